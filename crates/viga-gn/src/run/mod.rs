//! One assistant run as a state machine:
//! `idle → requesting_context → generating → (requesting_context →) applying → verifying →
//! done | error | cancelled`, with `verifying → generating` whenever a required gate fails
//! or the model is not done yet, `applying → generating` when a step fails (the failure goes
//! back to the model; the steps that ran stay in the scene), and `generating → generating`
//! when a reply is refused by protocol validation (nothing runs; the errors go back to the
//! model). After every round that got as far as applying, the model is sent the scene as it
//! is now. A model run ends in [`RunState::Error`] only when its rounds run out, the model
//! call fails or Blender fails; no failure panics or escapes as `Err`.
//!
//! A preset run ([`GnRun::from_preset`]) has no model: `idle → requesting_context →
//! applying → verifying → done | error`, where a failing step or gate ends it in error since
//! nothing is there to repair it.
//!
//! A run is driven like a loop run of viga-core: [`GnRun::start`] returns a
//! [`RunHandle`] with the shared [`RunEvent`]s out (`GnStateChanged` per transition,
//! `GnStepFinished` per step, …), cancel in, and the [`GnOutcome`] at the end. The events
//! also go to the run folder's `events.jsonl`; every state change and step record (a step's
//! start too) goes to its `steps.jsonl`, so a run that ends early keeps its partial log.
//!
//! A cancel abandons a model call in flight at once; a Blender call in flight finishes its
//! step first, so the scene, the step's record and the worker's connection stay consistent
//! (an attached front end can then take the run's changes back over that same connection).
//! The cancel is checked again before every state and step.
//!
//! This module owns the state machine and the run's records; `model` owns the talk with the
//! model (prompt, cache, reading a reply against the registry's reply schema), `search` the
//! model's docs searches (the `search_node_docs` tool and `meta.search_node_docs`), and
//! `steps` applying steps and checking gates.

use std::ops::ControlFlow::{self, Break, Continue};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use viga_core::conversation::{EarlierTurn, StartFrom};
use viga_core::{Cancelled, RunHandle};
use viga_io::files::unix_ms;
use viga_protocol::PROTOCOL_VERSION;
use viga_protocol::event::{FailureKind, RunEvent, StopReason};
use viga_protocol::gn::{ActionType, GateReport, GnStep};
use viga_protocol::message::{ChatMessage, ContentPart};
use viga_provider::{FinishReason, ModelResponse, Provider};

use crate::cache::ResponseCache;
use crate::context::{self, ContextBudget, SliceKind};
use crate::docs::{DocsCache, SearchLimits};
use crate::executor::ReplySchema;
use crate::gates::{Baseline, GateConfig};
use crate::recorder::{Recorder, RunFiles};
use crate::telemetry::Telemetry;
use crate::{ExecContext, ExecutorRegistry, GnBlender, GnError, Preset, Target};

mod model;
mod search;
mod steps;

use model::{first_message, system_prompt};
pub use model::{parse_reply, parse_reply_with, searches_asked};
pub use search::{SEARCH_META, SEARCH_TOOL};

const SYSTEM_PROMPT: &str = include_str!("../../prompts/system.md");
/// The finished scene, in the run folder.
pub const FINAL_BLEND: &str = "final.blend";
/// What the run was asked to do, in the run folder.
pub const REQUEST_FILE: &str = "request.json";
/// How the run ended, in the run folder.
pub const OUTCOME_FILE: &str = "outcome.json";

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
    /// Replays the stored reply of an identical request instead of calling the model, and
    /// stores new replies that pass protocol validation (a refused reply is never replayed).
    /// `None`: every request goes to the model. Preset runs ask no model and ignore it.
    pub cache: Option<ResponseCache>,
    /// The earlier turns of the conversation this run continues (empty: it starts one),
    /// shown to the model before the request ([`crate::conversation`]).
    pub conversation: Vec<EarlierTurn>,
    /// Where a follow-up starts, as its model is told.
    pub starts_from: StartFrom,
    /// The .blend the scene was opened from, recorded so a follow-up can start there again;
    /// `None` for an empty scene or a person's open scene.
    pub blend: Option<PathBuf>,
    /// How long the whole run may take; `None`: no limit.
    pub time_limit: Option<Duration>,
    /// Where the docs index of the run's Blender is kept (read, or built on the first
    /// search); `None`: the model gets no docs tool.
    pub docs: Option<DocsCache>,
    /// Searches of the docs the model may make in the whole run.
    pub max_doc_searches: u32,
    /// How much one search answers.
    pub search_limits: SearchLimits,
}

