//! The generator with tools (seed 001): instead of one fenced program per answer, the model
//! calls `make_plan`, `execute_code`, `undo_last_step`, `end_process` and the domain's own
//! tools (a scene's `get_scene_info`, `get_better_assets`) for up to `generator_max_turns`
//! turns. `execute_code` runs the whole program the way the fenced path does (from the
//! starting state, within the program timeout, a lost worker handled the same, output cut
//! for the prompt) and its result goes back as the tool's result, so the model can look, fix
//! and run again within the iteration.
//!
//! Fast retry keeps its meaning: at most `1 + max_fast_retries` programs run per iteration;
//! a failure handed back to the model and answered with another program is a fast retry
//! (`FastRetry`, `retry_errors`); the last program that ran is the iteration's program, the
//! one the verifier judges. No program at all is E2. `end_process` is a request to stop that
//! the verifier is told about; only its acceptance stops the run.

use std::fmt::Write as _;
use std::time::Instant;

use serde_json::Value;
use viga_protocol::event::{ModelRole, RunEvent};
use viga_protocol::iteration::{ExecutionResult, FailureClass, GeneratorToolCall};
use viga_protocol::message::{ChatMessage, ContentPart, ImageData, ToolCall, ToolResult};
use viga_provider::{FinishReason, ModelRequest, ModelResponse};
use viga_skills::registry::parse_arguments;
use viga_skills::{Control, ToolError};

use crate::CoreError;
use crate::domain::RefineRequest;
use crate::offered::{
    EXECUTE_CODE, OfferedTools, ProgramArgs, REFINE_NUMBERS, RefineArgs, UNDO_LAST_STEP,
};
use crate::program::{Attempt, Tried, first_line};
use crate::prompts::fill;
use crate::recover::PhaseEnd;
use crate::run::{Run, Tally};
use crate::verify::invoke;
use crate::written_calls::{not_an_answer, unreadable_call, with_tool_call_from_text};

/// How long one `refine_numbers` call may search; it keeps the best found by then.
const REFINE_TIME_LIMIT: std::time::Duration = std::time::Duration::from_secs(120);

/// The most changed numbers `refine_numbers` lists for the model (the program follows).
const REFINE_LISTED_CHANGES: usize = 40;

/// The longest argument summary and outcome a recorded tool call keeps, in characters.
const CALL_SUMMARY_CHARS: usize = 200;

/// Told when the model answers without a tool call before any program ran.
fn no_program_yet(noun: &str) -> String {
    format!(
        "No program has run in this iteration yet, so there is nothing to keep. Write {noun} and run it with execute_code."
    )
}

/// What one iteration's generator turns have produced so far.
#[derive(Default)]
struct Session {
    plan: Option<String>,
    /// The last program that ran (or was stopped) and how it went.
    last: Option<(String, Tried)>,
    /// Programs run so far in the iteration (the next one's attempt number).
    runs: u32,
    /// A failure the model was told about and has not answered with another program yet.
    pending: Option<(FailureClass, String)>,
    retry_errors: Vec<String>,
    end_request: Option<String>,
    calls: Vec<GeneratorToolCall>,
    /// Whether the worker holds the result the model should see: the last program's, and
    /// not changed by anyone since. Until then the domain's tools first rebuild it.
    scene_current: bool,
    /// Programs that ran without error, oldest first, the run's earlier ones included:
    /// `undo_last_step` goes back along it.
    good_programs: Vec<String>,
    thoughts: String,
}

impl Session {
    /// The iteration's program: the last that ran; none is E2.
    fn into_attempt(self) -> (Option<String>, Attempt) {
        let retries = self.retry_errors.len() as u32;
        let attempt = match self.last {
            Some((code, tried)) => Attempt {
                code: Some(code),
                result: tried.result,
                failure: tried.failure,
                left_a_scene: tried.left_a_scene,
                retries,
                retry_errors: self.retry_errors,
                end_request: self.end_request,
                tool_calls: self.calls,
            },
            None => Attempt {
                code: None,
                result: ExecutionResult::default(),
                failure: Some(FailureClass::E2),
                left_a_scene: false,
                retries,
                retry_errors: self.retry_errors,
                end_request: self.end_request,
                tool_calls: self.calls,
            },
        };
        (self.plan, attempt)
    }
}

