//! Running the generator's programs: each from the domain's starting state (a scene's
//! freshly reloaded base), within the run's program timeout, with seed 002's fast retry for
//! what the model can fix (an exception, no code, a program that never finishes or that
//! takes its worker down with it).

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use viga_protocol::event::{ModelRole, RunEvent};
use viga_protocol::iteration::{ExecutionError, ExecutionResult, FailureClass, GeneratorToolCall};
use viga_protocol::message::{ChatMessage, ContentPart};
use viga_provider::{FinishReason, ModelRequest, ModelResponse};
use viga_skills::generator::describe_execution;

use crate::CoreError;
use crate::domain::{FaultKind, SinceMark, WorkerFault};
use crate::excerpt::{PROMPT_OUTPUT_BYTES, execution_for_prompt};
use crate::prompts::fill;
use crate::recover::gone;
use crate::run::{Run, Tally};

/// `error_type` of a program stopped at the program timeout.
pub const PROGRAM_TIMEOUT_ERROR: &str = "ProgramTimeout";
/// `error_type` of a program during which its worker (Blender) died twice in a row.
pub const BLENDER_CRASH_ERROR: &str = "BlenderCrashed";
/// The error type of a program after which a reply of the worker was refused (it named a
/// file viga did not name, a size or count nobody asked for).
pub const REPLY_REFUSED_ERROR: &str = "ReplyRefused";

/// `error_type` of a program the containment launcher stopped for going past a limit it
/// watches (the scratch limit; the memory limit of a cgroup).
pub const LIMIT_ERROR: &str = "LimitExceeded";

/// The program an iteration kept (the last attempt's) and how it went.
pub(crate) struct Attempt {
    pub code: Option<String>,
    pub result: ExecutionResult,
    pub failure: Option<FailureClass>,
    /// Whether the program left a result to look at: it ran to its end or to an exception.
    /// No code, a timeout or a crash leave none (the worker was restarted).
    pub left_a_scene: bool,
    pub retries: u32,
    pub retry_errors: Vec<String>,
    /// Why the generator called `end_process` (it asks to stop; the verifier decides).
    pub end_request: Option<String>,
    /// The generator's tool calls, when it had tools.
    pub tool_calls: Vec<GeneratorToolCall>,
}

enum Executed {
    Ran(ExecutionResult),
    /// Stopped at the program timeout; the worker was restarted. The end of what it
    /// printed, when the worker kept it.
    TimedOut(Duration, Option<String>),
    /// The worker died twice in a row while running it; it was restarted each time.
    Crashed(String),
    /// It went past a limit: the launcher stopped it, or Blender ran out of memory under the
    /// memory limit (the sentence to tell); the worker was restarted.
    PastLimit(String),
}

/// One attempt's program run (or the lack of one) and how it went, in the words the
/// generator is told (the fast fix's error, or `execute_code`'s result).
pub(crate) struct Tried {
    pub result: ExecutionResult,
    pub failure: Option<FailureClass>,
    pub error_message: String,
    pub left_a_scene: bool,
}

impl Run {
    /// Runs the generator's program; on a failure the model can fix, asks for a fix with
    /// seed 002's prompt, at most `max_fast_retries` times. Retries are not iterations: only
    /// the last attempt is kept.
    pub(crate) async fn attempt_with_fast_retry(
        &mut self,
        index: u32,
        conversation: &mut Vec<ChatMessage>,
        mut answer: ModelResponse,
        thoughts: &mut String,
        tally: &mut Tally,
    ) -> Result<Attempt, CoreError> {
        let mut retry_errors = Vec::new();
        let mut attempt_number = 0;
        loop {
            let cut_off = answer.finish_reason == FinishReason::Length
                && !self.format.holds_a_whole_program(&answer.text);
            // A program cut off at the output limit is not run: it is not the one the model
            // meant, and its error would send the model after the wrong problem.
            let code = (!cut_off)
                .then(|| self.format.extract(&answer.text))
                .flatten();
            let tried = if cut_off {
                self.cut_off_program(&answer)
            } else {
                self.try_program(index, attempt_number, code.as_deref(), tally)
                    .await?
            };
            let retryable = tried.failure.is_some_and(FailureClass::is_fast_retryable);
            if !retryable || attempt_number >= self.config.max_fast_retries {
                return Ok(Attempt {
                    code,
                    result: tried.result,
                    failure: tried.failure,
                    left_a_scene: tried.left_a_scene,
                    retries: attempt_number,
                    retry_errors,
                    end_request: None,
                    tool_calls: Vec::new(),
                });
            }
            let failure = tried.failure.unwrap_or(FailureClass::E1);
            let summary = first_line(&tried.error_message);
            retry_errors.push(format!("{failure}: {summary}"));
            self.emit(RunEvent::FastRetry {
                index,
                attempt: attempt_number + 1,
                failure,
                error: summary,
            })?;
            let asked = if cut_off {
                tried.error_message.clone()
            } else {
                fill(
                    &self.prompts.fast_fix,
                    &[("error_message", tried.error_message.clone())],
                )
            };
            answer = self
                .ask_for_fix(index, conversation, &answer, asked, tally)
                .await?;
            thoughts.push_str(&format!(
                "\n## Fast retry {}\n\n{}\n",
                attempt_number + 1,
                answer.text
            ));
            attempt_number += 1;
        }
    }

