//! VIGA's scene modes from the command line, end to end on real Blender with scripted
//! sessions from `fixtures/sessions/`: a static scene with a target picture per camera, a 4D
//! scene from a folder of frames and from a video, and a base scene that lacks the camera a
//! target names.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic: that is how tests fail

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use viga_blender::{BlenderCommands as _, Worker, WorkerConfig, locate};
use viga_protocol::bridge::{RenderEngine, RenderRequest, RenderSpec, SceneReset};
use viga_testkit::{
    BLENDER_TEST_LIMIT, assert_succeeded, output_within, printed_run_folder, within,
};

/// The size of the target pictures; the scoring renders take it too.
const SIDE: u32 = 32;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/sessions")
        .join(name)
}

/// Renders `program`'s scene from each (camera, frame), as the run's Workbench renders see
/// it, into `dir/<name>.png`; returns the files in order.
async fn render_goal(
    program: &str,
    shots: &[(&str, Option<i32>, &str)],
    dir: &Path,
) -> Vec<PathBuf> {
    render_goal_on(SceneReset::Factory, program, shots, dir).await
}

/// [`render_goal`] with `program` run on `base`.
async fn render_goal_on(
    base: SceneReset,
    program: &str,
    shots: &[(&str, Option<i32>, &str)],
    dir: &Path,
) -> Vec<PathBuf> {
    let worker = Worker::start(WorkerConfig::new(locate().unwrap()))
        .await
        .unwrap();
    let ran = worker.execute(program, Some(base), None).await.unwrap();
    assert!(ran.succeeded(), "{ran:?}");
    let mut files = Vec::new();
    for (camera, frame, name) in shots {
        if let Some(frame) = frame {
            worker.set_frame(*frame).await.unwrap();
        }
        let request = RenderRequest {
            camera: Some((*camera).to_owned()),
            pose: None,
            spec: RenderSpec {
                engine: RenderEngine::Workbench,
                width: SIDE,
                height: SIDE,
                samples: None,
            },
            output_path: None,
        };
        let output = worker.render(request, None).await.unwrap();
        let file = dir.join(format!("{name}.png"));
        std::fs::write(&file, &output.image.data).unwrap();
        files.push(file);
    }
    files
}

/// `viga run` with the scripted `session`, small Workbench renders and one iteration.
fn viga_run(session: &str, targets: &[String], extra: &[&str], output: &Path) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_viga"));
    command
        .args(["run", "--task", "the scene in the pictures"])
        .args(targets.iter().flat_map(|t| ["--target", t.as_str()]))
        .args(["--provider", "scripted", "--script"])
        .arg(fixture(session))
        .args(["--verifier-engine", "workbench", "--resolution", "32"])
        // Scored at the targets' own size, so reproducing the goal scores 0.
        .args(["--score-resolution", "32"])
        .args(["--max-iterations", "1", "--generator-tools", "off"])
        .args(extra)
        .arg("--output")
        .arg(output);
    output_within(&mut command, BLENDER_TEST_LIMIT)
}

/// Every view's photometric loss in the run's `scores.json`.
fn scores(folder: &Path) -> serde_json::Map<String, serde_json::Value> {
    let scores: serde_json::Value =
        serde_json::from_slice(&std::fs::read(folder.join("scores.json")).unwrap()).unwrap();
    scores["iterations"][0]["views"]
        .as_object()
        .unwrap()
        .clone()
}

/// The fixture session's program is the goal program, so a scripted run reproduces it.
fn session_holds(session: &str, goal: &str) {
    let text = std::fs::read_to_string(fixture(session)).unwrap();
    let program = std::fs::read_to_string(fixture(goal)).unwrap();
    assert!(
        text.contains(&serde_json::to_string(&program).unwrap()[1..program.len() / 2]),
        "{session} must answer with {goal}"
    );
}

#[tokio::test]
async fn a_blendergym_edit_reaches_its_goal_from_the_instance_scene() {
    session_holds("edit.json", "../blendergym-mini/geometry1/goal.py");
    let dir = tempfile::tempdir().unwrap();
    let instance = fixture("../blendergym-mini/geometry1");
    let base = instance.join("blender_file.blend");
    let goal = std::fs::read_to_string(instance.join("goal.py")).unwrap();
    let base_scene = SceneReset::Blend {
        path: base.to_string_lossy().into_owned(),
    };
    let files = within(
        BLENDER_TEST_LIMIT,
        "the goal render",
        render_goal_on(base_scene, &goal, &[("Camera1", None, "goal")], dir.path()),
    )
    .await;
    let out = viga_run(
        "edit.json",
        &[format!("Camera1={}", files[0].display())],
        &["--base", &base.to_string_lossy()],
        &dir.path().join("out"),
    );
    assert_succeeded(&out);
    let loss = scores(&printed_run_folder(&out))["Camera1"]
        .as_f64()
        .unwrap();
    assert!(loss < 1e-4, "the edit reproduces the goal: PL {loss}");
}

