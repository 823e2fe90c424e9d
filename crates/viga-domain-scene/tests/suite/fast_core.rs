//! The loop's own decisions, on a fake Blender (`fake_blender.rs`) and the scripted model, in
//! milliseconds: Blender lost once, twice, for good; the verifier running out of turns,
//! writing its verdict or its tool calls as text; a cancel while Blender hangs. What Blender
//! itself does when killed is tested against real Blender (`faults.rs`, `lifecycle.rs`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tempfile::TempDir;
use viga_core::{RunConfig, RunHandle, RunOutcome};
use viga_protocol::bridge::{BridgeCommand, SceneReset};
use viga_protocol::event::{FailureKind, RunEvent, StopReason};
use viga_protocol::iteration::{FailureClass, Feedback, IterationRecord};
use viga_provider::ScriptedProvider;
use viga_testkit::within;

use viga_domain_scene::SceneSettings;
use viga_testkit::blender::{FakeBlender, Fault, REFUSAL, START_FAILURE};

use super::{GOOD_CODE, code, config, provider, scene, scene_settings, scene_with, text, verdict};

/// A run on the fake takes milliseconds; the limit is there only so a run that would hang
/// (a cancel that is not heard) fails its test instead of holding the suite.
const FAST_TEST_LIMIT: Duration = Duration::from_secs(10);

/// A finished run on the fake.
struct Ran {
    events: Vec<RunEvent>,
    outcome: RunOutcome,
    model: Arc<ScriptedProvider>,
    /// Keeps the run folder until the test is done with it.
    _output: TempDir,
}

impl Ran {
    fn records(&self) -> Vec<IterationRecord> {
        self.events
            .iter()
            .filter_map(|event| match event {
                RunEvent::IterationFinished { record } => Some(record.as_ref().clone()),
                _ => None,
            })
            .collect()
    }

    fn only_record(&self) -> IterationRecord {
        let records = self.records();
        assert_eq!(records.len(), 1, "{:#?}", self.events);
        records[0].clone()
    }

    /// The reasons of every `WorkerRestarted`, in order.
    fn restarts(&self) -> Vec<&str> {
        self.events
            .iter()
            .filter_map(|event| match event {
                RunEvent::WorkerRestarted { reason } => Some(reason.as_str()),
                _ => None,
            })
            .collect()
    }

    /// Every verifier tool call the run made, with whether it succeeded.
    fn tools(&self) -> Vec<(&str, bool)> {
        self.events
            .iter()
            .filter_map(|event| match event {
                RunEvent::ToolInvoked { tool, ok, .. } => Some((tool.as_str(), *ok)),
                _ => None,
            })
            .collect()
    }

    /// The message and kind of a run that failed; panics on any other stop.
    fn failure(&self) -> (&str, FailureKind) {
        match &self.outcome.stop {
            StopReason::Failed { message, kind } => (message.as_str(), *kind),
            other => panic!("the run did not fail: {other:?}\n{:#?}", self.events),
        }
    }

    fn ended_with_run_finished(&self) -> bool {
        matches!(self.events.last(), Some(RunEvent::RunFinished { stop, .. }) if *stop == self.outcome.stop)
    }
}

async fn drain(mut handle: RunHandle) -> (Vec<RunEvent>, RunOutcome) {
    let mut events = Vec::new();
    while let Some(event) = handle.next_event().await {
        events.push(event.event);
    }
    (events, handle.wait().await.unwrap())
}

/// Runs `settings` to its end on `blender`, the model answering with `turns`.
async fn run(settings: RunConfig, turns: Vec<Value>, blender: &Arc<FakeBlender>) -> Ran {
    run_in(settings, scene_settings(), turns, blender).await
}

/// [`run`] with the scene settings `scene`.
async fn run_in(
    settings: RunConfig,
    scene: SceneSettings,
    turns: Vec<Value>,
    blender: &Arc<FakeBlender>,
) -> Ran {
    within(FAST_TEST_LIMIT, "a run on the fake Blender", async {
        let output = tempfile::tempdir().unwrap();
        let model = provider(turns);
        let domain = scene_with(blender.clone(), scene, false);
        let handle = viga_core::start(settings, model.clone(), domain, output.path()).unwrap();
        let (events, outcome) = drain(handle).await;
        Ran {
            events,
            outcome,
            model,
            _output: output,
        }
    })
    .await
}

/// A verifier turn that says `words` and moves its camera to `location`.
fn look(words: &str, location: [f64; 3]) -> Value {
    json!({"response": {"text": words, "tool_calls": [
        {"id": "look", "name": "set_camera", "arguments": {"location": location}}
    ], "finish_reason": "tool_calls"}})
}

