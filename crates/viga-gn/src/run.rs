//! One assistant run as a state machine:
//! `idle → requesting_context → generating → (requesting_context →) applying → verifying →
//! done | error | cancelled`, with `verifying → generating` whenever a required gate fails
//! or the model is not done yet, and `generating → generating` when a reply is refused by
//! protocol validation (nothing runs; the errors go back to the model).
//!
//! Every state change and every step is recorded ([`StateChange`], [`StepRecord`]), sent on
//! the event channel as a [`GnEvent`] and appended to the run folder's `steps.jsonl`; the
//! shared [`RunEvent`]s go to `events.jsonl` like the main loop's. A failing step ends the
//! run in [`RunState::Error`] with the partial log; no failure panics or escapes as `Err`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::mpsc::UnboundedSender;
use viga_memory::RunLog;
use viga_protocol::event::{ModelRole, RunEvent, StopReason, TimedEvent};
use viga_protocol::gn::{GateReport, GnResponse, GnStep};
use viga_protocol::message::{ChatMessage, ContentPart};
use viga_protocol::{PROTOCOL_VERSION, parse_json, schema_of};
use viga_provider::{ModelRequest, Provider, ResponseFormat};

use crate::context::{self, ContextBudget, SliceKind};
use crate::gates::{Baseline, GateConfig, check_gates};
use crate::telemetry::Telemetry;
use crate::{ExecContext, ExecutorRegistry, GnBlender, GnError, Target};

const SYSTEM_PROMPT: &str = include_str!("../prompts/system.md");

/// The run states, the step status and the step record are protocol types, so every front
/// end reads them from the shared event stream.
pub use viga_protocol::gn::{GnRunState as RunState, StepRecord, StepStatus};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateChange {
    pub from: RunState,
    pub to: RunState,
    pub round: u32,
    pub unix_ms: u64,
}

/// What a run's consumer receives, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GnEvent {
    /// A shared run event (also in `events.jsonl`).
    Run(TimedEvent),
    State(StateChange),
    Step(StepRecord),
}

/// Stops a run at its next state change or step.
#[derive(Debug, Clone, Default)]
pub struct Canceller(Arc<AtomicBool>);

impl Canceller {
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

#[derive(Debug, Clone)]
pub struct GnRunConfig {
    /// What the user asked for.
    pub request: String,
    /// The object to work on; the active object when `None`.
    pub object: Option<String>,
    /// Model replies allowed before the run gives up.
    pub max_rounds: u32,
    pub gates: GateConfig,
    pub budget: ContextBudget,
    /// Where run folders go (`<output>/gn/<unix_ms>/`); no folder when `None`.
    pub output: Option<PathBuf>,
    pub max_tokens: u32,
}

impl GnRunConfig {
    pub fn new(request: impl Into<String>) -> Self {
        Self {
            request: request.into(),
            object: None,
            max_rounds: 6,
            gates: GateConfig::default(),
            budget: ContextBudget::default(),
            output: None,
            max_tokens: 4096,
        }
    }
}

/// How a run ended, with its whole log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GnOutcome {
    /// `Done`, `Error` or `Cancelled`.
    pub state: RunState,
    /// Model replies received.
    pub rounds: u32,
    pub final_message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub transitions: Vec<StateChange>,
    pub steps: Vec<StepRecord>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_report: Option<GateReport>,
    /// The steps that ran successfully, in order (what a preset saves).
    pub applied: Vec<GnStep>,
    pub targets: Vec<Target>,
    pub telemetry: Telemetry,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub folder: Option<PathBuf>,
}

/// One assistant run. Build it, optionally attach an event channel, then [`GnRun::run`].
pub struct GnRun {
    config: GnRunConfig,
    provider: Arc<dyn Provider>,
    blender: GnBlender,
    registry: ExecutorRegistry,
    events: Option<UnboundedSender<GnEvent>>,
    cancel: Canceller,
}

impl std::fmt::Debug for GnRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GnRun")
            .field("config", &self.config)
            .field("provider", &self.provider.name())
            .field("registry", &self.registry)
            .finish()
    }
}

enum Ending {
    Done(String),
    Cancelled,
    Error(String),
}

