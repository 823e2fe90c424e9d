//! One run of the loop: plan → code → execute from the domain's starting state → fast retry
//! for E1/E2 → verify → remember → stop or loop. Every step is a typed event, appended to
//! `events.jsonl` and sent to the front end as it happens. The loop knows what it builds
//! only through its [`Domain`].

use std::sync::Arc;
use std::time::Instant;

use viga_memory::{Memory, MemoryConfig, RunLog};
use viga_protocol::event::{FailureKind, ModelRole, RunEvent, StopReason};
use viga_protocol::iteration::{ExecutionError, FailureClass, Feedback, IterationRecord, Timings};
use viga_protocol::message::{ChatMessage, ContentPart, ImageData, TokenUsage};
use viga_provider::{FinishReason, ModelRequest, ModelResponse, Provider, ProviderError};
use viga_skills::metrics::{image_size, photometric_loss};

use crate::CoreError;
use crate::config::RunConfig;
use crate::domain::{Domain, ProgramFormat, RefusalMark, SinceMark, TargetView, ViewRender};
use crate::folder::RunFolder;
use crate::handle::RunLink;
use crate::program::{Attempt, REPLY_REFUSED_ERROR};
use crate::prompts::Prompts;
use crate::recover::PhaseEnd;
use crate::scores::Scores;
use crate::shrink::shrink_request;
use crate::verify::{Verdict, verify};

/// What a finished run reports.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutcome {
    pub stop: StopReason,
    /// Iterations recorded in the run (including those of earlier sessions when resumed).
    pub iterations: u32,
    pub folder: std::path::PathBuf,
    /// The program of the last iteration that ran without error.
    pub final_code: Option<String>,
    /// Where that program is kept in the run folder (`final.py`, a page's `final.html`).
    pub final_program: Option<std::path::PathBuf>,
}

impl RunOutcome {
    /// Whether the run left a result to offer for applying: it ran to its end (accepted, or
    /// its iterations spent, not cancelled or failed) and a program of it ran.
    pub fn has_result(&self) -> bool {
        self.final_code.is_some()
            && matches!(self.stop, StopReason::Accepted | StopReason::MaxIterations)
    }
}

/// A render of a target's view, scored and kept.
pub(crate) struct TargetLook {
    /// The target's label (`Camera1`, `Camera1@f24`, `default`).
    pub label: String,
    pub render_id: String,
    pub image: ImageData,
}

/// Sums for one iteration.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    pub usage: TokenUsage,
    pub timings: Timings,
}

pub(crate) struct Run {
    pub config: RunConfig,
    pub prompts: Prompts,
    pub provider: Arc<dyn Provider>,
    /// What the run builds: runs its programs, renders, offers the tools.
    pub domain: Arc<dyn Domain>,
    /// How the domain's programs are written, asked once.
    pub format: ProgramFormat,
    pub memory: Memory,
    pub folder: RunFolder,
    pub log: RunLog,
    /// The run's end of its queue pair: events out, cancel in.
    pub link: RunLink,
    pub targets: Vec<TargetView>,
    pub scores: Scores,
    /// The labels of the targets scored in this run (a resumed run counts the views its
    /// earlier iterations scored as seen).
    pub targets_scored: std::collections::BTreeSet<String>,
    pub first_index: u32,
    pub final_code: Option<String>,
    /// The program the worker's current state was built by, run again to rebuild it when
    /// the worker is lost; `None` before the first program ran (the starting state alone).
    pub scene_program: Option<String>,
    /// Programs that ran without error, oldest first: `undo_last_step` goes back to the one
    /// before the last.
    pub history: Vec<String>,
}

impl Run {
    pub(crate) fn memory_config(config: &RunConfig) -> MemoryConfig {
        MemoryConfig {
            window: config.memory_window,
            budget_bytes: config.memory_budget_bytes,
        }
    }

    /// The first user message: task, the domain's brief and the targets, always in the
    /// context.
    pub(crate) fn anchor(
        config: &RunConfig,
        domain: &dyn Domain,
        targets: &[TargetView],
    ) -> ChatMessage {
        ChatMessage::user(task_parts(config, domain, targets))
    }

