//! One assistant run as a state machine:
//! `idle → requesting_context → generating → (requesting_context →) applying → verifying →
//! done | error | cancelled`, with `verifying → generating` whenever a required gate fails
//! or the model is not done yet, and `generating → generating` when a reply is refused by
//! protocol validation (nothing runs; the errors go back to the model).
//!
//! A run is driven like a loop run of viga-core: [`GnRun::start`] returns a
//! [`RunHandle`] with the shared [`RunEvent`]s out (`GnStateChanged` per transition,
//! `GnStepFinished` per step, …), cancel in, and the [`GnOutcome`] at the end. The events
//! also go to the run folder's `events.jsonl`; every state change and step record (a step's
//! start too) goes to its `steps.jsonl`. A failing step ends the run in [`RunState::Error`]
//! with the partial log; no failure panics or escapes as `Err`.
//!
//! A cancel abandons a model call in flight at once; a Blender call in flight finishes its
//! step first, so the scene, the step's record and the worker's connection stay consistent
//! (an attached front end can then take the run's changes back over that same connection).
//! The cancel is checked again before every state and step.

use std::ops::ControlFlow::{self, Break, Continue};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use viga_blender::BlenderCommands as _;
use viga_core::{Cancelled, RunHandle, RunLink};
use viga_memory::RunLog;
use viga_memory::files::unix_ms;
use viga_protocol::event::{ModelRole, RunEvent, StopReason, TimedEvent};
use viga_protocol::gn::{GateReport, GnResponse, GnStep};
use viga_protocol::message::{ChatMessage, ContentPart};
use viga_protocol::{PROTOCOL_VERSION, parse_json, schema_of};
use viga_provider::{ModelRequest, ModelResponse, Provider, ResponseFormat};

use crate::context::{self, ContextBudget, SliceKind};
use crate::gates::{Baseline, GateConfig, check_gates};
use crate::telemetry::Telemetry;
use crate::{ExecContext, ExecutorRegistry, GnBlender, GnError, Target};

const SYSTEM_PROMPT: &str = include_str!("../prompts/system.md");
/// The finished scene, in the run folder.
pub const FINAL_BLEND: &str = "final.blend";

/// The run states, the step status and the step record are protocol types, so every front
/// end reads them from the shared event stream.
pub use viga_protocol::gn::{GnRunState as RunState, StepRecord, StepStatus};

