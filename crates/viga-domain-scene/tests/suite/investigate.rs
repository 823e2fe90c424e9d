//! The verifier's free-form `investigate` (issue 36): an instruction no fast path knows is
//! turned into a camera pose by the model, and that call is the run's like any other: a
//! `ModelCalled` event with the role `investigate`, its tokens counted in the iteration's.

use std::sync::Arc;

use serde_json::json;
use viga_protocol::event::{ModelRole, RunEvent, StopReason};
use viga_testkit::{BLENDER_TEST_LIMIT, within};

use viga_domain_scene::SceneDomain;

use super::{GOOD_CODE, blender, code, config, provider, scene_settings, text, verdict};

#[tokio::test]
async fn a_free_form_investigation_is_a_model_call_of_the_run() {
    within(BLENDER_TEST_LIMIT, "the run", async {
        let pose = json!({"response": {
            "text": "{\"location\": [0.0, -6.0, 1.0], \"look_at\": [0.0, 0.0, 1.0]}",
            "finish_reason": "stop",
            "usage": {"input_tokens": 70, "output_tokens": 30}
        }});
        let model = provider(vec![
            text("Plan: one crate."),
            code(GOOD_CODE),
            json!({"response": {"text": "", "finish_reason": "tool_calls", "tool_calls": [
                {"id": "i1", "name": "investigate", "arguments": {"instruction": "peek beneath the crate"}}
            ]}}),
            pose,
            verdict(true),
        ]);
        let domain = SceneDomain::new(scene_settings(), blender().await, false)
            .unwrap()
            .with_model(model.clone(), None)
            .unwrap();
        let out = tempfile::tempdir().unwrap();
        let mut run = viga_core::start(config(1), model, Arc::new(domain), out.path()).unwrap();
        let mut events = Vec::new();
        while let Some(event) = run.next_event().await {
            events.push(event.event);
        }
        let outcome = run.wait().await.unwrap();
        assert_eq!(outcome.stop, StopReason::Accepted, "{events:?}");
        let investigations: Vec<u64> = events
            .iter()
            .filter_map(|event| match event {
                RunEvent::ModelCalled {
                    role: ModelRole::Investigate,
                    usage,
                    ..
                } => Some(usage.output_tokens),
                _ => None,
            })
            .collect();
        assert_eq!(investigations, [30], "{events:?}");
        let record = events
            .iter()
            .find_map(|event| match event {
                RunEvent::IterationFinished { record } => Some(record.clone()),
                _ => None,
            })
            .unwrap();
        assert!(record.usage.output_tokens >= 30, "{:?}", record.usage);
    })
    .await;
}