impl GnRun {
    pub fn new(
        config: GnRunConfig,
        provider: Arc<dyn Provider>,
        blender: GnBlender,
        registry: ExecutorRegistry,
    ) -> Self {
        Self {
            config,
            provider,
            blender,
            registry,
            events: None,
            cancel: Canceller::default(),
        }
    }

    pub fn with_events(mut self, events: UnboundedSender<GnEvent>) -> Self {
        self.events = Some(events);
        self
    }

    pub fn canceller(&self) -> Canceller {
        self.cancel.clone()
    }

    /// Runs to the end. Every failure becomes an outcome in the `Error` state.
    pub async fn run(self) -> GnOutcome {
        let mut recorder = Recorder::new(self.events.clone());
        let mut work = Work {
            context: ExecContext::default(),
            applied: Vec::new(),
            last_report: None,
            rounds: 0,
        };
        if let Some(root) = &self.config.output
            && let Err(err) = recorder.open_folder(root, &self.config)
        {
            recorder.warn(format!("no run folder, the run is not saved: {err}"));
        }
        recorder.emit(RunEvent::RunStarted {
            run_id: recorder.run_id.clone(),
            task: self.config.request.clone(),
            protocol_version: PROTOCOL_VERSION,
            resumed_from_iteration: None,
        });
        let ending = self.drive(&mut recorder, &mut work).await;
        let (state, final_message, error, stop) = match ending {
            Ending::Done(message) => (RunState::Done, message, None, StopReason::Accepted),
            Ending::Cancelled => (
                RunState::Cancelled,
                String::new(),
                None,
                StopReason::Cancelled,
            ),
            Ending::Error(message) => (
                RunState::Error,
                String::new(),
                Some(message.clone()),
                StopReason::Failed { message },
            ),
        };
        recorder.transition(state, work.rounds.saturating_sub(1));
        recorder.emit(RunEvent::RunFinished {
            stop,
            iterations: work.rounds,
        });
        let outcome = GnOutcome {
            state,
            rounds: work.rounds,
            final_message,
            error,
            transitions: recorder.transitions.clone(),
            steps: recorder.steps.clone(),
            last_report: work.last_report,
            applied: work.applied,
            targets: work.context.targets,
            telemetry: recorder.telemetry.clone(),
            folder: recorder.folder.clone(),
        };
        recorder.write_json("outcome.json", &outcome);
        recorder.write_json("telemetry.json", &outcome.telemetry);
        outcome
    }

