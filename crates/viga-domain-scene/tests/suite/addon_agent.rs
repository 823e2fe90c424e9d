//! The add-on agent on real Blender with the example add-ons (`fixtures/addons`) and a
//! scripted model: commands and the scene after them, validation errors the model corrects,
//! failures undone, the step budget, cancellation, and the run folder with its report.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use viga_blender::{BlenderCommands as _, BlenderTransport};
use viga_core::CoreError;
use viga_domain_scene::addon_agent::{
    AgentConfig, AgentHandle, AgentOutcome, Transcript, read_transcript,
};
use viga_protocol::bridge::{RenderEngine, RenderSpec, SceneReset};
use viga_protocol::event::{ModelRole, RunEvent, StopReason};
use viga_provider::Provider;
use viga_testkit::{BLENDER_TEST_LIMIT, within};

use super::{blender, provider};

/// A table at the origin and a lamp off to its right.
const TABLE_AND_LAMP: &str = "import bpy
bpy.ops.mesh.primitive_cube_add(size=1, location=(0, 0, 0.5))
bpy.context.object.name = 'Table'
bpy.ops.mesh.primitive_cube_add(size=0.4, location=(3, 0, 0.2))
bpy.context.object.name = 'Lamp'
";

const REQUEST: &str = "put the lamp to the left of the table";

fn fixture_addons() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/addons")
}

async fn table_and_lamp() -> Arc<dyn BlenderTransport> {
    let blender = blender().await;
    let ran = blender
        .execute(TABLE_AND_LAMP, Some(SceneReset::Factory), None)
        .await
        .unwrap();
    assert!(ran.succeeded(), "{ran:?}");
    blender
}

fn config(max_steps: u32) -> AgentConfig {
    let mut config = AgentConfig::new(REQUEST);
    config.max_steps = max_steps;
    config.addons_folder = Some(fixture_addons());
    config.render = RenderSpec {
        engine: RenderEngine::Workbench,
        width: 48,
        height: 48,
        samples: None,
    };
    config.provider = "scripted".into();
    config.model = "test".into();
    config
}

/// A scripted turn that calls tools (`[name, arguments]` pairs), after checking the request.
fn calls(expect: Value, tools: &[(&str, Value)]) -> Value {
    let tool_calls: Vec<Value> = tools
        .iter()
        .enumerate()
        .map(|(n, (name, arguments))| json!({"id": format!("c{n}"), "name": name, "arguments": arguments}))
        .collect();
    json!({"expect": expect, "response": {"text": "", "tool_calls": tool_calls, "finish_reason": "tool_calls"}})
}

fn answer(expect: Value, text: &str) -> Value {
    json!({"expect": expect, "response": {"text": text, "finish_reason": "stop"}})
}

fn place_lamp(side: &str) -> (&'static str, Value) {
    (
        "place_object_relative",
        json!({"object1_name": "Lamp", "object2_name": "Table", "side": side}),
    )
}

async fn drain(
    mut handle: viga_domain_scene::addon_agent::AgentHandle,
) -> (Vec<RunEvent>, AgentOutcome) {
    let mut events = Vec::new();
    while let Some(event) = handle.next_event().await {
        events.push(event.event);
    }
    (events, handle.wait().await.unwrap())
}

async fn location_of(blender: &dyn BlenderTransport, name: &str) -> [f64; 3] {
    let info = blender.scene_info(0, 200).await.unwrap();
    info.objects
        .iter()
        .find(|object| object.name == name)
        .unwrap_or_else(|| panic!("no {name} in the scene"))
        .location
}

async fn object_names(blender: &dyn BlenderTransport) -> Vec<String> {
    let info = blender.scene_info(0, 200).await.unwrap();
    info.objects.into_iter().map(|object| object.name).collect()
}

fn tools_invoked(events: &[RunEvent]) -> Vec<(String, bool)> {
    events
        .iter()
        .filter_map(|event| match event {
            RunEvent::ToolInvoked { tool, ok, .. } => Some((tool.clone(), *ok)),
            _ => None,
        })
        .collect()
}