    /// The attempt of an answer cut off at the output limit inside its program: a format
    /// failure (E2) whose message tells the model so and asks for a shorter program.
    fn cut_off_program(&self, answer: &ModelResponse) -> Tried {
        Tried {
            result: ExecutionResult::default(),
            failure: Some(FailureClass::E2),
            error_message: crate::cut_off::told(
                self.config.generator_max_tokens,
                &answer.text,
                &shorter_program(&self.format.noun, "in one fenced block"),
            ),
            left_a_scene: false,
        }
    }

    /// Runs one attempt's program (an answer without one is E2) and announces it.
    pub(crate) async fn try_program(
        &mut self,
        index: u32,
        attempt: u32,
        code: Option<&str>,
        tally: &mut Tally,
    ) -> Result<Tried, CoreError> {
        let tried = match code {
            None => Tried {
                result: ExecutionResult::default(),
                failure: Some(FailureClass::E2),
                error_message: format!(
                    "Your answer contained no fenced ```{} code block.",
                    self.format.language
                ),
                left_a_scene: false,
            },
            Some(code) => {
                self.emit(RunEvent::CodeProduced {
                    index,
                    attempt,
                    code: code.to_owned(),
                })?;
                match self.execute(code, tally).await? {
                    Executed::Ran(result) => Tried {
                        failure: (!result.succeeded()).then_some(FailureClass::E1),
                        error_message: describe_execution(&execution_for_prompt(&result)),
                        result,
                        left_a_scene: true,
                    },
                    Executed::TimedOut(limit, last_output) => {
                        timed_out(self.domain.worker_name(), limit, last_output)
                    }
                    Executed::Crashed(loss) => stopped(
                        BLENDER_CRASH_ERROR,
                        crashed_message(self.domain.worker_name(), &loss),
                        Duration::ZERO,
                    ),
                    Executed::PastLimit(sentence) => stopped(
                        LIMIT_ERROR,
                        past_limit_message(self.domain.worker_name(), &sentence),
                        Duration::ZERO,
                    ),
                }
            }
        };
        self.emit(RunEvent::ExecutionFinished {
            index,
            attempt,
            result: tried.result.clone(),
            failure: tried.failure,
        })?;
        Ok(tried)
    }

    /// Seed 002's fast fix: the failed answer and its error go back into the same
    /// conversation, and the generator answers again.
    async fn ask_for_fix(
        &mut self,
        index: u32,
        conversation: &mut Vec<ChatMessage>,
        failed: &ModelResponse,
        asked: String,
        tally: &mut Tally,
    ) -> Result<ModelResponse, CoreError> {
        let generation_started = Instant::now();
        conversation.push(ChatMessage::assistant(vec![ContentPart::text(
            crate::cut_off::kept(failed),
        )]));
        conversation.push(ChatMessage::user_text(asked));
        let request = ModelRequest::new(self.prompts.generator.clone(), conversation.clone());
        let answer = self
            .call_model(index, ModelRole::FastFix, request, tally)
            .await?;
        tally.timings.generation_ms += generation_started.elapsed().as_secs_f64() * 1000.0;
        Ok(answer)
    }