    async fn drive(&self, recorder: &mut Recorder, work: &mut Work) -> Ending {
        recorder.transition(RunState::RequestingContext, 0);
        let object = self.config.object.as_deref();
        let baseline = match Baseline::take(&self.blender).await {
            Ok(baseline) => baseline,
            Err(err) => return Ending::Error(format!("cannot read the scene: {err}")),
        };
        let snapshot = match context::snapshot(&self.blender, object, &self.config.budget).await {
            Ok(snapshot) => snapshot,
            Err(err) => return Ending::Error(format!("cannot read the scene: {err}")),
        };
        let mut messages = vec![ChatMessage::user_text(first_message(
            &self.config.request,
            object,
            &snapshot,
        ))];
        let system = system_prompt();
        for round in 0..self.config.max_rounds {
            if self.cancel.is_cancelled() {
                return Ending::Cancelled;
            }
            recorder.transition(RunState::Generating, round);
            let mut request = ModelRequest::new(system.clone(), messages.clone());
            request.max_tokens = self.config.max_tokens;
            request.response_format = Some(ResponseFormat {
                name: "GnResponse".to_owned(),
                schema: schema_of::<GnResponse>(),
            });
            let started = Instant::now();
            let response = match self.provider.complete(&request).await {
                Ok(response) => response,
                Err(err) => {
                    recorder.telemetry.counters.request_failures += 1;
                    return Ending::Error(GnError::from(err).to_string());
                }
            };
            work.rounds = round + 1;
            let latency = if response.latency.is_zero() {
                started.elapsed()
            } else {
                response.latency
            };
            let latency_ms = latency.as_secs_f64() * 1000.0;
            recorder
                .telemetry
                .request(round, latency_ms, response.usage);
            recorder.emit(RunEvent::ModelCalled {
                index: round,
                role: ModelRole::GnAssistant,
                latency_ms,
                usage: response.usage,
            });
            recorder.write_text(&format!("responses/{round}.txt"), &response.text);
            messages.push(ChatMessage::assistant(vec![ContentPart::text(
                response.text.clone(),
            )]));
            let (reply, slices) = match parse_reply(&response.text) {
                Ok(parsed) => parsed,
                Err(problem) => {
                    recorder.telemetry.counters.protocol_errors += 1;
                    recorder.warn(format!(
                        "round {round}: reply refused before execution: {problem}"
                    ));
                    messages.push(ChatMessage::user_text(format!(
                        "Your reply was refused before anything ran:\n{problem}\nAnswer again with one JSON object that follows the schema."
                    )));
                    continue;
                }
            };
            let mut feedback = Vec::new();
            if !slices.is_empty() {
                if self.cancel.is_cancelled() {
                    return Ending::Cancelled;
                }
                recorder.transition(RunState::RequestingContext, round);
                recorder.telemetry.counters.context_requests += 1;
                for kind in slices {
                    match context::slice(&self.blender, kind, object, None, &self.config.budget)
                        .await
                    {
                        Ok(text) => feedback.push(format!("Context {}: {text}", kind.name())),
                        Err(GnError::Step(why)) => {
                            feedback.push(format!("Context {} is unavailable: {why}", kind.name()))
                        }
                        Err(err) => return Ending::Error(format!("cannot read the scene: {err}")),
                    }
                }
                if reply.steps.is_empty() && !reply.done {
                    messages.push(ChatMessage::user_text(feedback.join("\n")));
                    continue;
                }
            }
            if self.cancel.is_cancelled() {
                return Ending::Cancelled;
            }
            recorder.transition(RunState::Applying, round);
            for step in &reply.steps {
                if self.cancel.is_cancelled() {
                    return Ending::Cancelled;
                }
                let index = recorder.step_started(round, step);
                let started = Instant::now();
                let result = self
                    .registry
                    .execute(&self.blender, &mut work.context, step)
                    .await;
                let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
                match result {
                    Ok(outcome) => {
                        recorder.step_finished(index, latency_ms, Ok(&outcome.message));
                        feedback.push(format!(
                            "Step {:?} ran: {} {}",
                            step.id(),
                            outcome.message,
                            outcome.detail
                        ));
                        work.applied.push(step.clone());
                    }
                    Err(err) => {
                        let message = err.to_string();
                        recorder.step_finished(index, latency_ms, Err(&message));
                        return Ending::Error(format!(
                            "step {:?} ({:?}) failed: {message}",
                            step.id(),
                            step.action_type()
                        ));
                    }
                }
            }
            if self.cancel.is_cancelled() {
                return Ending::Cancelled;
            }
            recorder.transition(RunState::Verifying, round);
            let check = match check_gates(
                &self.blender,
                &baseline,
                &work.context,
                &self.config.gates,
            )
            .await
            {
                Ok(check) => check,
                Err(err) => return Ending::Error(format!("the gates could not run: {err}")),
            };
            recorder.emit(RunEvent::GatesChecked {
                index: round,
                report: check.report.clone(),
            });
            for warning in &check.advisory {
                recorder.warn(format!("gate not required, failed: {warning}"));
            }
            let report_json = json!(check.report).to_string();
            work.last_report = Some(check.report.clone());
            if !check.report.success {
                recorder.telemetry.counters.gate_failures += 1;
                feedback.push(format!(
                    "Verification failed; fix the scene with more steps and answer again:\n{report_json}"
                ));
                messages.push(ChatMessage::user_text(feedback.join("\n")));
                continue;
            }
            recorder.telemetry.counters.gate_passes += 1;
            if reply.done {
                return Ending::Done(reply.final_message);
            }
            feedback.push(format!(
                "All required gates pass: {report_json}\nContinue with more steps, or answer \"done\": true with a final_message."
            ));
            messages.push(ChatMessage::user_text(feedback.join("\n")));
        }
        Ending::Error(format!(
            "no accepted result within {} rounds; allow more rounds or simplify the request",
            self.config.max_rounds
        ))
    }
}

struct Work {
    context: ExecContext,
    applied: Vec<GnStep>,
    last_report: Option<GateReport>,
    rounds: u32,
}