    pub(crate) fn emit(&mut self, event: RunEvent) -> Result<(), CoreError> {
        let timed = self.log.append(event)?;
        self.link.send(timed);
        Ok(())
    }

    /// Awaits `work` unless the user cancels first.
    pub(crate) async fn cancellable<T>(
        &self,
        work: impl Future<Output = T>,
    ) -> Result<T, CoreError> {
        Ok(self.link.until_cancelled(work).await?)
    }

    /// Asks the model as `role`, which the request carries from here on with the role's
    /// output-token cap (every model call of the loop comes through here, so none goes
    /// without them). A cancel abandons the call at once. A model that finds the request
    /// too long for its context is asked once more with a smaller one.
    pub(crate) async fn call_model(
        &mut self,
        index: u32,
        role: ModelRole,
        mut request: ModelRequest,
        tally: &mut Tally,
    ) -> Result<ModelResponse, CoreError> {
        request.role = Some(role);
        request.max_tokens = self.config.max_output_tokens(role);
        let started = Instant::now();
        let response = match self.ask(&request, index, role).await? {
            Err(err @ ProviderError::ContextTooLong { .. }) => {
                self.ask_smaller(index, role, &request, err).await?
            }
            answered => answered?,
        };
        let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
        tally.usage += response.usage;
        self.emit(RunEvent::ModelCalled {
            index,
            role,
            latency_ms,
            usage: response.usage,
        })?;
        if response.finish_reason == FinishReason::Length {
            self.emit(RunEvent::Warning {
                message: format!(
                    "iteration {index}: the {} reply was cut off at its cap of {} output tokens{}",
                    role_words(role),
                    request.max_tokens,
                    match role {
                        ModelRole::Generator | ModelRole::FastFix =>
                            "; a program cut off is not run, and the model is told so and asked for a shorter one",
                        ModelRole::Verifier =>
                            "; without a call in it, the verifier is told so and asked for a shorter one",
                        _ => "; it is used as far as it goes",
                    }
                ),
            })?;
        }
        Ok(response)
    }

    async fn ask(
        &self,
        request: &ModelRequest,
        index: u32,
        role: ModelRole,
    ) -> Result<Result<ModelResponse, ProviderError>, CoreError> {
        Ok(self
            .link
            .ask_model(self.provider.as_ref(), request, index, role)
            .await?)
    }

    /// The second and last try of a request the model found too long (`err`): without the
    /// oldest memory iterations and older images. When there is nothing to leave out, or
    /// the smaller request is too long as well, the run stops with a context overflow.
    async fn ask_smaller(
        &mut self,
        index: u32,
        role: ModelRole,
        request: &ModelRequest,
        err: ProviderError,
    ) -> Result<ModelResponse, CoreError> {
        let memory = self.memory_text();
        let newest_only = self.newest_memory_text();
        let Some(smaller) = shrink_request(request, &memory, &newest_only) else {
            return Err(err.into());
        };
        self.emit(RunEvent::Warning {
            message: format!(
                "iteration {index}: the {role:?} request was too long for the model ({err}); \
                 asking once more without the oldest memory iterations and older images"
            ),
        })?;
        Ok(self.ask(&smaller, index, role).await??)
    }

    pub(crate) fn anchor_message(&self) -> ChatMessage {
        self.memory
            .anchor()
            .cloned()
            .unwrap_or_else(|| Self::anchor(&self.config, self.domain.as_ref(), &self.targets))
    }

    pub(crate) fn memory_text(&self) -> String {
        memory_text_of(&self.memory.context_block())
    }

    /// The memory block as it would read with only the newest iteration kept.
    fn newest_memory_text(&self) -> String {
        let newest = self.memory.recent().next_back().cloned();
        let config = MemoryConfig {
            window: 1,
            ..Self::memory_config(&self.config)
        };
        match Memory::rebuild(config, None, newest) {
            Ok(memory) => memory_text_of(&memory.context_block()),
            // Settings a one-iteration memory cannot have: leave the memory as it is.
            Err(_) => self.memory_text(),
        }
    }

