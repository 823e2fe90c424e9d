//! The run state machine with scripted replies on real Blender.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};
use viga_gn::run::{StateChange, StepStatus};
use viga_gn::{
    Canceller, ExecContext, ExecutorRegistry, GnBlender, GnError, GnOutcome, GnRun, GnRunConfig,
    PythonPolicy, ResponseCache, RunState, StepExecutor, StepOutcome,
};
use viga_protocol::event::{FailureKind, RunEvent, StopReason, TimedEvent};
use viga_protocol::gn::{ActionType, GateName, GnStep};
use viga_provider::scripted::{Expectation, Script, Turn};
use viga_provider::{
    FinishReason, ModelRequest, ModelResponse, Provider, ProviderError, ScriptedProvider,
};

use super::{PLANE, fresh, on_blender};

fn turn(reply: &Value, last_message_contains: Option<&str>) -> Turn {
    let text = match reply {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    Turn {
        expect: Expectation {
            last_message_contains: last_message_contains.map(str::to_owned),
            ..Expectation::default()
        },
        response: ModelResponse::text_only(text, FinishReason::Stop),
        delay_ms: 0,
    }
}

fn scripted(turns: Vec<Turn>) -> Arc<dyn Provider> {
    Arc::new(ScriptedProvider::new(
        "scripted:test",
        Script {
            description: String::new(),
            turns,
        },
    ))
}

fn target_step(id: &str) -> Value {
    json!({"id": id, "type": "GN_OPS", "payload": {"ops": [
        {"op": "ensure_target", "object": "Plane", "modifier": "GN"}
    ]}})
}

fn reply(steps: Vec<Value>, done: bool) -> Value {
    json!({"version": 1, "steps": steps, "done": done, "final_message": if done { "finished" } else { "" }})
}

fn config() -> GnRunConfig {
    let mut config = GnRunConfig::new("scatter cubes on the plane");
    config.object = Some("Plane".into());
    config
}

/// A model run on `blender` in safe mode, started.
fn start_run(
    blender: &GnBlender,
    config: GnRunConfig,
    provider: Arc<dyn Provider>,
) -> viga_gn::GnRunHandle {
    GnRun::new(
        config,
        provider,
        blender.clone(),
        ExecutorRegistry::with_defaults(PythonPolicy::safe()),
    )
    .start()
}

async fn run_with(
    blender: &GnBlender,
    config: GnRunConfig,
    provider: Arc<dyn Provider>,
) -> (GnOutcome, Vec<TimedEvent>) {
    let mut run = start_run(blender, config, provider);
    let mut events = Vec::new();
    while let Some(event) = run.next_event().await {
        events.push(event);
    }
    (run.wait().await.unwrap(), events)
}

fn states(outcome: &GnOutcome) -> Vec<RunState> {
    outcome
        .transitions
        .iter()
        .map(|c: &StateChange| c.to)
        .collect()
}

#[test]
fn a_good_reply_runs_to_done_and_writes_the_run_folder() {
    on_blender(|blender| async move {
        fresh(&blender, PLANE).await;
        let output = tempfile::tempdir().unwrap();
        let mut config = config();
        config.output = Some(output.path().to_path_buf());
        let provider = scripted(vec![turn(
            &reply(vec![target_step("target")], true),
            Some("Scene (JSON)"),
        )]);
        let (outcome, events) = run_with(&blender, config, provider).await;
        assert_eq!(outcome.state, RunState::Done, "{:?}", outcome.problem());
        assert_eq!(outcome.final_message, "finished");
        use RunState::*;
        assert_eq!(
            states(&outcome),
            [RequestingContext, Generating, Applying, Verifying, Done]
        );
        assert_eq!(outcome.transitions[0].from, Idle);
        let record = &outcome.steps[0];
        assert_eq!(
            (
                record.step_id.as_str(),
                record.action_type.clone(),
                record.status
            ),
            ("target", ActionType::GnOps, StepStatus::Succeeded)
        );
        assert!(record.ended_at.unwrap() >= record.started_at);
        assert_eq!(outcome.telemetry.counters.requests, 1);
        assert_eq!(outcome.telemetry.counters.gate_passes, 1);
        assert_eq!(outcome.telemetry.steps.len(), 1);

        let kinds: Vec<&str> = events
            .iter()
            .filter_map(|timed| match &timed.event {
                // State changes are checked on their own below.
                RunEvent::GnStateChanged { .. } => None,
                RunEvent::RunStarted { .. } => Some("started"),
                RunEvent::ModelCalled { .. } => Some("model"),
                RunEvent::GnStepFinished { .. } => Some("step"),
                RunEvent::GatesChecked { .. } => Some("gates"),
                RunEvent::RunFinished { .. } => Some("finished"),
                _ => Some("other"),
            })
            .collect();
        assert_eq!(kinds, ["started", "model", "step", "gates", "finished"]);
        // Every state change is in the shared stream, in order.
        let shared: Vec<RunState> = events
            .iter()
            .filter_map(|timed| match &timed.event {
                RunEvent::GnStateChanged { to, .. } => Some(*to),
                _ => None,
            })
            .collect();
        assert_eq!(shared, states(&outcome));
        assert_eq!(shared.last(), Some(&RunState::Done));

        let folder = outcome.folder.clone().unwrap();
        for file in [
            "events.jsonl",
            "steps.jsonl",
            "outcome.json",
            "telemetry.json",
            "request.json",
            "responses/0.txt",
            "final.blend",
        ] {
            assert!(folder.join(file).is_file(), "{file} is missing");
        }
        let log = viga_memory::read_run_log(&folder.join("events.jsonl")).unwrap();
        assert_eq!(
            log.events.len(),
            5 + shared.len(),
            "the shared events plus one per state change"
        );
        let steps_log = std::fs::read_to_string(folder.join("steps.jsonl")).unwrap();
        assert_eq!(
            steps_log.lines().count(),
            5 + 2,
            "five state changes, a step started and finished"
        );
    });
}

#[test]
fn an_invalid_reply_goes_back_to_the_model_before_anything_runs() {
    on_blender(|blender| async move {
        fresh(&blender, PLANE).await;
        let bad = json!({"version": 1, "done": true, "steps": [
            {"id": "t", "type": "GN_OPS", "payload": {"ops": [{"op": "ensure_target", "object": "Plane", "modifier": "Sneaky"}]}},
            {"id": "x", "type": "GN_OPS", "payload": {"ops": [{"op": "teleport"}]}}
        ]});
        let provider = scripted(vec![
            turn(&bad, None),
            turn(&json!("not json at all"), Some("/steps/1")),
            turn(
                &reply(vec![target_step("target")], true),
                Some("malformed JSON"),
            ),
        ]);
        let (outcome, _) = run_with(&blender, config(), provider).await;
        assert_eq!(outcome.state, RunState::Done, "{:?}", outcome.problem());
        assert_eq!(outcome.telemetry.counters.protocol_errors, 2);
        assert_eq!(outcome.rounds, 3);
        // The first reply's valid first step never ran: the whole reply was refused.
        assert!(outcome.targets.iter().all(|t| t.modifier != "Sneaky"));
        assert_eq!(outcome.steps.len(), 1);
        use RunState::*;
        assert_eq!(
            states(&outcome),
            [
                RequestingContext,
                Generating,
                Generating,
                Generating,
                Applying,
                Verifying,
                Done
            ]
        );
    });
}

#[test]
fn failed_gates_send_the_report_back_and_the_run_retries() {
    on_blender(|blender| async move {
        fresh(&blender, PLANE).await;
        let unlinked = json!({"id": "broken", "type": "GN_OPS", "payload": {"ops": [
            {"op": "ensure_target", "object": "Plane", "modifier": "GN"},
            {"op": "unlink", "from_node": "Group Input", "from_socket": 0, "to_node": "Group Output", "to_socket": 0}
        ]}});
        let fixed = json!({"id": "fix", "type": "GN_OPS", "payload": {"ops": [
            {"op": "link", "from_node": "Group Input", "from_socket": 0, "to_node": "Group Output", "to_socket": 0}
        ]}});
        let provider = scripted(vec![
            turn(&reply(vec![unlinked], true), None),
            turn(
                &reply(vec![fixed], true),
                Some("\"failed_gates\":[\"OUTPUT_CONNECTED\"]"),
            ),
        ]);
        let (outcome, events) = run_with(&blender, config(), provider).await;
        assert_eq!(outcome.state, RunState::Done, "{:?}", outcome.problem());
        assert_eq!(outcome.telemetry.counters.gate_failures, 1);
        use RunState::*;
        assert_eq!(
            states(&outcome),
            [
                RequestingContext,
                Generating,
                Applying,
                Verifying,
                Generating,
                Applying,
                Verifying,
                Done
            ]
        );
        let reports: Vec<(bool, Vec<GateName>)> = events
            .iter()
            .filter_map(|timed| match &timed.event {
                RunEvent::GatesChecked { report, .. } => {
                    Some((report.success, report.failed_gates.clone()))
                }
                _ => None,
            })
            .collect();
        assert_eq!(
            reports,
            [(false, vec![GateName::OutputConnected]), (true, vec![])]
        );
    });
}

fn failing_step(id: &str) -> Value {
    json!({"id": id, "type": "GN_OPS", "payload": {"ops": [
        {"op": "add_node", "id": "n", "bl_idname": "GeometryNodeDoesNotExist"}
    ]}})
}

fn statuses(outcome: &GnOutcome) -> Vec<(u32, &str, StepStatus)> {
    outcome
        .steps
        .iter()
        .map(|s| (s.round, s.step_id.as_str(), s.status))
        .collect()
}

#[test]
fn a_failing_step_goes_back_to_the_model_which_repairs_it() {
    on_blender(|blender| async move {
        fresh(&blender, PLANE).await;
        let output = tempfile::tempdir().unwrap();
        let mut config = config();
        config.output = Some(output.path().to_path_buf());
        let transform = json!({"id": "move", "type": "GN_OPS", "payload": {"ops": [
            {"op": "add_node", "id": "move", "bl_idname": "GeometryNodeTransform"}
        ]}});
        let provider = scripted(vec![
            turn(
                &reply(
                    vec![target_step("ok"), failing_step("bad"), target_step("never")],
                    true,
                ),
                None,
            ),
            // The model sees which step failed, why, and what is already in the scene.
            turn(
                &reply(vec![transform], true),
                Some(
                    "Step \"bad\" (GN_OPS) failed, so your reply was only partly applied:\nop 0 (add_node): cannot add a node of type 'GeometryNodeDoesNotExist'",
                ),
            ),
        ]);
        let (outcome, _) = run_with(&blender, config, provider).await;
        assert_eq!(outcome.state, RunState::Done, "{:?}", outcome.problem());
        assert_eq!(outcome.rounds, 2);
        assert_eq!(
            statuses(&outcome),
            [
                (0, "ok", StepStatus::Succeeded),
                (0, "bad", StepStatus::Failed),
                (1, "move", StepStatus::Succeeded)
            ]
        );
        assert!(
            outcome.steps[1]
                .error
                .as_deref()
                .unwrap()
                .contains("cannot add a node")
        );
        assert_eq!(outcome.telemetry.counters.steps_failed, 1);
        use RunState::*;
        assert_eq!(
            states(&outcome),
            [
                RequestingContext,
                Generating,
                Applying,
                Generating,
                Applying,
                Verifying,
                Done
            ]
        );
        // The failed step's record stays in the partial log on disk.
        let folder = outcome.folder.clone().unwrap();
        let steps_log = std::fs::read_to_string(folder.join("steps.jsonl")).unwrap();
        assert!(steps_log.contains("\"status\":\"failed\""), "{steps_log}");
        assert!(folder.join("final.blend").is_file());
    });
}

#[test]
fn the_feedback_names_what_ran_this_round_and_before() {
    on_blender(|blender| async move {
        fresh(&blender, PLANE).await;
        let provider = scripted(vec![
            turn(&reply(vec![target_step("first")], false), None),
            turn(
                &reply(
                    vec![
                        target_step("again"),
                        failing_step("bad"),
                        target_step("later"),
                    ],
                    false,
                ),
                None,
            ),
            turn(
                &reply(vec![], true),
                Some(
                    "Applied and kept in the scene: this round \"again\"; earlier rounds \"first\".\nNot run: \"later\".",
                ),
            ),
        ]);
        let (outcome, _) = run_with(&blender, config(), provider).await;
        assert_eq!(outcome.state, RunState::Done, "{:?}", outcome.problem());
    });
}

#[test]
fn steps_that_keep_failing_end_in_error_when_the_rounds_run_out() {
    on_blender(|blender| async move {
        fresh(&blender, PLANE).await;
        let output = tempfile::tempdir().unwrap();
        let mut config = config();
        config.max_rounds = 2;
        config.output = Some(output.path().to_path_buf());
        let provider = scripted(vec![
            turn(
                &reply(vec![target_step("ok"), failing_step("bad")], true),
                None,
            ),
            turn(
                &reply(vec![failing_step("still-bad")], true),
                Some("GeometryNodeDoesNotExist"),
            ),
        ]);
        let (outcome, _) = run_with(&blender, config, provider).await;
        assert_eq!(outcome.state, RunState::Error);
        let error = outcome.problem().unwrap().to_owned();
        assert!(error.contains("within 2 rounds"), "{error}");
        assert!(
            error.contains("the last problem: step \"still-bad\" (GN_OPS) failed"),
            "{error}"
        );
        assert_eq!(
            statuses(&outcome),
            [
                (0, "ok", StepStatus::Succeeded),
                (0, "bad", StepStatus::Failed),
                (1, "still-bad", StepStatus::Failed)
            ]
        );
        assert_eq!(outcome.applied.len(), 1);
        assert_eq!(*states(&outcome).last().unwrap(), RunState::Error);
        let folder = outcome.folder.clone().unwrap();
        let steps_log = std::fs::read_to_string(folder.join("steps.jsonl")).unwrap();
        assert_eq!(steps_log.matches("\"status\":\"failed\"").count(), 2);
        assert!(folder.join("events.jsonl").is_file());
        assert!(
            !folder.join("final.blend").exists(),
            "only a done run keeps its scene"
        );
    });
}

#[test]
fn every_round_sees_the_scene_as_it_is_now() {
    on_blender(|blender| async move {
        fresh(&blender, PLANE).await;
        let points = json!({"id": "points", "type": "GN_OPS", "payload": {"ops": [
            {"op": "ensure_target", "object": "Plane", "modifier": "GN"},
            {"op": "add_node", "id": "points", "bl_idname": "GeometryNodeDistributePointsOnFaces"},
            {"op": "link", "from_node": "Group Input", "from_socket": "Geometry", "to_node": "points", "to_socket": "Mesh"},
            {"op": "link", "from_node": "points", "from_socket": "Points", "to_node": "Group Output", "to_socket": "Geometry"}
        ]}});
        let provider = scripted(vec![
            turn(
                &reply(vec![points], false),
                Some("\"active_node_group\":null"),
            ),
            // The links the first round made, its node and the group's sockets with types.
            turn(
                &reply(vec![], false),
                Some("[\"points\",\"Points\",\"Group Output\",\"Geometry\"]"),
            ),
            turn(
                &reply(vec![], true),
                Some("Scene (JSON): unchanged since the last snapshot."),
            ),
        ]);
        let (outcome, _) = run_with(&blender, config(), provider).await;
        assert_eq!(outcome.state, RunState::Done, "{:?}", outcome.problem());
    });
}

#[test]
fn the_refreshed_snapshot_carries_sockets_and_node_types() {
    on_blender(|blender| async move {
        fresh(&blender, PLANE).await;
        let provider = scripted(vec![
            turn(&reply(vec![target_step("t")], false), None),
            turn(
                &reply(vec![], true),
                Some("\"inputs\":[[\"Geometry\",\"NodeSocketGeometry\"]]"),
            ),
        ]);
        let (outcome, _) = run_with(&blender, config(), provider).await;
        assert_eq!(outcome.state, RunState::Done, "{:?}", outcome.problem());
    });
}

#[test]
fn the_model_can_ask_for_context_slices() {
    on_blender(|blender| async move {
        fresh(&blender, PLANE).await;
        let ask = json!({"version": 1, "steps": [], "done": false,
                         "meta": {"request_context": ["modifier_stack", "geometry_stats", "node_tree_ir"]}});
        let provider = scripted(vec![
            turn(&ask, None),
            turn(
                &reply(vec![target_step("target")], true),
                Some("Context node_tree_ir is unavailable"),
            ),
        ]);
        let (outcome, _) = run_with(&blender, config(), provider).await;
        assert_eq!(outcome.state, RunState::Done, "{:?}", outcome.problem());
        assert_eq!(outcome.telemetry.counters.context_requests, 1);
        use RunState::*;
        assert_eq!(
            states(&outcome)[..4],
            [RequestingContext, Generating, RequestingContext, Generating]
        );
    });
}

#[test]
fn running_out_of_rounds_is_an_error() {
    on_blender(|blender| async move {
        fresh(&blender, PLANE).await;
        let mut config = config();
        config.max_rounds = 2;
        let provider = scripted(vec![
            turn(&reply(vec![target_step("a")], false), None),
            turn(&reply(vec![], false), Some("All required gates pass")),
        ]);
        let (outcome, _) = run_with(&blender, config, provider).await;
        assert_eq!(outcome.state, RunState::Error);
        assert_eq!(
            outcome.stop,
            StopReason::MaxIterations,
            "rounds spent, as a loop's budget"
        );
        assert!(outcome.problem().unwrap().contains("within 2 rounds"));
    });
}

/// A model whose every call is refused for a bad key.
struct RefusedKey;

#[async_trait]
impl Provider for RefusedKey {
    fn name(&self) -> &str {
        "refusing"
    }

    fn model(&self) -> &str {
        "refusing:test"
    }

    async fn complete(&self, _request: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        Err(ProviderError::Auth {
            provider: "refusing".to_owned(),
            key_env: "REFUSED_KEY".to_owned(),
            message: "invalid key".to_owned(),
        })
    }
}

#[test]
fn a_failed_run_says_what_kind_of_failure_ended_it() {
    on_blender(|blender| async move {
        fresh(&blender, PLANE).await;
        let (outcome, _) = run_with(&blender, config(), Arc::new(RefusedKey)).await;
        assert_eq!(outcome.state, RunState::Error);
        assert_eq!(outcome.failure_kind(), Some(FailureKind::ProviderAuth));
        assert!(outcome.problem().unwrap().contains("REFUSED_KEY"));

        let mut config = config();
        config.max_rounds = 1;
        let provider = scripted(vec![turn(&reply(vec![], false), None)]);
        let (outcome, _) = run_with(&blender, config, provider).await;
        assert_eq!(
            (outcome.stop.clone(), outcome.failure_kind()),
            (StopReason::MaxIterations, None),
            "a round without an accepted result is the budget, not a failure"
        );
    });
}

fn cached_config(output: &std::path::Path) -> GnRunConfig {
    let mut config = config();
    config.output = Some(output.to_path_buf());
    config.cache = Some(ResponseCache::in_output(output));
    config
}

fn cache_entries(output: &std::path::Path) -> usize {
    std::fs::read_dir(output.join("gn/cache")).unwrap().count()
}

#[test]
fn an_identical_second_run_is_answered_from_the_cache() {
    on_blender(|blender| async move {
        let output = tempfile::tempdir().unwrap();
        // One turn for two runs: the second must not reach the model.
        let scripted = Arc::new(ScriptedProvider::new(
            "scripted:test",
            Script {
                description: String::new(),
                turns: vec![turn(&reply(vec![target_step("t")], true), None)],
            },
        ));
        let provider: Arc<dyn Provider> = scripted.clone();
        fresh(&blender, PLANE).await;
        let (first, _) = run_with(&blender, cached_config(output.path()), provider.clone()).await;
        assert_eq!(first.state, RunState::Done, "{:?}", first.problem());
        assert_eq!(first.telemetry.counters.requests, 1);
        assert_eq!(first.telemetry.counters.cache_hits, 0);
        assert_eq!(cache_entries(output.path()), 1);

        fresh(&blender, PLANE).await;
        let (second, events) = run_with(&blender, cached_config(output.path()), provider).await;
        assert_eq!(second.state, RunState::Done, "{:?}", second.problem());
        assert_eq!(scripted.turns_used(), 1);
        assert_eq!(second.rounds, 1);
        assert_eq!(second.telemetry.counters.requests, 0);
        assert_eq!(second.telemetry.counters.cache_hits, 1);
        assert!(second.telemetry.requests[0].cached);
        assert!(
            !events
                .iter()
                .any(|timed| matches!(timed.event, RunEvent::ModelCalled { .. })),
            "no model call"
        );
        assert!(events.iter().any(|timed| matches!(
            &timed.event,
            RunEvent::Warning { message } if message.contains("replayed the cached reply")
        )));

        // The run folder says so: the reply's text, a note beside it, and the telemetry.
        let folder = second.folder.clone().unwrap();
        let first_folder = first.folder.clone().unwrap();
        assert_eq!(
            std::fs::read_to_string(folder.join("responses/0.txt")).unwrap(),
            std::fs::read_to_string(first_folder.join("responses/0.txt")).unwrap()
        );
        let note: Value = serde_json::from_str(
            &std::fs::read_to_string(folder.join("responses/0.cached.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(note["cached"], json!(true));
        assert!(!first_folder.join("responses/0.cached.json").exists());
        let telemetry = std::fs::read_to_string(folder.join("telemetry.json")).unwrap();
        assert!(telemetry.contains("\"cached\": true"), "{telemetry}");
        let request: Value =
            serde_json::from_str(&std::fs::read_to_string(folder.join("request.json")).unwrap())
                .unwrap();
        assert_eq!(request["source"]["kind"], json!("model"));
        assert!(
            request["source"]["cache"]
                .as_str()
                .unwrap()
                .ends_with("gn/cache")
        );
    });
}

#[test]
fn refused_replies_are_not_cached_and_another_scene_misses() {
    on_blender(|blender| async move {
        let output = tempfile::tempdir().unwrap();
        fresh(&blender, PLANE).await;
        let provider = scripted(vec![
            turn(&json!("not json at all"), None),
            turn(&reply(vec![target_step("t")], true), Some("malformed JSON")),
        ]);
        let (outcome, _) = run_with(&blender, cached_config(output.path()), provider).await;
        assert_eq!(outcome.state, RunState::Done, "{:?}", outcome.problem());
        assert_eq!(
            cache_entries(output.path()),
            1,
            "only the valid reply is stored"
        );

        // The same request about another scene is a different request.
        fresh(
            &blender,
            &format!("{PLANE}bpy.context.object.location.x = 1.0\n"),
        )
        .await;
        let provider = scripted(vec![turn(&reply(vec![target_step("t")], true), None)]);
        let (moved, _) = run_with(&blender, cached_config(output.path()), provider).await;
        assert_eq!(moved.state, RunState::Done, "{:?}", moved.problem());
        assert_eq!(moved.telemetry.counters.cache_hits, 0);
        assert_eq!(moved.telemetry.counters.requests, 1);
        assert_eq!(cache_entries(output.path()), 2);
    });
}

/// Answers with a valid reply, but cancels the run while "thinking".
struct CancellingProvider {
    canceller: std::sync::Mutex<Option<Canceller>>,
}

#[async_trait]
impl Provider for CancellingProvider {
    fn name(&self) -> &str {
        "cancelling"
    }
    fn model(&self) -> &str {
        "test"
    }
    async fn complete(&self, _request: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        if let Some(canceller) = self.canceller.lock().unwrap().as_ref() {
            canceller.cancel();
        }
        Ok(ModelResponse::text_only(
            reply(vec![target_step("t")], true).to_string(),
            FinishReason::Stop,
        ))
    }
}

#[test]
fn a_cancelled_run_stops_before_applying() {
    on_blender(|blender| async move {
        fresh(&blender, PLANE).await;
        let provider = Arc::new(CancellingProvider {
            canceller: std::sync::Mutex::new(None),
        });
        let run = GnRun::new(
            config(),
            provider.clone(),
            blender.clone(),
            ExecutorRegistry::with_defaults(PythonPolicy::safe()),
        )
        .start();
        // In place long before the run asks the model: it reads the scene first.
        *provider.canceller.lock().unwrap() = Some(run.canceller());
        let outcome = run.wait().await.unwrap();
        assert_eq!(outcome.state, RunState::Cancelled);
        assert!(outcome.steps.is_empty());
        assert!(!states(&outcome).contains(&RunState::Applying));
    });
}

/// Records the PYTHON steps it is handed instead of running them.
struct Recording(Arc<std::sync::Mutex<Vec<String>>>);

#[async_trait]
impl StepExecutor for Recording {
    async fn execute(
        &self,
        _blender: &GnBlender,
        _context: &mut ExecContext,
        step: &GnStep,
    ) -> Result<StepOutcome, GnError> {
        self.0.lock().unwrap().push(step.id().to_owned());
        Ok(StepOutcome {
            message: "recorded".into(),
            detail: json!(null),
        })
    }
}

#[test]
fn registered_executors_replace_the_defaults() {
    on_blender(|blender| async move {
        fresh(&blender, PLANE).await;
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut registry = ExecutorRegistry::with_defaults(PythonPolicy::safe());
        let old = registry.register_executor(ActionType::Python, Arc::new(Recording(seen.clone())));
        assert!(old.is_some());
        let python = json!({"id": "py", "type": "PYTHON", "payload": {"code": "import os"}});
        let provider = scripted(vec![turn(
            &reply(vec![target_step("t"), python], true),
            None,
        )]);
        let outcome = GnRun::new(config(), provider, blender.clone(), registry)
            .start()
            .wait()
            .await
            .unwrap();
        assert_eq!(outcome.state, RunState::Done, "{:?}", outcome.problem());
        assert_eq!(*seen.lock().unwrap(), ["py"]);
    });
}

/// How a run is set up is in its folder before its first event, so a run that fails at once
/// still says it: the settings its provider was built from and what containment its Blender
/// (here one started without the launcher) runs under.
#[test]
fn a_run_that_fails_at_once_has_recorded_its_provider_and_containment() {
    on_blender(|blender| async move {
        fresh(&blender, PLANE).await;
        let output = tempfile::tempdir().unwrap();
        let script = output.path().join("no-turns.json");
        std::fs::write(&script, r#"{"description": "", "turns": []}"#).unwrap();
        let mut settings =
            viga_provider::ProviderConfig::new(viga_provider::ProviderKind::Scripted, "");
        settings.script = Some(script);
        let provider = viga_provider::build_provider_with_env(&settings, |_| None).unwrap();
        let mut config = config();
        config.output = Some(output.path().to_path_buf());
        let mut run = start_run(&blender, config, provider);
        let folder = run.folder().clone().unwrap();
        let first = run.next_event().await.unwrap();
        assert!(matches!(first.event, RunEvent::RunStarted { .. }));
        let read = |name: &str| std::fs::read_to_string(folder.join(name)).unwrap();
        let recorded: viga_provider::ProviderConfig =
            serde_json::from_str(&read("provider.json")).unwrap();
        assert_eq!(recorded, settings);
        let containment: viga_blender::ContainmentStatus =
            serde_json::from_str(&read("containment.json")).unwrap();
        assert_eq!(containment, viga_blender::ContainmentStatus::off());
        while run.next_event().await.is_some() {}
        let outcome = run.wait().await.unwrap();
        assert_eq!(outcome.state, RunState::Error, "{:?}", outcome.stop);
    });
}

/// First a reply cut off at the output limit, repeating one step; then a good one. Keeps
/// every request it is sent.
struct CutOffFirst {
    requests: std::sync::Mutex<Vec<ModelRequest>>,
    cut_off: String,
}

#[async_trait]
impl Provider for CutOffFirst {
    fn name(&self) -> &str {
        "cut-off"
    }
    fn model(&self) -> &str {
        "test"
    }
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        let mut requests = self.requests.lock().unwrap();
        requests.push(request.clone());
        Ok(if requests.len() == 1 {
            ModelResponse::text_only(self.cut_off.clone(), FinishReason::Length)
        } else {
            ModelResponse::text_only(
                reply(vec![target_step("target")], true).to_string(),
                FinishReason::Stop,
            )
        })
    }
}

/// A reply cut off at the output limit (issue 38) goes back shortened, not whole, and the
/// model is told it was cut off and that it repeated itself, not that its JSON was malformed.
#[test]
fn a_reply_cut_off_at_the_output_limit_is_said_so_and_not_sent_back_whole() {
    on_blender(|blender| async move {
        fresh(&blender, PLANE).await;
        let step = r#"{"id": "s", "type": "GN_OPS", "payload": {"ops": [{"op": "add_node", "node_type": "GeometryNodeMeshLine"}]}},"#;
        let cut_off = format!(
            "{{\"version\": 1, \"steps\": [\n{}\n{{\"id\": \"s\", \"ty",
            [step; 60].join("\n")
        );
        let provider = Arc::new(CutOffFirst {
            requests: std::sync::Mutex::new(Vec::new()),
            cut_off: cut_off.clone(),
        });
        let (outcome, _) = run_with(&blender, config(), provider.clone()).await;
        assert_eq!(outcome.state, RunState::Done, "{:?}", outcome.problem());
        let requests = provider.requests.lock().unwrap();
        let size = |request: &ModelRequest| serde_json::to_string(&request.messages).unwrap().len();
        let second = &requests[1];
        let told = serde_json::to_string(second.messages.last().unwrap()).unwrap();
        assert!(
            told.contains("cut off at the output limit (4096 tokens)"),
            "{told}"
        );
        assert!(told.contains("repeated one line 60 times"), "{told}");
        assert!(!told.contains("malformed"), "{told}");
        assert!(
            size(second) < size(&requests[0]) + cut_off.len() / 2,
            "the cut-off reply went back whole: {} then {}",
            size(&requests[0]),
            size(second)
        );
    });
}

/// A model that keeps hitting its output limit, a little slowly. Keeps every request.
struct AlwaysCutOff {
    requests: std::sync::Mutex<Vec<ModelRequest>>,
    cut_off: String,
}

#[async_trait]
impl Provider for AlwaysCutOff {
    fn name(&self) -> &str {
        "always-cut-off"
    }
    fn model(&self) -> &str {
        "test"
    }
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        self.requests.lock().unwrap().push(request.clone());
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        Ok(ModelResponse::text_only(
            self.cut_off.clone(),
            FinishReason::Length,
        ))
    }
}

/// Issue 38's GN replay: a model that keeps hitting its output limit is told so each time,
/// its requests do not grow round after round, and the run ends at its time limit with a
/// `run_finished` that says so, in its events and its folder.
#[test]
fn a_model_that_keeps_hitting_its_limit_is_stopped_by_the_time_limit() {
    on_blender(|blender| async move {
        fresh(&blender, PLANE).await;
        let output = tempfile::tempdir().unwrap();
        let step = r#"{"id": "s", "type": "GN_OPS", "payload": {"ops": [{"op": "add_node", "node_type": "GeometryNodeMeshLine"}]}},"#;
        let provider = Arc::new(AlwaysCutOff {
            requests: std::sync::Mutex::new(Vec::new()),
            cut_off: format!("{{\"version\": 1, \"steps\": [\n{}", [step; 80].join("\n")),
        });
        let mut config = config();
        config.max_rounds = 1000;
        config.time_limit = Some(std::time::Duration::from_secs(2));
        config.output = Some(output.path().to_path_buf());
        let started = std::time::Instant::now();
        let (outcome, events) = run_with(&blender, config, provider.clone()).await;
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(outcome.stop, StopReason::TimeLimit { seconds: 2 });
        assert!(
            outcome.problem().unwrap().contains("time limit (2 s)"),
            "{:?}",
            outcome.problem()
        );
        let Some(RunEvent::RunFinished { stop, .. }) = events.last().map(|e| &e.event) else {
            panic!("the last event is not run_finished: {:?}", events.last());
        };
        assert_eq!(stop, &StopReason::TimeLimit { seconds: 2 });
        let folder = outcome.folder.clone().unwrap();
        let log = std::fs::read_to_string(folder.join("events.jsonl")).unwrap();
        let last: Value = serde_json::from_str(log.lines().last().unwrap()).unwrap();
        assert_eq!(last["type"], "run_finished", "{last}");
        assert_eq!(last["stop"]["reason"], "time_limit", "{last}");
        let requests = provider.requests.lock().unwrap();
        assert!(requests.len() >= 3, "{} requests", requests.len());
        let size = |request: &ModelRequest| serde_json::to_string(&request.messages).unwrap().len();
        for later in &requests[2..] {
            let told = serde_json::to_string(later.messages.last().unwrap()).unwrap();
            assert!(told.contains("cut off at the output limit"), "{told}");
            assert_eq!(size(later), size(&requests[1]), "the requests grew");
        }
    });
}