/// A verifier turn that ends the verification, answering a request whose last message
/// (the tool results) holds `expected`.
fn verdict_after(expected: &str, accepted: bool) -> Value {
    let differences: Vec<&str> = if accepted {
        vec![]
    } else {
        vec!["the crate is too small"]
    };
    json!({
        "expect": {"system_contains": "You are the verifier", "last_message_contains": expected},
        "response": {"text": "", "tool_calls": [{"id": "v", "name": "end_process", "arguments": {
            "visual_differences": differences, "suggestions": [], "accepted": accepted
        }}], "finish_reason": "tool_calls"}
    })
}

fn good_program() -> Vec<Value> {
    vec![text("1. a crate"), code(GOOD_CODE)]
}

/// The model's turns: a plan, the good program, then `verifier`.
fn then_verifier(verifier: impl IntoIterator<Item = Value>) -> Vec<Value> {
    good_program().into_iter().chain(verifier).collect()
}

// ---------------------------------------------------------------- Blender lost

#[tokio::test]
async fn blender_lost_once_during_the_program_runs_it_again_and_the_iteration_completes() {
    let blender = Arc::new(FakeBlender::new().on("execute", 1, Fault::Lost));
    let ran = run(config(1), then_verifier([verdict(true)]), &blender).await;
    assert_eq!(ran.outcome.stop, StopReason::Accepted, "{:#?}", ran.events);
    let record = ran.only_record();
    assert_eq!((record.failure, record.retry_count), (None, 0));
    assert_eq!(ran.restarts().len(), 1);
    assert_eq!(
        blender.names(),
        [
            "execute",
            "execute",
            "render_framed_views",
            "execute",
            "save_blend"
        ],
        "the program ran again at once; then verification and the final scene"
    );
    let attempts = ran
        .events
        .iter()
        .filter(|e| matches!(e, RunEvent::ExecutionFinished { .. }))
        .count();
    assert_eq!(
        attempts, 1,
        "running again after a loss is not a new attempt"
    );
}

#[tokio::test]
async fn blender_lost_twice_during_the_program_is_a_crash_the_generator_hears_about() {
    let blender = Arc::new(FakeBlender::new().on("execute", 1, Fault::Lost).on(
        "execute",
        2,
        Fault::Lost,
    ));
    let fix = json!({
        "expect": {"last_message_contains": "Blender died twice in a row while running the program"},
        "response": {"text": format!("```python\n{GOOD_CODE}```"), "finish_reason": "stop"}
    });
    let ran = run(config(1), then_verifier([fix, verdict(true)]), &blender).await;
    assert_eq!(ran.outcome.stop, StopReason::Accepted, "{:#?}", ran.events);
    let record = ran.only_record();
    assert_eq!((record.failure, record.retry_count), (None, 1));
    assert!(
        record.retry_errors[0].starts_with("E1: Blender died twice in a row"),
        "{:?}",
        record.retry_errors
    );
    let first_attempt = ran
        .events
        .iter()
        .find_map(|e| match e {
            RunEvent::ExecutionFinished {
                attempt: 0,
                result,
                failure,
                ..
            } => Some((result.clone(), *failure)),
            _ => None,
        })
        .unwrap();
    assert_eq!(first_attempt.1, Some(FailureClass::E1));
    assert_eq!(
        first_attempt.0.error.unwrap().error_type,
        viga_core::BLENDER_CRASH_ERROR
    );
    assert_eq!(ran.restarts().len(), 2);
    assert_eq!(
        blender.names(),
        [
            "execute",
            "execute",
            "execute",
            "render_framed_views",
            "execute",
            "save_blend"
        ]
    );
}

#[tokio::test]
async fn blender_that_cannot_be_restarted_twice_in_a_row_stops_the_run_as_unavailable() {
    // Lost while rendering the canonical views, and the restart fails; rebuilding the scene
    // then finds Blender still not startable.
    let blender = Arc::new(
        FakeBlender::new()
            .on("render_framed_views", 1, Fault::LostAndRestartFailed)
            .on("execute", 2, Fault::RestartFails),
    );
    let ran = run(config(2), good_program(), &blender).await;
    let (message, kind) = ran.failure();
    assert_eq!(kind, FailureKind::WorkerUnavailable);
    for words in [
        "could not be restarted twice in a row",
        "viga doctor",
        START_FAILURE,
    ] {
        assert!(message.contains(words), "{words:?} not in {message}");
    }
    assert_eq!(ran.outcome.iterations, 0);
    assert!(ran.ended_with_run_finished());
    assert_eq!(ran.model.turns_used(), 2, "no verifier turn");
    assert_eq!(
        blender.names(),
        ["execute", "render_framed_views", "execute"],
        "nothing more was asked of Blender once it was gone"
    );
}

