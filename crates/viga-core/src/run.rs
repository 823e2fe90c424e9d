//! One run of the loop: plan → code → execute on the reloaded base scene → fast retry for
//! E1/E2 → verify → remember → stop or loop. Every step is a typed event, appended to
//! `events.jsonl` and sent to the front end as it happens.

use std::sync::Arc;
use std::time::Instant;

use viga_blender::{BlenderCommands as _, BlenderTransport, Recovery, TransportError};
use viga_memory::{Memory, MemoryConfig, RunLog};
use viga_protocol::bridge::{RenderEngine, RenderRequest, SceneReset};
use viga_protocol::event::{ModelRole, RunEvent, StopReason};
use viga_protocol::iteration::{ExecutionResult, FailureClass, Feedback, IterationRecord, Timings};
use viga_protocol::message::{ChatMessage, ContentPart, ImageData, TokenUsage};
use viga_provider::{ModelRequest, ModelResponse, Provider};
use viga_skills::generator::describe_execution;
use viga_skills::metrics::{image_size, photometric_loss};
use viga_skills::{RenderSettings, ToolContext, ToolError};

use crate::CoreError;
use crate::config::RunConfig;
use crate::extract::first_python_block;
use crate::folder::RunFolder;
use crate::handle::{Cancelled, RunLink};
use crate::prompts::{Prompts, fill};
use crate::scores::Scores;
use crate::translate::ProviderTranslator;
use crate::verify::{Verdict, verify};

/// Why the loop stopped early: the user, or something nothing can fix.
#[derive(Debug)]
pub(crate) enum Interrupt {
    Cancelled,
    Fatal(String),
}

impl From<CoreError> for Interrupt {
    fn from(err: CoreError) -> Self {
        Self::Fatal(err.to_string())
    }
}

impl From<Cancelled> for Interrupt {
    fn from(Cancelled: Cancelled) -> Self {
        Self::Cancelled
    }
}

/// What a finished run reports.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutcome {
    pub stop: StopReason,
    /// Iterations recorded in the run (including those of earlier sessions when resumed).
    pub iterations: u32,
    pub folder: std::path::PathBuf,
    /// The program of the last iteration that ran without error.
    pub final_code: Option<String>,
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
    pub blender: Arc<dyn BlenderTransport>,
    pub tools: ToolContext,
    pub memory: Memory,
    pub folder: RunFolder,
    pub log: RunLog,
    /// The run's end of its queue pair: events out, cancel in.
    pub link: RunLink,
    pub target: Option<ImageData>,
    pub scores: Scores,
    pub first_index: u32,
    pub final_code: Option<String>,
}

impl Run {
    pub(crate) fn base_scene(config: &RunConfig) -> SceneReset {
        match &config.base_blend {
            Some(path) => SceneReset::Blend {
                path: path.to_string_lossy().into_owned(),
            },
            None => SceneReset::Factory,
        }
    }

    pub(crate) fn tool_context(
        config: &RunConfig,
        prompts: &Prompts,
        provider: &Arc<dyn Provider>,
        blender: &Arc<dyn BlenderTransport>,
    ) -> ToolContext {
        let translator = ProviderTranslator::new(Arc::clone(provider), prompts.investigate.clone());
        ToolContext::new(
            Arc::clone(blender),
            RenderSettings::new(config.render),
            Self::base_scene(config),
        )
        .with_translator(Arc::new(translator))
    }

    pub(crate) fn memory_config(config: &RunConfig) -> MemoryConfig {
        MemoryConfig {
            window: config.memory_window,
            budget_bytes: config.memory_budget_bytes,
        }
    }

    /// The first user message: task and target, always in the context.
    pub(crate) fn anchor(config: &RunConfig, target: Option<&ImageData>) -> ChatMessage {
        let mut content = vec![ContentPart::text(format!("Task: {}", config.task))];
        if let Some(image) = target {
            content.push(ContentPart::text("Target image:"));
            content.push(ContentPart::Image {
                image: image.clone(),
                label: Some("target".to_owned()),
            });
        }
        ChatMessage::user(content)
    }

