//! What the loop builds, behind one trait: a *domain*.
//!
//! The loop (plan, program, run, look, verify, remember, fast retry, E0-E3, resume, report)
//! never names what its programs build. A [`Domain`] says what a program is (its language and
//! how it is found in an answer), runs it in the domain's worker from the same starting state
//! every time, renders the views a target picture shows, gives the verifier its first look
//! and its tools, and saves the result. A Blender scene is one domain
//! (viga-domain-scene's `SceneDomain`); a downstream crate adds another by implementing the trait:
//!
//! ```
//! use std::path::Path;
//! use std::sync::{Arc, Mutex};
//! use std::time::Duration;
//!
//! use viga_core::domain::{
//!     Domain, ProgramFormat, TargetView, ToolRole, ViewRender, WorkerFault, WorkerWatch,
//! };
//! use viga_protocol::iteration::ExecutionResult;
//! use viga_protocol::message::ToolSpec;
//! use viga_skills::{ToolError, ToolOutput};
//!
//! /// A "domain" whose programs are lines of text and whose result is the last one.
//! #[derive(Default)]
//! struct Notes {
//!     watch: WorkerWatch,
//!     text: Mutex<String>,
//! }
//!
//! #[async_trait::async_trait]
//! impl Domain for Notes {
//!     fn name(&self) -> &str {
//!         "notes"
//!     }
//!     fn program_format(&self) -> ProgramFormat {
//!         ProgramFormat::new("text", "the whole note")
//!     }
//!     fn watch(&self) -> &WorkerWatch {
//!         &self.watch
//!     }
//!     async fn execute(&self, program: &str, _limit: Duration) -> Result<ExecutionResult, WorkerFault> {
//!         *self.text.lock().unwrap() = program.to_owned();
//!         Ok(ExecutionResult { stdout: format!("{} lines", program.lines().count()), ..Default::default() })
//!     }
//!     async fn render_view(&self, _target: &TargetView, _width: u32, _height: u32) -> Result<ViewRender, WorkerFault> {
//!         Ok(ViewRender::Unavailable("notes have no pictures".to_owned()))
//!     }
//!     async fn overview(&self) -> Result<ToolOutput, ToolError> {
//!         Ok(ToolOutput::text(format!("The note reads: {}", self.text.lock().unwrap())))
//!     }
//!     fn tools(&self, _role: ToolRole) -> Vec<ToolSpec> {
//!         Vec::new()
//!     }
//!     async fn call_tool(&self, _role: ToolRole, name: &str, _arguments: serde_json::Value) -> Result<ToolOutput, ToolError> {
//!         Err(ToolError::Recoverable(format!("no tool {name}")))
//!     }
//!     async fn save_result(&self, program: &str, _limit: Duration, folder: &Path) -> Result<Vec<std::path::PathBuf>, WorkerFault> {
//!         let path = folder.join("final.txt");
//!         std::fs::write(&path, program).map_err(|err| WorkerFault::other(err.to_string()))?;
//!         Ok(vec![path])
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let script = serde_json::json!({"turns": [
//!     {"response": {"text": "```text\nhello\n```", "finish_reason": "stop"}},
//!     {"response": {"text": "", "finish_reason": "tool_calls", "tool_calls": [{"id": "1",
//!         "name": "end_process", "arguments": {"visual_differences": [], "suggestions": [],
//!         "accepted": true}}]}}
//! ]});
//! let provider = Arc::new(viga_provider::ScriptedProvider::new(
//!     "scripted:notes", serde_json::from_value(script)?));
//! let mut config = viga_core::RunConfig::new("write hello");
//! config.plan_each_iteration = false;
//! let output = tempfile::tempdir()?;
//! let run = viga_core::start(config, provider, Arc::new(Notes::default()), output.path())?;
//! let outcome = run.wait().await?;
//! assert_eq!(outcome.stop, viga_protocol::event::StopReason::Accepted);
//! assert_eq!(outcome.final_code.as_deref(), Some("hello\n"));
//! assert!(outcome.folder.join("final.txt").is_file());
//! # Ok(()) }
//! ```

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use viga_protocol::bridge::ViewPicture;
use viga_protocol::iteration::ExecutionResult;
use viga_protocol::message::{ImageData, ToolSpec};
use viga_sandbox::ContainmentStatus;
use viga_skills::{ToolError, ToolOutput};

use crate::prompts::Prompts;

/// How a domain's programs are written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramFormat {
    /// The language tag of the fenced block a program is written in (`python`, `html`).
    pub language: String,
    /// What one program is, in the words the model is asked with ("the whole scene
    /// program", "the whole page").
    pub noun: String,
    /// Other tags a fenced block of this language may carry (`py` for `python`, `htm` for
    /// `html`): models do not always write the canonical one.
    pub aliases: Vec<String>,
}

impl ProgramFormat {
    pub fn new(language: impl Into<String>, noun: impl Into<String>) -> Self {
        Self {
            language: language.into(),
            noun: noun.into(),
            aliases: Vec::new(),
        }
    }

    pub fn with_aliases(mut self, aliases: &[&str]) -> Self {
        self.aliases = aliases.iter().map(|a| (*a).to_owned()).collect();
        self
    }

    /// The first fenced block of this language in `answer` (seed 000: the first block
    /// wins); `None` when there is none or it is empty.
    pub fn extract(&self, answer: &str) -> Option<String> {
        crate::extract::first_block(answer, &self.tags())
    }

    /// Whether `answer` holds a whole program: a block of this language whose closing fence
    /// was written. An answer cut off at the output limit inside its block does not.
    pub fn holds_a_whole_program(&self, answer: &str) -> bool {
        crate::extract::first_block_and_end(answer, &self.tags()).is_some_and(|(_, closed)| closed)
    }

    fn tags(&self) -> Vec<&str> {
        std::iter::once(self.language.as_str())
            .chain(self.aliases.iter().map(String::as_str))
            .collect()
    }
}

/// Whose tools: the generator's (besides the loop's own `execute_code`, `make_plan`,
/// `undo_last_step` and `end_process`) or the verifier's (besides `end_process`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolRole {
    Generator,
    Verifier,
}

impl ToolRole {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Generator => "generator",
            Self::Verifier => "verifier",
        }
    }
}