#[tokio::test]
async fn one_failed_restart_is_tolerated_and_the_iteration_completes() {
    let blender =
        Arc::new(FakeBlender::new().on("render_framed_views", 1, Fault::LostAndRestartFailed));
    let ran = run(config(1), then_verifier([verdict(true)]), &blender).await;
    assert_eq!(ran.outcome.stop, StopReason::Accepted, "{:#?}", ran.events);
    assert_eq!(ran.only_record().failure, None);
    assert_eq!(ran.restarts().len(), 1);
    assert_eq!(
        blender.names(),
        [
            "execute",
            "render_framed_views",
            "execute",
            "render_framed_views",
            "execute",
            "save_blend"
        ]
    );
}

#[tokio::test]
async fn blender_lost_with_nobody_to_restart_it_stops_the_run_at_once() {
    let blender = Arc::new(FakeBlender::new().on("render_framed_views", 1, Fault::LostForGood));
    let ran = run(config(2), good_program(), &blender).await;
    let (message, kind) = ran.failure();
    assert_eq!(kind, FailureKind::WorkerUnavailable);
    assert!(
        message.contains("connection reset by peer") && message.contains("not restarted"),
        "{message}"
    );
    assert!(message.contains("nothing restarts it"), "{message}");
    assert!(!message.contains("twice in a row"), "{message}");
    assert_eq!(
        blender.names(),
        ["execute", "render_framed_views"],
        "no attempt to rebuild the scene"
    );
}

#[tokio::test]
async fn after_a_loss_the_program_runs_again_on_the_base_scene_and_the_call_is_made_again() {
    let base = tempfile::tempdir().unwrap();
    let base_blend = base.path().join("base.blend");
    std::fs::write(&base_blend, b"").unwrap();
    let settings = config(1);
    let with_base = SceneSettings {
        base_blend: Some(base_blend.clone()),
        ..scene_settings()
    };
    // Lost while the verifier's set_camera renders its view.
    let blender = Arc::new(FakeBlender::new().on("render", 1, Fault::Lost));
    let turns = then_verifier([
        look("Let me look from the front.", [0.0, -6.0, 2.0]),
        verdict_after("Blender was restarted meanwhile", true),
    ]);
    let ran = run_in(settings, with_base, turns, &blender).await;
    assert_eq!(ran.outcome.stop, StopReason::Accepted, "{:#?}", ran.events);
    assert_eq!(ran.tools(), [("set_camera", true), ("end_process", true)]);

    let calls = blender.calls();
    let names: Vec<_> = calls.iter().map(BridgeCommand::name).collect();
    assert_eq!(
        names,
        [
            "execute",
            "render_framed_views",
            "render",
            "execute",
            "render",
            "execute",
            "save_blend"
        ]
    );
    let on_the_base_scene = BridgeCommand::Execute {
        code: GOOD_CODE.to_owned(),
        reset: Some(SceneReset::Blend {
            path: base_blend.to_string_lossy().into_owned(),
        }),
    };
    assert_eq!(calls[0], on_the_base_scene, "the iteration's program");
    assert_eq!(
        calls[3], on_the_base_scene,
        "the scene rebuilt after the loss"
    );
    assert_eq!(calls[4], calls[2], "the lost render, made again");
    assert_eq!(calls[5], on_the_base_scene, "the final scene");
    let restarts = ran.restarts();
    assert_eq!(restarts.len(), 1);
    assert!(
        restarts[0].contains("the verifier's tool `set_camera`")
            && restarts[0].contains("the result is rebuilt by running its program again"),
        "{restarts:?}"
    );
}

// ---------------------------------------------------------------- the verifier's turns