/// What a turn's answer leads to.
enum Next {
    /// Another turn, with this message from the loop after the model's.
    Continue(ChatMessage),
    Done,
}

/// How one program run requested by the model went.
enum Ran {
    Tried {
        text: String,
        ok: bool,
    },
    /// Not run: the iteration's programs are used up.
    NoRunsLeft(String),
}

impl Run {
    /// The generator's half of an iteration when it has tools: its plan (from `make_plan`)
    /// and the program kept. The thoughts and the program are written to the run folder.
    pub(crate) async fn generate_with_tools(
        &mut self,
        index: u32,
        tally: &mut Tally,
    ) -> Result<(Option<String>, Attempt), CoreError> {
        let tools = OfferedTools::generator(
            self.domain.as_ref(),
            &self.format,
            self.config.plan_each_iteration,
        )?;
        let noun = self.format.noun.clone();
        let first_step = if self.config.plan_each_iteration {
            format!("Start with make_plan, then write {noun} and run it with execute_code.")
        } else {
            format!("Write {noun} and run it with execute_code.")
        };
        let mut messages = vec![
            self.anchor_message(),
            ChatMessage::user_text(format!(
                "{}\n\nIteration {index}. {first_step}",
                self.memory_text()
            )),
        ];
        let mut session = Session {
            thoughts: format!("# Iteration {index}\n"),
            good_programs: self.history.clone(),
            ..Session::default()
        };
        let turns = self.config.generator_max_turns;
        let mut finished = false;
        for turn in 0..turns {
            let mut request =
                ModelRequest::new(self.prompts.generator_tools.clone(), messages.clone());
            request.tools = tools.specs();
            let asked = Instant::now();
            let response = self
                .call_model(index, ModelRole::Generator, request, tally)
                .await?;
            tally.timings.generation_ms += asked.elapsed().as_secs_f64() * 1000.0;
            if !response.text.trim().is_empty() {
                let _ = write!(session.thoughts, "\n{}\n", response.text.trim());
            }
            // A call written as JSON text (local models do) is read as the call.
            let response =
                with_tool_call_from_text(response, |name| tools.offers(name), index, turn);
            let next = if response.tool_calls.is_empty() {
                self.final_answer(index, &tools, &mut session, &response, tally)
                    .await?
            } else {
                self.use_generator_tools(index, &tools, &mut session, &response, tally)
                    .await?
            };
            match next {
                Next::Done => {
                    finished = true;
                    break;
                }
                Next::Continue(message) => {
                    messages.push(assistant_turn(&response));
                    messages.push(message);
                }
            }
        }
        if !finished {
            let kept = if session.last.is_some() {
                "the last program it ran is kept"
            } else {
                "no program ran"
            };
            self.emit(RunEvent::Warning {
                message: format!(
                    "iteration {index}: the generator did not finish within {turns} turns; {kept}"
                ),
            })?;
        }
        self.close_iteration(index, session, tally).await
    }

    /// Ends the iteration's generator turns: reruns the last good program when the model
    /// asked to stop without a new one, writes the thoughts and the program kept, and
    /// answers the plan and the attempt.
    async fn close_iteration(
        &mut self,
        index: u32,
        mut session: Session,
        tally: &mut Tally,
    ) -> Result<(Option<String>, Attempt), CoreError> {
        if session.last.is_none()
            && session.end_request.is_some()
            && let Some(kept) = self.final_code.clone()
        {
            // Asked to stop without a new program: the run's last good program stands, run
            // again so the verifier sees its scene.
            let _ = write!(
                session.thoughts,
                "\n(end_process without a new program: the last good program runs again)\n"
            );
            self.run_program(index, &mut session, &kept, tally).await?;
        }
        self.folder
            .write_generator_thought(index, &session.thoughts)?;
        self.history = std::mem::take(&mut session.good_programs);
        let (plan, attempt) = session.into_attempt();
        if let Some(code) = &attempt.code {
            self.folder.write_code(index, &self.format.language, code)?;
        }
        Ok((plan, attempt))
    }