fn system_prompt() -> String {
    let schema = schema_of::<GnResponse>();
    format!("{SYSTEM_PROMPT}\n## JSON Schema of your reply\n\n{schema}\n")
}

fn first_message(request: &str, object: Option<&str>, snapshot: &str) -> String {
    let target = object.unwrap_or("(the active object)");
    format!("Request: {request}\nObject: {target}\nScene (JSON): {snapshot}")
}

/// Parses a reply: an optional Markdown fence around one JSON object, validated against
/// the protocol; `meta.request_context` names the context slices the model wants.
pub fn parse_reply(text: &str) -> Result<(GnResponse, Vec<SliceKind>), String> {
    let body = strip_fence(text);
    let reply = parse_json::<GnResponse>(body).map_err(|err| err.to_string())?;
    let slices = match reply.meta.get("request_context") {
        None => Vec::new(),
        Some(value) => serde_json::from_value::<Vec<SliceKind>>(value.clone()).map_err(|_| {
            let names: Vec<&str> = SliceKind::ALL.iter().map(|k| k.name()).collect();
            format!(
                "at /meta/request_context (enum): expected a list of slice names from {names:?}"
            )
        })?,
    };
    Ok((reply, slices))
}

fn strip_fence(text: &str) -> &str {
    let trimmed = text.trim();
    let Some(rest) = trimmed.strip_prefix("```") else {
        return trimmed;
    };
    let body = rest.split_once('\n').map_or("", |(_, body)| body);
    body.trim_end().strip_suffix("```").unwrap_or(body).trim()
}

pub(crate) fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Keeps the run's log in memory, on the event channel and in the run folder.
struct Recorder {
    run_id: String,
    state: RunState,
    transitions: Vec<StateChange>,
    steps: Vec<StepRecord>,
    telemetry: Telemetry,
    events: Option<UnboundedSender<GnEvent>>,
    folder: Option<PathBuf>,
    log: Option<RunLog>,
    steps_log: Option<std::fs::File>,
    seq: u64,
}

impl Recorder {
    fn new(events: Option<UnboundedSender<GnEvent>>) -> Self {
        Self {
            run_id: format!("gn-{}-{}", unix_ms(), std::process::id()),
            state: RunState::Idle,
            transitions: Vec::new(),
            steps: Vec::new(),
            telemetry: Telemetry::default(),
            events,
            folder: None,
            log: None,
            steps_log: None,
            seq: 0,
        }
    }

