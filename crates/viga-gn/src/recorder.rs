//! A run's log: in memory for the outcome, on the run's link to its front end, and in the run
//! folder (`events.jsonl`, `steps.jsonl`, `responses/`, `request.json`, …). Writing a file
//! never fails a run: a failure is logged and the run goes on.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Value, json};
use viga_blender::ContainmentStatus;
use viga_core::RunLink;
use viga_io::files::unix_ms;
use viga_memory::RunLog;
use viga_protocol::event::{ModelRole, RunEvent, TimedEvent};
use viga_protocol::gn::{GnRunState as RunState, GnStep, StepRecord, StepStatus};
use viga_provider::{ModelResponse, ProviderConfig};

use crate::GnError;
use crate::cache::CachedReply;
use crate::run::StateChange;
use crate::telemetry::Telemetry;

/// Keeps the run's log in memory, on the run's link to its front end, and in the run
/// folder.
pub(crate) struct Recorder {
    pub(crate) run_id: String,
    pub(crate) link: RunLink,
    state: RunState,
    pub(crate) transitions: Vec<StateChange>,
    pub(crate) steps: Vec<StepRecord>,
    pub(crate) telemetry: Telemetry,
    pub(crate) files: Option<RunFiles>,
    /// The next event's number when there is no event log to number it.
    seq: u64,
}

/// The run folder's open files.
pub(crate) struct RunFiles {
    folder: PathBuf,
    /// `events.jsonl`: the shared events.
    log: RunLog,
    /// `steps.jsonl`: state changes and step records (a step's start too) as they happen,
    /// so a killed run leaves its partial log.
    steps_log: std::fs::File,
}

impl RunFiles {
    /// Creates `<root>/gn/<run id>/` with its logs, `request.json` (what was asked of the
    /// run, as the caller describes it) and how the run is set up: the settings its model's
    /// provider was built from and the containment its Blender runs under, when known
    /// ([`viga_core::folder::write_setup`]).
    pub(crate) fn create(
        root: &Path,
        run_id: &str,
        request: &Value,
        provider: Option<&ProviderConfig>,
        containment: Option<&ContainmentStatus>,
    ) -> Result<Self, GnError> {
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
        write_json_file(&folder, crate::run::REQUEST_FILE, request);
        if let Err(err) = viga_core::folder::write_setup(&folder, provider, containment) {
            tracing::warn!("{err}");
        }
        Ok(Self {
            folder,
            log,
            steps_log,
        })
    }

    pub(crate) fn folder(&self) -> &Path {
        &self.folder
    }
}

impl Recorder {
    pub(crate) fn new(run_id: String, link: RunLink) -> Self {
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

    pub(crate) fn folder(&self) -> Option<&Path> {
        self.files.as_ref().map(RunFiles::folder)
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
    pub(crate) fn emit(&mut self, event: RunEvent) {
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

    pub(crate) fn warn(&mut self, message: String) {
        self.emit(RunEvent::Warning { message });
    }

    pub(crate) fn transition(&mut self, to: RunState, round: u32) {
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
    pub(crate) fn model_called(
        &mut self,
        round: u32,
        latency: std::time::Duration,
        response: &ModelResponse,
    ) {
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

    /// Counts a reply replayed from the cache. No `ModelCalled` (no model was called); a
    /// warning says the reply was replayed, and `responses/<round>.cached.json` beside its
    /// text names the entry it came from.
    pub(crate) fn reply_replayed(&mut self, round: u32, cached: &CachedReply) {
        self.telemetry.cached_reply(round);
        self.warn(format!(
            "round {round}: replayed the cached reply {} (no model call)",
            cached.file.display()
        ));
        self.write_text(&format!("responses/{round}.txt"), &cached.response.text);
        self.write_json(
            &format!("responses/{round}.cached.json"),
            &json!({"cached": true, "entry": cached.file.display().to_string()}),
        );
    }

    pub(crate) fn step_started(&mut self, round: u32, step: &GnStep) -> usize {
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

    pub(crate) fn step_finished(
        &mut self,
        index: usize,
        latency_ms: f64,
        result: Result<&str, &str>,
    ) {
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
            record.action_type.clone(),
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

    pub(crate) fn write_json<T: Serialize>(&self, name: &str, value: &T) {
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

/// Writes a file whole (see [`viga_io::files::write_atomic`]), so a reader never sees
/// half of it.
pub(crate) fn write_whole(path: &Path, bytes: &[u8]) -> Result<(), GnError> {
    viga_io::files::write_atomic(path, bytes)
        .map_err(|err| GnError::file(path, format!("cannot write it: {err}")))
}