    /// An answer without a tool call. A fenced program in it runs like `execute_code`; when
    /// it fails and turns are left, the error goes back as seed 002's fast fix. An answer cut
    /// off at the output limit, or one that tried to write a call nobody could read, is told
    /// what went wrong. Without a program, the last one that ran stands; with none at all the
    /// model is reminded (E2).
    async fn final_answer(
        &mut self,
        index: u32,
        tools: &OfferedTools,
        session: &mut Session,
        response: &ModelResponse,
        tally: &mut Tally,
    ) -> Result<Next, CoreError> {
        if let Some(told) = self.what_went_wrong(tools, response) {
            // A cut-off reply was announced where the model was called.
            if response.finish_reason != FinishReason::Length {
                self.emit(RunEvent::Warning {
                    message: format!(
                        "iteration {index}: the generator: {}",
                        crate::written_calls::first_sentence(&told)
                    ),
                })?;
            }
            session.pending = Some((FailureClass::E2, told.clone()));
            return Ok(Next::Continue(ChatMessage::user_text(told)));
        }
        let Some(code) = self.format.extract(&response.text) else {
            if session.last.is_some() {
                return Ok(Next::Done);
            }
            let reminder = no_program_yet(&self.format.noun);
            session.pending = Some((FailureClass::E2, reminder.clone()));
            return Ok(Next::Continue(ChatMessage::user_text(reminder)));
        };
        let already_ran = session
            .last
            .as_ref()
            .is_some_and(|(last, tried)| *last == code && tried.failure.is_none());
        if already_ran {
            return Ok(Next::Done);
        }
        match self.run_program(index, session, &code, tally).await? {
            Ran::Tried { ok: true, .. } | Ran::NoRunsLeft(_) => Ok(Next::Done),
            Ran::Tried { text, ok: false } => Ok(Next::Continue(ChatMessage::user_text(fill(
                &self.prompts.fast_fix,
                &[("error_message", text)],
            )))),
        }
    }

    /// What the model is told about an answer without a call that went wrong: cut off at
    /// the output limit inside its program, or a call written so that nobody could read it.
    fn what_went_wrong(&self, tools: &OfferedTools, response: &ModelResponse) -> Option<String> {
        // A whole program came back: it was not cut off where it matters.
        if self.format.holds_a_whole_program(&response.text) {
            return unreadable_call(&response.text, &tools.specs());
        }
        not_an_answer(
            response,
            self.config.generator_max_tokens,
            &crate::program::shorter_program(&self.format.noun, "run with execute_code"),
            &tools.specs(),
        )
    }

    /// Runs the tool calls of one answer in order; the results go back as the next message,
    /// unless the model called `end_process`.
    async fn use_generator_tools(
        &mut self,
        index: u32,
        tools: &OfferedTools,
        session: &mut Session,
        response: &ModelResponse,
        tally: &mut Tally,
    ) -> Result<Next, CoreError> {
        let mut results = Vec::new();
        for call in &response.tool_calls {
            let (text, ok, images) = if call.name == REFINE_NUMBERS {
                self.refine_numbers(index, session, call, tally).await?
            } else {
                let (text, ok) = self
                    .generator_call(index, tools, session, call, tally)
                    .await?;
                (text, ok, Vec::new())
            };
            let recorded = GeneratorToolCall {
                tool: call.name.clone(),
                arguments: arguments_summary(call),
                ok,
                outcome: shortened(first_line(&text).as_str()),
            };
            let _ = writeln!(
                session.thoughts,
                "\n- tool `{}` {} -> {}{}",
                recorded.tool,
                recorded.arguments,
                if ok { "" } else { "(failed) " },
                recorded.outcome
            );
            self.emit(RunEvent::GeneratorToolCalled {
                index,
                call: recorded.clone(),
            })?;
            session.calls.push(recorded);
            results.push(ContentPart::ToolResult(ToolResult {
                call_id: call.id.clone(),
                text,
                images,
                is_error: !ok,
            }));
        }
        Ok(if session.end_request.is_some() {
            Next::Done
        } else {
            Next::Continue(ChatMessage::user(results))
        })
    }