/// The default limit of a Geometry Nodes run: six rounds of a slow local model fit in it.
pub const DEFAULT_GN_TIME_LIMIT: Duration = Duration::from_secs(60 * 60);

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
            cache: None,
            conversation: Vec::new(),
            starts_from: StartFrom::Result,
            blend: None,
            time_limit: Some(DEFAULT_GN_TIME_LIMIT),
            docs: DocsCache::default_location(),
            max_doc_searches: 8,
            search_limits: SearchLimits::default(),
        }
    }

    /// A run of `request` on `object` where what is not given comes from `preset`: the
    /// request it was saved from (else `preset <name>`, so the run folder and the undo step
    /// still say what ran) and the object it was saved for.
    pub fn with_preset_defaults(
        request: Option<String>,
        object: Option<String>,
        preset: Option<&Preset>,
    ) -> Self {
        let saved = preset.map(|preset| &preset.metadata);
        let request = request
            .or_else(|| {
                saved.map(|saved| match saved.request.as_str() {
                    "" => format!("preset {}", saved.name),
                    request => request.to_owned(),
                })
            })
            .unwrap_or_default();
        let mut config = Self::new(request);
        config.object = object.or_else(|| saved.and_then(|saved| saved.object.clone()));
        config
    }
}

/// How a run ended, with its whole log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GnOutcome {
    /// `Done`, `Error` or `Cancelled`.
    pub state: RunState,
    /// Model replies received (from the model or the cache); 0 for a preset run.
    pub rounds: u32,
    /// The model's last message when done, or why the rounds ran out.
    pub final_message: String,
    /// How the run ended, as every kind of run says it: done is `accepted`, rounds spent
    /// `max_iterations`, the time limit passed `time_limit`, a failure `failed` with its
    /// message and kind.
    pub stop: StopReason,
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
    /// The name of the preset a preset run applied; `None` for a model run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<String>,
}

impl GnOutcome {
    /// What went wrong, in words: a failure's message, or why the rounds ran out; `None` for
    /// a run that was done or cancelled.
    pub fn problem(&self) -> Option<&str> {
        match &self.stop {
            StopReason::Failed { message, .. } => Some(message),
            StopReason::MaxIterations | StopReason::TimeLimit { .. } => Some(&self.final_message),
            StopReason::Accepted | StopReason::Cancelled | StopReason::GeneratorEnded { .. } => {
                None
            }
        }
    }

    /// The kind of a failure; `None` for a run that did not fail.
    pub fn failure_kind(&self) -> Option<FailureKind> {
        match &self.stop {
            StopReason::Failed { kind, .. } => Some(*kind),
            _ => None,
        }
    }
}

/// Where a run's steps come from.
enum Source {
    /// A model's replies, round by round.
    Model(Arc<dyn Provider>),
    /// A saved preset's steps, applied once.
    Preset(Preset),
}

/// One assistant run: build it, then [`GnRun::start`] it.
pub struct GnRun {
    config: GnRunConfig,
    source: Source,
    blender: GnBlender,
    registry: ExecutorRegistry,
}

impl std::fmt::Debug for GnRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let source = match &self.source {
            Source::Model(provider) => format!("model {} ({})", provider.model(), provider.name()),
            Source::Preset(preset) => format!("preset {}", preset.metadata.name),
        };
        f.debug_struct("GnRun")
            .field("config", &self.config)
            .field("source", &source)
            .field("registry", &self.registry)
            .finish()
    }
}

/// How the state machine stopped.
enum Ending {
    Done(String),
    /// No accepted result within the rounds; why, in words.
    RoundsRanOut(String),
    Cancelled,
    /// Why, and what kind of failure it was (front ends map kinds to exit codes).
    Error(String, FailureKind),
}

impl From<Cancelled> for Ending {
    fn from(Cancelled: Cancelled) -> Self {
        Self::Cancelled
    }
}