/// Prepares the run's folder under `output` and starts the agent in it.
async fn start_agent(
    config: AgentConfig,
    provider: Arc<dyn Provider>,
    blender: Arc<dyn BlenderTransport>,
    output: &Path,
) -> Result<AgentHandle, CoreError> {
    let prepared = viga_domain_scene::addon_agent::prepare(config, output)?;
    viga_domain_scene::addon_agent::start(prepared, provider, blender).await
}

fn transcript(outcome: &AgentOutcome) -> Transcript {
    read_transcript(&outcome.folder).unwrap().unwrap()
}

#[tokio::test]
async fn the_agent_commands_sees_the_scene_after_each_command_and_answers() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let blender = table_and_lamp().await;
        let script = provider(vec![
            calls(
                json!({
                    "system_contains": "place_object_relative",
                    "last_message_contains": "Lamp [MESH]",
                    "tools_include": ["place_object_relative", "paint_object", "get_scene_info", "initialize_viewpoint"],
                }),
                &[("list_scene_objects", json!({})), ("initialize_viewpoint", json!({}))],
            ),
            calls(
                json!({"min_images": 1, "last_message_contains": "\"scene\":[\"Lamp [MESH] at (3.000"}),
                &[place_lamp("left")],
            ),
            answer(
                json!({"last_message_contains": "\"object\":\"Lamp\""}),
                "The lamp now stands to the left of the table.",
            ),
        ]);
        let output = tempfile::tempdir().unwrap();
        let handle = start_agent(config(6), script, blender.clone(), output.path())
            .await
            .unwrap();
        let (events, outcome) = drain(handle).await;
        assert_eq!(
            (&outcome.stop, outcome.steps, outcome.answer.as_deref()),
            (&StopReason::Accepted, 3, Some("The lamp now stands to the left of the table.")),
            "{events:?}"
        );

        // The scene changed, and the look left nothing behind.
        let lamp = location_of(blender.as_ref(), "Lamp").await;
        assert!((lamp[0] + 0.7).abs() < 1e-3 && (lamp[2] - 0.5).abs() < 1e-3, "{lamp:?}");
        let names = object_names(blender.as_ref()).await;
        assert_eq!(names, ["Lamp", "Table"], "a look must leave no camera behind");
        // One command, one undo step: one undo puts the lamp back.
        blender.undo().await.unwrap();
        assert_eq!(location_of(blender.as_ref(), "Lamp").await, [3.0, 0.0, 0.2]);

        assert!(matches!(events.first(), Some(RunEvent::RunStarted { task, .. }) if task == REQUEST));
        let roles: Vec<ModelRole> = events
            .iter()
            .filter_map(|event| match event {
                RunEvent::ModelCalled { role, .. } => Some(*role),
                _ => None,
            })
            .collect();
        assert_eq!(roles, [ModelRole::Agent; 3]);
        assert_eq!(
            tools_invoked(&events),
            [
                ("list_scene_objects".to_owned(), true),
                ("initialize_viewpoint".to_owned(), true),
                ("place_object_relative".to_owned(), true)
            ]
        );
        assert!(
            events
                .iter()
                .any(|e| matches!(e, RunEvent::RenderProduced { index: 1, .. }))
        );
        assert!(matches!(
            events.last(),
            Some(RunEvent::RunFinished { stop: StopReason::Accepted, iterations: 3 })
        ));

        let folder = &outcome.folder;
        assert!(folder.starts_with(output.path().join("agent")), "{}", folder.display());
        for file in ["args.json", "events.jsonl", "transcript.json", "final.blend"] {
            assert!(folder.join(file).is_file(), "missing {file}");
        }
        let log = viga_memory::read_run_log(&folder.join("events.jsonl")).unwrap();
        assert_eq!(log.events.len(), events.len(), "every event is in the log");
        let transcript = transcript(&outcome);
        assert_eq!(transcript.steps.len(), 2);
        let placed = &transcript.steps[1].calls[0];
        assert_eq!(placed.result["object"], "Lamp");
        assert!(placed.scene.iter().any(|line| line.starts_with("Lamp [MESH] at (-0.700")), "{:?}", placed.scene);
        assert_eq!(placed.undo_step.as_deref(), Some("viga: place_object_relative"));
        let looked = &transcript.steps[0].calls[1];
        assert_eq!(looked.render_ids.len(), 4, "{looked:?}");
        assert!(looked.render_ids.iter().all(|id| folder.join(id).is_file()));

        let report = viga_core::report::write_html(folder, None, &super::kinds()).unwrap();
        let html = std::fs::read_to_string(report).unwrap();
        for fragment in [
            "viga add-on agent: put the lamp to the left of the table",
            "SCRIPTED PROVIDER",
            "place_object_relative",
            "Lamp [MESH] at (-0.700",
            "Undo step: viga: place_object_relative",
            "The lamp now stands to the left of the table.",
            "<img",
        ] {
            assert!(html.contains(fragment), "the report lacks {fragment:?}");
        }
    })
    .await;
}