    /// One tool call: what the model is told, and whether it went well.
    async fn generator_call(
        &mut self,
        index: u32,
        tools: &OfferedTools,
        session: &mut Session,
        call: &ToolCall,
        tally: &mut Tally,
    ) -> Result<(String, bool), CoreError> {
        if call.name == EXECUTE_CODE {
            let args: ProgramArgs = match parse_arguments(&call.name, call.arguments.clone()) {
                Ok(args) => args,
                Err(err) => return Ok((err.to_string(), false)),
            };
            return Ok(
                match self.run_program(index, session, &args.code, tally).await? {
                    Ran::Tried { text, ok } => (text, ok),
                    Ran::NoRunsLeft(text) => (text, false),
                },
            );
        }
        if call.name == UNDO_LAST_STEP {
            return self.undo_last_step(index, session, tally).await;
        }
        if tools.is_domain_tool(&call.name) && !session.scene_current {
            if let Some(message) = self.show_the_last_scene(index).await? {
                return Ok((message, false));
            }
            session.scene_current = true;
        }
        let (invoked, _rebuilt) = invoke(self, tools, "generator", index, call).await?;
        match invoked {
            Ok(output) => {
                match output.control {
                    Control::Plan(plan) => {
                        self.emit(RunEvent::PlanProduced {
                            index,
                            plan: plan.clone(),
                        })?;
                        session.plan = Some(plan);
                    }
                    Control::EndGeneration { reason } => session.end_request = Some(reason),
                    Control::Continue | Control::EndVerification(_) => {}
                }
                Ok((output.text, true))
            }
            Err(ToolError::Recoverable(message)) => Ok((message, false)),
            Err(ToolError::Fatal(message)) => Err(CoreError::Tool(message)),
        }
    }

    /// Runs one of the model's programs as the fenced path does, within the iteration's
    /// budget of `1 + max_fast_retries` programs. A program after a failure the model was
    /// told about is a fast retry.
    async fn run_program(
        &mut self,
        index: u32,
        session: &mut Session,
        code: &str,
        tally: &mut Tally,
    ) -> Result<Ran, CoreError> {
        let budget = 1 + self.config.max_fast_retries;
        if session.runs >= budget {
            return Ok(Ran::NoRunsLeft(format!(
                "Not run: the iteration allows {budget} program {} and all were used. The last \
                 program that ran is this iteration's result; finish with end_process or an \
                 answer without a tool call.",
                if budget == 1 { "run" } else { "runs" }
            )));
        }
        if let Some((failure, error)) = session.pending.take() {
            session.retry_errors.push(format!("{failure}: {error}"));
            self.emit(RunEvent::FastRetry {
                index,
                attempt: session.runs,
                failure,
                error,
            })?;
        }
        let tried = self
            .try_program(index, session.runs, Some(code), tally)
            .await?;
        session.runs += 1;
        // A stopped program (timeout, crash) left a restarted, empty worker behind.
        session.scene_current = tried.left_a_scene;
        let ok = tried.failure.is_none();
        let text = tried.error_message.clone();
        session.pending = tried
            .failure
            .map(|failure| (failure, first_line(&tried.error_message)));
        if ok {
            session.good_programs.push(code.to_owned());
        }
        session.last = Some((code.to_owned(), tried));
        Ok(Ran::Tried { text, ok })
    }