/// A Geometry Nodes run in progress: viga-core's handle with this run's outcome. The folder
/// is `None` when the run has no output root (or its folder could not be created).
pub type GnRunHandle = RunHandle<GnOutcome, Option<PathBuf>>;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateChange {
    pub from: RunState,
    pub to: RunState,
    pub round: u32,
    pub unix_ms: u64,
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
    /// Where run folders go (`<output>/gn/<run id>/`); no folder when `None`.
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

/// One assistant run: build it, then [`GnRun::start`] it.
pub struct GnRun {
    config: GnRunConfig,
    provider: Arc<dyn Provider>,
    blender: GnBlender,
    registry: ExecutorRegistry,
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

/// How the state machine stopped.
enum Ending {
    Done(String),
    Cancelled,
    Error(String),
}

impl From<Cancelled> for Ending {
    fn from(Cancelled: Cancelled) -> Self {
        Self::Cancelled
    }
}

/// Everything a run builds up as it goes: its log, what it changed, and the conversation.
struct Session {
    recorder: Recorder,
    context: ExecContext,
    applied: Vec<GnStep>,
    last_report: Option<GateReport>,
    /// Model replies received.
    rounds: u32,
    messages: Vec<ChatMessage>,
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
        }
    }

    /// Starts the run on the current tokio runtime. Its run folder (with `output` set) is
    /// created before this returns; a folder that cannot be created becomes a warning and
    /// the run goes on unsaved.
    pub fn start(self) -> GnRunHandle {
        let run_id = format!("gn-{}-{}", unix_ms(), std::process::id());
        let files = self
            .config
            .output
            .as_deref()
            .map(|root| RunFiles::create(root, &run_id, &self.config));
        let folder = match &files {
            Some(Ok(files)) => Some(files.folder.clone()),
            _ => None,
        };
        RunHandle::spawn(folder, move |link| async move {
            let mut recorder = Recorder::new(run_id, link);
            match files {
                Some(Ok(files)) => recorder.files = Some(files),
                Some(Err(err)) => {
                    recorder.warn(format!("no run folder, the run is not saved: {err}"));
                }
                None => {}
            }
            Ok(self.run(recorder).await)
        })
    }

    /// Runs to the end. Every failure becomes an outcome in the `Error` state.
    async fn run(self, mut recorder: Recorder) -> GnOutcome {
        recorder.emit(RunEvent::RunStarted {
            run_id: recorder.run_id.clone(),
            task: self.config.request.clone(),
            protocol_version: PROTOCOL_VERSION,
            resumed_from_iteration: None,
        });
        let mut session = Session {
            recorder,
            context: ExecContext::default(),
            applied: Vec::new(),
            last_report: None,
            rounds: 0,
            messages: Vec::new(),
        };
        let ending = self.drive(&mut session).await;
        if matches!(ending, Ending::Done(_)) {
            self.save_final_scene(&mut session.recorder).await;
        }
        session.finish(ending)
    }

    /// Keeps the finished scene as `final.blend` in the run folder: a copy, so the scene in
    /// Blender (a person's, when attached) stays open as it is.
    async fn save_final_scene(&self, recorder: &mut Recorder) {
        let Some(path) = recorder.folder().map(|folder| folder.join(FINAL_BLEND)) else {
            return;
        };
        let saved = self
            .blender
            .transport()
            .save_blend(&path.to_string_lossy())
            .await;
        if let Err(err) = saved {
            recorder.warn(format!("the final scene was not saved: {err}"));
        }
    }

    /// The state machine: read the scene, then one round per model reply until the gates
    /// pass and the model is done, something fails, the run is cancelled or the rounds run
    /// out.
    async fn drive(&self, session: &mut Session) -> Ending {
        session.recorder.transition(RunState::RequestingContext, 0);
        let baseline = match self.read_scene(session).await {
            Ok(baseline) => baseline,
            Err(err) => return Ending::Error(format!("cannot read the scene: {err}")),
        };
        let system = system_prompt();
        for round in 0..self.config.max_rounds {
            if let Break(ending) = self.round(round, &system, &baseline, session).await {
                return ending;
            }
        }
        Ending::Error(format!(
            "no accepted result within {} rounds; allow more rounds or simplify the request",
            self.config.max_rounds
        ))
    }

    /// Takes the gates' baseline and opens the conversation with the request and a snapshot
    /// of the scene.
    async fn read_scene(&self, session: &mut Session) -> Result<Baseline, GnError> {
        let object = self.config.object.as_deref();
        let baseline = Baseline::take(&self.blender).await?;
        let snapshot = context::snapshot(&self.blender, object, &self.config.budget).await?;
        session.messages.push(ChatMessage::user_text(first_message(
            &self.config.request,
            object,
            &snapshot,
        )));
        Ok(baseline)
    }

    /// One model reply and what follows from it: refused, answered with context, or applied
    /// and verified. `Break` ends the run; `Continue` goes on to the next round with the
    /// feedback in the conversation.
    async fn round(
        &self,
        round: u32,
        system: &str,
        baseline: &Baseline,
        session: &mut Session,
    ) -> ControlFlow<Ending> {
        self.enter(RunState::Generating, round, session)?;
        let response = self.ask(round, system, session).await?;
        session
            .messages
            .push(ChatMessage::assistant(vec![ContentPart::text(
                response.text.clone(),
            )]));
        let (reply, slices) = match parse_reply(&response.text) {
            Ok(parsed) => parsed,
            Err(problem) => {
                session.refused(round, &problem);
                return Continue(());
            }
        };
        let mut feedback = Vec::new();
        if !slices.is_empty() {
            self.gather_context(round, slices, &mut feedback, session)
                .await?;
            if reply.steps.is_empty() && !reply.done {
                session.say(&feedback);
                return Continue(());
            }
        }
        self.apply(round, &reply.steps, &mut feedback, session)
            .await?;
        let report = self.check(round, baseline, session).await?;
        let report_json = json!(report).to_string();
        if report.success {
            session.recorder.telemetry.counters.gate_passes += 1;
            if reply.done {
                return Break(Ending::Done(reply.final_message));
            }
            feedback.push(format!(
                "All required gates pass: {report_json}\nContinue with more steps, or answer \"done\": true with a final_message."
            ));
        } else {
            session.recorder.telemetry.counters.gate_failures += 1;
            feedback.push(format!(
                "Verification failed; fix the scene with more steps and answer again:\n{report_json}"
            ));
        }
        session.say(&feedback);
        Continue(())
    }

    /// Moves to `state` unless the run was cancelled.
    fn enter(&self, state: RunState, round: u32, session: &mut Session) -> ControlFlow<Ending> {
        if session.recorder.link.is_cancelled() {
            return Break(Ending::Cancelled);
        }
        session.recorder.transition(state, round);
        Continue(())
    }

    /// Asks the model for the next reply; a cancel abandons the call at once.
    async fn ask(
        &self,
        round: u32,
        system: &str,
        session: &mut Session,
    ) -> ControlFlow<Ending, ModelResponse> {
        let mut request =
            ModelRequest::for_role(ModelRole::GnAssistant, system, session.messages.clone());
        request.max_tokens = self.config.max_tokens;
        request.response_format = Some(ResponseFormat {
            name: "GnResponse".to_owned(),
            schema: schema_of::<GnResponse>(),
        });
        let started = Instant::now();
        let answer = session
            .recorder
            .link
            .until_cancelled(self.provider.complete(&request))
            .await;
        let response = match answer {
            Err(cancelled) => return Break(cancelled.into()),
            Ok(Err(err)) => {
                session.recorder.telemetry.counters.request_failures += 1;
                return Break(Ending::Error(GnError::from(err).to_string()));
            }
            Ok(Ok(response)) => response,
        };
        session.rounds = round + 1;
        let latency = if response.latency.is_zero() {
            started.elapsed()
        } else {
            response.latency
        };
        session.recorder.model_called(round, latency, &response);
        Continue(response)
    }

    /// Fetches the context slices the model asked for, as lines of feedback. A slice the
    /// scene cannot give is said so; a failing Blender ends the run.
    async fn gather_context(
        &self,
        round: u32,
        slices: Vec<SliceKind>,
        feedback: &mut Vec<String>,
        session: &mut Session,
    ) -> ControlFlow<Ending> {
        self.enter(RunState::RequestingContext, round, session)?;
        session.recorder.telemetry.counters.context_requests += 1;
        let object = self.config.object.as_deref();
        for kind in slices {
            match context::slice(&self.blender, kind, object, None, &self.config.budget).await {
                Ok(text) => feedback.push(format!("Context {}: {text}", kind.name())),
                Err(GnError::Step(why)) => {
                    feedback.push(format!("Context {} is unavailable: {why}", kind.name()))
                }
                Err(err) => return Break(Ending::Error(format!("cannot read the scene: {err}"))),
            }
        }
        Continue(())
    }

    /// Runs a reply's steps in order. The first that fails ends the run; the steps after it
    /// do not run.
    async fn apply(
        &self,
        round: u32,
        steps: &[GnStep],
        feedback: &mut Vec<String>,
        session: &mut Session,
    ) -> ControlFlow<Ending> {
        self.enter(RunState::Applying, round, session)?;
        for step in steps {
            if session.recorder.link.is_cancelled() {
                return Break(Ending::Cancelled);
            }
            // Not cancellable once begun: the step finishes, so its record and the scene
            // agree.
            let index = session.recorder.step_started(round, step);
            let started = Instant::now();
            let result = self
                .registry
                .execute(&self.blender, &mut session.context, step)
                .await;
            let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
            match result {
                Ok(outcome) => {
                    session
                        .recorder
                        .step_finished(index, latency_ms, Ok(&outcome.message));
                    feedback.push(format!(
                        "Step {:?} ran: {} {}",
                        step.id(),
                        outcome.message,
                        outcome.detail
                    ));
                    session.applied.push(step.clone());
                }
                Err(err) => {
                    let message = err.to_string();
                    session
                        .recorder
                        .step_finished(index, latency_ms, Err(&message));
                    return Break(Ending::Error(format!(
                        "step {:?} ({:?}) failed: {message}",
                        step.id(),
                        step.action_type()
                    )));
                }
            }
        }
        Continue(())
    }

    /// Checks the gates against the baseline and announces the report; gates that are not
    /// required only warn.
    async fn check(
        &self,
        round: u32,
        baseline: &Baseline,
        session: &mut Session,
    ) -> ControlFlow<Ending, GateReport> {
        self.enter(RunState::Verifying, round, session)?;
        let checked = check_gates(
            &self.blender,
            baseline,
            &session.context,
            &self.config.gates,
        )
        .await;
        let check = match checked {
            Ok(check) => check,
            Err(err) => return Break(Ending::Error(format!("the gates could not run: {err}"))),
        };
        session.recorder.emit(RunEvent::GatesChecked {
            index: round,
            report: check.report.clone(),
        });
        for warning in &check.advisory {
            session
                .recorder
                .warn(format!("gate not required, failed: {warning}"));
        }
        session.last_report = Some(check.report.clone());
        Continue(check.report)
    }
}