#[tokio::test]
async fn a_static_scene_is_built_and_scored_from_two_camera_views() {
    session_holds("static.json", "static_goal.py");
    let dir = tempfile::tempdir().unwrap();
    let goal = std::fs::read_to_string(fixture("static_goal.py")).unwrap();
    let files = within(
        BLENDER_TEST_LIMIT,
        "the goal renders",
        render_goal(
            &goal,
            &[("Camera1", None, "front"), ("Camera2", None, "side")],
            dir.path(),
        ),
    )
    .await;
    let targets = [
        format!("Camera1={}", files[0].display()),
        format!("Camera2={}", files[1].display()),
    ];
    let out = viga_run("static.json", &targets, &[], &dir.path().join("out"));
    assert_succeeded(&out);
    let folder = printed_run_folder(&out);
    let views = scores(&folder);
    for camera in ["Camera1", "Camera2"] {
        let loss = views[camera].as_f64().unwrap();
        assert!(loss < 1e-4, "{camera} reproduces its target: PL {loss}");
    }
    for file in [
        "targets/00-Camera1.png",
        "targets/01-Camera2.png",
        "target.png",
    ] {
        assert!(folder.join(file).is_file(), "missing {file}");
    }
    let report = std::fs::read_to_string(folder.join("report.html")).unwrap();
    assert!(
        report.contains("target: Camera1") && report.contains("result: Camera2"),
        "each target beside its render"
    );
}

#[tokio::test]
async fn a_4d_scene_is_compared_frame_by_frame_from_frames_and_from_a_video() {
    session_holds("dynamic.json", "dynamic_goal.py");
    let dir = tempfile::tempdir().unwrap();
    let goal = std::fs::read_to_string(fixture("dynamic_goal.py")).unwrap();
    let shots: Vec<(String, Option<i32>, String)> = (1..=9)
        .map(|frame| ("Camera1".to_owned(), Some(frame), format!("all/{frame:04}")))
        .collect();
    std::fs::create_dir(dir.path().join("all")).unwrap();
    let borrowed: Vec<(&str, Option<i32>, &str)> = shots
        .iter()
        .map(|(camera, frame, name)| (camera.as_str(), *frame, name.as_str()))
        .collect();
    within(
        BLENDER_TEST_LIMIT,
        "the goal renders",
        render_goal(&goal, &borrowed, dir.path()),
    )
    .await;

    // A folder of three frames, named as VIGA's dynamic scenes name their renders.
    let frames = dir.path().join("frames");
    std::fs::create_dir(&frames).unwrap();
    for frame in [1, 5, 9] {
        std::fs::copy(
            dir.path().join(format!("all/{frame:04}.png")),
            frames.join(format!("Camera1_f{frame}.png")),
        )
        .unwrap();
    }
    let out = viga_run(
        "dynamic.json",
        &[frames.display().to_string()],
        &[],
        &dir.path().join("out-frames"),
    );
    assert_succeeded(&out);
    let views = scores(&printed_run_folder(&out));
    for view in ["Camera1@f1", "Camera1@f5", "Camera1@f9"] {
        let loss = views[view].as_f64().unwrap();
        assert!(loss < 1e-4, "{view} reproduces its target: PL {loss}");
    }
    let report = std::fs::read_to_string(printed_run_folder(&out).join("report.html")).unwrap();
    assert!(report.contains("Camera1 over time"), "a frame strip");

    // The same motion as a video: its first, middle and last frame are compared.
    let video = dir.path().join("motion.mkv");
    let encoded = Command::new("ffmpeg")
        .args(["-v", "error", "-nostdin", "-y", "-framerate", "9", "-i"])
        .arg(dir.path().join("all/%04d.png"))
        .args(["-c:v", "ffv1"])
        .arg(&video)
        .status()
        .expect("ffmpeg is installed (cargo xtask test installs it on CI)");
    assert!(encoded.success());
    let out = viga_run(
        "dynamic.json",
        &[format!("Camera1={}", video.display())],
        &[],
        &dir.path().join("out-video"),
    );
    assert_succeeded(&out);
    let views = scores(&printed_run_folder(&out));
    let labels: Vec<&String> = views.keys().collect();
    assert_eq!(labels, ["Camera1@f1", "Camera1@f5", "Camera1@f9"]);
    for (view, loss) in &views {
        let loss = loss.as_f64().unwrap();
        assert!(loss < 5e-3, "{view} close to its decoded frame: PL {loss}");
    }
}

#[tokio::test]
async fn a_base_scene_without_the_named_camera_is_refused_with_its_cameras() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base.blend");
    let picture = within(BLENDER_TEST_LIMIT, "the base scene", async {
        let worker = Worker::start(WorkerConfig::new(locate().unwrap()))
            .await
            .unwrap();
        let one_camera = "import bpy\nbpy.ops.object.camera_add()\n";
        let made = worker
            .execute(one_camera, Some(SceneReset::Factory), None)
            .await
            .unwrap();
        assert!(made.succeeded(), "{made:?}");
        worker.save_blend(&base.to_string_lossy()).await.unwrap();
        let picture = dir.path().join("front.png");
        std::fs::write(
            &picture,
            include_bytes!("../../../../fixtures/clip-reference/gradient.png"),
        )
        .unwrap();
        picture
    })
    .await;
    let out = viga_run(
        "static.json",
        &[format!("Camera7={}", picture.display())],
        &["--base", &base.to_string_lossy()],
        &dir.path().join("out"),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(2),
        "a setting to fix: {stdout}\n{stderr}"
    );
    let said = format!("{stdout}{stderr}");
    assert!(
        said.contains("no camera named \"Camera7\"") && said.contains("its cameras: Camera"),
        "{said}"
    );
}
