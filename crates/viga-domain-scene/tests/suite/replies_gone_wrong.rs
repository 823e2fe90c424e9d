//! Issue 38's replays on real Blender, role by role: a reply cut off at the output limit and
//! a call written so that nobody can read it. Each goes back to the model saying what went
//! wrong (a cut-off reply shortened, never whole), nothing of it runs, and the run goes on to
//! what the model answers next.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::{Value, json};
use viga_core::RunConfig;
use viga_protocol::event::{RunEvent, StopReason};
use viga_protocol::iteration::FailureClass;
use viga_provider::{ModelRequest, ModelResponse, Provider, ProviderError, ScriptedProvider};
use viga_testkit::{BLENDER_TEST_LIMIT, within};

use super::{GOOD_CODE, blender, code, config, provider, scene, text, verdict};

/// A scripted model that keeps every request it is sent.
struct Recording {
    script: Arc<ScriptedProvider>,
    requests: Mutex<Vec<ModelRequest>>,
}

#[async_trait]
impl Provider for Recording {
    fn name(&self) -> &str {
        self.script.name()
    }
    fn model(&self) -> &str {
        self.script.model()
    }
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        self.requests.lock().unwrap().push(request.clone());
        self.script.complete(request).await
    }
}

/// The run of `settings` with the model answering `turns`: its events, how it stopped, and
/// every request (as JSON text) the model was sent.
async fn run(settings: RunConfig, turns: Vec<Value>) -> (Vec<RunEvent>, StopReason, Vec<String>) {
    within(BLENDER_TEST_LIMIT, "the run", async {
        let output = tempfile::tempdir().unwrap();
        let model = Arc::new(Recording {
            script: provider(turns),
            requests: Mutex::new(Vec::new()),
        });
        let mut handle = viga_core::start(
            settings,
            model.clone(),
            scene(blender().await),
            output.path(),
        )
        .unwrap();
        let mut events = Vec::new();
        while let Some(event) = handle.next_event().await {
            events.push(event.event);
        }
        let stop = handle.wait().await.unwrap().stop;
        let requests = model
            .requests
            .lock()
            .unwrap()
            .iter()
            .map(|request| serde_json::to_string(&request.messages).unwrap())
            .collect();
        (events, stop, requests)
    })
    .await
}

/// A reply that stopped at the output limit: `text`, `finish_reason: length`.
fn cut_off(text: &str) -> Value {
    json!({"response": {"text": text, "finish_reason": "length"}})
}

/// A long program that repeats one line and ends, cut off, with `tail`.
fn repeating_program(tail: &str) -> String {
    let line = "bpy.ops.mesh.primitive_cube_add(size=0.1, location=(0, 0, 0))";
    format!("```python\nimport bpy\n{}\n{tail}", [line; 40].join("\n"))
}

const TAIL: &str = "bpy.ops.mesh.primitive_cube_add(size=0.1, location=(9, 9, 9";