/// A domain's own tools, one registry per role, over the context `C` their calls reach.
#[derive(Debug)]
pub struct RoleTools<C: Sync + ?Sized> {
    generator: viga_skills::ToolRegistry<C>,
    verifier: viga_skills::ToolRegistry<C>,
}

impl<C: Sync + ?Sized> RoleTools<C> {
    pub fn new(
        generator: viga_skills::ToolRegistry<C>,
        verifier: viga_skills::ToolRegistry<C>,
    ) -> Self {
        Self {
            generator,
            verifier,
        }
    }

    /// Registries holding `generator` and `verifier`; a name given twice is refused.
    pub fn of(
        generator: Vec<Arc<dyn viga_skills::Tool<C>>>,
        verifier: Vec<Arc<dyn viga_skills::Tool<C>>>,
    ) -> Result<Self, viga_skills::registry::RegistryError> {
        let registry = |tools: Vec<Arc<dyn viga_skills::Tool<C>>>| {
            let mut registry = viga_skills::ToolRegistry::new();
            for tool in tools {
                registry.register(tool)?;
            }
            Ok(registry)
        };
        Ok(Self::new(registry(generator)?, registry(verifier)?))
    }

    fn of_role(&self, role: ToolRole) -> &viga_skills::ToolRegistry<C> {
        match role {
            ToolRole::Generator => &self.generator,
            ToolRole::Verifier => &self.verifier,
        }
    }

    /// What [`Domain::tools`] answers.
    pub fn specs(&self, role: ToolRole) -> Vec<ToolSpec> {
        self.of_role(role).specs()
    }

    /// What [`Domain::call_tool`] does: runs `role`'s tool `name` over `context`.
    pub async fn invoke(
        &self,
        context: &C,
        role: ToolRole,
        name: &str,
        arguments: Value,
    ) -> Result<ToolOutput, ToolError> {
        self.of_role(role).invoke(context, name, arguments).await
    }
}

/// A target picture and the view of the result it shows.
#[derive(Debug, Clone, PartialEq)]
pub struct TargetView {
    /// Which view, in the domain's words: a camera's name (`Camera1`), a slide's number, a
    /// viewport; `None` for the domain's default view (a scene's active camera, the first
    /// slide, the page at its viewport).
    pub view: Option<String>,
    /// The frame of an animation the picture shows (4D scenes); `None` for a still.
    pub frame: Option<i32>,
    pub image: ImageData,
}

impl TargetView {
    /// The view's label in scores, renders and the report: `Camera1`, `Camera1@f24`,
    /// `default`.
    pub fn label(&self) -> String {
        label_of(self.view.as_deref(), self.frame)
    }
}