impl Session {
    /// A reply that failed protocol validation: nothing of it ran, and the model hears why.
    fn refused(&mut self, round: u32, problem: &str) {
        self.recorder.telemetry.counters.protocol_errors += 1;
        self.recorder.warn(format!(
            "round {round}: reply refused before execution: {problem}"
        ));
        self.messages.push(ChatMessage::user_text(format!(
            "Your reply was refused before anything ran:\n{problem}\nAnswer again with one JSON object that follows the schema."
        )));
    }

    /// Sends the round's feedback to the model as the next user message.
    fn say(&mut self, feedback: &[String]) {
        self.messages
            .push(ChatMessage::user_text(feedback.join("\n")));
    }

    /// Records the final state and `RunFinished`, writes `outcome.json` and
    /// `telemetry.json`, and returns the outcome.
    fn finish(self, ending: Ending) -> GnOutcome {
        let Self {
            mut recorder,
            context,
            applied,
            last_report,
            rounds,
            messages: _,
        } = self;
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
        recorder.transition(state, rounds.saturating_sub(1));
        recorder.emit(RunEvent::RunFinished {
            stop,
            iterations: rounds,
        });
        let outcome = GnOutcome {
            state,
            rounds,
            final_message,
            error,
            transitions: std::mem::take(&mut recorder.transitions),
            steps: std::mem::take(&mut recorder.steps),
            last_report,
            applied,
            targets: context.targets,
            telemetry: std::mem::take(&mut recorder.telemetry),
            folder: recorder.folder().map(Path::to_path_buf),
        };
        recorder.write_json("outcome.json", &outcome);
        recorder.write_json("telemetry.json", &outcome.telemetry);
        outcome
    }
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

/// Keeps the run's log in memory, on the run's link to its front end, and in the run
/// folder.
struct Recorder {
    run_id: String,
    link: RunLink,
    state: RunState,
    transitions: Vec<StateChange>,
    steps: Vec<StepRecord>,
    telemetry: Telemetry,
    files: Option<RunFiles>,
    /// The next event's number when there is no event log to number it.
    seq: u64,
}

/// The run folder's open files.
struct RunFiles {
    folder: PathBuf,
    /// `events.jsonl`: the shared events.
    log: RunLog,
    /// `steps.jsonl`: state changes and step records (a step's start too) as they happen,
    /// so a killed run leaves its partial log.
    steps_log: std::fs::File,
}

impl RunFiles {
    /// Creates `<root>/gn/<run id>/` with its logs and `request.json`.
    fn create(root: &Path, run_id: &str, config: &GnRunConfig) -> Result<Self, GnError> {
        let folder = root.join("gn").join(run_id);
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
        write_json_file(
            &folder,
            "request.json",
            &json!({
                "request": config.request,
                "object": config.object,
                "max_rounds": config.max_rounds,
                "required_gates": config.gates.required,
                "budget": config.budget,
            }),
        );
        Ok(Self {
            folder,
            log,
            steps_log,
        })
    }
}

impl Recorder {
    fn new(run_id: String, link: RunLink) -> Self {
        Self {
            run_id,
            link,
            state: RunState::Idle,
            transitions: Vec::new(),
            steps: Vec::new(),
            telemetry: Telemetry::default(),
            files: None,
            seq: 0,
        }
    }