    pub(crate) async fn run(mut self) -> Result<RunOutcome, CoreError> {
        let mut recorded = self.first_index.saturating_sub(1);
        self.domain.begin_run(self.folder.root(), &self.targets);
        let ran = match self.check_targets().await {
            Ok(()) => self.iterate(&mut recorded).await,
            Err(err) => Err(err),
        };
        let stop = match ran {
            Ok(stop) => self.unless_views_never_scored(stop),
            Err(CoreError::Cancelled) => self.link.stop_reason(),
            Err(err) => StopReason::failed(err.to_string(), err.kind()),
        };
        if let Err(err) = self.save_final_scene().await {
            let _ = self.emit(RunEvent::Warning {
                message: format!("final scene not saved: {err}"),
            });
        }
        self.emit(RunEvent::RunFinished {
            stop: stop.clone(),
            iterations: recorded,
        })?;
        let final_program = self
            .folder
            .root()
            .join(crate::folder::final_program_name(&self.format.language));
        Ok(RunOutcome {
            stop,
            iterations: recorded,
            folder: self.folder.root().to_path_buf(),
            final_code: self.final_code.clone(),
            final_program: Some(final_program).filter(|path| path.is_file()),
        })
    }

    /// `stop`, unless a target's view was never scored in the whole run (the programs never
    /// made the camera it is seen from, the slide it shows): then the run failed, and says
    /// which, whatever the verifier thought.
    fn unless_views_never_scored(&self, stop: StopReason) -> StopReason {
        let never: Vec<String> = self
            .targets
            .iter()
            .map(TargetView::label)
            .filter(|label| !self.targets_scored.contains(label))
            .collect();
        // Only a run whose programs ran has results that could have been compared.
        if never.is_empty() || self.final_code.is_none() {
            return stop;
        }
        StopReason::failed(
            format!(
                "no result of the run could be compared with the target view{} {}: the programs never made {} (each iteration's warning says why); name the views the scene has, or ask for them in the task",
                if never.len() == 1 { "" } else { "s" },
                never.join(", "),
                if never.len() == 1 { "it" } else { "them" }
            ),
            FailureKind::Other,
        )
    }

    /// The domain's check of the targets against the starting state; a problem is a setting
    /// to fix.
    async fn check_targets(&mut self) -> Result<(), CoreError> {
        let domain = Arc::clone(&self.domain);
        let problems = self
            .cancellable(domain.check_targets(&self.targets))
            .await?
            .map_err(|err| CoreError::worker("checking the targets failed", err))?;
        if problems.is_empty() {
            return Ok(());
        }
        Err(CoreError::Config(format!(
            "the targets do not fit the starting state:\n  - {}",
            problems.join("\n  - ")
        )))
    }

    async fn iterate(&mut self, recorded: &mut u32) -> Result<StopReason, CoreError> {
        for index in self.first_index..=self.config.max_iterations {
            let (record, ended) = self.iteration(index).await?;
            let accepted = record.feedback.as_ref().is_some_and(|f| f.accepted);
            self.memory.push(record.clone());
            *recorded = index;
            self.emit(RunEvent::IterationFinished {
                record: Box::new(record),
            })?;
            if let Some(why) = ended {
                return Ok(StopReason::GeneratorEnded { why });
            }
            if accepted {
                return Ok(StopReason::Accepted);
            }
        }
        Ok(StopReason::MaxIterations)
    }

    /// One iteration: the generator's half, then the critique; with the generator's reason
    /// when it ended the run (see [`RunConfig::generator_ends_run`]).
    async fn iteration(
        &mut self,
        index: u32,
    ) -> Result<(IterationRecord, Option<String>), CoreError> {
        let started = Instant::now();
        let mut tally = Tally::default();
        self.emit(RunEvent::IterationStarted { index })?;
        self.domain
            .begin_iteration(&self.folder.renders_dir(index)?);
        // A reply refused anywhere in the iteration (the generator's own looks too) fails it.
        let refusals = self.domain.watch().refusal_mark();
        let (plan, mut attempt) = if self.config.generator_tools {
            self.generate_with_tools(index, &mut tally).await?
        } else {
            self.generate(index, &mut tally).await?
        };
        let ended = attempt
            .end_request
            .clone()
            .filter(|_| self.config.generator_ends_run);
        let (feedback, render_ids) = match &ended {
            Some(why) => self.generator_ended(index, &attempt, why).await?,
            None => {
                self.critique(index, &mut attempt, refusals, &mut tally)
                    .await?
            }
        };
        self.emit(RunEvent::FeedbackProduced {
            index,
            feedback: feedback.clone(),
        })?;
        self.write_scores()?;
        tally.timings.total_ms = started.elapsed().as_secs_f64() * 1000.0;
        let record = IterationRecord {
            index,
            plan,
            code: attempt.code.unwrap_or_default(),
            execution: attempt.result,
            // A result no verifier judged was not rejected (E3).
            failure: if ended.is_some() {
                attempt.failure
            } else {
                recorded_failure(attempt.failure, &feedback)
            },
            feedback: Some(feedback),
            retry_count: attempt.retries,
            retry_errors: attempt.retry_errors,
            generator_tool_calls: attempt.tool_calls,
            render_ids,
            timings: tally.timings,
            usage: tally.usage,
        };
        Ok((record, ended))
    }

