//! The run event stream. Every front end (CLI, report writer, Blender add-on, MCP server)
//! consumes the same [`RunEvent`]s; the run folder's `events.jsonl` is a list of
//! [`TimedEvent`]s, one per line, and a run can be rebuilt from it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::bridge::RenderEngine;
use crate::gn::{GateReport, GnRunState, StepRecord};
use crate::iteration::{
    ExecutionResult, FailureClass, Feedback, GeneratorToolCall, IterationRecord,
};
use crate::message::TokenUsage;

/// Why a run stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "reason", rename_all = "snake_case", deny_unknown_fields)]
pub enum StopReason {
    /// The run reached its end: the verifier accepted the result, the Geometry Nodes
    /// assistant is done, or the add-on agent gave its answer.
    Accepted,
    /// The iteration budget (the add-on agent's: its step budget) was spent.
    MaxIterations,
    /// The generator ended the run with `end_process` (seed 001), saying why; its last
    /// program's renders and scores were recorded, and no verifier was asked.
    GeneratorEnded { why: String },
    /// The user stopped the run.
    Cancelled,
    /// The run's time limit passed (`--time-limit`); what it made by then is kept.
    TimeLimit {
        /// The limit, in whole seconds.
        seconds: u64,
    },
    /// Something the run cannot recover from.
    Failed {
        message: String,
        /// What kind of failure it was, so a front end can say what to do; `other` in logs
        /// written before failures had kinds.
        #[serde(default)]
        kind: FailureKind,
    },
}

/// What kind of failure stopped a run or a command, in the categories a person acts on:
/// `provider_auth` (the API key is wrong or missing), `provider_unavailable` (the model
/// server is down, overloaded, rate-limited or unreachable after retries: try again later),
/// `context_overflow` (the prompt is too long for the model even after shrinking it),
/// `provider_failed` (the provider refused the request or answered with something unusable),
/// `worker_unavailable` (the worker the programs run in, Blender, LibreOffice or Chromium,
/// could not be started, or restarted twice in a row; `blender_unavailable` before),
/// `io` (a file or folder could not be read or written), `config` (settings that cannot
/// work), `cancelled`, and `other` (anything else: a bug).
// No doc comments on the variants: schemars would turn the plain string enum of the schema
// into a `oneOf`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    ProviderAuth,
    ProviderUnavailable,
    ContextOverflow,
    ProviderFailed,
    #[serde(alias = "blender_unavailable")]
    WorkerUnavailable,
    Io,
    Config,
    Cancelled,
    #[default]
    Other,
}

impl FailureKind {
    /// The exit code of a command that failed this way; docs/configuration.md lists them.
    pub fn exit_code(self) -> u8 {
        match self {
            Self::Other => 1,
            Self::Config => 2,
            Self::ProviderAuth => 3,
            Self::ProviderUnavailable => 4,
            Self::ContextOverflow => 5,
            Self::ProviderFailed => 6,
            Self::WorkerUnavailable => 7,
            Self::Io => 8,
            Self::Cancelled => 130,
        }
    }
}

impl StopReason {
    /// The exit code of a command whose run stopped for this reason (0 when it ran to its
    /// end or its budget); docs/configuration.md lists them.
    pub fn exit_code(&self) -> u8 {
        match self {
            // A spent budget, of iterations or of time, is an end the person chose.
            Self::Accepted
            | Self::MaxIterations
            | Self::GeneratorEnded { .. }
            | Self::TimeLimit { .. } => 0,
            Self::Cancelled => FailureKind::Cancelled.exit_code(),
            Self::Failed { kind, .. } => kind.exit_code(),
        }
    }

    /// Why the run stopped, in words a person reads in a report.
    pub fn in_words(&self) -> String {
        match self {
            Self::Accepted => "accepted".to_owned(),
            Self::MaxIterations => "the iteration budget was spent".to_owned(),
            Self::GeneratorEnded { why } => format!("the generator ended it: {why}"),
            Self::Cancelled => "cancelled".to_owned(),
            Self::TimeLimit { seconds } => {
                format!("stopped at its time limit ({})", seconds_in_words(*seconds))
            }
            Self::Failed { message, .. } => format!("failed: {message}"),
        }
    }

    /// A failed stop of `kind`.
    pub fn failed(message: impl Into<String>, kind: FailureKind) -> Self {
        Self::Failed {
            message: message.into(),
            kind,
        }
    }
}

/// A span of whole seconds in its largest whole unit: `2 h`, `90 min`, `45 s`.
pub fn seconds_in_words(seconds: u64) -> String {
    if seconds >= 3600 && seconds.is_multiple_of(3600) {
        format!("{} h", seconds / 3600)
    } else if seconds >= 60 && seconds.is_multiple_of(60) {
        format!("{} min", seconds / 60)
    } else {
        format!("{seconds} s")
    }
}