    pub(crate) fn emit(&mut self, event: RunEvent) -> Result<(), Interrupt> {
        let timed = self
            .log
            .append(event)
            .map_err(|err| Interrupt::Fatal(format!("cannot write the event log: {err}")))?;
        self.link.send(timed);
        Ok(())
    }

    /// Awaits `work` unless the user cancels first.
    pub(crate) async fn cancellable<T>(
        &self,
        work: impl Future<Output = T>,
    ) -> Result<T, Interrupt> {
        Ok(self.link.until_cancelled(work).await?)
    }

    /// Asks the model as `role`, which the request carries from here on (every model call of
    /// the loop comes through here, so none goes without one). A cancel abandons the call at
    /// once.
    pub(crate) async fn call_model(
        &mut self,
        index: u32,
        role: ModelRole,
        mut request: ModelRequest,
        tally: &mut Tally,
    ) -> Result<ModelResponse, Interrupt> {
        request.role = Some(role);
        let provider = Arc::clone(&self.provider);
        let started = Instant::now();
        let response = self
            .cancellable(async move { provider.complete(&request).await })
            .await?
            .map_err(|err| Interrupt::Fatal(format!("model call failed: {err}")))?;
        let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
        tally.usage += response.usage;
        self.emit(RunEvent::ModelCalled {
            index,
            role,
            latency_ms,
            usage: response.usage,
        })?;
        Ok(response)
    }

    fn request(&self, system: &str, messages: Vec<ChatMessage>) -> ModelRequest {
        let mut request = ModelRequest::new(system, messages);
        request.max_tokens = self.config.max_tokens;
        request
    }

    fn memory_text(&self) -> String {
        let block = self.memory.context_block();
        if block.trim().is_empty() {
            "Memory: none yet; this is the first iteration.".to_owned()
        } else {
            format!("Memory of recent iterations (oldest first):\n{block}")
        }
    }

    fn anchor_message(&self) -> ChatMessage {
        self.memory
            .anchor()
            .cloned()
            .unwrap_or_else(|| Self::anchor(&self.config, self.target.as_ref()))
    }

    pub(crate) async fn run(mut self) -> Result<RunOutcome, CoreError> {
        let mut recorded = self.first_index.saturating_sub(1);
        let stop = match self.iterate(&mut recorded).await {
            Ok(stop) => stop,
            Err(Interrupt::Cancelled) => StopReason::Cancelled,
            Err(Interrupt::Fatal(message)) => StopReason::Failed { message },
        };
        if let Err(err) = self.save_final_scene().await {
            let _ = self.emit(RunEvent::Warning {
                message: format!("final scene not saved: {}", interrupt_text(&err)),
            });
        }
        let finished = RunEvent::RunFinished {
            stop: stop.clone(),
            iterations: recorded,
        };
        if let Err(err) = self.emit(finished) {
            return Err(CoreError::Config(interrupt_text(&err)));
        }
        Ok(RunOutcome {
            stop,
            iterations: recorded,
            folder: self.folder.root().to_path_buf(),
            final_code: self.final_code.clone(),
        })
    }

    async fn iterate(&mut self, recorded: &mut u32) -> Result<StopReason, Interrupt> {
        for index in self.first_index..=self.config.max_iterations {
            let record = self.iteration(index).await?;
            let accepted = record.feedback.as_ref().is_some_and(|f| f.accepted);
            self.memory.push(record.clone());
            *recorded = index;
            self.emit(RunEvent::IterationFinished {
                record: Box::new(record),
            })?;
            if accepted {
                return Ok(StopReason::Accepted);
            }
        }
        Ok(StopReason::MaxIterations)
    }