#[tokio::test]
async fn bad_arguments_and_failed_commands_go_back_to_the_model_which_corrects_them() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let blender = table_and_lamp().await;
        let ghost = json!({"object1_name": "Ghost", "object2_name": "Table", "side": "left"});
        let script = provider(vec![
            calls(json!({}), &[place_lamp("west")]),
            calls(
                json!({"last_message_contains": "invalid arguments for place_object_relative"}),
                &[("place_object_relative", ghost)],
            ),
            calls(
                json!({"last_message_contains": "no object named 'Ghost'"}),
                &[place_lamp("left")],
            ),
            answer(
                json!({"last_message_contains": "\"object\":\"Lamp\""}),
                "Done.",
            ),
        ]);
        let output = tempfile::tempdir().unwrap();
        let handle = start_agent(config(6), script, blender.clone(), output.path())
            .await
            .unwrap();
        let (events, outcome) = drain(handle).await;
        assert_eq!(
            (&outcome.stop, outcome.steps),
            (&StopReason::Accepted, 4),
            "{events:?}"
        );
        assert_eq!(
            tools_invoked(&events),
            [
                ("place_object_relative".to_owned(), false),
                ("place_object_relative".to_owned(), false),
                ("place_object_relative".to_owned(), true)
            ]
        );
        let transcript = transcript(&outcome);
        let refused = &transcript.steps[0].calls[0];
        assert!(!refused.ok && refused.undo_step.is_none());
        let message = refused.result.as_str().unwrap();
        assert!(
            message.contains("/side") && message.contains("west"),
            "{message}"
        );
        let failed = transcript.steps[1].calls[0].result.as_str().unwrap();
        assert!(failed.contains("was undone"), "{failed}");

        // Only the command that ran is a step: one undo gives the scene back as it was.
        assert!((location_of(blender.as_ref(), "Lamp").await[0] + 0.7).abs() < 1e-3);
        blender.undo().await.unwrap();
        assert_eq!(location_of(blender.as_ref(), "Lamp").await, [3.0, 0.0, 0.2]);
    })
    .await;
}

#[tokio::test]
async fn the_step_budget_stops_an_agent_that_never_answers() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let blender = table_and_lamp().await;
        let script = provider(vec![
            calls(json!({}), &[("list_scene_objects", json!({}))]),
            calls(json!({}), &[("get_scene_info", json!({"limit": 5}))]),
        ]);
        let output = tempfile::tempdir().unwrap();
        let handle = start_agent(config(2), script, blender, output.path())
            .await
            .unwrap();
        let (events, outcome) = drain(handle).await;
        assert_eq!(
            (&outcome.stop, outcome.steps, &outcome.answer),
            (&StopReason::MaxIterations, 2, &None),
            "{events:?}"
        );
        assert_eq!(transcript(&outcome).steps.len(), 2);
        let html = viga_core::report::render_html(&outcome.folder, &super::kinds()).unwrap();
        assert!(html.contains("stopped without a final answer") && html.contains("2 of at most 2"));
    })
    .await;
}

#[tokio::test]
async fn a_cancel_abandons_the_model_call_in_flight() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let blender = table_and_lamp().await;
        let script = provider(vec![json!({
            "delay_ms": 60_000,
            "response": {"text": "too late", "finish_reason": "stop"}
        })]);
        let output = tempfile::tempdir().unwrap();
        let mut handle = start_agent(config(3), script, blender, output.path())
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        let cancelled_at = Instant::now();
        handle.cancel();
        while handle.next_event().await.is_some() {}
        let outcome = handle.wait().await.unwrap();
        assert!(cancelled_at.elapsed() < Duration::from_secs(5));
        assert_eq!((&outcome.stop, outcome.steps), (&StopReason::Cancelled, 0));
        let log = viga_memory::read_run_log(&outcome.folder.join("events.jsonl")).unwrap();
        assert!(matches!(
            log.events.last().map(|e| &e.event),
            Some(RunEvent::RunFinished {
                stop: StopReason::Cancelled,
                ..
            })
        ));
    })
    .await;
}

