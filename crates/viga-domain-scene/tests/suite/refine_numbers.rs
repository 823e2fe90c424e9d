//! The generator's `refine_numbers` (issue 37) on real Blender: a scripted model writes the
//! right structure with wrong numbers (the mini-suite's placement1, its crate in the wrong
//! place), calls the tool, and ends. The search fits the numbers to the target picture, the
//! fitted program becomes the iteration's, and it closes at least 90% of the instance's
//! start-to-goal photometric gap on the target's camera.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Value, json};
use viga_blender::{BlenderCommands as _, BlenderTransport};
use viga_core::TargetSpec;
use viga_protocol::bridge::{RenderEngine, RenderRequest, RenderSpec, SceneReset};
use viga_protocol::event::RunEvent;
use viga_skills::metrics::photometric_loss;
use viga_testkit::{BLENDER_TEST_LIMIT, within};

use viga_domain_scene::SceneSettings;

use super::{blender, config, provider, scene_with};

const SIDE: u32 = 48;

fn instance() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/blendergym-mini/placement1")
}

fn cycles() -> RenderSpec {
    RenderSpec {
        engine: RenderEngine::Cycles,
        width: SIDE,
        height: SIDE,
        samples: Some(8),
    }
}

/// The render of `code` on the instance's scene from `camera`.
async fn render(blender: &Arc<dyn BlenderTransport>, code: &str, camera: &str) -> Vec<u8> {
    let base = SceneReset::Blend {
        path: instance().join("blender_file.blend").display().to_string(),
    };
    let ran = blender.execute(code, Some(base), None).await.unwrap();
    assert!(ran.succeeded(), "{ran:?}");
    let request = RenderRequest {
        camera: Some(camera.to_owned()),
        pose: None,
        spec: cycles(),
        output_path: None,
    };
    blender.render(request, None).await.unwrap().image.data
}

fn tools_turn(name: &str, arguments: Value) -> Value {
    json!({"response": {"text": "", "finish_reason": "tool_calls",
        "tool_calls": [{"id": name, "name": name, "arguments": arguments}]}})
}

#[tokio::test]
async fn a_model_writes_the_structure_and_refine_numbers_fits_its_numbers() {
    within(BLENDER_TEST_LIMIT, "the run", async {
        let blender = blender().await;
        let start = std::fs::read_to_string(instance().join("start.py")).unwrap();
        let goal = std::fs::read_to_string(instance().join("goal.py")).unwrap();
        // The right structure with wrong numbers: the crate half a metre off, the ball in its
        // place.
        let written = start.replace(
            "crate.location = (0.0, 0.0, 0.5)",
            "crate.location = (0.6, -0.2, 0.5)",
        );
        assert_ne!(written, start);
        let work = tempfile::tempdir().unwrap();
        let target = work.path().join("goal.png");
        std::fs::write(&target, render(&blender, &goal, "Camera1").await).unwrap();

        let mut settings = config(1);
        settings.plan_each_iteration = false;
        settings.generator_tools = true;
        settings.targets = vec![TargetSpec {
            path: target.clone(),
            view: Some("Camera1".to_owned()),
            frame: None,
        }];
        let scene = SceneSettings {
            base_blend: Some(instance().join("blender_file.blend")),
            render: cycles(),
            verifier_engine: Some(RenderEngine::Cycles),
            verifier_samples: Some(8),
            score_size: Some(SIDE),
            ..SceneSettings::default()
        };
        let mut refine = tools_turn("refine_numbers", json!({"budget": 60}));
        refine["expect"] = json!({"tools_include": ["refine_numbers"]});
        let mut end = tools_turn("end_process", json!({"reason": "the numbers are fitted"}));
        end["expect"] =
            json!({"any_message_contains": "The fitted program is the current program now"});
        // Asked before any program ran, the tool says what to do first.
        let mut first_run = tools_turn("execute_code", json!({"code": written}));
        first_run["expect"] = json!({"any_message_contains": "There is no program to refine"});
        let model = provider(vec![
            tools_turn("refine_numbers", json!({})),
            first_run,
            refine,
            end,
        ]);
        let domain = scene_with(Arc::clone(&blender), scene, true);
        let mut run = viga_core::start(settings, model, domain, &work.path().join("out")).unwrap();
        let mut events = Vec::new();
        while let Some(event) = run.next_event().await {
            events.push(event.event);
        }
        let outcome = run.wait().await.unwrap();

        let refined = events.iter().find_map(|event| match event {
            RunEvent::NumbersRefined {
                loss_before,
                loss_after,
                programs,
                ..
            } => Some((*loss_before, *loss_after, *programs)),
            _ => None,
        });
        let (before, after, programs) = refined.expect("a NumbersRefined event");
        assert!(
            after < before && programs <= 60,
            "{before} -> {after} in {programs}"
        );
        let kept = events
            .iter()
            .rev()
            .find_map(|event| match event {
                RunEvent::CodeProduced { code, .. } => Some(code.clone()),
                _ => None,
            })
            .unwrap();
        assert_ne!(kept, written, "the fitted program is the iteration's");
        assert!(kept.contains("crate.location"), "{kept}");

        let target_png = std::fs::read(&target).unwrap();
        let noop =
            photometric_loss(&render(&blender, &start, "Camera1").await, &target_png).unwrap();
        let fitted =
            photometric_loss(&render(&blender, &kept, "Camera1").await, &target_png).unwrap();
        let closed = 1.0 - fitted / noop;
        eprintln!(
            "refine_numbers closed {:.1}% of the gap (PL {noop:.6} -> {fitted:.6})",
            closed * 100.0
        );
        assert!(
            closed >= 0.9,
            "closed {:.0}% of the gap (PL {noop} -> {fitted}):\n{kept}",
            closed * 100.0
        );
        let report = viga_core::report::render_html(&outcome.folder, &super::kinds()).unwrap();
        assert!(
            report.contains("refine_numbers") && report.contains("Refined "),
            "the report shows the call and what it did"
        );
    })
    .await;
}
