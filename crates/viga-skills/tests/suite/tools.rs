//! The tools against real Blender.

use std::sync::Arc;

use serde_json::json;
use viga_blender::{BlenderCommands as _, Worker, WorkerConfig, locate};
use viga_protocol::bridge::{RenderEngine, RenderSpec, SceneReset};
use viga_skills::generator::generator_tools;
use viga_skills::metrics::image_size;
use viga_skills::verifier::verifier_tools;
use viga_skills::{Control, RenderSettings, ToolContext, ToolError};
use viga_testkit::{BLENDER_TEST_LIMIT, within};

const SCENE: &str = "import bpy
bpy.ops.mesh.primitive_cube_add(size=2, location=(0, 0, 1))
bpy.context.object.name = 'Box'
bpy.ops.mesh.primitive_uv_sphere_add(radius=0.5, location=(2, 0, 0.5))
bpy.context.object.name = 'Ball'
bpy.ops.object.light_add(type='SUN', location=(2, -2, 5))
";

async fn context() -> ToolContext {
    let worker = Worker::start(WorkerConfig::new(locate().unwrap()))
        .await
        .unwrap();
    assert!(
        worker
            .execute(SCENE, Some(SceneReset::Factory), None)
            .await
            .unwrap()
            .succeeded()
    );
    let render = RenderSettings::new(RenderSpec {
        engine: RenderEngine::Workbench,
        width: 64,
        height: 64,
        samples: None,
    });
    ToolContext::new(Arc::new(worker), render, SceneReset::Factory)
}

#[tokio::test]
async fn the_verifier_looks_around_and_ends_with_a_verdict() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let context = context().await;
        let tools = verifier_tools().unwrap();
        let err = tools
            .invoke(
                &context,
                "investigate",
                json!({"instruction": "rotate left"}),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(&err, ToolError::Recoverable(m) if m.contains("initialize_viewpoint first")),
            "{err}"
        );

        let start = tools
            .invoke(&context, "initialize_viewpoint", json!({}))
            .await
            .unwrap();
        assert_eq!(
            start
                .renders
                .iter()
                .map(|r| r.view.as_str())
                .collect::<Vec<_>>(),
            ["iso", "front", "right", "top"]
        );
        assert_eq!(start.images.len(), 1, "one montage for the model");
        // Each canonical view is half the render size each side, so the 2x2 montage is about
        // one render's size; a view from one camera is the full size.
        let sizes: Vec<_> = start
            .renders
            .iter()
            .map(|r| image_size(&r.picture.image.data).unwrap())
            .collect();
        assert_eq!(sizes, [(32, 32); 4]);
        assert!(start.text.contains("Ball, Box"), "{}", start.text);
        let before = context.view().unwrap();

        let turned = tools
            .invoke(
                &context,
                "investigate",
                json!({"instruction": "rotate left"}),
            )
            .await
            .unwrap();
        assert_eq!(turned.renders.len(), 1);
        assert_eq!(
            image_size(&turned.renders[0].picture.image.data).unwrap(),
            (64, 64)
        );
        assert_eq!(
            context.view().unwrap().azimuth_deg,
            before.azimuth_deg - 30.0
        );
        let unknown = tools
            .invoke(
                &context,
                "investigate",
                json!({"instruction": "show me the underside of the ball"}),
            )
            .await;
        assert!(
            matches!(unknown, Err(ToolError::Recoverable(_))),
            "no translator configured: {unknown:?}"
        );

        let hidden = tools
            .invoke(
                &context,
                "set_visibility",
                json!({"objects": ["Box"], "visible": false}),
            )
            .await
            .unwrap();
        assert!(hidden.text.starts_with("Box now hidden"), "{}", hidden.text);
        let framed = tools
            .invoke(&context, "set_keyframe", json!({"frame": 5}))
            .await
            .unwrap();
        assert!(framed.text.starts_with("At frame 5"), "{}", framed.text);
        let moved = tools
            .invoke(&context, "set_camera", json!({"location": [0, -9, 3]}))
            .await
            .unwrap();
        assert_eq!(moved.images.len(), 1);

        let bad = tools
            .invoke(&context, "end_process", json!({"accepted": "yes"}))
            .await
            .unwrap_err();
        assert!(
            bad.to_string()
                .contains("invalid arguments for end_process"),
            "{bad}"
        );
        let verdict = tools
            .invoke(&context, "end_process", json!({"visual_differences": ["ball too small"], "suggestions": ["radius 1"], "accepted": false}))
            .await
            .unwrap();
        match verdict.control {
            Control::EndVerification(feedback) => assert_eq!(feedback.suggestions, ["radius 1"]),
            other => panic!("expected a verdict, got {other:?}"),
        }
    })
    .await;
}