    /// The iteration whose generator ended the run (`why`): its program's target views are
    /// rendered and scored, the program is kept as the result when it ran, and no verifier
    /// is asked. The feedback says so.
    async fn generator_ended(
        &mut self,
        index: u32,
        attempt: &Attempt,
        why: &str,
    ) -> Result<(Feedback, Vec<String>), CoreError> {
        let mut render_ids = Vec::new();
        if attempt.left_a_scene {
            render_ids = self
                .score_targets(index)
                .await?
                .into_iter()
                .map(|look| look.render_id)
                .collect();
        }
        if attempt.failure.is_none() && attempt.code.is_some() {
            self.final_code = attempt.code.clone();
        }
        let feedback = Feedback {
            visual_differences: vec![format!(
                "not verified: the generator ended the run with end_process ({why})"
            )],
            suggestions: Vec::new(),
            accepted: false,
        };
        Ok((feedback, render_ids))
    }

    /// The generator's half of an iteration without tools: the plan (when enabled), the
    /// program (the answer's first fenced block) and its fast retries. The thoughts and the
    /// program kept are written to the run folder.
    async fn generate(
        &mut self,
        index: u32,
        tally: &mut Tally,
    ) -> Result<(Option<String>, Attempt), CoreError> {
        let generation_started = Instant::now();
        let plan = if self.config.plan_each_iteration {
            let plan = self.plan(index, tally).await?;
            self.emit(RunEvent::PlanProduced {
                index,
                plan: plan.clone(),
            })?;
            Some(plan)
        } else {
            None
        };
        let mut conversation = vec![
            self.anchor_message(),
            ChatMessage::user_text(format!(
                "{}\n\nPlan for iteration {index}:\n{}\n\nWrite {}.",
                self.memory_text(),
                plan.as_deref()
                    .unwrap_or("(no separate plan: decide the edits yourself)"),
                self.format.noun
            )),
        ];
        let request = ModelRequest::new(self.prompts.generator.clone(), conversation.clone());
        let answer = self
            .call_model(index, ModelRole::Generator, request, tally)
            .await?;
        let mut thoughts = format!(
            "# Iteration {index}\n\n## Plan\n\n{}\n\n## Answer\n\n{}\n",
            plan.clone().unwrap_or_default(),
            answer.text
        );
        tally.timings.generation_ms += generation_started.elapsed().as_secs_f64() * 1000.0;

        let attempt = self
            .attempt_with_fast_retry(index, &mut conversation, answer, &mut thoughts, tally)
            .await?;
        self.folder.write_generator_thought(index, &thoughts)?;
        if let Some(code) = &attempt.code {
            self.folder.write_code(index, &self.format.language, code)?;
        }
        Ok((plan, attempt))
    }