#[tokio::test]
async fn without_add_on_tools_or_with_bad_settings_nothing_starts() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let blender = table_and_lamp().await;
        let output = tempfile::tempdir().unwrap();
        let mut no_addons = config(3);
        no_addons.addons_folder = None;
        let err = start_agent(no_addons, provider(vec![]), blender.clone(), output.path())
            .await
            .unwrap_err();
        assert!(err.to_string().contains("no add-on offers tools"), "{err}");
        let mut bad = config(0);
        bad.addons_folder = Some(output.path().join("missing"));
        let err = start_agent(bad, provider(vec![]), blender, output.path())
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("max_steps") && err.contains("does not exist"),
            "{err}"
        );
        assert_eq!(
            std::fs::read_dir(output.path()).unwrap().count(),
            0,
            "no run folder"
        );
    })
    .await;
}

/// Copies a fixture add-on package into `folder`, optionally as another add-on whose only
/// tool is named `rename_tool_to` (handled by the package's `list_scene_objects`).
fn add_package(folder: &Path, name: &str, as_id: Option<(&str, &str)>) {
    let from = fixture_addons().join(name);
    let to = folder.join(as_id.map_or(name, |(id, _)| id));
    std::fs::create_dir_all(&to).unwrap();
    let code = std::fs::read_to_string(from.join("__init__.py")).unwrap();
    let mut manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(from.join("addon_ai.json")).unwrap())
            .unwrap();
    let code = match as_id {
        None => code,
        Some((id, tool)) => {
            manifest["addon_info"]["id"] = json!(id);
            let tools = manifest["ai_integration"]["tools"].as_array_mut().unwrap();
            tools.retain(|t| t["name"] == "list_scene_objects");
            tools[0]["name"] = json!(tool);
            format!("{code}\nVIGA_COMMANDS[{tool:?}] = VIGA_COMMANDS[\"list_scene_objects\"]\n")
        }
    };
    std::fs::write(to.join("__init__.py"), code).unwrap();
    std::fs::write(to.join("addon_ai.json"), manifest.to_string()).unwrap();
}

#[tokio::test]
async fn an_add_on_that_arrives_mid_run_is_offered_on_the_next_turn_and_a_clash_is_refused() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let blender = table_and_lamp().await;
        let folder = tempfile::tempdir().unwrap();
        add_package(folder.path(), "object_placer", None);
        // Named like the agent's own scene tool: refused, naming both, never offered.
        add_package(
            folder.path(),
            "object_placer",
            Some(("clashing_placer", "get_scene_info")),
        );
        let mut slow_first = calls(
            json!({"system_contains": "place_object_relative"}),
            &[("list_scene_objects", json!({}))],
        );
        slow_first["delay_ms"] = json!(1500);
        let script = provider(vec![
            slow_first,
            answer(
                json!({"system_contains": "paint_object"}),
                "the painter is here",
            ),
        ]);
        let mut settings = config(4);
        settings.addons_folder = Some(folder.path().to_path_buf());
        let output = tempfile::tempdir().unwrap();
        let handle = start_agent(settings, script, blender, output.path())
            .await
            .unwrap();
        // While the first model call is in flight, another add-on arrives.
        tokio::time::sleep(Duration::from_millis(300)).await;
        add_package(folder.path(), "material_painter", None);
        let (events, outcome) = drain(handle).await;
        assert_eq!(outcome.stop, StopReason::Accepted, "{events:?}");
        let warnings: Vec<&str> = events
            .iter()
            .filter_map(|event| match event {
                RunEvent::Warning { message } => Some(message.as_str()),
                _ => None,
            })
            .collect();
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("clashing_placer") && w.contains("get_scene_info")),
            "{warnings:?}"
        );
        assert!(
            warnings.iter().any(|w| w.contains("material_painter")),
            "{warnings:?}"
        );
        assert!(
            !transcript(&outcome)
                .addons
                .iter()
                .any(|id| id == "clashing_placer")
        );
    })
    .await;
}