    /// `refine_numbers`: the domain fits the numbers of the current program (the last that
    /// ran without error, the run's last good one before any ran in this iteration) to the
    /// targets, and the fitted program runs as the current one, which is not a new attempt.
    /// The model is told what changed, the loss before and after, and sees the renders.
    async fn refine_numbers(
        &mut self,
        index: u32,
        session: &mut Session,
        call: &ToolCall,
        tally: &mut Tally,
    ) -> Result<(String, bool, Vec<ImageData>), CoreError> {
        let failed = |text: String| Ok((text, false, Vec::new()));
        let args: RefineArgs = match parse_arguments(&call.name, call.arguments.clone()) {
            Ok(args) => args,
            Err(err) => return failed(err.to_string()),
        };
        let current = match &session.last {
            Some((code, tried)) if tried.failure.is_none() => Some(code.clone()),
            Some(_) => None,
            None => self.final_code.clone(),
        };
        let Some(program) = current else {
            return failed(format!(
                "There is no program to refine: the last one failed or none ran. Run {} that works with execute_code first; then refine its numbers.",
                self.format.noun
            ));
        };
        let request = RefineRequest {
            lines: args.lines.clone(),
            budget: args.budget(),
            time_limit: REFINE_TIME_LIMIT,
            program_timeout: self.config.program_timeout,
        };
        let started = Instant::now();
        // The search leaves the worker holding its last candidate.
        session.scene_current = false;
        let refined = match self.domain.refine(&program, &request).await {
            Ok(Ok(refined)) => refined,
            Ok(Err(why)) => return failed(why),
            Err(fault) => {
                return failed(format!(
                    "The search stopped: {fault}. The current program is unchanged."
                ));
            }
        };
        self.emit(RunEvent::NumbersRefined {
            index,
            loss_before: refined.loss_before,
            loss_after: refined.loss_after,
            programs: refined.programs,
            changed: refined.changes.len() as u32,
            seconds: started.elapsed().as_secs_f64(),
            out_of_time: refined.out_of_time,
        })?;
        if refined.changes.is_empty() {
            return Ok((
                format!(
                    "No change to the {} free number(s) matched the target better (loss {:.6}, {} programs tried); the current program is unchanged.",
                    refined.free, refined.loss_before, refined.programs
                ),
                true,
                refined.renders,
            ));
        }
        match self
            .run_as_current(index, session, refined.code.clone(), tally)
            .await?
        {
            Ok(()) => {
                session.good_programs.push(refined.code.clone());
                let text = refined_text(&refined, &self.format.language);
                Ok((text, true, refined.renders))
            }
            Err(error) => failed(format!("The fitted program did not run again: {error}")),
        }
    }

    /// Runs `code` again from the starting state as the iteration's current program, which
    /// is not a new attempt (what `undo_last_step` and `refine_numbers` end with); `Err` with
    /// the error when it failed.
    async fn run_as_current(
        &mut self,
        index: u32,
        session: &mut Session,
        code: String,
        tally: &mut Tally,
    ) -> Result<Result<(), String>, CoreError> {
        let tried = self
            .try_program(index, session.runs, Some(&code), tally)
            .await?;
        session.scene_current = tried.left_a_scene;
        session.pending = None;
        let ran = match tried.failure {
            None => Ok(()),
            Some(_) => Err(tried.error_message.clone()),
        };
        session.last = Some((code, tried));
        Ok(ran)
    }

    /// `undo_last_step`: back to the result of the good program before the current one (the
    /// last that ran without error; a failed last program is simply left behind), or to the
    /// starting state when there is none. That program becomes the iteration's program. It
    /// runs again from the starting state, which is not a new attempt.
    async fn undo_last_step(
        &mut self,
        index: u32,
        session: &mut Session,
        tally: &mut Tally,
    ) -> Result<(String, bool), CoreError> {
        let current_is_good = match &session.last {
            Some((_, tried)) => tried.failure.is_none(),
            // No program ran in this iteration: the current result is the run's last good one.
            None => true,
        };
        if current_is_good {
            session.good_programs.pop();
        }
        let Some(previous) = session.good_programs.last().cloned() else {
            let _ = self.run_from_start("").await?;
            self.scene_program = None;
            session.last = None;
            session.pending = None;
            session.scene_current = true;
            return Ok((
                "Back to the starting state: no earlier program ran without error.".to_owned(),
                true,
            ));
        };
        let lines = previous.lines().count();
        let first = first_line(&previous);
        Ok(
            match self.run_as_current(index, session, previous, tally).await? {
                Ok(()) => (
                    format!(
                        "Back to the result of the program before ({lines} lines, starting {first:?}); it is the current program now."
                    ),
                    true,
                ),
                Err(error) => (
                    format!("The program before could not be run again: {error}"),
                    false,
                ),
            },
        )
    }