    /// The iteration's critique and the renders behind it: the verifier's whenever the
    /// program left a scene, even when all fast retries failed, and when no program came
    /// back at all (E2: seed 002's "record as E1/E2 failure and proceed to Verifier", which
    /// then looks at the scene the last program left); a synthetic one when a program left
    /// none (stopped at the timeout, Blender died with it), since its worker was restarted. A reply of the worker refused meanwhile makes the
    /// program a failure (E1) the model is told about.
    async fn critique(
        &mut self,
        index: u32,
        attempt: &mut Attempt,
        refusals: RefusalMark,
        tally: &mut Tally,
    ) -> Result<(Feedback, Vec<String>), CoreError> {
        let no_program = attempt.failure == Some(FailureClass::E2);
        if !attempt.left_a_scene && !no_program {
            let feedback = nothing_to_look_at(index, attempt, self.config.generator_tools);
            return Ok((feedback, Vec::new()));
        }
        // Refused while generating: the worker was replaced, so there is nothing of the
        // program's left to look at.
        if let Some(reason) = self.domain.watch().refused_since(refusals) {
            return self.refused_reply(index, attempt, reason);
        }
        let verification_started = Instant::now();
        let verdict = verify(self, index, attempt, tally).await;
        if !matches!(verdict, Err(CoreError::Cancelled))
            && let Some(reason) = self.domain.watch().refused_since(refusals)
        {
            return self.refused_reply(index, attempt, reason);
        }
        let verdict: Verdict = verdict?;
        tally.timings.verification_ms += verification_started.elapsed().as_secs_f64() * 1000.0;
        self.folder
            .write_verifier_thought(index, &verdict.thoughts)?;
        if attempt.failure.is_none() {
            self.final_code = attempt.code.clone();
            if let Some(code) = &attempt.code
                && self.history.last() != Some(code)
            {
                self.history.push(code.clone());
            }
        }
        Ok((verdict.feedback, verdict.render_ids))
    }

    /// The iteration whose program made the worker break the rules (`reason`): recorded as
    /// its failure, never kept as a result, and said to the model as the critique.
    fn refused_reply(
        &mut self,
        index: u32,
        attempt: &mut Attempt,
        reason: String,
    ) -> Result<(Feedback, Vec<String>), CoreError> {
        self.emit(RunEvent::ReplyRefused {
            index,
            reason: reason.clone(),
        })?;
        let worker = self.domain.worker_name().to_owned();
        attempt.failure = Some(FailureClass::E1);
        attempt.result.error = Some(ExecutionError {
            error_type: REPLY_REFUSED_ERROR.to_owned(),
            message: format!("a reply of {worker} was refused: {reason}"),
            traceback: String::new(),
            line: None,
        });
        let feedback = Feedback {
            visual_differences: vec![format!(
                "iteration {index}'s program failed: after it ran, a reply of {worker} broke viga's rules ({reason}). Nothing it named was read, and {worker} was restarted."
            )],
            suggestions: vec![
                "write a program that only builds the scene: leave viga's bridge, its commands and its replies alone".to_owned(),
            ],
            accepted: false,
        };
        Ok((feedback, Vec::new()))
    }

    async fn plan(&mut self, index: u32, tally: &mut Tally) -> Result<String, CoreError> {
        let messages = vec![
            self.anchor_message(),
            ChatMessage::user_text(format!(
                "{}\n\nWrite the plan for iteration {index}.",
                self.memory_text()
            )),
        ];
        let request = ModelRequest::new(self.prompts.plan.clone(), messages);
        Ok(self
            .call_model(index, ModelRole::Planner, request, tally)
            .await?
            .text
            .trim()
            .to_owned())
    }

    /// Renders every target's view at the target's size and scores it against the target;
    /// a view that cannot be rendered is said in a warning. The worker lost meanwhile is
    /// restarted, the state rebuilt and the scoring done again.
    pub(crate) async fn score_targets(&mut self, index: u32) -> Result<Vec<TargetLook>, CoreError> {
        let phase = format!("iteration {index}: rendering the target views for scoring");
        let mut redos = 0;
        loop {
            let mark = self.domain.watch().mark();
            let scored = self.score_once(index).await;
            match self.phase_end(&phase, mark, &mut redos, &scored).await? {
                PhaseEnd::Done => return scored,
                PhaseEnd::Redo => {}
                PhaseEnd::GaveUp(_) => return Ok(Vec::new()),
            }
        }
    }

