//! A whole run's folder, resume, and cancellation, on real Blender.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use serde_json::json;
use viga_blender::BlenderCommands as _;
use viga_protocol::bridge::{RenderEngine, RenderRequest, RenderSpec, SceneReset};
use viga_protocol::event::{RunEvent, StopReason};
use viga_provider::{FinishReason, ModelRequest, ModelResponse, Provider, ProviderError};
use viga_testkit::{BLENDER_TEST_LIMIT, within};

use super::{blender, code, config, provider, scene, scene_settings, scene_with, text, verdict};

const SCENE_WITH_CAMERA: &str = "import bpy
bpy.ops.mesh.primitive_cube_add(size=2, location=(0, 0, 1))
bpy.context.object.name = 'Crate'
bpy.ops.object.camera_add(location=(6, -6, 4), rotation=(1.1, 0, 0.785))
bpy.context.scene.camera = bpy.context.object
";

async fn drain(mut handle: viga_core::RunHandle) -> (Vec<RunEvent>, viga_core::RunOutcome) {
    let mut events = Vec::new();
    while let Some(event) = handle.next_event().await {
        events.push(event.event);
    }
    (events, handle.wait().await.unwrap())
}

#[tokio::test]
async fn a_run_writes_its_whole_folder_and_resumes_where_it_stopped() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let blender = blender().await;
        // The target is the goal scene itself, rendered by the same Blender.
        assert!(
            blender
                .execute(SCENE_WITH_CAMERA, Some(SceneReset::Factory), None)
                .await
                .unwrap()
                .succeeded()
        );
        let goal = blender
            .render(
                RenderRequest {
                    camera: None,
                    pose: None,
                    spec: RenderSpec {
                        engine: RenderEngine::Workbench,
                        width: 48,
                        height: 48,
                        samples: None,
                    },
                    output_path: None,
                },
                None,
            )
            .await
            .unwrap();
        let work = tempfile::tempdir().unwrap();
        let target = work.path().join("goal.png");
        std::fs::write(&target, &goal.image.data).unwrap();

        let mut settings = config(1);
        settings.targets = vec![viga_core::TargetSpec::picture(target)];
        let domain = scene_with(blender.clone(), scene_settings(), true);
        let first = provider(vec![
            text("1. a crate\n2. a camera"),
            code(SCENE_WITH_CAMERA),
            json!({"response": {"text": "Let me look from the left.", "tool_calls": [
                {"id": "t1", "name": "investigate", "arguments": {"instruction": "rotate left"}}
            ], "finish_reason": "tool_calls"}}),
            verdict(false),
        ]);
        let output = work.path().join("output");
        let (events, outcome) =
            drain(viga_core::start(settings, first, domain.clone(), &output).unwrap()).await;
        assert_eq!(
            (outcome.stop.clone(), outcome.iterations),
            (StopReason::MaxIterations, 1)
        );
        let folder = outcome.folder.clone();
        for file in [
            "args.json",
            "events.jsonl",
            "target.png",
            "codes/1.py",
            "generator_thoughts/1.md",
            "verifier_thoughts/1.md",
            "scores.json",
            "final.blend",
        ] {
            assert!(folder.join(file).is_file(), "missing {file}");
        }
        let renders: Vec<String> = std::fs::read_dir(folder.join("renders/1"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(renders.contains(&"target-default.png".to_owned()), "{renders:?}");
        assert_eq!(
            renders.len(),
            1 + 4 + 1,
            "camera view, four canonical views, one investigation: {renders:?}"
        );
        let scores: serde_json::Value =
            serde_json::from_slice(&std::fs::read(folder.join("scores.json")).unwrap()).unwrap();
        let loss = scores["iterations"][0]["views"]["Camera"].as_f64().unwrap();
        assert!(
            loss < 1e-4,
            "the goal program reproduces the target: PL {loss}"
        );
        assert!(events.iter().any(
            |e| matches!(e, RunEvent::ToolInvoked { tool, ok: true, .. } if tool == "investigate")
        ));
        let thoughts = std::fs::read_to_string(folder.join("verifier_thoughts/1.md")).unwrap();
        assert!(
            thoughts.contains("Let me look from the left."),
            "{thoughts}"
        );

        // Resume with a larger budget: iteration 2 sees iteration 1's critique in its memory.
        let second = provider(vec![
            json!({"expect": {"last_message_contains": "the crate is too small"}, "response": {"text": "bigger crate", "finish_reason": "stop"}}),
            code(SCENE_WITH_CAMERA),
            verdict(true),
        ]);
        let (events, outcome) =
            drain(viga_core::resume(&folder, second, domain.clone(), Some(3)).unwrap()).await;
        assert_eq!(
            (outcome.stop, outcome.iterations),
            (StopReason::Accepted, 2)
        );
        assert!(matches!(
            events.first(),
            Some(RunEvent::RunStarted {
                resumed_from_iteration: Some(2),
                ..
            })
        ));
        assert!(folder.join("codes/2.py").is_file());
        let log = viga_memory::read_run_log(&folder.join("events.jsonl")).unwrap();
        assert_eq!(
            viga_memory::iterations_in(&log.events)
                .iter()
                .map(|r| r.index)
                .collect::<Vec<_>>(),
            [1, 2]
        );

        let err = viga_core::resume(&folder, provider(vec![]), domain, None).unwrap_err();
        assert!(err.to_string().contains("already finished"), "{err}");
    })
    .await;
}