/// A target's label from its view and frame (see [`TargetView::label`]).
pub fn label_of(view: Option<&str>, frame: Option<i32>) -> String {
    let view = view.unwrap_or("default");
    match frame {
        Some(frame) => format!("{view}@f{frame}"),
        None => view.to_owned(),
    }
}

/// The result seen as a target sees it.
#[derive(Debug, Clone, PartialEq)]
pub enum ViewRender {
    /// `view` names the view that was rendered, as scores record it: the target's label
    /// with a default view resolved (`Camera1`, `Camera1@f24`, `2`).
    Rendered { view: String, picture: ViewPicture },
    /// The view cannot be rendered for this result (a program removed the camera, the deck
    /// has fewer slides): said to the model, and the run goes on without that score.
    Unavailable(String),
}

/// What kind of failure a [`WorkerFault`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// The worker is gone or could not start; the supervisor may be restarting it (which the
    /// domain also reports to its [`WorkerWatch`]).
    Unavailable,
    /// The program ran past its time limit and was stopped; the worker was restarted.
    TimedOut(Duration),
    /// The worker refused the request or answered something unreadable; it is still there.
    Refused,
    /// Anything else (a file that could not be written, a bug).
    Other,
}

/// A domain worker's failure, as the loop needs to know it. The domain keeps the error
/// behind it as `source`.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct WorkerFault {
    pub kind: FaultKind,
    pub message: String,
    #[source]
    pub source: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

impl WorkerFault {
    pub fn new(kind: FaultKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            source: None,
        }
    }

    pub fn other(message: impl Into<String>) -> Self {
        Self::new(FaultKind::Other, message)
    }

    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Arc::new(source));
        self
    }
}

/// Where a domain reports what happened to its worker, so the loop can notice a loss after
/// any phase, whoever was talking to the worker (a program, a render, a verifier's tool),
/// rebuild the result by running its program again, and redo the phase.
#[derive(Debug, Default)]
pub struct WorkerWatch {
    record: Mutex<WatchRecord>,
}

#[derive(Debug, Default)]
struct WatchRecord {
    /// Every loss so far; a mark is a position in this count.
    losses: u64,
    last_loss: Option<String>,
    /// Restarts that failed since the worker last answered.
    failed_restarts_in_a_row: u32,
    last_failed_restart: Option<WorkerFault>,
    /// A loss nobody recovers from: the run cannot go on.
    unrecoverable: Option<WorkerFault>,
    /// Every refused reply so far; a [`RefusalMark`] is a position in this count.
    refusals: u64,
    last_refusal: Option<String>,
}

/// How many restarts may fail one after the other before the run gives up on its worker.
const RESTART_FAILURES_TOLERATED: u32 = 1;

/// A point in a [`WorkerWatch`]'s count of refused replies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RefusalMark(u64);

/// A point in a [`WorkerWatch`]'s history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mark(u64);

/// What happened to the worker since a [`Mark`].
#[derive(Debug)]
pub(crate) enum SinceMark {
    /// Nothing: every call was answered, or failed without losing the worker.
    Steady,
    /// The worker was lost (and restarted, or will be by the next call): its state is gone.
    /// The words say how.
    Lost(String),
    /// The worker is gone for good: restarts failed too often, or nobody restarts it
    /// (`nobody_restarts`).
    Gone {
        fault: WorkerFault,
        nobody_restarts: bool,
    },
}

impl WorkerWatch {
    pub fn new() -> Self {
        Self::default()
    }

    /// The worker answered a call: restarts that failed before no longer count.
    pub fn answered(&self) {
        if let Ok(mut record) = self.record.lock() {
            record.failed_restarts_in_a_row = 0;
        }
    }

    /// The worker was lost (`how`, in words); `restarted` when a new one already runs.
    pub fn lost(&self, how: impl Into<String>, restarted: bool) {
        if let Ok(mut record) = self.record.lock() {
            if restarted {
                record.failed_restarts_in_a_row = 0;
            }
            record.losses += 1;
            record.last_loss = Some(how.into());
        }
    }

    /// A new worker could not be started (after a loss, or for a call): the state is gone
    /// as surely as after a loss, and two in a row stop the run.
    pub fn restart_failed(&self, fault: WorkerFault) {
        if let Ok(mut record) = self.record.lock() {
            record.losses += 1;
            record.last_loss = Some(fault.message.clone());
            record.failed_restarts_in_a_row += 1;
            record.last_failed_restart = Some(fault);
        }
    }