    fn open_folder(&mut self, root: &Path, config: &GnRunConfig) -> Result<(), GnError> {
        let folder = root.join("gn").join(&self.run_id);
        std::fs::create_dir_all(folder.join("responses"))
            .map_err(|err| GnError::file(&folder, format!("cannot create it: {err}")))?;
        let log = RunLog::create(&folder.join("events.jsonl"))
            .map_err(|err| GnError::file(&folder, err))?;
        let steps = folder.join("steps.jsonl");
        let steps_log = std::fs::OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&steps)
            .map_err(|err| GnError::file(&steps, format!("cannot create it: {err}")))?;
        self.folder = Some(folder);
        self.log = Some(log);
        self.steps_log = Some(steps_log);
        self.write_json(
            "request.json",
            &json!({
                "request": config.request,
                "object": config.object,
                "max_rounds": config.max_rounds,
                "required_gates": config.gates.required,
                "budget": config.budget,
            }),
        );
        Ok(())
    }

    fn send(&mut self, event: GnEvent) {
        if let Some(file) = &mut self.steps_log
            && !matches!(event, GnEvent::Run(_))
        {
            use std::io::Write as _;
            let line = serde_json::to_string(&event).unwrap_or_default();
            if let Err(err) = writeln!(file, "{line}") {
                tracing::warn!("steps.jsonl: {err}");
            }
        }
        if let Some(events) = &self.events {
            // A consumer that went away does not stop the run.
            let _ = events.send(event);
        }
    }

    fn emit(&mut self, event: RunEvent) {
        let timed = match &mut self.log {
            Some(log) => match log.append(event.clone()) {
                Ok(timed) => timed,
                Err(err) => {
                    tracing::warn!("events.jsonl: {err}");
                    self.timed(event)
                }
            },
            None => self.timed(event),
        };
        self.seq = timed.seq + 1;
        self.send(GnEvent::Run(timed));
    }

    fn timed(&self, event: RunEvent) -> TimedEvent {
        TimedEvent {
            seq: self.seq,
            unix_ms: unix_ms(),
            event,
        }
    }

    fn warn(&mut self, message: String) {
        self.emit(RunEvent::Warning { message });
    }

    fn transition(&mut self, to: RunState, round: u32) {
        let change = StateChange {
            from: self.state,
            to,
            round,
            unix_ms: unix_ms(),
        };
        self.state = to;
        self.transitions.push(change.clone());
        self.emit(RunEvent::GnStateChanged {
            round,
            from: change.from,
            to,
        });
        self.send(GnEvent::State(change));
    }

    fn step_started(&mut self, round: u32, step: &GnStep) -> usize {
        let record = StepRecord {
            round,
            step_id: step.id().to_owned(),
            action_type: step.action_type(),
            status: StepStatus::Running,
            started_at: unix_ms(),
            ended_at: None,
            message: String::new(),
            error: None,
        };
        self.steps.push(record.clone());
        self.send(GnEvent::Step(record));
        self.steps.len() - 1
    }

    fn step_finished(&mut self, index: usize, latency_ms: f64, result: Result<&str, &str>) {
        let Some(record) = self.steps.get_mut(index) else {
            return;
        };
        record.ended_at = Some(unix_ms());
        match result {
            Ok(message) => {
                record.status = StepStatus::Succeeded;
                record.message = message.to_owned();
            }
            Err(error) => {
                record.status = StepStatus::Failed;
                record.error = Some(error.to_owned());
            }
        }
        let record = record.clone();
        self.telemetry.step(
            &record.step_id,
            record.action_type,
            latency_ms,
            result.is_ok(),
        );
        self.emit(RunEvent::GnStepFinished {
            record: record.clone(),
        });
        self.send(GnEvent::Step(record));
    }

    fn write_text(&self, name: &str, text: &str) {
        let Some(folder) = &self.folder else {
            return;
        };
        if let Err(err) = write_whole(&folder.join(name), text.as_bytes()) {
            tracing::warn!("{err}");
        }
    }

    fn write_json<T: Serialize>(&self, name: &str, value: &T) {
        match serde_json::to_string_pretty(value) {
            Ok(text) => self.write_text(name, &text),
            Err(err) => tracing::warn!("{name}: {err}"),
        }
    }
}

/// Writes a file whole: to a temporary name first, then renamed into place, so a reader
/// never sees half of it.
pub(crate) fn write_whole(path: &Path, bytes: &[u8]) -> Result<(), GnError> {
    let temporary = path.with_extension("tmp");
    std::fs::write(&temporary, bytes)
        .and_then(|()| std::fs::rename(&temporary, path))
        .map_err(|err| GnError::file(path, format!("cannot write it: {err}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fences_are_stripped_and_slices_read() {
        let text = "```json\n{\"version\": 1, \"steps\": [], \"done\": false, \"meta\": {\"request_context\": [\"node_tree_ir\"]}}\n```";
        let (reply, slices) = parse_reply(text).unwrap();
        assert!(!reply.done);
        assert_eq!(slices, vec![SliceKind::NodeTreeIr]);
    }

    #[test]
    fn invalid_replies_name_the_path() {
        let missing = parse_reply(r#"{"version": 1, "steps": []}"#).unwrap_err();
        assert!(missing.contains("done"), "{missing}");
        let bad_slice = parse_reply(
            r#"{"version": 1, "steps": [], "done": false, "meta": {"request_context": ["everything"]}}"#,
        )
        .unwrap_err();
        assert!(bad_slice.contains("/meta/request_context"), "{bad_slice}");
        let bad_op = parse_reply(
            r#"{"version": 1, "done": false, "steps": [{"id": "a", "type": "GN_OPS", "payload": {"ops": [{"op": "explode"}]}}]}"#,
        )
        .unwrap_err();
        assert!(bad_op.contains("/steps/0"), "{bad_op}");
        let version = parse_reply(r#"{"version": 9, "steps": [], "done": true}"#).unwrap_err();
        assert!(version.contains("version"), "{version}");
    }
}