    /// Executes a program from the starting state, within the program timeout. A program
    /// still running then is stopped (the supervisor restarts the worker). The worker lost
    /// for another reason is restarted by the supervisor and the same program runs once more
    /// (an infrastructure hiccup is not the program's fault); lost again, the program is
    /// taken to be what kills it. A worker that cannot be restarted twice in a row stops the
    /// run.
    async fn execute(&mut self, code: &str, tally: &mut Tally) -> Result<Executed, CoreError> {
        let mut lost_once = false;
        loop {
            let mark = self.domain.watch().mark();
            let started = Instant::now();
            let outcome = self.run_from_start(code).await?;
            tally.timings.execution_ms += started.elapsed().as_secs_f64() * 1000.0;
            let fault = match outcome {
                Ok(result) => {
                    self.scene_program = Some(code.to_owned());
                    return Ok(Executed::Ran(result));
                }
                Err(fault) => fault,
            };
            if let FaultKind::TimedOut(limit) = fault.kind {
                self.emit(RunEvent::WorkerRestarted {
                    reason: format!("{fault} (the program ran past the program timeout)"),
                })?;
                return Ok(Executed::TimedOut(limit, self.domain.last_program_output()));
            }
            match self.domain.watch().since(mark) {
                SinceMark::Lost(loss) => {
                    self.emit(RunEvent::WorkerRestarted {
                        reason: loss.clone(),
                    })?;
                    // The program's own doing, said by the launcher: no second run.
                    let containment = self.domain.containment();
                    if let Some(sentence) =
                        limit_sentence(&loss).or_else(|| out_of_memory(&loss, containment.as_ref()))
                    {
                        return Ok(Executed::PastLimit(sentence));
                    }
                    if lost_once {
                        return Ok(Executed::Crashed(loss));
                    }
                    lost_once = true;
                }
                SinceMark::Gone {
                    fault,
                    nobody_restarts,
                } => return Err(gone(fault, nobody_restarts)),
                SinceMark::Steady => {
                    let worker = self.domain.worker_name().to_owned();
                    return Err(CoreError::worker(
                        format!("{worker} could not run the program"),
                        fault,
                    ));
                }
            }
        }
    }

    /// Runs `code` from the domain's starting state within the program timeout; a cancel
    /// abandons it.
    pub(crate) async fn run_from_start(
        &self,
        code: &str,
    ) -> Result<Result<ExecutionResult, WorkerFault>, CoreError> {
        let timeout = self.config.program_timeout;
        let domain = Arc::clone(&self.domain);
        self.cancellable(domain.execute(code, timeout)).await
    }
}

/// A program the loop had to stop: E1 (the model can fix it), with no result left to look at.
fn stopped(error_type: &str, error_message: String, duration: Duration) -> Tried {
    Tried {
        result: ExecutionResult {
            error: Some(ExecutionError {
                error_type: error_type.to_owned(),
                message: first_line(&error_message),
                traceback: String::new(),
                line: None,
            }),
            duration_ms: duration.as_secs_f64() * 1000.0,
            ..ExecutionResult::default()
        },
        failure: Some(FailureClass::E1),
        error_message,
        left_a_scene: false,
    }
}

/// A program stopped at `limit`: E1, told with the end of what it printed when the
/// transport kept it (the last 64 KiB of stdout and stderr as they interleaved, recorded as
/// the attempt's stdout in the run folder).
fn timed_out(worker: &str, limit: Duration, last_output: Option<String>) -> Tried {
    let mut tried = stopped(
        PROGRAM_TIMEOUT_ERROR,
        timed_out_message(worker, limit),
        limit,
    );
    match last_output {
        Some(output) if output.is_empty() => tried.error_message.push_str("\nIt printed nothing."),
        Some(output) => {
            let _ = write!(
                tried.error_message,
                "\nThe end of what it printed before it was stopped:\n{}",
                tail(&output, PROMPT_OUTPUT_BYTES)
            );
            tried.result.stdout = output;
        }
        // This worker keeps no record of it (a Blender viga does not run itself).
        None => {}
    }
    tried
}

fn timed_out_message(worker: &str, limit: Duration) -> String {
    format!(
        "The program did not finish within {} s and was stopped ({worker} was restarted).\nLook \
         for a loop that never ends, or work that grows too fast (subdivision levels, array \
         counts, particle numbers, nested loops over vertices), and write a program that \
         finishes well within {} s.",
        seconds(limit),
        seconds(limit)
    )
}

/// The last `budget` bytes of `text` (at a character boundary), with a note when cut.
fn tail(text: &str, budget: usize) -> String {
    if text.len() <= budget {
        return text.to_owned();
    }
    let mut start = text.len() - budget;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!(
        "[... {} earlier bytes not shown ...]\n{}",
        start,
        &text[start..]
    )
}

/// The launcher's sentence about the limit it stopped the program for, from the worker's
/// loss (its last error output holds the launcher's [`viga_sandbox::LIMIT_MARKER`] line).
fn limit_sentence(loss: &str) -> Option<String> {
    let line = loss
        .lines()
        .rev()
        .find_map(|line| line.split_once(viga_sandbox::LIMIT_MARKER))?
        .1;
    // The limit's name, then the sentence.
    let (_, sentence) = line.split_once(' ')?;
    Some(sentence.trim().to_owned())
}