/// Which role a model call served.
// No doc comments on the variants: schemars would turn the plain string enum of the schema
// into a `oneOf`. `planner` is the plan call before the generator's program (seed 000 step 2);
// `agent` is the add-on agent's tool-calling turn (seed 004); `judge` is an evaluation's
// reference-free judge (BlenderBench), which rates a result and takes no part in a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ModelRole {
    Planner,
    Generator,
    Verifier,
    FastFix,
    Investigate,
    GnAssistant,
    Agent,
    Judge,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum RunEvent {
    RunStarted {
        run_id: String,
        task: String,
        protocol_version: u32,
        /// Set when the run continues an earlier one from its event log.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resumed_from_iteration: Option<u32>,
    },
    IterationStarted {
        index: u32,
    },
    ModelCalled {
        index: u32,
        role: ModelRole,
        latency_ms: f64,
        usage: TokenUsage,
    },
    PlanProduced {
        index: u32,
        plan: String,
    },
    CodeProduced {
        index: u32,
        /// 0 for the first attempt, then one more per fast retry.
        attempt: u32,
        code: String,
    },
    ExecutionFinished {
        index: u32,
        attempt: u32,
        result: ExecutionResult,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        failure: Option<FailureClass>,
    },
    FastRetry {
        index: u32,
        attempt: u32,
        failure: FailureClass,
        error: String,
    },
    WorkerRestarted {
        reason: String,
    },
    /// A reply of the worker broke the rules of what viga asked for (it named a file viga did
    /// not name, or a size, camera or count nobody asked for): nothing it named was read,
    /// the worker was replaced, and iteration `index`'s program is recorded as failed (E1)
    /// and the model is told why.
    ReplyRefused {
        index: u32,
        reason: String,
    },
    RenderProduced {
        index: u32,
        render_id: String,
        view: String,
        width: u32,
        height: u32,
        render_ms: f64,
        /// The engine that rendered it; absent in logs written before it was recorded.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        engine: Option<RenderEngine>,
    },
    /// Iteration `index`'s result seen from a target's view (its label: `Camera1`,
    /// `Camera1@f24`, `default`) compared with the target picture: BlenderGym's photometric
    /// loss, 0 for the same picture (also kept in `scores.json`).
    ViewScored {
        index: u32,
        view: String,
        photometric_loss: f64,
    },
    /// A tool call the add-on agent is about to make (its `ToolInvoked` follows when it
    /// answers): a run stopped in the middle of a command still says which it had sent.
    ToolStarted {
        index: u32,
        tool: String,
        arguments: Value,
    },
    ToolInvoked {
        index: u32,
        tool: String,
        ok: bool,
        summary: String,
        /// The call's arguments as the tool received them (the add-on agent's calls).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        arguments: Option<Value>,
        /// What came back, as the model was told it: an add-on command's own result with the
        /// scene after it, a scene tool's text, or why the call was refused.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
    },
    /// The generator called one of its tools (runs that offer it tools).
    GeneratorToolCalled {
        index: u32,
        call: GeneratorToolCall,
    },
    /// The generator's `refine_numbers` fitted the numbers of its program to the targets:
    /// the search's objective before and after, what it cost, and how many numbers moved.
    NumbersRefined {
        index: u32,
        loss_before: f64,
        loss_after: f64,
        programs: u32,
        changed: u32,
        seconds: f64,
        out_of_time: bool,
    },
    FeedbackProduced {
        index: u32,
        feedback: Feedback,
    },
    GatesChecked {
        index: u32,
        report: GateReport,
    },
    /// The Geometry Nodes assistant moved from one state to another.
    GnStateChanged {
        round: u32,
        from: GnRunState,
        to: GnRunState,
    },
    /// The Geometry Nodes assistant finished applying a step.
    GnStepFinished {
        record: StepRecord,
    },
    IterationFinished {
        record: Box<IterationRecord>,
    },
    Warning {
        message: String,
    },
    RunFinished {
        stop: StopReason,
        iterations: u32,
    },
}

/// A [`RunEvent`] with its position in the stream and wall-clock time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TimedEvent {
    pub seq: u64,
    /// Milliseconds since the Unix epoch.
    pub unix_ms: u64,
    #[serde(flatten)]
    pub event: RunEvent,
}

crate::validate::plain_protocol_types!(RunEvent, TimedEvent);

#[cfg(test)]
mod tests {
    #[test]
    fn stops_read_in_words_with_limits_in_their_largest_whole_unit() {
        assert_eq!(seconds_in_words(7200), "2 h");
        assert_eq!(seconds_in_words(5400), "90 min");
        assert_eq!(seconds_in_words(45), "45 s");
        assert_eq!(
            StopReason::TimeLimit { seconds: 1800 }.in_words(),
            "stopped at its time limit (30 min)"
        );
        let failed = StopReason::failed("no key", FailureKind::ProviderAuth);
        assert_eq!(failed.in_words(), "failed: no key");
    }

    use super::*;

    #[test]
    fn every_kind_has_its_own_exit_code() {
        let kinds = [
            FailureKind::Other,
            FailureKind::Config,
            FailureKind::ProviderAuth,
            FailureKind::ProviderUnavailable,
            FailureKind::ContextOverflow,
            FailureKind::ProviderFailed,
            FailureKind::WorkerUnavailable,
            FailureKind::Io,
            FailureKind::Cancelled,
        ];
        let codes: std::collections::BTreeSet<u8> =
            kinds.iter().map(|kind| kind.exit_code()).collect();
        assert_eq!(codes.len(), kinds.len(), "one code per kind");
        assert!(!codes.contains(&0));
        assert_eq!(StopReason::MaxIterations.exit_code(), 0);
        assert_eq!(
            StopReason::failed("down", FailureKind::ProviderUnavailable).exit_code(),
            4
        );
    }

    /// Run folders written before the kind had its neutral name still read.
    #[test]
    fn a_lost_worker_reads_under_its_old_name_and_writes_under_its_new() {
        let old: FailureKind = serde_json::from_str("\"blender_unavailable\"").unwrap();
        assert_eq!(old, FailureKind::WorkerUnavailable);
        assert_eq!(
            serde_json::to_string(&FailureKind::WorkerUnavailable).unwrap(),
            "\"worker_unavailable\""
        );
    }
}