    async fn iteration(&mut self, index: u32) -> Result<IterationRecord, Interrupt> {
        let started = Instant::now();
        let mut tally = Tally::default();
        self.emit(RunEvent::IterationStarted { index })?;
        self.tools.reset_view();
        self.tools
            .set_render_folder(Some(self.folder.renders_dir(index)?));
        let (plan, attempt) = self.generate(index, &mut tally).await?;
        let (feedback, render_ids) = self.critique(index, &attempt, &mut tally).await?;
        self.emit(RunEvent::FeedbackProduced {
            index,
            feedback: feedback.clone(),
        })?;
        self.write_scores()?;
        tally.timings.total_ms = started.elapsed().as_secs_f64() * 1000.0;
        Ok(IterationRecord {
            index,
            plan,
            code: attempt.code.unwrap_or_default(),
            execution: attempt.result,
            feedback: Some(feedback),
            retry_count: attempt.retries,
            failure: attempt.failure,
            retry_errors: attempt.retry_errors,
            render_ids,
            timings: tally.timings,
            usage: tally.usage,
        })
    }

    /// The generator's half of an iteration: the plan (when enabled), the program and its
    /// fast retries. The thoughts and the program kept are written to the run folder.
    async fn generate(
        &mut self,
        index: u32,
        tally: &mut Tally,
    ) -> Result<(Option<String>, Attempt), Interrupt> {
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
                "{}\n\nPlan for iteration {index}:\n{}\n\nWrite the whole scene program.",
                self.memory_text(),
                plan.as_deref()
                    .unwrap_or("(no separate plan: decide the edits yourself)")
            )),
        ];
        let request = self.request(&self.prompts.generator.clone(), conversation.clone());
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
            self.folder.write_code(index, code)?;
        }
        Ok((plan, attempt))
    }

    /// The iteration's critique and the renders behind it: the verifier's whenever the
    /// program ran, even when all fast retries failed (seed 002); a synthetic one when no
    /// program ran (E0, E2), since there is nothing new to look at.
    async fn critique(
        &mut self,
        index: u32,
        attempt: &Attempt,
        tally: &mut Tally,
    ) -> Result<(Feedback, Vec<String>), Interrupt> {
        if let Some(failure @ (FailureClass::E0 | FailureClass::E2)) = attempt.failure {
            return Ok((nothing_ran(index, failure), Vec::new()));
        }
        let verification_started = Instant::now();
        let verdict: Verdict = verify(self, index, &attempt.result, tally).await?;
        tally.timings.verification_ms += verification_started.elapsed().as_secs_f64() * 1000.0;
        self.folder
            .write_verifier_thought(index, &verdict.thoughts)?;
        if attempt.failure.is_none() {
            self.final_code = attempt.code.clone();
        }
        Ok((verdict.feedback, verdict.render_ids))
    }

    async fn plan(&mut self, index: u32, tally: &mut Tally) -> Result<String, Interrupt> {
        let messages = vec![
            self.anchor_message(),
            ChatMessage::user_text(format!(
                "{}\n\nWrite the plan for iteration {index}.",
                self.memory_text()
            )),
        ];
        let request = self.request(&self.prompts.plan.clone(), messages);
        Ok(self
            .call_model(index, ModelRole::Planner, request, tally)
            .await?
            .text
            .trim()
            .to_owned())
    }

    /// Runs the generator's program; on E1/E2 asks for a fix with seed 002's prompt, at most
    /// `max_fast_retries` times. Retries are not iterations: only the last attempt is kept.
    async fn attempt_with_fast_retry(
        &mut self,
        index: u32,
        conversation: &mut Vec<ChatMessage>,
        mut answer: ModelResponse,
        thoughts: &mut String,
        tally: &mut Tally,
    ) -> Result<Attempt, Interrupt> {
        let mut retry_errors = Vec::new();
        let mut attempt_number = 0;
        loop {
            let code = first_python_block(&answer.text);
            let tried = self
                .try_program(index, attempt_number, code.as_deref(), tally)
                .await?;
            let retryable = tried.failure.is_some_and(FailureClass::is_fast_retryable);
            if !retryable || attempt_number >= self.config.max_fast_retries {
                return Ok(Attempt {
                    code,
                    result: tried.result,
                    failure: tried.failure,
                    retries: attempt_number,
                    retry_errors,
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
            answer = self
                .ask_for_fix(index, conversation, &answer, &tried.error_message, tally)
                .await?;
            thoughts.push_str(&format!(
                "\n## Fast retry {}\n\n{}\n",
                attempt_number + 1,
                answer.text
            ));
            attempt_number += 1;
        }
    }

    /// Runs one attempt's program (an answer without one is E2) and announces it.
    async fn try_program(
        &mut self,
        index: u32,
        attempt: u32,
        code: Option<&str>,
        tally: &mut Tally,
    ) -> Result<Tried, Interrupt> {
        let tried = match code {
            None => Tried {
                result: ExecutionResult::default(),
                failure: Some(FailureClass::E2),
                error_message: "Your answer contained no fenced ```python code block.".to_owned(),
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
                        error_message: describe_execution(&result),
                        result,
                    },
                    Executed::WorkerLost(message) => Tried {
                        result: ExecutionResult::default(),
                        failure: Some(FailureClass::E0),
                        error_message: message,
                    },
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
        error_message: &str,
        tally: &mut Tally,
    ) -> Result<ModelResponse, Interrupt> {
        let generation_started = Instant::now();
        conversation.push(ChatMessage::assistant(vec![ContentPart::text(
            failed.text.clone(),
        )]));
        conversation.push(ChatMessage::user_text(fill(
            &self.prompts.fast_fix,
            &[("error_message", error_message.to_owned())],
        )));
        let request = self.request(&self.prompts.generator.clone(), conversation.clone());
        let answer = self
            .call_model(index, ModelRole::FastFix, request, tally)
            .await?;
        tally.timings.generation_ms += generation_started.elapsed().as_secs_f64() * 1000.0;
        Ok(answer)
    }

    /// Executes a program on the reloaded base scene. A worker lost and restarted gets the
    /// same program once more (an infrastructure hiccup is not the program's fault); a worker
    /// that cannot be restarted stops the run.
    async fn execute(&mut self, code: &str, tally: &mut Tally) -> Result<Executed, Interrupt> {
        let mut lost_once = false;
        loop {
            let blender = Arc::clone(&self.blender);
            let reset = Self::base_scene(&self.config);
            let started = Instant::now();
            let outcome = self
                .cancellable(async move { blender.execute(code, Some(reset), None).await })
                .await?;
            tally.timings.execution_ms += started.elapsed().as_secs_f64() * 1000.0;
            match outcome {
                Ok(result) => return Ok(Executed::Ran(result)),
                Err(TransportError::Lost {
                    reason,
                    recovery: recovery @ Recovery::Restarted { .. },
                    ..
                }) => {
                    let message = format!("Blender worker lost ({reason}); {recovery}");
                    self.emit(RunEvent::WorkerRestarted {
                        reason: message.clone(),
                    })?;
                    if lost_once {
                        return Ok(Executed::WorkerLost(message));
                    }
                    lost_once = true;
                }
                Err(err) => return Err(Interrupt::Fatal(format!("Blender failed: {err}"))),
            }
        }
    }

    /// With a target image: renders the scene camera at the target's size and scores it.
    pub(crate) async fn score_against_target(
        &mut self,
        index: u32,
    ) -> Result<Option<(String, ImageData)>, Interrupt> {
        let Some(target) = self.target.clone() else {
            return Ok(None);
        };
        let Some(camera) = self.scoring_camera(index).await? else {
            return Ok(None);
        };
        let (width, height) =
            image_size(&target.data).map_err(|err| Interrupt::Fatal(err.to_string()))?;
        let request = RenderRequest {
            camera: Some(camera.clone()),
            pose: None,
            output_path: None,
            // The target's size; Cycles gets 16 samples unless the run names its own.
            spec: viga_protocol::bridge::RenderSpec {
                width,
                height,
                samples: self
                    .config
                    .render
                    .samples
                    .or(match self.config.render.engine {
                        RenderEngine::Cycles => Some(16),
                        _ => None,
                    }),
                ..self.config.render
            },
        };
        let blender = Arc::clone(&self.blender);
        let output = match self
            .cancellable(async move { blender.render(request, None).await })
            .await?
        {
            Ok(output) => output,
            // A program that removed or renamed the target's camera: this iteration cannot be
            // scored, which the model should hear about, but the run goes on.
            Err(err @ TransportError::Refused { .. }) => {
                self.emit(RunEvent::Warning {
                    message: format!(
                        "iteration {index}: camera {camera:?} cannot be rendered for scoring: {err}"
                    ),
                })?;
                return Ok(None);
            }
            Err(err) => return Err(blender_interrupt(err)),
        };
        let render_id = self
            .folder
            .write_render(index, "camera", &output.image.data)?;
        self.emit(RunEvent::RenderProduced {
            index,
            render_id: render_id.clone(),
            view: format!("camera:{camera}"),
            width: output.width,
            height: output.height,
            render_ms: output.render_ms,
        })?;
        match photometric_loss(&output.image.data, &target.data) {
            Ok(loss) => self.scores.record(index, &camera, loss),
            Err(err) => self.emit(RunEvent::Warning {
                message: format!("iteration {index}: photometric loss not computed: {err}"),
            })?,
        }
        Ok(Some((render_id, output.image)))
    }

    /// The camera that sees the scene as the target does: the one the run names, else the
    /// scene's active camera. A scene without one is said in a warning (`None`).
    async fn scoring_camera(&mut self, index: u32) -> Result<Option<String>, Interrupt> {
        let camera = match self.config.target_camera.clone() {
            Some(named) => Some(named),
            None => {
                self.blender
                    .scene_info(0, 1)
                    .await
                    .map_err(blender_interrupt)?
                    .active_camera
            }
        };
        if camera.is_none() {
            self.emit(RunEvent::Warning {
                message: format!("iteration {index}: the scene has no camera, so it cannot be scored against the target"),
            })?;
        }
        Ok(camera)
    }

    fn write_scores(&mut self) -> Result<(), Interrupt> {
        if self.target.is_some() {
            self.folder
                .write_json(crate::folder::SCORES_FILE, &self.scores)?;
        }
        Ok(())
    }

    /// Keeps the last good program as `final.py`, re-runs it on the base scene and saves
    /// the result as `final.blend`.
    async fn save_final_scene(&mut self) -> Result<(), Interrupt> {
        let Some(code) = self.final_code.clone() else {
            return Ok(());
        };
        self.folder
            .write_bytes(crate::folder::FINAL_PROGRAM, code.as_bytes())?;
        let reset = Self::base_scene(&self.config);
        let result = self
            .blender
            .execute(&code, Some(reset), None)
            .await
            .map_err(blender_interrupt)?;
        if !result.succeeded() {
            return Err(Interrupt::Fatal(
                "the final program no longer runs".to_owned(),
            ));
        }
        let path = self
            .folder
            .final_blend_path()
            .to_string_lossy()
            .into_owned();
        self.blender
            .save_blend(&path)
            .await
            .map_err(blender_interrupt)?;
        Ok(())
    }
}

pub(crate) struct Attempt {
    code: Option<String>,
    result: ExecutionResult,
    failure: Option<FailureClass>,
    retries: u32,
    retry_errors: Vec<String>,
}

enum Executed {
    Ran(ExecutionResult),
    WorkerLost(String),
}

/// One attempt's program run (or the lack of one) and what went wrong, in the words the
/// fast fix sends back to the generator.
struct Tried {
    result: ExecutionResult,
    failure: Option<FailureClass>,
    error_message: String,
}

/// The critique of an iteration whose program never ran.
fn nothing_ran(index: u32, failure: FailureClass) -> Feedback {
    Feedback {
        visual_differences: vec![format!(
            "iteration {index} produced no scene: {}",
            failure.describe()
        )],
        suggestions: vec![
            "answer with one fenced ```python block holding the whole program".to_owned(),
        ],
        accepted: false,
    }
}

pub(crate) fn blender_interrupt(err: TransportError) -> Interrupt {
    match ToolError::from(err) {
        ToolError::Recoverable(message) | ToolError::Fatal(message) => {
            Interrupt::Fatal(format!("Blender failed: {message}"))
        }
    }
}

fn interrupt_text(interrupt: &Interrupt) -> String {
    match interrupt {
        Interrupt::Cancelled => "cancelled".to_owned(),
        Interrupt::Fatal(message) => message.clone(),
    }
}

fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    line.chars().take(300).collect()
}
