mod addon_agent;
mod attached_result;
mod fake_blender;
mod fast_core;
mod fast_retry;
mod faults;
mod flat_faults;
mod generator_tools;
mod investigate;
mod lifecycle;
mod model_text;
mod placing_by_sight;
mod refine_numbers;
mod replies_gone_wrong;
mod target_views;
mod verifier_render;

use std::sync::Arc;

use serde_json::{Value, json};
use viga_blender::{BlenderTransport, Worker, WorkerConfig, locate};
use viga_core::RunConfig;
use viga_core::domain::Domain;
use viga_domain_scene::{SceneDomain, SceneSettings};
use viga_protocol::bridge::RenderEngine;
use viga_protocol::bridge::RenderSpec;
use viga_provider::ScriptedProvider;
use viga_provider::scripted::Script;

pub(crate) const GOOD_CODE: &str = "import bpy\nbpy.ops.mesh.primitive_cube_add(size=2, location=(0, 0, 1))\nbpy.context.object.name = 'Crate'\n";

pub(crate) async fn blender() -> Arc<dyn BlenderTransport> {
    Arc::new(
        Worker::start(WorkerConfig::new(locate().unwrap()))
            .await
            .unwrap(),
    )
}

pub(crate) fn config(max_iterations: u32) -> RunConfig {
    let mut config = RunConfig::new("a crate on the floor");
    config.max_iterations = max_iterations;
    config.plan_each_iteration = true;
    config.provider = "scripted".into();
    config.model = "test".into();
    config
}

/// Small Workbench renders, even with a target: these tests compare shapes, and stay fast.
/// The Cycles default a target picks has its own test (verifier_render.rs).
pub(crate) fn scene_settings() -> SceneSettings {
    SceneSettings {
        render: RenderSpec {
            engine: RenderEngine::Workbench,
            width: 48,
            height: 48,
            samples: None,
        },
        verifier_engine: Some(RenderEngine::Workbench),
        // Scored at the targets' own size, so reproducing the goal scores 0.
        score_size: Some(48),
        ..SceneSettings::default()
    }
}

/// The scene domain over `blender` with [`scene_settings`].
pub(crate) fn scene(blender: Arc<dyn BlenderTransport>) -> Arc<dyn Domain> {
    scene_with(blender, scene_settings(), false)
}

pub(crate) fn scene_with(
    blender: Arc<dyn BlenderTransport>,
    settings: SceneSettings,
    has_target: bool,
) -> Arc<dyn Domain> {
    Arc::new(SceneDomain::new(settings, blender, has_target).unwrap())
}

pub(crate) fn text(text: &str) -> Value {
    json!({"response": {"text": text, "finish_reason": "stop"}})
}

pub(crate) fn code(code: &str) -> Value {
    text(&format!("Here is the program.\n```python\n{code}```\n"))
}

pub(crate) fn verdict(accepted: bool) -> Value {
    json!({
        "expect": {"system_contains": "You are the verifier", "tools_include": ["end_process"], "min_images": 1},
        "response": {
            "text": "",
            "tool_calls": [{"id": "v1", "name": "end_process", "arguments": {
                "visual_differences": if accepted { vec![] } else { vec!["the crate is too small"] },
                "suggestions": if accepted { vec![] } else { vec!["make it bigger"] },
                "accepted": accepted
            }}],
            "finish_reason": "tool_calls"
        }
    })
}

pub(crate) fn provider(turns: Vec<Value>) -> Arc<ScriptedProvider> {
    let script: Script =
        serde_json::from_value(json!({"description": "test", "turns": turns})).unwrap();
    Arc::new(ScriptedProvider::new("scripted:test", script))
}

/// The scene domain's kind, as a front end registers it for reports.
pub(crate) fn kinds() -> viga_core::DomainKinds {
    viga_core::DomainKinds::new().with(Arc::new(viga_domain_scene::SceneKind))
}