    async fn score_once(&mut self, index: u32) -> Result<Vec<TargetLook>, CoreError> {
        let mut looks = Vec::with_capacity(self.targets.len());
        for target in self.targets.clone() {
            let (width, height) = image_size(&target.image.data).map_err(|err| {
                CoreError::Config(format!("the target image cannot be read: {err}"))
            })?;
            let domain = Arc::clone(&self.domain);
            let rendered = self
                .cancellable(domain.render_view(&target, width, height))
                .await?
                .map_err(|err| {
                    CoreError::worker("rendering a target's view for scoring failed", err)
                })?;
            let label = target.label();
            let (view, output) = match rendered {
                ViewRender::Rendered { view, picture } => (view, picture),
                // A program that removed or renamed the target's camera: this view cannot be
                // scored, which the model should hear about, but the run goes on.
                ViewRender::Unavailable(why) => {
                    self.emit(RunEvent::Warning {
                        message: format!("iteration {index}: target {label} not scored: {why}"),
                    })?;
                    continue;
                }
            };
            if index == self.first_index
                && let Some(said) = shapes_differ((width, height), (output.width, output.height))
            {
                self.emit(RunEvent::Warning {
                    message: format!("target {label}: {said}"),
                })?;
            }
            let render_id = self.folder.write_render(
                index,
                &crate::folder::target_render_stem(&label),
                &output.image.data,
            )?;
            self.emit(RunEvent::RenderProduced {
                index,
                render_id: render_id.clone(),
                view: format!("target:{view}"),
                width: output.width,
                height: output.height,
                render_ms: output.render_ms,
                engine: output.engine,
            })?;
            match photometric_loss(&output.image.data, &target.image.data) {
                Ok(loss) => {
                    self.scores.record(index, &view, loss);
                    self.targets_scored.insert(label.clone());
                    self.emit(RunEvent::ViewScored {
                        index,
                        view: view.clone(),
                        photometric_loss: loss,
                    })?;
                }
                Err(err) => self.emit(RunEvent::Warning {
                    message: format!(
                        "iteration {index}: photometric loss of {label} not computed: {err}"
                    ),
                })?,
            }
            looks.push(TargetLook {
                label,
                render_id,
                image: output.image,
            });
        }
        Ok(looks)
    }

    fn write_scores(&mut self) -> Result<(), CoreError> {
        if !self.targets.is_empty() {
            self.folder
                .write_json(crate::folder::SCORES_FILE, &self.scores)?;
        }
        Ok(())
    }

    /// Keeps the last good program as `final.<ext>`, and has the domain build it again from
    /// its starting state and save the result (a scene's `final.blend`). It runs after a
    /// cancel too, so nothing here is raced against one; the worker lost meanwhile gets one
    /// more try (the program rebuilds the result itself).
    async fn save_final_scene(&mut self) -> Result<(), CoreError> {
        let Some(code) = self.final_code.clone() else {
            return Ok(());
        };
        let name = crate::folder::final_program_name(&self.format.language);
        self.folder.write_bytes(&name, code.as_bytes())?;
        let mark = self.domain.watch().mark();
        let saved = self.save_result(&code).await;
        if saved.is_err()
            && let SinceMark::Lost(loss) = self.domain.watch().since(mark)
        {
            self.emit(RunEvent::WorkerRestarted {
                reason: format!("{loss} (saving the final result); trying once more"),
            })?;
            return self.save_result(&code).await;
        }
        saved
    }

    async fn save_result(&self, code: &str) -> Result<(), CoreError> {
        self.domain
            .save_result(code, self.config.program_timeout, self.folder.root())
            .await
            .map(drop)
            .map_err(|err| CoreError::worker("the final result could not be saved", err))
    }
}

/// The task as the model is told it: its text, the domain's brief, and the targets.
pub(crate) fn task_parts(
    config: &RunConfig,
    domain: &dyn Domain,
    targets: &[TargetView],
) -> Vec<ContentPart> {
    let mut parts = vec![ContentPart::text(format!("Task: {}", config.task))];
    if let Some(earlier) =
        crate::conversation::earlier_turns_text(&config.conversation, config.starts_from)
    {
        parts.push(ContentPart::text(earlier));
    }
    if let Some(brief) = domain.brief(targets) {
        parts.push(ContentPart::text(brief));
    }
    parts.extend(target_parts(targets));
    parts
}

