//! Seed 002's four tests, plus the format failure (E2), on real Blender.

use viga_protocol::event::{RunEvent, StopReason};
use viga_protocol::iteration::{FailureClass, IterationRecord};
use viga_testkit::{BLENDER_TEST_LIMIT, within};

use super::{GOOD_CODE, blender, code, config, provider, scene, text, verdict};

async fn run_one_iteration(
    turns: Vec<serde_json::Value>,
) -> (IterationRecord, Vec<RunEvent>, tempfile::TempDir) {
    // The tests here touch Blender only through this run, so bounding it bounds them.
    within(BLENDER_TEST_LIMIT, "the one-iteration run", async {
        let output = tempfile::tempdir().unwrap();
        let provider = provider(turns);
        let mut handle = viga_core::start(
            config(1),
            provider.clone(),
            scene(blender().await),
            output.path(),
        )
        .unwrap();
        let mut events = Vec::new();
        while let Some(event) = handle.next_event().await {
            events.push(event.event);
        }
        let outcome = handle.wait().await.unwrap();
        assert!(
            !matches!(outcome.stop, StopReason::Failed { .. }),
            "{:?}",
            outcome.stop
        );
        let record = events
            .iter()
            .find_map(|e| match e {
                RunEvent::IterationFinished { record } => Some((**record).clone()),
                _ => None,
            })
            .expect("one iteration finished");
        (record, events, output)
    })
    .await
}

fn fast_retries(events: &[RunEvent]) -> usize {
    events
        .iter()
        .filter(|e| matches!(e, RunEvent::FastRetry { .. }))
        .count()
}

#[tokio::test]
async fn test_fast_retry_fixes_syntax_error() {
    let (record, events, _dir) = run_one_iteration(vec![
        text("1. add a crate"),
        code("import bpy\nbpy.ops.mesh.primitive_cube_add(size=2\n"),
        code(GOOD_CODE),
        verdict(false),
    ])
    .await;
    assert_eq!(record.retry_count, 1);
    assert_eq!(
        record.failure,
        Some(FailureClass::E3),
        "the fixed program ran, and the verifier rejected its scene"
    );
    assert_eq!(record.code, GOOD_CODE);
    assert_eq!(record.retry_errors.len(), 1);
    assert!(
        record.retry_errors[0].starts_with("E1: The program failed: SyntaxError"),
        "{:?}",
        record.retry_errors
    );
    assert_eq!(fast_retries(&events), 1);
}

#[tokio::test]
async fn test_fast_retry_gives_up_after_max() {
    let broken =
        code("import bpy\nbpy.ops.mesh.primitive_cube_add()\nraise RuntimeError('still broken')\n");
    let (record, events, _dir) = run_one_iteration(vec![
        text("plan"),
        broken.clone(),
        broken.clone(),
        broken.clone(),
        broken,
        verdict(false),
    ])
    .await;
    assert_eq!(
        record.retry_count, 3,
        "three fast retries after the first attempt"
    );
    assert_eq!(record.failure, Some(FailureClass::E1));
    assert_eq!(fast_retries(&events), 3);
    assert!(
        record.feedback.is_some(),
        "after giving up, the verifier still runs (seed 002)"
    );
    assert_eq!(
        record.execution.error.as_ref().unwrap().error_type,
        "RuntimeError"
    );
}

#[tokio::test]
async fn test_fast_retry_does_not_trigger_on_success() {
    let (record, events, _dir) =
        run_one_iteration(vec![text("plan"), code(GOOD_CODE), verdict(true)]).await;
    assert_eq!((record.retry_count, record.failure), (0, None));
    assert_eq!(fast_retries(&events), 0);
    assert!(events.iter().any(|e| matches!(
        e,
        RunEvent::RunFinished {
            stop: StopReason::Accepted,
            ..
        }
    )));
}

#[tokio::test]
async fn test_fast_retry_count_is_recorded() {
    let output_and_record = run_one_iteration(vec![
        text("plan"),
        code("x = undefined_one\n"),
        text("I think the scene is fine as it is."),
        code(GOOD_CODE),
        verdict(false),
    ])
    .await;
    let (record, events, output) = output_and_record;
    assert_eq!(record.retry_count, 2);
    assert_eq!(record.retry_errors.len(), 2);
    assert!(
        record.retry_errors[1].starts_with("E2:"),
        "prose instead of code is a format failure: {:?}",
        record.retry_errors
    );
    // Retries are not iterations: one IterationFinished, and the memory/log holds one record.
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, RunEvent::IterationFinished { .. }))
            .count(),
        1
    );
    let folder = std::fs::read_dir(output.path().join("scene"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
        .join("a-crate-on-the-floor");
    let log = viga_memory::read_run_log(&folder.join("events.jsonl")).unwrap();
    let records = viga_memory::iterations_in(&log.events);
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].retry_count, 2);
}

/// Seed 002: prose every time is E2 after three fast retries, and the iteration still goes
/// to the verifier, which looks at the scene as it is (here the starting scene).
#[tokio::test]
async fn prose_only_every_time_is_an_e2_iteration_the_verifier_still_sees() {
    let prose = text("I would put a crate there.");
    let (record, events, _dir) = run_one_iteration(vec![
        text("plan"),
        prose.clone(),
        prose.clone(),
        prose.clone(),
        prose,
        verdict(false),
    ])
    .await;
    assert_eq!(
        (record.failure, record.retry_count),
        (Some(FailureClass::E2), 3)
    );
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, RunEvent::CodeProduced { .. })),
        "no program ran"
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, RunEvent::RenderProduced { .. })),
        "the verifier looked at the scene"
    );
}

#[tokio::test]
async fn a_flood_of_output_reaches_the_model_as_its_head_and_tail() {
    let flood = code("print('x' * 100000)\nraise RuntimeError('boom')\n");
    let fix = serde_json::json!({
        "expect": {"last_message_contains": "characters (1 lines) cut here; the whole output is in the run folder"},
        "response": {"text": format!("```python\n{GOOD_CODE}```"), "finish_reason": "stop"}
    });
    let (record, events, _dir) =
        run_one_iteration(vec![text("plan"), flood, fix, verdict(true)]).await;
    assert_eq!((record.retry_count, record.failure), (1, None));
    let first_attempt = events
        .iter()
        .find_map(|e| match e {
            RunEvent::ExecutionFinished {
                attempt: 0, result, ..
            } => Some(result),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        first_attempt.stdout.trim_end().len(),
        100_000,
        "the run folder keeps the whole output"
    );
}