    /// A reply of the worker broke the rules of what was asked (`why`, in words): it named
    /// a file viga did not name, or a size or count nobody asked for. Only a program that
    /// rewrote the worker's side makes one, so the program that ran last is to blame.
    pub fn refused(&self, why: impl Into<String>) {
        if let Ok(mut record) = self.record.lock() {
            record.refusals += 1;
            record.last_refusal = Some(why.into());
        }
    }

    pub(crate) fn refusal_mark(&self) -> RefusalMark {
        RefusalMark(self.record.lock().map(|r| r.refusals).unwrap_or_default())
    }

    /// The last refused reply since `mark`, in words.
    pub(crate) fn refused_since(&self, mark: RefusalMark) -> Option<String> {
        let record = self.record.lock().ok()?;
        (record.refusals > mark.0)
            .then(|| record.last_refusal.clone())
            .flatten()
    }

    /// The worker is lost and nothing will restart it.
    pub fn gone(&self, fault: WorkerFault) {
        if let Ok(mut record) = self.record.lock() {
            record.unrecoverable = Some(fault);
        }
    }

    pub(crate) fn mark(&self) -> Mark {
        Mark(self.record.lock().map(|r| r.losses).unwrap_or_default())
    }

    pub(crate) fn since(&self, mark: Mark) -> SinceMark {
        let Ok(record) = self.record.lock() else {
            return SinceMark::Steady;
        };
        if let Some(fault) = &record.unrecoverable {
            return SinceMark::Gone {
                fault: fault.clone(),
                nobody_restarts: true,
            };
        }
        if record.failed_restarts_in_a_row > RESTART_FAILURES_TOLERATED
            && let Some(fault) = &record.last_failed_restart
        {
            return SinceMark::Gone {
                fault: fault.clone(),
                nobody_restarts: false,
            };
        }
        match &record.last_loss {
            Some(how) if record.losses > mark.0 => SinceMark::Lost(how.clone()),
            _ => SinceMark::Steady,
        }
    }
}

/// What the generator's `refine_numbers` asks of [`Domain::refine`].
#[derive(Debug, Clone, PartialEq)]
pub struct RefineRequest {
    /// Only the numbers on these program lines (from 1) move; all of them when `None`.
    /// Numbers on a line with a `# viga: keep` comment never move.
    pub lines: Option<Vec<usize>>,
    /// Programs the search may render, the program itself included.
    pub budget: u32,
    /// When the search stops and keeps the best it has.
    pub time_limit: Duration,
    /// How long one candidate program may run (the run's program timeout).
    pub program_timeout: Duration,
}

/// What [`Domain::refine`] found.
#[derive(Debug, Clone, PartialEq)]
pub struct Refined {
    /// The program with the fitted numbers (the same text otherwise).
    pub code: String,
    /// The search's objective (mean photometric loss over the target views, plus its
    /// penalty for leaving the scene's structure) before and after.
    pub loss_before: f64,
    pub loss_after: f64,
    /// Programs rendered and scored (those turned down unrendered for breaking the scene's
    /// structure are not counted), and how many numbers were free to move.
    pub programs: u32,
    pub free: usize,
    /// The numbers it changed: line, old text, new text.
    pub changes: Vec<(usize, String, String)>,
    pub out_of_time: bool,
    /// The fitted program's render of each target view, for the model to look at.
    pub renders: Vec<viga_protocol::message::ImageData>,
}

/// What the loop builds: see the [module documentation](self).
#[async_trait]
pub trait Domain: Send + Sync {
    /// A short name: `scene`, `slides`, `page`. Recorded in the run folder, and a resumed
    /// run must be given a domain of the same name.
    fn name(&self) -> &str;

    /// How programs are written and found in an answer.
    fn program_format(&self) -> ProgramFormat;

    /// The prompts a run of this domain starts from (a prompt folder given by the user
    /// replaces any of them by file name). The default is the Blender scene's.
    fn prompts(&self) -> Prompts {
        Prompts::default()
    }

    /// Where the domain reports its worker's losses and restarts.
    fn watch(&self) -> &WorkerWatch;

    /// One line about the worker, for logs.
    fn describe(&self) -> String {
        self.name().to_owned()
    }

    /// What runs the programs, in the words the model is told about it ("Blender").
    fn worker_name(&self) -> &str {
        "the worker"
    }

    /// What containment the domain's worker runs the programs under, recorded in the run
    /// folder (`containment.json`) before the run's first event; `None` when the domain does
    /// not know (a worker viga did not start), and nothing is recorded.
    fn containment(&self) -> Option<ContainmentStatus> {
        None
    }