/// Answers the first call, then never answers again.
struct StallsAfterFirst(AtomicUsize);

#[async_trait]
impl Provider for StallsAfterFirst {
    fn name(&self) -> &str {
        "stall"
    }
    fn model(&self) -> &str {
        "stall"
    }
    async fn complete(&self, _request: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        if self.0.fetch_add(1, Ordering::SeqCst) == 0 {
            return Ok(ModelResponse::text_only("1. a crate", FinishReason::Stop));
        }
        std::future::pending().await
    }
}

#[tokio::test]
async fn cancelling_leaves_a_complete_folder_that_can_be_resumed() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let output = tempfile::tempdir().unwrap();
        let domain = scene(blender().await);
        let stall = Arc::new(StallsAfterFirst(AtomicUsize::new(0)));
        let mut handle = viga_core::start(config(2), stall, domain.clone(), output.path()).unwrap();
        while let Some(event) = handle.next_event().await {
            if matches!(event.event, RunEvent::PlanProduced { .. }) {
                handle.cancel();
            }
        }
        let outcome = handle.wait().await.unwrap();
        assert_eq!(
            (outcome.stop.clone(), outcome.iterations),
            (StopReason::Cancelled, 0)
        );
        let log = viga_memory::read_run_log(&outcome.folder.join("events.jsonl")).unwrap();
        assert!(!log.truncated_tail);
        assert!(matches!(
            log.events.last().map(|e| &e.event),
            Some(RunEvent::RunFinished {
                stop: StopReason::Cancelled,
                ..
            })
        ));

        let resumed = provider(vec![text("plan"), code(super::GOOD_CODE), verdict(true)]);
        let (_, outcome) =
            drain(viga_core::resume(&outcome.folder, resumed, domain, None).unwrap()).await;
        assert_eq!(
            (outcome.stop, outcome.iterations),
            (StopReason::Accepted, 1)
        );
    })
    .await;
}

#[tokio::test]
async fn bad_settings_are_refused_before_anything_is_written() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let output = tempfile::tempdir().unwrap();
        let mut settings = config(0);
        settings.memory_window = 0;
        settings.targets = vec![viga_core::TargetSpec::picture(
            output.path().join("missing.png"),
        )];
        let err = viga_core::start(
            settings,
            provider(vec![]),
            scene(blender().await),
            output.path(),
        )
        .unwrap_err();
        let message = err.to_string();
        for expected in [
            "max_iterations must be at least 1",
            "memory window",
            "missing.png does not exist",
        ] {
            assert!(message.contains(expected), "{message}");
        }
        assert_eq!(
            std::fs::read_dir(output.path()).unwrap().count(),
            0,
            "nothing written"
        );
    })
    .await;
}
