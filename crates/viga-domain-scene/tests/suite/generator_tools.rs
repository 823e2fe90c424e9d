//! The generator with tools (seed 001) on real Blender: it looks at the scene, runs a
//! program that fails, reads the error as the tool's result, fixes it within the iteration,
//! and asks to stop; the verifier decides.

use serde_json::{Value, json};
use viga_core::RunConfig;
use viga_protocol::event::{RunEvent, StopReason};
use viga_protocol::iteration::{FailureClass, IterationRecord};
use viga_testkit::{BLENDER_TEST_LIMIT, within};

use viga_domain_scene::SceneSettings;

use super::{GOOD_CODE, blender, config, provider, scene_settings, scene_with, verdict};

const BROKEN_CODE: &str = "import bpy\nbpy.ops.mesh.primitive_cube_add(size=2, location=(0, 0, 1))\ncrate = undefined_crate\n";
const BIGGER_CODE: &str = "import bpy\nbpy.ops.mesh.primitive_cube_add(size=3, location=(0, 0, 1.5))\nbpy.context.object.name = 'Crate'\n";

/// One generator answer calling `calls` (name, arguments) in order, after `expect`.
fn tools_turn(expect: Value, calls: &[(&str, Value)]) -> Value {
    let calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(n, (name, arguments))| json!({"id": format!("g{n}"), "name": name, "arguments": arguments}))
        .collect();
    json!({"expect": expect, "response": {"text": "", "tool_calls": calls, "finish_reason": "tool_calls"}})
}

fn verdict_after_request(accepted: bool, reason: &str) -> Value {
    let mut turn = verdict(accepted);
    turn["expect"]["any_message_contains"] =
        json!(format!("The generator asks to stop here: {reason}"));
    turn
}

/// A generator with tools whose `end_process` asks the verifier (the tests of the
/// conversation between them); [`the_generators_end_process_ends_the_run`] has the default.
fn with_tools(max_iterations: u32) -> RunConfig {
    let mut settings = config(max_iterations);
    settings.generator_tools = true;
    settings.generator_ends_run = false;
    settings
}

struct Finished {
    events: Vec<RunEvent>,
    records: Vec<IterationRecord>,
    stop: StopReason,
    folder: std::path::PathBuf,
    _output: tempfile::TempDir,
}

async fn run(settings: RunConfig, turns: Vec<Value>) -> Finished {
    run_in(settings, scene_settings(), turns).await
}

/// [`run`] with the scene settings `scene`.
async fn run_in(settings: RunConfig, scene: SceneSettings, turns: Vec<Value>) -> Finished {
    within(BLENDER_TEST_LIMIT, "the run", async {
        let output = tempfile::tempdir().unwrap();
        let model = provider(turns);
        let domain = scene_with(blender().await, scene, false);
        let mut handle = viga_core::start(settings, model.clone(), domain, output.path()).unwrap();
        let mut events = Vec::new();
        while let Some(event) = handle.next_event().await {
            events.push(event.event);
        }
        let outcome = handle.wait().await.unwrap();
        let records = events
            .iter()
            .filter_map(|e| match e {
                RunEvent::IterationFinished { record } => Some(record.as_ref().clone()),
                _ => None,
            })
            .collect();
        Finished {
            events,
            records,
            stop: outcome.stop,
            folder: outcome.folder,
            _output: output,
        }
    })
    .await
}

fn calls(record: &IterationRecord) -> Vec<(&str, bool)> {
    record
        .generator_tool_calls
        .iter()
        .map(|call| (call.tool.as_str(), call.ok))
        .collect()
}