    /// The domain's own settings, recorded in the run folder (`args.json`'s `domain`) so a
    /// front end can build the same domain to resume the run.
    fn settings(&self) -> Value {
        Value::Null
    }

    /// What is wrong with the domain's settings for a run whose generator has its tools
    /// (`generator_tools`) or not, in words a person can act on; any problem stops the run
    /// before it starts.
    fn problems(&self, _generator_tools: bool) -> Vec<String> {
        Vec::new()
    }

    /// What the model should know about the task beyond its text and the target pictures
    /// (the cameras a scene must have, that it is animated); added to the first message of
    /// the generator and of the verifier.
    fn brief(&self, _targets: &[TargetView]) -> Option<String> {
        None
    }

    /// Checks the targets against the starting state before the first iteration (a scene's
    /// named cameras exist in its base scene). Problems stop the run as settings to fix.
    async fn check_targets(&self, _targets: &[TargetView]) -> Result<Vec<String>, WorkerFault> {
        Ok(Vec::new())
    }

    /// The run starts (or resumes) in `folder` with `targets`: the domain may keep files of
    /// its own there (a scene's generated assets) and lend its tools the target pictures.
    fn begin_run(&self, _folder: &Path, _targets: &[TargetView]) {}

    /// A new iteration begins; the domain's renders from now on belong in `renders`.
    fn begin_iteration(&self, _renders: &Path) {}

    /// Runs `program` from the domain's starting state (a Blender scene reloaded from its
    /// base), stopping it at `limit`. A program that raises is `Ok` with the error in the
    /// result; `Err` is the worker's own failure.
    async fn execute(&self, program: &str, limit: Duration)
    -> Result<ExecutionResult, WorkerFault>;

    /// Model calls the domain's tools made since the loop last asked (a camera instruction
    /// translated for `investigate`): the loop records each as a `ModelCalled` event and
    /// counts its tokens. None by default.
    fn take_model_calls(&self) -> Vec<crate::ModelCallRecord> {
        Vec::new()
    }

    /// The end of what the last program printed before it was stopped at its time limit,
    /// when the worker kept it.
    fn last_program_output(&self) -> Option<String> {
        None
    }

    /// What the model must hear about the result whatever the verifier makes of it (a scene
    /// whose program deleted every object it was initialised with), checked after the
    /// iteration's program ran: the loop tells the verifier first, keeps each note with the
    /// iteration's critique (so the next generator turn reads it) and logs it as a warning.
    async fn result_notes(&self) -> Result<Vec<String>, WorkerFault> {
        Ok(Vec::new())
    }

    /// Renders the view `target` shows at `width` x `height`, for scoring and for the
    /// verifier's first look.
    async fn render_view(
        &self,
        target: &TargetView,
        width: u32,
        height: u32,
    ) -> Result<ViewRender, WorkerFault>;

    /// What the verifier is shown of the result besides the target views (a scene's
    /// canonical views): text, images and the renders behind them.
    async fn overview(&self) -> Result<ToolOutput, ToolError>;

    /// The domain's own tools for `role` (the loop adds its own: see [`ToolRole`]).
    fn tools(&self, role: ToolRole) -> Vec<ToolSpec>;

    /// Runs one of the domain's tools.
    async fn call_tool(
        &self,
        role: ToolRole,
        name: &str,
        arguments: Value,
    ) -> Result<ToolOutput, ToolError>;

    /// Whether [`Domain::refine`] can fit a program's numbers to this run's targets; the
    /// loop then offers the generator `refine_numbers`.
    fn can_refine(&self) -> bool {
        false
    }

    /// Fits the numbers of `program` to the run's target pictures by search, with renders in
    /// the loop (no model): `Err` with a sentence for the model when it cannot (no target,
    /// the program fails). A program it runs that hangs or kills the worker is a fault.
    async fn refine(
        &self,
        _program: &str,
        _request: &RefineRequest,
    ) -> Result<Result<Refined, String>, WorkerFault> {
        Ok(Err(
            "this run cannot fit numbers to a target: it has no target picture".to_owned(),
        ))
    }

    /// Builds the result of `program` again from the starting state (stopping it at
    /// `limit`) and saves it into `folder` (`final.blend`, the deck, the page); returns the
    /// files written.
    async fn save_result(
        &self,
        program: &str,
        limit: Duration,
        folder: &Path,
    ) -> Result<Vec<PathBuf>, WorkerFault>;
}