    fn folder(&self) -> Option<&Path> {
        self.files.as_ref().map(|files| files.folder.as_path())
    }

    /// Appends one line, `{"state": …}` or `{"step": …}`, to `steps.jsonl`.
    fn append_to_steps_log(&mut self, line: &Value) {
        if let Some(files) = &mut self.files {
            use std::io::Write as _;
            if let Err(err) = writeln!(files.steps_log, "{line}") {
                tracing::warn!("steps.jsonl: {err}");
            }
        }
    }

    /// Logs a shared event to `events.jsonl` and sends it to the front end.
    fn emit(&mut self, event: RunEvent) {
        let timed = match &mut self.files {
            Some(files) => match files.log.append(event.clone()) {
                Ok(timed) => timed,
                Err(err) => {
                    tracing::warn!("events.jsonl: {err}");
                    self.timed(event)
                }
            },
            None => self.timed(event),
        };
        self.seq = timed.seq + 1;
        self.link.send(timed);
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
        self.emit(RunEvent::GnStateChanged {
            round,
            from: change.from,
            to,
        });
        self.append_to_steps_log(&json!({ "state": change }));
        self.transitions.push(change);
    }

    /// Counts a model reply, announces it and keeps its raw text (`responses/<round>.txt`).
    fn model_called(&mut self, round: u32, latency: std::time::Duration, response: &ModelResponse) {
        let latency_ms = latency.as_secs_f64() * 1000.0;
        self.telemetry.request(round, latency_ms, response.usage);
        self.emit(RunEvent::ModelCalled {
            index: round,
            role: ModelRole::GnAssistant,
            latency_ms,
            usage: response.usage,
        });
        self.write_text(&format!("responses/{round}.txt"), &response.text);
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
        self.append_to_steps_log(&json!({ "step": record }));
        self.steps.push(record);
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
        self.append_to_steps_log(&json!({ "step": record }));
    }