/// The reported case: a small model on a llama.cpp server wrote its call as JSON in a fenced
/// block, with a wrong parameter name (`object_name` for `object1_name`). It is read as a
/// call, not taken for the final answer; the refusal names the parameter it meant and lists
/// the manifest's exact names, types and options; the model corrects its call, again as text.
#[tokio::test]
async fn a_call_written_as_text_with_a_wrong_parameter_name_is_corrected_not_taken_as_the_answer() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let blender = table_and_lamp().await;
        let written = |arguments: Value| {
            format!(
                "I will place the lamp.\n```json\n{}\n```",
                json!({"name": "place_object_relative", "arguments": arguments})
            )
        };
        let wrong = written(json!({"object_name": "Lamp", "object2_name": "Table", "side": "left"}));
        let right = written(json!({"object1_name": "Lamp", "object2_name": "Table", "side": "left"}));
        let script = provider(vec![
            answer(json!({}), &wrong),
            answer(
                json!({"last_message_contains": "\"object_name\" is not a parameter of place_object_relative; did you mean \"object1_name\"?"}),
                &right,
            ),
            answer(
                json!({"last_message_contains": "\"object\":\"Lamp\""}),
                "The lamp is left of the table.",
            ),
        ]);
        let output = tempfile::tempdir().unwrap();
        let handle = start_agent(config(6), script, blender.clone(), output.path())
            .await
            .unwrap();
        let (events, outcome) = drain(handle).await;
        assert_eq!(
            (&outcome.stop, outcome.steps, outcome.answer.as_deref()),
            (
                &StopReason::Accepted,
                3,
                Some("The lamp is left of the table.")
            ),
            "{events:?}"
        );
        let refusal = transcript(&outcome).steps[0].calls[0].result.clone();
        let refusal = refusal.as_str().unwrap();
        for exact in [
            "object1_name (object_name, required)",
            "side (enum, required, one of: left, right, front, back, top, bottom)",
            "distance (float, optional, default 0.0)",
        ] {
            assert!(refusal.contains(exact), "{exact} in {refusal}");
        }
        assert!((location_of(blender.as_ref(), "Lamp").await[0] + 0.7).abs() < 1e-3);
    })
    .await;
}

/// A call written as text to a tool that does not exist is told so, with the tools that do.
#[tokio::test]
async fn a_call_written_as_text_to_a_missing_tool_is_told_which_tools_exist() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let blender = table_and_lamp().await;
        let script = provider(vec![
            answer(
                json!({}),
                "```json\n{\"name\": \"move_object\", \"arguments\": {\"name\": \"Lamp\"}}\n```",
            ),
            answer(
                json!({"last_message_contains": "there is no tool named \"move_object\"; available tools:"}),
                "I cannot move it with these tools.",
            ),
        ]);
        let output = tempfile::tempdir().unwrap();
        let handle = start_agent(config(4), script, blender, output.path())
            .await
            .unwrap();
        let (events, outcome) = drain(handle).await;
        assert_eq!(outcome.stop, StopReason::Accepted, "{events:?}");
        assert_eq!(tools_invoked(&events), [("move_object".to_owned(), false)]);
    })
    .await;
}

/// What a small local model wrote (issue 38): a call and a copy of a tool's result, one JSON
/// object per line with no fence. The call is run, the reply is no final answer, and the run
/// goes on to the answer the model gives after it.
#[tokio::test]
async fn a_call_written_beside_an_echoed_result_is_run_not_taken_as_the_answer() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let blender = table_and_lamp().await;
        let (tool, arguments) = place_lamp("left");
        let written = format!(
            "{}\n{}",
            json!({"name": tool, "arguments": arguments}),
            json!({"scene": ["Camera [CAMERA] at (7.359, -6.926, 4.958)", "Lamp [MESH] at (3.000, 0.000, 0.200)"]})
        );
        let script = provider(vec![
            answer(json!({}), &written),
            answer(
                json!({"last_message_contains": "\"object\":\"Lamp\""}),
                "The lamp is left of the table.",
            ),
        ]);
        let output = tempfile::tempdir().unwrap();
        let handle = start_agent(config(4), script, blender.clone(), output.path())
            .await
            .unwrap();
        let (events, outcome) = drain(handle).await;
        assert_eq!(
            (&outcome.stop, outcome.answer.as_deref()),
            (&StopReason::Accepted, Some("The lamp is left of the table.")),
            "{events:?}"
        );
        assert_eq!(
            tools_invoked(&events),
            [("place_object_relative".to_owned(), true)]
        );
        assert!((location_of(blender.as_ref(), "Lamp").await[0] + 0.7).abs() < 1e-3);
    })
    .await;
}