impl Ending {
    /// The run ends because `err` stopped what it was `doing`.
    fn failed(doing: &str, err: &GnError) -> Self {
        Self::Error(format!("{doing}: {err}"), err.kind())
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
    /// The snapshot the model saw last, so an unchanged scene is not sent again.
    last_snapshot: String,
    /// What went wrong last (a refused reply, a failed step, failed gates), named in the
    /// error when the rounds run out.
    last_problem: Option<String>,
    /// Whether the run's folder and front end were told the server refused structured output.
    told_of_fallback: bool,
    /// Where the last cut-off reply and what the model was told of it start in `messages`,
    /// while they are the conversation's last two: a reply cut off again replaces them, so
    /// a model that keeps hitting its limit does not make every request longer.
    cut_off_at: Option<usize>,
    /// The docs index, once the model searched it.
    docs: search::Docs,
    /// Searches of the docs made so far.
    doc_searches: u32,
}

/// What stays the same through the rounds of a model run.
struct Conversation<'a> {
    provider: &'a dyn Provider,
    system: String,
    baseline: &'a Baseline,
    /// The step protocol's schema with the registry's own action types.
    replies: ReplySchema,
}

/// A model reply, and the cache key to store it under once it passed validation (`None`
/// when it came from the cache or there is no cache).
struct Answer {
    response: ModelResponse,
    store_under: Option<String>,
}

/// What applying a reply's steps did.
#[derive(Default)]
struct AppliedSteps {
    /// The ids of the steps that ran, in order.
    ran: Vec<String>,
    /// One line per step that ran, for the model.
    reports: Vec<String>,
    /// The step the scene refused; the steps after it did not run.
    failure: Option<StepFailure>,
}

/// A step that failed, and what of its reply did not run.
struct StepFailure {
    step_id: String,
    action_type: ActionType,
    error: String,
    not_run: Vec<String>,
}

impl GnRun {
    /// A run that asks `provider` for the steps.
    pub fn new(
        config: GnRunConfig,
        provider: Arc<dyn Provider>,
        blender: GnBlender,
        registry: ExecutorRegistry,
    ) -> Self {
        Self {
            config,
            source: Source::Model(provider),
            blender,
            registry,
        }
    }

    /// A run that applies a preset's steps instead of asking a model, with the same records,
    /// events, gates, run folder and `final.blend` as a model run. `config.request` and
    /// `config.object` describe the run; the preset's steps name their own targets.
    pub fn from_preset(
        config: GnRunConfig,
        preset: Preset,
        blender: GnBlender,
        registry: ExecutorRegistry,
    ) -> Self {
        Self {
            config,
            source: Source::Preset(preset),
            blender,
            registry,
        }
    }

    /// Starts the run on the current tokio runtime. Its run folder (with `output` set) is
    /// created before this returns, with the settings the model's provider was built from
    /// and the containment its Blender runs under; a folder that cannot be created becomes a
    /// warning and the run goes on unsaved.
    pub fn start(self) -> GnRunHandle {
        let run_id = format!("gn-{}-{}", unix_ms(), std::process::id());
        let provider = match &self.source {
            Source::Model(provider) => provider.config(),
            Source::Preset(_) => None,
        };
        let containment = self.blender.transport().containment();
        let files = self.config.output.as_deref().map(|root| {
            let request = self.request_record();
            RunFiles::create(root, &run_id, &request, provider, containment.as_ref())
        });
        let folder = match &files {
            Some(Ok(files)) => Some(files.folder().to_path_buf()),
            _ => None,
        };
        let time_limit = self.config.time_limit;
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
        .with_time_limit(time_limit)
    }