/// The targets as the model sees them: each picture, labelled with its view.
fn target_parts(targets: &[TargetView]) -> Vec<ContentPart> {
    let mut parts = Vec::new();
    for target in targets {
        let label = match (&target.view, target.frame) {
            (None, None) => "Target image:".to_owned(),
            (view, frame) => format!(
                "Target image{}{}:",
                view.as_deref()
                    .map(|view| format!(" from {view}"))
                    .unwrap_or_default(),
                frame
                    .map(|frame| format!(" at frame {frame}"))
                    .unwrap_or_default()
            ),
        };
        parts.push(ContentPart::text(label));
        let label = match (&target.view, target.frame) {
            (None, None) => "target".to_owned(),
            _ => format!("target {}", target.label()),
        };
        parts.push(ContentPart::Image {
            image: target.image.clone(),
            label: Some(label),
        });
    }
    parts
}

fn memory_text_of(block: &str) -> String {
    if block.trim().is_empty() {
        "Memory: none yet; this is the first iteration.".to_owned()
    } else {
        format!("Memory of recent iterations (oldest first):\n{block}")
    }
}

/// The failure an iteration is recorded with: its program's, or E3 when the program ran and
/// the verifier did not accept the scene (seed 002: ran, but the scene is wrong).
fn recorded_failure(program: Option<FailureClass>, feedback: &Feedback) -> Option<FailureClass> {
    match program {
        None if !feedback.accepted => Some(FailureClass::E3),
        failure => failure,
    }
}

/// The critique of an iteration whose program left no scene to look at; `tools` says
/// What to say when a target picture (`target`, width and height) and the render it is
/// compared with (`render`) differ in shape: the target is stretched to the render's size
/// to be scored, which a person should know. `None` when their shapes agree within 1%.
fn shapes_differ(target: (u32, u32), render: (u32, u32)) -> Option<String> {
    let ratio = |(width, height): (u32, u32)| f64::from(width) / f64::from(height.max(1));
    let (of_target, of_render) = (ratio(target), ratio(render));
    ((of_target / of_render - 1.0).abs() > 0.01).then(|| {
        format!(
            "the picture is {}x{} and the result renders at {}x{}, another shape: the picture is stretched to the render's size to be scored, so the scores compare distorted shapes; give a picture of the render's shape (a scene renders at the picture's size, a slide at its deck's page size, a page at --viewport)",
            target.0, target.1, render.0, render.1
        )
    })
}

/// A role as a person reads it in a warning.
fn role_words(role: ModelRole) -> &'static str {
    match role {
        ModelRole::Planner => "plan",
        ModelRole::Generator => "generator's",
        ModelRole::Verifier => "verifier's",
        ModelRole::FastFix => "fast fix",
        ModelRole::Investigate => "investigation",
        ModelRole::GnAssistant => "Geometry Nodes assistant's",
        ModelRole::Agent => "agent's",
        ModelRole::Judge => "judge's",
    }
}

/// whether the generator runs its programs with `execute_code`.
fn nothing_to_look_at(index: u32, attempt: &Attempt, tools: bool) -> Feedback {
    let why = match &attempt.result.error {
        Some(error) => error.message.clone(),
        None if tools && attempt.failure == Some(FailureClass::E2) => {
            "the generator ran no program (it never called execute_code with a whole program)"
                .to_owned()
        }
        None => attempt
            .failure
            .map(FailureClass::describe)
            .unwrap_or("the program left no scene")
            .to_owned(),
    };
    Feedback {
        visual_differences: vec![format!("iteration {index} produced no scene: {why}")],
        suggestions: vec![if tools {
            "run the whole program with execute_code, one that finishes quickly".to_owned()
        } else {
            "answer with one fenced ```python block holding the whole program, one that finishes quickly"
                .to_owned()
        }],
        accepted: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_of_another_shape_than_its_render_is_said() {
        assert!(shapes_differ((512, 512), (1280, 720)).is_some());
        assert_eq!(shapes_differ((640, 360), (1280, 720)), None);
        assert_eq!(shapes_differ((64, 64), (64, 64)), None);
    }

    #[test]
    fn a_program_that_ran_and_was_rejected_is_e3() {
        let rejected = Feedback::default();
        let accepted = Feedback {
            accepted: true,
            ..Feedback::default()
        };
        assert_eq!(recorded_failure(None, &rejected), Some(FailureClass::E3));
        assert_eq!(recorded_failure(None, &accepted), None);
        assert_eq!(
            recorded_failure(Some(FailureClass::E1), &rejected),
            Some(FailureClass::E1)
        );
    }
}