/// A call the model could not write (issue 38): a misspelt tool name with its arguments
/// beside it, and then a reply cut off at the output limit. Neither is taken for the answer:
/// each goes back saying what was wrong, and the run ends with the answer that follows.
#[tokio::test]
async fn a_call_nobody_can_read_and_a_cut_off_reply_are_no_answers() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let blender = table_and_lamp().await;
        let misspelt = json!({"name": "place_object", "object1_name": "Lamp", "side": "left"});
        let cut_off = json!({"response": {"text": "I will now place the lamp by calling the tool with", "finish_reason": "length"}});
        let script = provider(vec![
            answer(json!({}), &misspelt.to_string()),
            {
                let mut turn = cut_off;
                turn["expect"] = json!({"last_message_contains": "There is no tool named \"place_object\" (did you mean \"place_object_relative\"?)"});
                turn
            },
            answer(
                json!({"last_message_contains": "cut off at the output limit"}),
                "I could not place the lamp.",
            ),
        ]);
        let output = tempfile::tempdir().unwrap();
        let handle = start_agent(config(4), script, blender.clone(), output.path())
            .await
            .unwrap();
        let (events, outcome) = drain(handle).await;
        assert_eq!(
            (&outcome.stop, outcome.answer.as_deref()),
            (&StopReason::Accepted, Some("I could not place the lamp.")),
            "{events:?}"
        );
        assert!(tools_invoked(&events).is_empty());
    })
    .await;
}

/// Seed 004 (issue 36): after a command, an add-on that declares `list_scene_objects` gives
/// its listing of the scene too, beside viga's summary with every object's place.
#[tokio::test]
async fn an_addons_declared_scene_listing_is_the_context_after_a_command() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let blender = table_and_lamp().await;
        let (tool, arguments) = place_lamp("left");
        let script = provider(vec![
            calls(json!({}), &[(tool, arguments)]),
            answer(
                json!({"last_message_contains": "\"listed_by_addon\":[\"{\\\"name\\\":\\\"Lamp\\\",\\\"type\\\":\\\"MESH\\\"}\""}),
                "Done.",
            ),
        ]);
        let output = tempfile::tempdir().unwrap();
        let handle = start_agent(config(4), script, blender, output.path())
            .await
            .unwrap();
        let (events, outcome) = drain(handle).await;
        assert_eq!(outcome.stop, StopReason::Accepted, "{events:?}");
    })
    .await;
}

/// A look whose camera instruction no fast path knows is translated by the model; that call
/// is the agent run's own (`ModelCalled` with the role `investigate`).
#[tokio::test]
async fn a_looks_translated_instruction_is_a_model_call_of_the_agent() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let blender = table_and_lamp().await;
        let pose = json!({"response": {
            "text": "{\"location\": [0.0, -6.0, 1.0], \"look_at\": [0.0, 0.0, 0.5]}",
            "finish_reason": "stop",
            "usage": {"input_tokens": 50, "output_tokens": 20}
        }});
        let script = provider(vec![
            calls(
                json!({}),
                &[
                    ("initialize_viewpoint", json!({})),
                    (
                        "investigate",
                        json!({"instruction": "peek beneath the lamp"}),
                    ),
                ],
            ),
            pose,
            answer(json!({}), "Seen."),
        ]);
        let output = tempfile::tempdir().unwrap();
        let handle = start_agent(config(4), script, blender, output.path())
            .await
            .unwrap();
        let (events, outcome) = drain(handle).await;
        assert_eq!(outcome.stop, StopReason::Accepted, "{events:?}");
        assert!(
            events.iter().any(|event| matches!(
                event,
                RunEvent::ModelCalled {
                    role: viga_protocol::event::ModelRole::Investigate,
                    ..
                }
            )),
            "{events:?}"
        );
    })
    .await;
}