    /// Before the model has run a program in this iteration, the worker may hold anything
    /// the verifier left (hidden objects, its camera) or a fresh worker's empty state: the
    /// last program is run again from the starting state (the starting state alone before
    /// the first), so the domain's tools (`get_scene_info`) show what that program built.
    /// `Some` with the reason when the worker was lost every time.
    async fn show_the_last_scene(&mut self, index: u32) -> Result<Option<String>, CoreError> {
        let code = self.scene_program.clone().unwrap_or_default();
        let phase = format!("iteration {index}: rebuilding the last result for the generator");
        let mark = self.domain.watch().mark();
        let rebuilt = self.run_from_start(&code).await.map(drop);
        match self.phase_end(&phase, mark, &mut 0, &rebuilt).await? {
            // The worker lost meanwhile: the result has been rebuilt the same way already.
            PhaseEnd::Done | PhaseEnd::Redo => rebuilt.map(|()| None),
            PhaseEnd::GaveUp(message) => Ok(Some(message)),
        }
    }
}

/// The model's turn as the conversation keeps it: its text and its calls.
/// What the model reads after a refinement that changed numbers.
fn refined_text(refined: &crate::domain::Refined, language: &str) -> String {
    let mut text = format!(
        "Refined {} of {} free number(s) in {} programs{}: loss {:.6} -> {:.6} (mean photometric loss over the target views, plus a penalty for leaving the scene's structure).\nChanged:\n",
        refined.changes.len(),
        refined.free,
        refined.programs,
        if refined.out_of_time {
            ", stopped at its time limit"
        } else {
            ""
        },
        refined.loss_before,
        refined.loss_after
    );
    for (line, before, after) in refined.changes.iter().take(REFINE_LISTED_CHANGES) {
        let _ = writeln!(text, "- line {line}: {before} -> {after}");
    }
    if refined.changes.len() > REFINE_LISTED_CHANGES {
        let _ = writeln!(
            text,
            "- and {} more",
            refined.changes.len() - REFINE_LISTED_CHANGES
        );
    }
    let _ = write!(
        text,
        "The fitted program is the current program now; its renders follow.\n```{language}\n{}\n```",
        refined.code.trim_end()
    );
    text
}

fn assistant_turn(response: &ModelResponse) -> ChatMessage {
    let mut parts = Vec::new();
    if !response.text.is_empty() {
        parts.push(ContentPart::text(crate::cut_off::kept(response)));
    }
    parts.extend(
        response
            .tool_calls
            .iter()
            .cloned()
            .map(ContentPart::ToolCall),
    );
    ChatMessage::assistant(parts)
}

/// A call's arguments in a line: a program by its size and first line, anything else as
/// JSON, cut to [`CALL_SUMMARY_CHARS`].
fn arguments_summary(call: &ToolCall) -> String {
    let program = (call.name == EXECUTE_CODE)
        .then(|| call.arguments.get("code").and_then(Value::as_str))
        .flatten();
    match program {
        Some(code) => shortened(&format!(
            "{} lines: {}",
            code.lines().count(),
            first_line(code)
        )),
        None => shortened(&call.arguments.to_string()),
    }
}

fn shortened(text: &str) -> String {
    if text.chars().count() <= CALL_SUMMARY_CHARS {
        return text.to_owned();
    }
    let mut short: String = text.chars().take(CALL_SUMMARY_CHARS - 3).collect();
    short.push_str("...");
    short
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn calls_are_summarised_in_a_line() {
        let program = ToolCall {
            id: "1".into(),
            name: "execute_code".into(),
            arguments: json!({"code": "import bpy\nbpy.ops.mesh.primitive_cube_add()\n"}),
        };
        assert_eq!(arguments_summary(&program), "2 lines: import bpy");
        let scene = ToolCall {
            id: "2".into(),
            name: "get_scene_info".into(),
            arguments: json!({"limit": 5}),
        };
        assert_eq!(arguments_summary(&scene), r#"{"limit":5}"#);
        let long = shortened(&"x".repeat(500));
        assert_eq!((long.chars().count(), long.ends_with("...")), (200, true));
    }

    #[test]
    fn make_plan_is_offered_only_to_runs_that_plan() {
        let domain = crate::test_domain::Notes::default();
        let format = crate::domain::Domain::program_format(&domain);
        let names = |plan| {
            OfferedTools::generator(&domain, &format, plan)
                .unwrap()
                .specs()
                .into_iter()
                .map(|spec| spec.name)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names(true),
            [
                "end_process",
                "execute_code",
                "make_plan",
                "read_notes",
                "undo_last_step"
            ]
        );
        assert!(!names(false).contains(&"make_plan".to_owned()));
    }
}