#[tokio::test]
async fn a_program_cut_off_is_not_run_and_goes_back_shortened() {
    let mut fix = code(GOOD_CODE);
    fix["expect"] = json!({"last_message_contains": "cut off at the output limit (4096 tokens)"});
    let (events, stop, requests) = run(
        config(1),
        vec![
            text("Plan: one crate."),
            cut_off(&repeating_program(TAIL)),
            fix,
            verdict(true),
        ],
    )
    .await;
    assert_eq!(stop, StopReason::Accepted, "{events:?}");
    let retried: Vec<FailureClass> = events
        .iter()
        .filter_map(|event| match event {
            RunEvent::FastRetry { failure, .. } => Some(*failure),
            _ => None,
        })
        .collect();
    assert_eq!(retried, [FailureClass::E2]);
    // The cut-off program never ran; the fix did.
    let programs: Vec<&str> = events
        .iter()
        .filter_map(|event| match event {
            RunEvent::CodeProduced { code, .. } => Some(code.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(programs, [GOOD_CODE]);
    let fix_request = &requests[2];
    assert!(
        fix_request.contains("repeated one line 40 times"),
        "{fix_request}"
    );
    assert!(
        !fix_request.contains(TAIL),
        "the cut-off reply went back whole"
    );
}

#[tokio::test]
async fn a_verifier_cut_off_before_its_call_is_asked_again() {
    let mut concluded = verdict(true);
    concluded["expect"]["last_message_contains"] =
        json!("a few sentences at most, then the end_process call");
    let rambling = format!("{} and so", ["The crate looks right."; 30].join(" "));
    let mut cut = cut_off(&rambling);
    cut["expect"] = json!({"system_contains": "You are the verifier"});
    let (events, stop, requests) = run(
        config(1),
        vec![text("Plan: one crate."), code(GOOD_CODE), cut, concluded],
    )
    .await;
    assert_eq!(stop, StopReason::Accepted, "{events:?}");
    assert!(
        !requests[3].contains(&rambling),
        "the cut-off reply went back whole"
    );
}

#[tokio::test]
async fn a_call_that_is_not_json_is_told_what_was_wrong_and_nothing_runs() {
    // A raw new line inside the code string: not JSON, as small models often write it.
    let broken = format!(
        "```json\n{{\"name\": \"execute_code\", \"arguments\": {{\"code\": \"{}\"}}}}\n```",
        GOOD_CODE.trim_end()
    );
    let mut settings = config(1);
    settings.generator_tools = true;
    // The verifier judges the request to stop, so the whole exchange is replayed.
    settings.generator_ends_run = false;
    let mut again = json!({"response": {"text": "", "finish_reason": "tool_calls", "tool_calls": [
        {"id": "g1", "name": "execute_code", "arguments": {"code": GOOD_CODE}}
    ]}});
    again["expect"] = json!({"last_message_contains": "Your tool call is not valid JSON ("});
    let mut stop_turn = json!({"response": {"text": "", "finish_reason": "tool_calls", "tool_calls": [
        {"id": "g2", "name": "end_process", "arguments": {"reason": "the crate is there"}}
    ]}});
    stop_turn["expect"] = json!({"last_message_contains": "The program ran without errors"});
    let (events, stop, requests) = run(
        settings,
        vec![
            json!({"response": {"text": "", "finish_reason": "tool_calls", "tool_calls": [
                {"id": "p", "name": "make_plan", "arguments": {"plan": "one crate"}}
            ]}}),
            text(&broken),
            again,
            stop_turn,
            verdict(true),
        ],
    )
    .await;
    assert_eq!(stop, StopReason::Accepted, "{events:?}");
    assert!(
        requests[2].contains("execute_code(code)"),
        "the tools and their parameters are named: {}",
        requests[2]
    );
    assert!(events.iter().any(|event| matches!(
        event,
        RunEvent::Warning { message } if message.contains("the generator: Your tool call is not valid JSON")
    )));
}

/// A verifier whose chat template writes its call in `<tool_call>` tags (Qwen's, Hermes'),
/// with its thinking around it: the call is read, and its verdict is the iteration's.
#[tokio::test]
async fn a_verifier_call_in_tool_call_tags_is_its_verdict() {
    let tagged = format!(
        "The crate stands on the floor.\n<tool_call>\n{}\n</tool_call>",
        json!({"name": "end_process", "arguments": {"visual_differences": [], "suggestions": [], "accepted": true}})
    );
    let mut verifier = text(&tagged);
    verifier["expect"] = json!({"system_contains": "You are the verifier"});
    let (events, stop, _) = run(
        config(1),
        vec![text("Plan: one crate."), code(GOOD_CODE), verifier],
    )
    .await;
    assert_eq!(stop, StopReason::Accepted, "{events:?}");
}

/// Seed 002 (issue 36): when no answer holds a program after every fast retry, the
/// iteration is recorded as E2 and still goes to the verifier, told that no program came
/// back, so its critique reaches the next iteration.
#[tokio::test]
async fn an_iteration_without_a_program_still_goes_to_the_verifier() {
    let mut settings = config(1);
    settings.plan_each_iteration = false;
    let mut verifier = verdict(false);
    verifier["expect"]["any_message_contains"] = json!("No program came back in this iteration");
    let (events, stop, _) = run(
        settings,
        vec![
            text("I would add a crate."),
            text("A crate, then."),
            text("Still a crate."),
            text("The crate."),
            verifier,
        ],
    )
    .await;
    assert_eq!(stop, StopReason::MaxIterations, "{events:?}");
    let record = events
        .iter()
        .find_map(|event| match event {
            RunEvent::IterationFinished { record } => Some(record.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(record.failure, Some(FailureClass::E2));
    assert!(
        record
            .feedback
            .as_ref()
            .is_some_and(|feedback| feedback.visual_differences == ["the crate is too small"]),
        "{:?}",
        record.feedback
    );
}