    /// `request.json`: what the run was asked to do and where its steps come from.
    fn request_record(&self) -> Value {
        let source = match &self.source {
            Source::Model(provider) => json!({
                "kind": "model",
                "provider": provider.name(),
                "model": provider.model(),
                "cache": self.config.cache.as_ref().map(|cache| cache.dir().display().to_string()),
            }),
            Source::Preset(preset) => json!({"kind": "preset", "preset": preset}),
        };
        json!({
            "request": self.config.request,
            "object": self.config.object,
            "max_rounds": self.config.max_rounds,
            "time_limit": self.config.time_limit.map(|limit| limit.as_secs_f64()),
            "required_gates": self.config.gates.required,
            "budget": self.config.budget,
            "source": source,
            "conversation": self.config.conversation,
            "starts_from": self.config.starts_from,
            "blend": self.config.blend,
            "docs": self.config.docs.as_ref().map(|docs| docs.dir().display().to_string()),
            "action_types": self.registry.action_types().iter().map(|t| t.name().to_owned()).collect::<Vec<_>>(),
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
            last_snapshot: String::new(),
            last_problem: None,
            told_of_fallback: false,
            cut_off_at: None,
            docs: search::Docs::default(),
            doc_searches: 0,
        };
        let ending = self.drive(&mut session).await;
        if matches!(ending, Ending::Done(_)) {
            self.save_final_scene(&mut session.recorder).await;
        }
        let preset = match &self.source {
            Source::Preset(preset) => Some(preset.metadata.name.clone()),
            Source::Model(_) => None,
        };
        session.finish(ending, preset)
    }

    /// Keeps the finished scene as `final.blend` in the run folder: a copy, so the scene in
    /// Blender (a person's, when attached) stays open as it is.
    async fn save_final_scene(&self, recorder: &mut Recorder) {
        let Some(path) = recorder.folder().map(|folder| folder.join(FINAL_BLEND)) else {
            return;
        };
        let saved =
            viga_domain_scene::save_scene_as(self.blender.transport().as_ref(), &path).await;
        if let Err(err) = saved {
            recorder.warn(format!("the final scene was not saved: {err}"));
        }
    }

    /// The state machine: take the gates' baseline, then apply the preset or converse with
    /// the model.
    async fn drive(&self, session: &mut Session) -> Ending {
        session.recorder.transition(RunState::RequestingContext, 0);
        let baseline = match Baseline::take(&self.blender).await {
            Ok(baseline) => baseline,
            Err(err) => return Ending::failed("cannot read the scene", &err),
        };
        match &self.source {
            Source::Model(provider) => self.converse(provider.as_ref(), &baseline, session).await,
            Source::Preset(preset) => self.apply_preset(preset, &baseline, session).await,
        }
    }

    /// Opens the conversation with the request and a snapshot of the scene, then one round
    /// per model reply until the gates pass and the model is done, the run is cancelled,
    /// something other than a step fails, or the rounds run out.
    async fn converse(
        &self,
        provider: &dyn Provider,
        baseline: &Baseline,
        session: &mut Session,
    ) -> Ending {
        let object = self.config.object.as_deref();
        let snapshot =
            match context::snapshot(&self.blender, object, None, &self.config.budget).await {
                Ok(snapshot) => snapshot,
                Err(err) => return Ending::failed("cannot read the scene", &err),
            };
        let opening = first_message(
            &self.config.request,
            object,
            &snapshot,
            &self.config.conversation,
            self.config.starts_from,
        );
        session.messages.push(ChatMessage::user_text(opening));
        session.last_snapshot = snapshot;
        let replies = match self.registry.reply_schema() {
            Ok(replies) => replies,
            Err(err) => return Ending::failed("cannot describe the replies", &err),
        };
        let conversation = Conversation {
            provider,
            system: system_prompt(replies.schema(), self.config.docs.is_some()),
            baseline,
            replies,
        };
        for round in 0..self.config.max_rounds {
            if let Break(ending) = self.round(&conversation, round, session).await {
                return ending;
            }
        }
        Ending::RoundsRanOut(rounds_ran_out(
            self.config.max_rounds,
            session.last_problem.as_deref(),
        ))
    }

    /// Applies a preset's steps and checks the gates: one round without a model. A failing
    /// step or gate ends the run in error, since no model is there to repair it.
    async fn apply_preset(
        &self,
        preset: &Preset,
        baseline: &Baseline,
        session: &mut Session,
    ) -> Ending {
        let name = &preset.metadata.name;
        let applied = match self.apply(0, &preset.steps, session).await {
            Break(ending) => return ending,
            Continue(applied) => applied,
        };
        if let Some(failure) = applied.failure {
            return Ending::Error(
                format!("preset {name:?}: {}", failure.summary()),
                FailureKind::Other,
            );
        }
        match self.check(0, baseline, session).await {
            Break(ending) => ending,
            Continue(report) if report.success => {
                Ending::Done(format!("preset {name:?} applied; all gates pass"))
            }
            Continue(report) => Ending::Error(
                format!(
                    "preset {name:?} applied, but the gates failed: {}",
                    report.messages.join("; ")
                ),
                FailureKind::Other,
            ),
        }
    }

    /// One model reply and what follows from it: refused, answered with context, applied
    /// (a failing step goes back to the model) and verified. `Break` ends the run;
    /// `Continue` goes on to the next round with the feedback and the scene as it is now in
    /// the conversation.
    async fn round(
        &self,
        conversation: &Conversation<'_>,
        round: u32,
        session: &mut Session,
    ) -> ControlFlow<Ending> {
        self.enter(RunState::Generating, round, session)?;
        let answer = match self
            .answer_after_searches(conversation, round, session)
            .await?
        {
            Ok(answer) => answer,
            Err(problem) => {
                session.refused(round, &problem);
                return Continue(());
            }
        };
        let text = answer.response.text.clone();
        let parsed = parse_reply_with(&text, &conversation.replies);
        if parsed.is_err() && answer.response.finish_reason == FinishReason::Length {
            session.cut_off(round, &text, self.config.max_tokens);
            return Continue(());
        }
        session
            .messages
            .push(ChatMessage::assistant(vec![ContentPart::text(
                text.clone(),
            )]));
        let parsed = parsed.and_then(|(reply, slices)| {
            let queries = searches_asked(&reply)?;
            Ok((reply, slices, queries))
        });
        let (reply, slices, queries) = match parsed {
            Ok(parsed) => parsed,
            Err(problem) => {
                session.refused(round, &problem);
                return Continue(());
            }
        };
        self.keep_in_cache(conversation.provider, &answer, session);
        let mut feedback = Vec::new();
        if !slices.is_empty() || !queries.is_empty() {
            if !slices.is_empty() {
                self.gather_context(round, slices, &mut feedback, session)
                    .await?;
            }
            self.meta_searches(round, queries, &mut feedback, session)
                .await?;
            if reply.steps.is_empty() && !reply.done {
                session.say(&feedback);
                return Continue(());
            }
        }
        let applied_before: Vec<String> =
            session.applied.iter().map(|s| s.id().to_owned()).collect();
        let applied = self.apply(round, &reply.steps, session).await?;
        feedback.extend(applied.reports);
        if let Some(failure) = applied.failure {
            feedback.push(failure.for_model(&applied.ran, &applied_before));
            session.last_problem = Some(failure.summary());
        } else {
            let report = self.check(round, conversation.baseline, session).await?;
            if report.success && reply.done {
                return Break(Ending::Done(reply.final_message));
            }
            feedback.push(session.gate_feedback(&report));
        }
        self.refresh_snapshot(&mut feedback, session).await?;
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

    /// The object and modifier the model is working on: the current target once there is
    /// one, else the configured object.
    fn focus(&self, context: &ExecContext) -> (Option<String>, Option<String>) {
        match &context.current {
            Some(target) => (Some(target.object.clone()), Some(target.modifier.clone())),
            None => (self.config.object.clone(), None),
        }
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
        let (object, modifier) = self.focus(&session.context);
        let budget = &self.config.budget;
        for kind in slices {
            let slice = context::slice(
                &self.blender,
                kind,
                object.as_deref(),
                modifier.as_deref(),
                budget,
            );
            match slice.await {
                Ok(text) => feedback.push(format!("Context {}: {text}", kind.name())),
                Err(GnError::Step(why)) => {
                    feedback.push(format!("Context {} is unavailable: {why}", kind.name()))
                }
                Err(err) => return Break(Ending::failed("cannot read the scene", &err)),
            }
        }
        Continue(())
    }

    /// Adds the scene as it is now to the feedback, so the next reply builds on the scene
    /// itself rather than on what the model expects its steps did. An unchanged scene is
    /// said in one line instead of being sent again.
    async fn refresh_snapshot(
        &self,
        feedback: &mut Vec<String>,
        session: &mut Session,
    ) -> ControlFlow<Ending> {
        let (object, modifier) = self.focus(&session.context);
        let snapshot = context::snapshot(
            &self.blender,
            object.as_deref(),
            modifier.as_deref(),
            &self.config.budget,
        );
        match snapshot.await {
            Ok(snapshot) if snapshot == session.last_snapshot => {
                feedback.push("Scene (JSON): unchanged since the last snapshot.".to_owned());
            }
            Ok(snapshot) => {
                feedback.push(format!("Scene now (JSON): {snapshot}"));
                session.last_snapshot = snapshot;
            }
            Err(err) => return Break(Ending::failed("cannot read the scene", &err)),
        }
        Continue(())
    }
}

fn rounds_ran_out(max_rounds: u32, last_problem: Option<&str>) -> String {
    let mut message = format!(
        "no accepted result within {max_rounds} rounds; allow more rounds or simplify the request"
    );
    if let Some(problem) = last_problem {
        message.push_str("; the last problem: ");
        message.push_str(problem);
    }
    message
}

impl Session {
    /// A reply that failed protocol validation: nothing of it ran, and the model hears why.
    /// A reply cut off at the output limit: kept shortened, and the model told so and asked
    /// for less (see [`cutoff`]).
    fn cut_off(&mut self, round: u32, text: &str, limit: u32) {
        self.recorder.telemetry.counters.protocol_errors += 1;
        self.recorder.warn(format!(
            "round {round}: the reply was cut off at the output limit ({limit} tokens); it went back shortened"
        ));
        self.last_problem = Some(format!(
            "the reply was cut off at the output limit ({limit} tokens)"
        ));
        if let Some(at) = self.cut_off_at
            && self.messages.len() == at + 2
        {
            self.messages.truncate(at);
        }
        self.cut_off_at = Some(self.messages.len());
        self.messages
            .push(ChatMessage::assistant(vec![ContentPart::text(
                viga_core::cut_off::shortened(text),
            )]));
        self.messages
            .push(ChatMessage::user_text(viga_core::cut_off::told(
                limit,
                text,
                "a few steps at most (the next ones come in later rounds), each step once",
            )));
    }

    fn refused(&mut self, round: u32, problem: &str) {
        self.recorder.telemetry.counters.protocol_errors += 1;
        self.recorder.warn(format!(
            "round {round}: reply refused before execution: {problem}"
        ));
        self.last_problem = Some(format!("the reply was refused: {problem}"));
        self.messages.push(ChatMessage::user_text(format!(
            "Your reply was refused before anything ran:\n{problem}\nAnswer again with one JSON object that follows the schema."
        )));
    }

    /// The gate report as the model reads it.
    fn gate_feedback(&mut self, report: &GateReport) -> String {
        let report_json = json!(report).to_string();
        if report.success {
            self.last_problem = None;
            format!(
                "All required gates pass: {report_json}\nContinue with more steps, or answer \"done\": true with a final_message."
            )
        } else {
            self.last_problem = Some(format!("the gates failed: {}", report.messages.join("; ")));
            format!(
                "Verification failed; fix the scene with more steps and answer again:\n{report_json}"
            )
        }
    }

    /// Sends the round's feedback to the model as the next user message.
    fn say(&mut self, feedback: &[String]) {
        self.messages
            .push(ChatMessage::user_text(feedback.join("\n")));
    }

    /// Records the final state and `RunFinished`, writes `outcome.json` and
    /// `telemetry.json`, and returns the outcome.
    fn finish(self, ending: Ending, preset: Option<String>) -> GnOutcome {
        let Self {
            mut recorder,
            context,
            applied,
            last_report,
            rounds,
            ..
        } = self;
        let (state, final_message, stop) = match ending {
            Ending::Done(message) => (RunState::Done, message, StopReason::Accepted),
            Ending::RoundsRanOut(why) => (RunState::Error, why, StopReason::MaxIterations),
            Ending::Cancelled => match recorder.link.stop_reason() {
                stop @ StopReason::TimeLimit { seconds } => (
                    RunState::Error,
                    format!(
                        "the time limit ({}) passed before the assistant was done",
                        viga_protocol::event::seconds_in_words(seconds)
                    ),
                    stop,
                ),
                stop => (RunState::Cancelled, String::new(), stop),
            },
            Ending::Error(message, kind) => (
                RunState::Error,
                String::new(),
                StopReason::failed(message, kind),
            ),
        };
        recorder.transition(state, rounds.saturating_sub(1));
        recorder.emit(RunEvent::RunFinished {
            stop: stop.clone(),
            iterations: rounds,
        });
        let outcome = GnOutcome {
            state,
            rounds,
            final_message,
            stop,
            transitions: std::mem::take(&mut recorder.transitions),
            steps: std::mem::take(&mut recorder.steps),
            last_report,
            applied,
            targets: context.targets,
            telemetry: std::mem::take(&mut recorder.telemetry),
            folder: recorder.folder().map(Path::to_path_buf),
            preset,
        };
        recorder.write_json(OUTCOME_FILE, &outcome);
        recorder.write_json("telemetry.json", &outcome.telemetry);
        outcome
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

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
            assert_eq!(
                outcome.state,
                RunState::Cancelled,
                "{:?}",
                outcome.problem()
            );
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
