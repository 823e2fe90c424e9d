//! Plans, programs, execution results, verifier feedback and the iteration record that the
//! memory keeps.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::message::TokenUsage;

/// Why an attempt failed (seed 002). Only E1 and E2 enter the fast retry loop; E0 goes to the
/// worker supervisor; E3 is what the verifier is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum FailureClass {
    /// Infrastructure: Blender crashed, hung, or could not be reached.
    E0,
    /// Execution: the program raised inside Blender.
    E1,
    /// Format: the model's answer held no usable code.
    E2,
    /// Semantic: the program ran but the scene is wrong.
    E3,
}

impl FailureClass {
    /// Whether the fast retry loop should ask the generator for a fix.
    pub fn is_fast_retryable(self) -> bool {
        matches!(self, Self::E1 | Self::E2)
    }

    pub fn describe(self) -> &'static str {
        match self {
            Self::E0 => "infrastructure failure (Blender crashed, hung or was unreachable)",
            Self::E1 => "execution failure (the program raised an exception or did not finish)",
            Self::E2 => "format failure (no whole program came back to run)",
            Self::E3 => "semantic failure (the program ran but the scene does not match)",
        }
    }
}

impl std::fmt::Display for FailureClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self:?}")
    }
}

/// An exception raised by a program inside Blender.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecutionError {
    /// The Python exception type, for example `NameError`.
    pub error_type: String,
    pub message: String,
    pub traceback: String,
    /// The 1-based line in the submitted program where the exception surfaced, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
}

impl std::fmt::Display for ExecutionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(line) => write!(f, "{} at line {line}: {}", self.error_type, self.message),
            None => write!(f, "{}: {}", self.error_type, self.message),
        }
    }
}

/// What running a program produced.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecutionResult {
    pub stdout: String,
    pub stderr: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ExecutionError>,
    /// Wall time Blender spent running the program, in milliseconds.
    pub duration_ms: f64,
}

impl ExecutionResult {
    pub fn succeeded(&self) -> bool {
        self.error.is_none()
    }
}

/// The verifier's critique of one iteration.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Feedback {
    /// Concrete mismatches between the render and the target.
    pub visual_differences: Vec<String>,
    /// Corrections the generator should make next.
    pub suggestions: Vec<String>,
    /// True when the verifier judges the scene to match the target.
    pub accepted: bool,
}

/// Where the time of one iteration went, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Timings {
    pub generation_ms: f64,
    pub execution_ms: f64,
    pub verification_ms: f64,
    pub render_ms: f64,
    pub total_ms: f64,
}

/// One call the generator made to one of its tools (seed 001) while it wrote an iteration's
/// program, when the run offers it tools: what it asked for and what came of it, each in a
/// line or two (the programs themselves are in `CodeProduced` and `ExecutionFinished`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GeneratorToolCall {
    /// `get_scene_info`, `get_better_assets`, `execute_code`, `make_plan` or `end_process`
    /// (or whatever unknown name the model used).
    pub tool: String,
    /// The arguments, shortened: a program's size and first line, other arguments as JSON.
    pub arguments: String,
    /// Whether the call did what it was asked: a program that raised, an unknown tool or
    /// arguments that do not fit its schema are `false`.
    pub ok: bool,
    /// What the model was told, shortened.
    pub outcome: String,
}

/// One Generator → Execute → Verifier cycle, as the memory stores it. Fast retries are not
/// iterations: only the final attempt's code is kept, with `retry_count` and the errors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IterationRecord {
    /// 1-based.
    pub index: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<String>,
    /// The whole scene program that was executed (or last attempted).
    pub code: String,
    pub execution: ExecutionResult,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<Feedback>,
    /// How many fast retries this iteration used (0 when the first attempt ran).
    pub retry_count: u32,
    /// Set when the iteration ended in a failure of this class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<FailureClass>,
    /// One-line summaries of the errors the fast retries fixed, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retry_errors: Vec<String>,
    /// The generator's tool calls, in order, when the run offered it tools.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub generator_tool_calls: Vec<GeneratorToolCall>,
    /// Ids of the renders made while verifying (files under `renders/<index>/`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub render_ids: Vec<String>,
    pub timings: Timings,
    pub usage: TokenUsage,
}

crate::validate::plain_protocol_types!(ExecutionResult, Feedback, IterationRecord);