#[tokio::test]
async fn the_generator_runs_code_and_reads_the_scene() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let context = context().await;
        let tools = generator_tools().unwrap();
        let ran = tools
            .invoke(&context, "execute_code", json!({"code": "import bpy\nbpy.ops.mesh.primitive_cube_add()\nprint(len(bpy.data.objects))"}))
            .await
            .unwrap();
        assert!(
            ran.text.contains("without errors") && ran.text.contains("stdout:\n1"),
            "{}",
            ran.text
        );
        let info = tools
            .invoke(&context, "get_scene_info", json!({"limit": 1}))
            .await
            .unwrap();
        assert!(
            info.text.contains("1 objects; showing 1-1:\n- Cube [MESH]"),
            "{}",
            info.text
        );
        assert!(!info.text.contains("more objects"), "{}", info.text);
        let failed = tools
            .invoke(
                &context,
                "execute_code",
                json!({"code": "x = undefined_name"}),
            )
            .await;
        let Err(ToolError::Recoverable(told)) = failed else {
            panic!("a program that raises is a failure the model can correct: {failed:?}");
        };
        assert!(told.contains("NameError at line 1"), "{told}");
        let empty = tools
            .invoke(&context, "get_scene_info", json!({}))
            .await
            .unwrap();
        assert!(
            empty.text.ends_with("0 objects"),
            "every program runs on the reloaded base scene: {}",
            empty.text
        );
        let no_assets = tools
            .invoke(&context, "get_better_assets", json!({"query": "chair"}))
            .await
            .unwrap_err();
        assert!(matches!(no_assets, ToolError::Recoverable(_)));
        let unknown = tools
            .invoke(&context, "teleport", json!({}))
            .await
            .unwrap_err();
        assert!(
            unknown.to_string().contains("available tools: end_process"),
            "{unknown}"
        );
    })
    .await;
}

/// With a render folder, Blender writes each render there itself (no copy afterwards), under
/// its final name once done; without one, renders stay in memory.
#[tokio::test]
async fn renders_are_kept_in_the_render_folder_when_one_is_set() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let context = context().await;
        let tools = verifier_tools().unwrap();
        let unkept = tools
            .invoke(&context, "initialize_viewpoint", json!({}))
            .await
            .unwrap();
        assert!(unkept.renders.iter().all(|render| render.file.is_none()));

        let folder = tempfile::tempdir().unwrap();
        context.set_render_folder(Some(folder.path().to_path_buf()));
        let kept = tools
            .invoke(&context, "initialize_viewpoint", json!({}))
            .await
            .unwrap();
        let turned = tools
            .invoke(
                &context,
                "investigate",
                json!({"instruction": "rotate left"}),
            )
            .await
            .unwrap();
        for render in kept.renders.iter().chain(&turned.renders) {
            let file = render.file.as_ref().expect("kept in the folder");
            assert_eq!(file.parent(), Some(folder.path()));
            assert_eq!(std::fs::read(file).unwrap(), render.picture.image.data);
        }
        let mut names: Vec<String> = std::fs::read_dir(folder.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "front-2.png",
                "investigate-5.png",
                "iso-1.png",
                "right-3.png",
                "top-4.png"
            ],
            "one file per render, none left partial"
        );
    })
    .await;
}