fn fast_retries(events: &[RunEvent]) -> Vec<(u32, FailureClass)> {
    events
        .iter()
        .filter_map(|e| match e {
            RunEvent::FastRetry {
                attempt, failure, ..
            } => Some((*attempt, *failure)),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn the_generator_looks_fixes_its_program_and_asks_to_stop() {
    let all_tools = [
        "make_plan",
        "get_scene_info",
        "get_better_assets",
        "execute_code",
        "end_process",
    ];
    let finished = run(
        with_tools(1),
        vec![
            tools_turn(
                json!({"system_contains": "You work with tools", "tools_include": all_tools}),
                &[
                    ("make_plan", json!({"plan": "1. a crate on the floor"})),
                    ("get_scene_info", json!({})),
                ],
            ),
            // The base scene (empty), as get_scene_info's result.
            tools_turn(
                json!({"last_message_contains": "0 objects"}),
                &[("execute_code", json!({"code": BROKEN_CODE}))],
            ),
            tools_turn(
                json!({"last_message_contains": "NameError"}),
                &[("execute_code", json!({"code": GOOD_CODE}))],
            ),
            tools_turn(
                json!({"last_message_contains": "The program ran without errors"}),
                &[(
                    "end_process",
                    json!({"reason": "the crate is on the floor"}),
                )],
            ),
            verdict_after_request(true, "the crate is on the floor"),
        ],
    )
    .await;
    assert_eq!(finished.stop, StopReason::Accepted);
    let record = &finished.records[0];
    assert_eq!(
        calls(record),
        [
            ("make_plan", true),
            ("get_scene_info", true),
            ("execute_code", false),
            ("execute_code", true),
            ("end_process", true),
        ]
    );
    let failed = &record.generator_tool_calls[2];
    assert_eq!(failed.arguments, "3 lines: import bpy");
    assert!(
        failed.outcome.contains("NameError at line 3"),
        "{}",
        failed.outcome
    );
    assert_eq!(
        record.generator_tool_calls[4].arguments,
        r#"{"reason":"the crate is on the floor"}"#
    );
    // The fixed program is the iteration's; the failure it fixed is a fast retry.
    assert_eq!(record.code, GOOD_CODE);
    assert_eq!((record.failure, record.retry_count), (None, 1));
    assert!(
        record.retry_errors[0].starts_with("E1: The program failed: NameError"),
        "{:?}",
        record.retry_errors
    );
    assert_eq!(fast_retries(&finished.events), [(1, FailureClass::E1)]);
    assert_eq!(record.plan.as_deref(), Some("1. a crate on the floor"));
    let announced = finished
        .events
        .iter()
        .filter(|e| matches!(e, RunEvent::GeneratorToolCalled { index: 1, .. }))
        .count();
    assert_eq!(announced, 5);
    assert_eq!(
        std::fs::read_to_string(finished.folder.join("codes/1.py")).unwrap(),
        GOOD_CODE
    );
    let thoughts =
        std::fs::read_to_string(finished.folder.join("generator_thoughts/1.md")).unwrap();
    assert!(
        thoughts.contains(
            "tool `execute_code` 3 lines: import bpy -> (failed) The program failed: NameError"
        ),
        "{thoughts}"
    );
    let report = viga_core::report::render_html(&finished.folder, &super::kinds()).unwrap();
    assert!(report.contains("<h3>Generator tools</h3>"), "{report}");
    assert!(
        report.contains("execute_code (failed)") && report.contains("get_scene_info"),
        "{report}"
    );
}

#[tokio::test]
async fn asking_to_stop_stops_nothing_until_the_verifier_accepts() {
    let finished = run(
        with_tools(2),
        vec![
            tools_turn(
                json!({}),
                &[
                    ("execute_code", json!({"code": GOOD_CODE})),
                    ("end_process", json!({"reason": "done"})),
                ],
            ),
            verdict_after_request(false, "done"),
            // Iteration 2 starts from the critique; prose alone runs nothing (E2)...
            json!({"expect": {"last_message_contains": "the crate is too small"},
                   "response": {"text": "Let me think about the size.", "finish_reason": "stop"}}),
            // ...the model is told so, and looks at the scene the last program built...
            tools_turn(
                json!({"last_message_contains": "No program has run in this iteration"}),
                &[("get_scene_info", json!({}))],
            ),
            // ...then answers with its program, which runs as if by execute_code.
            json!({"expect": {"last_message_contains": "Crate"},
                   "response": {"text": format!("A bigger crate.\n```python\n{BIGGER_CODE}```\n"),
                                "finish_reason": "stop"}}),
            verdict(true),
        ],
    )
    .await;
    assert_eq!(finished.stop, StopReason::Accepted);
    let [first, second] = finished.records.as_slice() else {
        panic!("two iterations: {:?}", finished.records);
    };
    assert_eq!(
        calls(first),
        [("execute_code", true), ("end_process", true)]
    );
    assert_eq!(
        first.failure,
        Some(FailureClass::E3),
        "asked to stop, and not accepted"
    );
    assert_eq!(calls(second), [("get_scene_info", true)]);
    // The scene the program built, without the verifier's camera it left behind.
    let scene = &second.generator_tool_calls[0].outcome;
    assert!(scene.contains("camera none, 1 objects"), "{scene}");
    assert_eq!(second.code, BIGGER_CODE);
    assert_eq!((second.failure, second.retry_count), (None, 1));
    assert!(
        second.retry_errors[0].starts_with("E2: No program has run"),
        "{:?}",
        second.retry_errors
    );
    assert_eq!(fast_retries(&finished.events), [(0, FailureClass::E2)]);
}

#[tokio::test]
async fn programs_per_iteration_are_bounded_like_fast_retries() {
    let mut settings = with_tools(1);
    settings.max_fast_retries = 0;
    let finished = run(
        settings,
        vec![
            tools_turn(json!({}), &[("execute_code", json!({"code": BROKEN_CODE}))]),
            tools_turn(
                json!({"last_message_contains": "NameError"}),
                &[("execute_code", json!({"code": GOOD_CODE}))],
            ),
            tools_turn(
                json!({"last_message_contains": "Not run: the iteration allows 1 program"}),
                &[("end_process", json!({"reason": "I cannot fix it"}))],
            ),
            // The broken program left a scene, so the verifier still looks (seed 002).
            verdict_after_request(false, "I cannot fix it"),
        ],
    )
    .await;
    assert_eq!(finished.stop, StopReason::MaxIterations);
    let record = &finished.records[0];
    assert_eq!(
        calls(record),
        [
            ("execute_code", false),
            ("execute_code", false),
            ("end_process", true)
        ]
    );
    assert_eq!(record.code, BROKEN_CODE, "the last program that ran");
    assert_eq!(
        (record.failure, record.retry_count),
        (Some(FailureClass::E1), 0)
    );
    assert!(fast_retries(&finished.events).is_empty());
    let runs = finished
        .events
        .iter()
        .filter(|e| matches!(e, RunEvent::ExecutionFinished { .. }))
        .count();
    assert_eq!(runs, 1, "the second program was not run");
}

#[tokio::test]
async fn get_better_assets_searches_the_runs_asset_folder() {
    let assets = tempfile::tempdir().unwrap();
    std::fs::create_dir(assets.path().join("furniture")).unwrap();
    std::fs::write(assets.path().join("furniture/oak_chair.glb"), b"glTF").unwrap();
    std::fs::write(
        assets.path().join("furniture/oak_chair.txt"),
        "a wooden dining chair",
    )
    .unwrap();
    let settings = with_tools(1);
    let scene = SceneSettings {
        assets: Some(assets.path().to_path_buf()),
        ..scene_settings()
    };
    let finished = run_in(
        settings,
        scene,
        vec![
            tools_turn(
                json!({}),
                &[("get_better_assets", json!({"query": "wooden chair"}))],
            ),
            json!({"expect": {"last_message_contains": "furniture/oak_chair"},
                   "response": {"text": format!("```python\n{GOOD_CODE}```"), "finish_reason": "stop"}}),
            verdict(true),
        ],
    )
    .await;
    assert_eq!(finished.stop, StopReason::Accepted);
    assert_eq!(calls(&finished.records[0]), [("get_better_assets", true)]);
}

#[tokio::test]
async fn an_openai_request_offers_the_generator_its_tools() {
    let server = viga_testkit::openai::replay_server(vec![json!({"text": "ok"})]).unwrap();
    let mut settings =
        viga_provider::ProviderConfig::new(viga_provider::ProviderKind::OpenAi, "gpt-4o");
    settings.base_url = Some(format!("{}/v1", server.base()));
    let openai =
        viga_provider::build_provider_with_env(&settings, |_| Some("sk-test".to_owned())).unwrap();
    let mut request = viga_provider::ModelRequest::new(
        "You are the generator",
        vec![viga_protocol::message::ChatMessage::user_text(
            "Iteration 1.",
        )],
    );
    request.tools = viga_skills::generator::generator_tools().unwrap().specs();
    openai.complete(&request).await.unwrap();
    let body: Value = serde_json::from_slice(&server.requests()[0].body).unwrap();
    insta::assert_json_snapshot!("openai_generator_tools", body["tools"]);
}

/// The reported case: with generator tools on, a small model wrote a call to a tool that does
/// not exist (`start_process`) as fenced JSON, turn after turn, and was only reminded to run a
/// program. It is told that no such tool exists and which ones do; so is the verifier when it
/// does the same.
#[tokio::test]
async fn a_call_to_a_tool_that_does_not_exist_is_told_so_with_the_tools_that_do() {
    let written =
        |name: &str| format!("```json\n{{\"name\": \"{name}\", \"arguments\": {{}}}}\n```");
    let told = |name: &str, first_tools: &str| json!({"last_message_contains": format!("there is no tool named \"{name}\"; the tools you have are: {first_tools}")});
    let finished = run(
        with_tools(1),
        vec![
            json!({"response": {"text": written("start_process"), "finish_reason": "stop"}}),
            json!({"expect": told("start_process", "end_process, execute_code"), "response": {"text": written("start_process"), "finish_reason": "stop"}}),
            tools_turn(told("start_process", "end_process, execute_code"), &[("execute_code", json!({"code": GOOD_CODE}))]),
            tools_turn(
                json!({"last_message_contains": "The program ran without errors"}),
                &[("end_process", json!({"reason": "done"}))],
            ),
            json!({"expect": {"system_contains": "You are the verifier"},
                   "response": {"text": written("zoom_in"), "finish_reason": "stop"}}),
            {
                let mut accept = verdict(true);
                accept["expect"] = told("zoom_in", "end_process, get_scene_info, initialize_viewpoint");
                accept
            },
        ],
    )
    .await;
    assert_eq!(finished.stop, StopReason::Accepted, "{:?}", finished.events);
    assert_eq!(
        calls(&finished.records[0]),
        [
            ("start_process", false),
            ("start_process", false),
            ("execute_code", true),
            ("end_process", true)
        ]
    );
    assert!(finished.events.iter().any(|event| matches!(
        event,
        RunEvent::ToolInvoked { tool, ok: false, .. } if tool == "zoom_in"
    )));
}

/// What a small local model wrote with `--generator-tools on` (issue 38): fenced calls with
/// their arguments beside the name. They are read as the calls they are, so the program runs
/// and the generator's request to stop reaches the verifier.
#[tokio::test]
async fn calls_with_their_arguments_beside_the_name_are_run() {
    let fenced = |call: Value| json!({"response": {"text": format!("```json\n{call}\n```"), "finish_reason": "stop"}});
    let finished = run(
        with_tools(1),
        vec![
            fenced(json!({"name": "execute_code", "code": GOOD_CODE})),
            {
                let mut stop =
                    fenced(json!({"name": "end_process", "reason": "the crate is there"}));
                stop["expect"] = json!({"last_message_contains": "The program ran without errors"});
                stop
            },
            verdict_after_request(true, "the crate is there"),
        ],
    )
    .await;
    assert_eq!(finished.stop, StopReason::Accepted, "{:?}", finished.events);
    assert_eq!(
        calls(&finished.records[0]),
        [("execute_code", true), ("end_process", true)]
    );
}

/// Seed 001 (issue 36): by default the generator's `end_process` ends the run with its
/// reason, after its program's target views are rendered and scored; no verifier is asked
/// (the script has no verifier turn), and the report gives the reason.
#[tokio::test]
async fn the_generators_end_process_ends_the_run() {
    let work = tempfile::tempdir().unwrap();
    let target = work.path().join("goal.png");
    std::fs::write(&target, viga_testkit::picture::halves_png(32, 32)).unwrap();
    let mut settings = config(3);
    settings.generator_tools = true;
    settings.targets = vec![viga_core::TargetSpec::picture(target)];
    let code = "import bpy\nbpy.ops.mesh.primitive_cube_add()\nbpy.ops.object.camera_add(location=(4, -4, 3), rotation=(1.1, 0, 0.8))\nbpy.context.scene.camera = bpy.context.object\n";
    let finished = run(
        settings,
        vec![
            tools_turn(json!({}), &[("execute_code", json!({"code": code}))]),
            tools_turn(
                json!({"last_message_contains": "The program ran without errors"}),
                &[(
                    "end_process",
                    json!({"reason": "the cube stands where it should"}),
                )],
            ),
        ],
    )
    .await;
    assert_eq!(
        finished.stop,
        StopReason::GeneratorEnded {
            why: "the cube stands where it should".to_owned()
        },
        "{:?}",
        finished.events
    );
    assert_eq!(finished.records.len(), 1);
    assert_eq!(finished.records[0].failure, None);
    assert!(
        finished
            .events
            .iter()
            .any(|event| matches!(event, RunEvent::ViewScored { index: 1, .. })),
        "the last program's views were scored"
    );
    assert!(!finished.events.iter().any(|event| matches!(
        event,
        RunEvent::ModelCalled {
            role: viga_protocol::event::ModelRole::Verifier,
            ..
        }
    )));
    let report = viga_core::report::render_html(&finished.folder, &super::kinds()).unwrap();
    assert!(
        report.contains("the generator ended it: the cube stands where it should"),
        "the report gives the reason"
    );
}