#[tokio::test]
async fn a_verifier_that_never_calls_end_process_is_stopped_and_its_last_words_kept() {
    let mut settings = config(1);
    settings.verifier_max_turns = 2;
    let blender = Arc::new(FakeBlender::new());
    let turns = then_verifier([
        look("Let me look from the side.", [4.0, -4.0, 3.0]),
        look("The crate looks too small from here.", [0.0, -6.0, 2.0]),
    ]);
    let ran = run(settings, turns, &blender).await;
    // A third verifier turn would have found the script used up and failed the run.
    assert_eq!(
        ran.outcome.stop,
        StopReason::MaxIterations,
        "{:#?}",
        ran.events
    );
    assert_eq!(ran.model.turns_used(), 4);
    let record = ran.only_record();
    assert_eq!(
        record.feedback,
        Some(Feedback {
            visual_differences: vec![
                "the verifier did not call end_process within 2 turns".to_owned(),
                "The crate looks too small from here.".to_owned(),
            ],
            suggestions: vec![],
            accepted: false,
        })
    );
    assert_eq!(record.failure, Some(FailureClass::E3));
    assert_eq!(ran.tools(), [("set_camera", true), ("set_camera", true)]);
    assert_eq!(
        blender.names(),
        [
            "execute",
            "render_framed_views",
            "render",
            "render",
            "execute",
            "save_blend"
        ]
    );
}

/// Today's behaviour, asserted so a change to it is a decision: when the turns run out, the
/// last text is read as a verdict, and a JSON verdict written there beside a tool call
/// counts, an accepting one included.
#[tokio::test]
async fn a_verdict_written_beside_a_tool_call_counts_when_the_turns_run_out() {
    let mut settings = config(1);
    settings.verifier_max_turns = 1;
    let blender = Arc::new(FakeBlender::new());
    let accepting =
        r#"Looks right: {"visual_differences": [], "suggestions": [], "accepted": true}"#;
    let ran = run(
        settings,
        then_verifier([look(accepting, [4.0, -4.0, 3.0])]),
        &blender,
    )
    .await;
    assert_eq!(ran.outcome.stop, StopReason::Accepted, "{:#?}", ran.events);
    let feedback = ran.only_record().feedback.unwrap();
    assert_eq!(
        feedback,
        Feedback {
            visual_differences: vec![
                "the verifier did not call end_process within 1 turns".to_owned()
            ],
            suggestions: vec![],
            accepted: true,
        }
    );
}

#[tokio::test]
async fn a_verdict_written_as_text_is_read() {
    let cases = [
        (
            "Verdict:\n```json\n{\"visual_differences\": [\"the crate is too red\"], \"suggestions\": [\"paint it brown\"], \"accepted\": false}\n```",
            Feedback {
                visual_differences: vec!["the crate is too red".to_owned()],
                suggestions: vec!["paint it brown".to_owned()],
                accepted: false,
            },
        ),
        (
            r#"{"visual_differences": [], "suggestions": [], "accepted": true}"#,
            Feedback {
                accepted: true,
                ..Feedback::default()
            },
        ),
        (
            "  The crate floats above the floor.\n",
            Feedback {
                visual_differences: vec!["The crate floats above the floor.".to_owned()],
                suggestions: vec![],
                accepted: false,
            },
        ),
    ];
    for (words, expected) in cases {
        let blender = Arc::new(FakeBlender::new());
        let ran = run(config(1), then_verifier([text(words)]), &blender).await;
        let stop = if expected.accepted {
            StopReason::Accepted
        } else {
            StopReason::MaxIterations
        };
        assert_eq!(ran.outcome.stop, stop, "{words:?}");
        assert_eq!(ran.only_record().feedback, Some(expected), "{words:?}");
        assert!(ran.tools().is_empty(), "{words:?}: no tool was called");
    }
}

#[tokio::test]
async fn tool_calls_written_as_json_text_are_made() {
    let blender = Arc::new(FakeBlender::new());
    let turns = then_verifier([
        // Qwen's habit: tags around the call, `parameters` for `arguments`.
        text("<tool_call>\n{\"name\": \"set_camera\", \"parameters\": {\"location\": [4, -4, 3]}}\n</tool_call>"),
        text(
            &json!({"name": "end_process", "arguments": {
                "visual_differences": ["the lid is missing"], "suggestions": ["add a lid"], "accepted": false
            }})
            .to_string(),
        ),
    ]);
    let ran = run(config(1), turns, &blender).await;
    assert_eq!(
        ran.outcome.stop,
        StopReason::MaxIterations,
        "{:#?}",
        ran.events
    );
    assert_eq!(ran.tools(), [("set_camera", true), ("end_process", true)]);
    assert_eq!(
        ran.only_record().feedback,
        Some(Feedback {
            visual_differences: vec!["the lid is missing".to_owned()],
            suggestions: vec!["add a lid".to_owned()],
            accepted: false,
        })
    );
    let camera_moved = blender.calls().iter().any(|call| {
        matches!(call, BridgeCommand::Render(request)
            if request.pose.as_ref().and_then(|pose| pose.location) == Some([4.0, -4.0, 3.0]))
    });
    assert!(camera_moved, "{:?}", blender.calls());
}