    fn write_text(&self, name: &str, text: &str) {
        if let Some(folder) = self.folder() {
            write_text_file(folder, name, text);
        }
    }

    fn write_json<T: Serialize>(&self, name: &str, value: &T) {
        if let Some(folder) = self.folder() {
            write_json_file(folder, name, value);
        }
    }
}

/// Writes one file of the run folder; a failure is logged, never fatal to the run.
fn write_text_file(folder: &Path, name: &str, text: &str) {
    if let Err(err) = write_whole(&folder.join(name), text.as_bytes()) {
        tracing::warn!("{err}");
    }
}

fn write_json_file<T: Serialize>(folder: &Path, name: &str, value: &T) {
    match serde_json::to_string_pretty(value) {
        Ok(text) => write_text_file(folder, name, &text),
        Err(err) => tracing::warn!("{name}: {err}"),
    }
}

/// Writes a file whole (see [`viga_memory::files::write_atomic`]), so a reader never sees
/// half of it.
pub(crate) fn write_whole(path: &Path, bytes: &[u8]) -> Result<(), GnError> {
    viga_memory::files::write_atomic(path, bytes)
        .map_err(|err| GnError::file(path, format!("cannot write it: {err}")))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use viga_blender::{Worker, WorkerConfig, locate};
    use viga_provider::scripted::{Script, Turn};
    use viga_provider::{FinishReason, ScriptedProvider};

    use super::*;
    use crate::PythonPolicy;

    /// A cancel while the model is thinking ends the run at once, not when the answer comes,
    /// and nothing of that answer runs. On real Blender: the run reads the scene before it
    /// asks the model.
    #[tokio::test]
    async fn a_cancel_during_a_slow_model_call_ends_the_run_at_once() {
        viga_testkit::within(viga_testkit::BLENDER_TEST_LIMIT, "the test", async {
            let worker = Arc::new(
                Worker::start(WorkerConfig::new(locate().unwrap()))
                    .await
                    .unwrap(),
            );
            let reply = json!({"version": 1, "done": true, "steps": [
                {"id": "t", "type": "GN_OPS", "payload": {"ops": [
                    {"op": "ensure_target", "object": "Cube", "modifier": "GN"}
                ]}}
            ]});
            let slow = Turn {
                expect: Default::default(),
                response: ModelResponse::text_only(reply.to_string(), FinishReason::Stop),
                delay_ms: 30_000,
            };
            let provider = ScriptedProvider::new(
                "scripted:slow",
                Script {
                    description: String::new(),
                    turns: vec![slow],
                },
            );
            let mut config = GnRunConfig::new("scatter cubes");
            config.object = Some("Cube".into());
            let mut run = GnRun::new(
                config,
                Arc::new(provider),
                GnBlender::new(worker.clone()),
                ExecutorRegistry::with_defaults(PythonPolicy::safe()),
            )
            .start();
            while let Some(event) = run.next_event().await {
                if let RunEvent::GnStateChanged {
                    to: RunState::Generating,
                    ..
                } = event.event
                {
                    break;
                }
            }
            // The model call is in flight now.
            tokio::time::sleep(Duration::from_millis(200)).await;
            let cancelled_at = Instant::now();
            run.cancel();
            let mut after = Vec::new();
            while let Some(event) = run.next_event().await {
                after.push(event.event);
            }
            let outcome = run.wait().await.unwrap();
            let took = cancelled_at.elapsed();
            assert!(
                took < Duration::from_secs(1),
                "the run took {took:?} to stop"
            );
            assert_eq!(outcome.state, RunState::Cancelled, "{:?}", outcome.error);
            assert_eq!(outcome.rounds, 0);
            assert!(outcome.steps.is_empty());
            assert!(
                !after
                    .iter()
                    .any(|event| matches!(event, RunEvent::ModelCalled { .. }))
            );
            assert!(matches!(
                after.last(),
                Some(RunEvent::RunFinished {
                    stop: StopReason::Cancelled,
                    ..
                })
            ));
            if let Ok(worker) = Arc::try_unwrap(worker) {
                worker.shutdown().await;
            }
        })
        .await;
    }

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