/// Blender's allocator says this on its error output when an allocation fails, which under
/// a memory limit of `RLIMIT_DATA` crashes Blender rather than raising `MemoryError`.
const BLENDER_OUT_OF_MEMORY: [&str; 2] = ["Malloc returns null", "Memory allocation failed"];

/// The sentence for a worker lost because Blender ran out of memory under a memory limit
/// that holds: the program's doing, told at once like a limit the launcher stopped it for.
fn out_of_memory(
    loss: &str,
    containment: Option<&viga_sandbox::ContainmentStatus>,
) -> Option<String> {
    let memory = &containment?.limits.memory;
    let value = memory.value.filter(|_| memory.active)?;
    BLENDER_OUT_OF_MEMORY
        .iter()
        .any(|said| loss.contains(said))
        .then(|| {
            format!(
                "the program hit the memory limit ({}): an allocation failed and Blender stopped",
                viga_sandbox::Limit::Memory.show(value)
            )
        })
}

fn past_limit_message(worker: &str, sentence: &str) -> String {
    let mut chars = sentence.chars();
    let sentence: String = chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default();
    format!(
        "{sentence} ({worker} was restarted with an empty scratch folder).\nUse less: fewer or \
         smaller files, renders and caches, smaller meshes and textures."
    )
}

fn crashed_message(worker: &str, loss: &str) -> String {
    format!(
        "{worker} died twice in a row while running the program ({loss}).\nThe program probably \
         makes {worker} crash or run out of memory: avoid what it does last before dying \
         (huge meshes or textures, deleting data still in use, os._exit, infinite recursion)."
    )
}

/// Whole seconds when the limit is whole, else with one decimal.
fn seconds(limit: Duration) -> String {
    let secs = limit.as_secs_f64();
    if secs.fract() == 0.0 {
        format!("{secs:.0}")
    } else {
        format!("{secs:.1}")
    }
}

pub(crate) fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    line.chars().take(300).collect()
}

/// What a generator whose program was cut off at its output limit is asked for instead:
/// `noun` (the whole program), written `how` (in one fenced block, run with execute_code),
/// shorter than the last.
pub(crate) fn shorter_program(noun: &str, how: &str) -> String {
    format!(
        "{noun} {how}, shorter than the last: the essential parts first, loops instead of repeated lines, no comments; details can come in later iterations"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stopped_program_says_why_in_its_first_line() {
        let tried = stopped(
            PROGRAM_TIMEOUT_ERROR,
            timed_out_message("Blender", Duration::from_secs(5)),
            Duration::from_secs(5),
        );
        let error = tried.result.error.unwrap();
        assert_eq!(error.error_type, PROGRAM_TIMEOUT_ERROR);
        assert!(
            error
                .message
                .starts_with("The program did not finish within 5 s")
        );
        assert_eq!(tried.failure, Some(FailureClass::E1));
        assert!(!tried.left_a_scene);
        assert_eq!(seconds(Duration::from_millis(2500)), "2.5");
    }

    #[test]
    fn a_loss_past_a_limit_is_told_in_the_launchers_words() {
        let loss = "Blender exited (signal: 9 (SIGKILL)); last error output:\nsome Blender line\nVIGA_LIMIT scratch the program wrote more than the scratch limit (64 MiB) into its scratch folder and was stopped";
        let sentence = limit_sentence(loss).unwrap_or_default();
        assert_eq!(
            sentence,
            "the program wrote more than the scratch limit (64 MiB) into its scratch folder and was stopped"
        );
        assert_eq!(limit_sentence("Blender exited (signal: 9 (SIGKILL))"), None);
        let crashed = "Blender exited (signal: 11 (SIGSEGV)); last error output:\nMalloc returns null: len=8184 in mempool chunk";
        let mut status = viga_sandbox::ContainmentStatus::off();
        assert_eq!(out_of_memory(crashed, Some(&status)), None);
        status.limits.memory =
            viga_sandbox::LimitGuard::held(viga_sandbox::Enforcement::Rlimit, 1 << 30, "rlimit");
        let said = out_of_memory(crashed, Some(&status)).unwrap_or_default();
        assert!(
            said.starts_with("the program hit the memory limit (1 GiB)"),
            "{said}"
        );
        assert_eq!(
            out_of_memory("Blender exited (signal: 11)", Some(&status)),
            None
        );
        let tried = stopped(
            LIMIT_ERROR,
            past_limit_message("Blender", &sentence),
            Duration::ZERO,
        );
        let message = tried.result.error.map(|error| error.message);
        let message = message.unwrap_or_default();
        assert!(
            message.starts_with("The program wrote more than the scratch limit (64 MiB)"),
            "{message}"
        );
        assert_eq!(tried.failure, Some(FailureClass::E1));
    }
}