#[tokio::test]
async fn a_refused_verifier_render_goes_back_to_the_model_as_a_tool_error() {
    let blender = Arc::new(FakeBlender::new().on("render", 1, Fault::Refuse));
    let turns = then_verifier([
        look("Let me look from the side.", [4.0, -4.0, 3.0]),
        verdict_after(REFUSAL, false),
    ]);
    let ran = run(config(1), turns, &blender).await;
    assert_eq!(
        ran.outcome.stop,
        StopReason::MaxIterations,
        "{:#?}",
        ran.events
    );
    assert_eq!(ran.tools(), [("set_camera", false), ("end_process", true)]);
    assert_eq!(ran.only_record().failure, Some(FailureClass::E3));
    assert!(ran.restarts().is_empty(), "a refusal is not a loss");
    assert_eq!(
        blender.names(),
        [
            "execute",
            "render_framed_views",
            "render",
            "execute",
            "save_blend"
        ]
    );
}

/// A reply that cannot be read is a refused command, not a broken Blender: the model hears
/// about it as a tool error and the verification goes on, with the worker kept.
#[tokio::test]
async fn an_unreadable_reply_to_a_verifier_tool_goes_back_to_the_model() {
    let blender = Arc::new(FakeBlender::new().on("render", 1, Fault::Garbage));
    let turns = then_verifier([
        look("Let me look from the side.", [4.0, -4.0, 3.0]),
        verdict_after("malformed reply to `render`", false),
    ]);
    let ran = run(config(1), turns, &blender).await;
    assert_eq!(
        ran.outcome.stop,
        StopReason::MaxIterations,
        "{:#?}",
        ran.events
    );
    assert_eq!(ran.tools(), [("set_camera", false), ("end_process", true)]);
    assert!(
        ran.restarts().is_empty(),
        "an unreadable reply is not a loss"
    );
    assert_eq!(ran.outcome.iterations, 1);
}

// ---------------------------------------------------------------- cancel

/// Starts a run whose Blender hangs where `blender` says, cancels it once the call hangs,
/// and says how long the run took to end after the cancel.
async fn cancel_while_hanging(blender: &Arc<FakeBlender>, turns: Vec<Value>) -> (Ran, Duration) {
    within(
        FAST_TEST_LIMIT,
        "a run cancelled while Blender hangs",
        async {
            let output = tempfile::tempdir().unwrap();
            let model = provider(turns);
            let handle = viga_core::start(
                config(2),
                model.clone(),
                scene(blender.clone()),
                output.path(),
            )
            .unwrap();
            blender.hanging().await;
            let cancelled_at = Instant::now();
            handle.cancel();
            let (events, outcome) = drain(handle).await;
            let ran = Ran {
                events,
                outcome,
                model,
                _output: output,
            };
            (ran, cancelled_at.elapsed())
        },
    )
    .await
}

/// Far more than a cancel takes (a few milliseconds); far less than any Blender timeout.
const PROMPT_CANCEL: Duration = Duration::from_secs(2);

#[tokio::test]
async fn cancelling_while_a_verifier_tool_hangs_stops_the_run_at_once() {
    let blender = Arc::new(FakeBlender::new().on("render", 1, Fault::Hang));
    let turns = then_verifier([look("Let me look from the side.", [4.0, -4.0, 3.0])]);
    let (ran, took) = cancel_while_hanging(&blender, turns).await;
    assert_eq!(
        (ran.outcome.stop.clone(), ran.outcome.iterations),
        (StopReason::Cancelled, 0)
    );
    assert!(took < PROMPT_CANCEL, "the run took {took:?} to stop");
    assert!(ran.ended_with_run_finished());
    assert!(ran.records().is_empty());
    assert!(ran.tools().is_empty(), "the hanging tool never answered");
    assert_eq!(
        blender.names(),
        ["execute", "render_framed_views", "render"]
    );
}

#[tokio::test]
async fn cancelling_while_the_canonical_views_hang_stops_the_run_at_once() {
    let blender = Arc::new(FakeBlender::new().on("render_framed_views", 1, Fault::Hang));
    let (ran, took) = cancel_while_hanging(&blender, good_program()).await;
    assert_eq!(ran.outcome.stop, StopReason::Cancelled);
    assert!(took < PROMPT_CANCEL, "the run took {took:?} to stop");
    assert!(ran.ended_with_run_finished());
    assert_eq!(ran.model.turns_used(), 2, "the verifier was never asked");
    assert_eq!(blender.names(), ["execute", "render_framed_views"]);
}
