//! The loop of one agent run: each step one model call whose tool calls run in order, the
//! scene looked at after each step, add-ons that appear or go followed, and the transcript
//! and events written as it goes.

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;
use viga_blender::BlenderCommands as _;
use viga_protocol::event::{ModelRole, RunEvent, StopReason};
use viga_protocol::message::{ChatMessage, ContentPart, ToolCall, ToolResult};
use viga_provider::{ModelRequest, ModelResponse};
use viga_skills::CapturedRender;
use viga_skills::addons::AddonSetChange;
use viga_skills::scene::summarize;

use viga_core::CoreError;
use viga_core::prompts::fill;
use viga_core::written_calls::with_tool_call_from_text;

use super::tools::{CallOutcome, SCENE_LISTING_TOOL, ToolBelt};
use super::{
    AgentOutcome, AgentRun, AgentStep, CommandRecord, OPENING_SCENE_OBJECTS, SUMMARY_CHARS,
    SYSTEM_PROMPT, TRANSCRIPT_FILE, absolute,
};

/// How the conversation ended, when nobody stopped it.
enum Ending {
    /// The model answered without a tool call.
    Answered(String),
    /// `max_steps` model calls were made.
    OutOfSteps,
}

impl AgentRun {
    pub(super) async fn run(mut self) -> Result<AgentOutcome, CoreError> {
        let (stop, answer) = match self.converse().await {
            Ok(Ending::Answered(text)) => (StopReason::Accepted, Some(text)),
            Ok(Ending::OutOfSteps) => (StopReason::MaxIterations, None),
            Err(CoreError::Cancelled) => (self.link.stop_reason(), None),
            Err(err) => (StopReason::failed(err.to_string(), err.kind()), None),
        };
        self.transcript.answer.clone_from(&answer);
        if let Err(err) = self.write_transcript() {
            self.warn(&format!("the transcript was not saved: {err}"));
        }
        if !self.config.attached
            && let Err(err) = self.save_final_scene().await
        {
            self.warn(&format!("the final scene was not saved: {err}"));
        }
        let finished = RunEvent::RunFinished {
            stop: stop.clone(),
            iterations: self.steps_taken,
        };
        self.emit(finished)?;
        Ok(AgentOutcome {
            stop,
            steps: self.steps_taken,
            answer,
            folder: self.folder.root().to_path_buf(),
        })
    }

    /// The opening message, then one model call per step, each followed by its tool calls,
    /// until the model answers or the steps run out.
    async fn converse(&mut self) -> Result<Ending, CoreError> {
        if !self.config.attached {
            self.belt.record_base_step().await?;
        }
        let mut messages = vec![ChatMessage::user_text(self.opening().await?)];
        for step in 1..=self.config.max_steps {
            if self.link.is_cancelled() {
                return Err(CoreError::Cancelled);
            }
            self.follow_addon_changes().await?;
            let response = self.ask(step, &messages).await?;
            // A call written as text is a call (an offered tool's or not): an answer that is
            // only a tool call never ends the conversation.
            let belt = &self.belt;
            let response = with_tool_call_from_text(response, |name| belt.offers(name), step, 0);
            if response.tool_calls.is_empty() {
                let Some(told) = self.what_went_wrong(&response) else {
                    return Ok(Ending::Answered(response.text.trim().to_owned()));
                };
                // Not an answer: the model is told what went wrong and asked again.
                messages.push(ChatMessage::assistant(vec![ContentPart::text(
                    viga_core::cut_off::kept(&response),
                )]));
                messages.push(ChatMessage::user_text(told));
                continue;
            }
            let (assistant, mut results, commanded) = self.use_tools(step, &response).await?;
            if commanded && self.config.look_after_commands {
                results.extend(self.look_after_step(step).await?);
            }
            messages.push(ChatMessage::assistant(assistant));
            messages.push(ChatMessage::user(results));
        }
        Ok(Ending::OutOfSteps)
    }

    /// One look at the scene after a step's commands, kept and announced; the model is shown
    /// it when it reads images. A look that cannot be made is a warning.
    async fn look_after_step(&mut self, step: u32) -> Result<Vec<ContentPart>, CoreError> {
        self.belt.keep_renders_in(self.folder.renders_dir(step)?);
        let render = match self.belt.look_at_scene().await? {
            Ok(render) => render,
            Err(why) => {
                self.warn(&format!("no look at the scene after step {step}: {why}"));
                return Ok(Vec::new());
            }
        };
        self.save_renders(step, std::slice::from_ref(&render))?;
        if !self.config.model_sees {
            return Ok(Vec::new());
        }
        Ok(vec![
            ContentPart::text(format!("The scene after step {step}:")),
            ContentPart::Image {
                image: render.picture.image,
                label: Some(format!("the scene after step {step}")),
            },
        ])
    }

    /// Asks Blender which add-ons it has now: one enabled or disabled since the last turn
    /// appears in (or leaves) this turn's tools and system prompt, without a restart. A
    /// listing that fails keeps the add-ons known so far.
    async fn follow_addon_changes(&mut self) -> Result<(), CoreError> {
        let folder = self.config.addons_folder.clone();
        let change = match self
            .addons
            .refresh(self.blender.as_ref(), folder.as_deref())
            .await
        {
            Ok(change) => change,
            Err(err) => {
                self.warn(&format!("the add-ons could not be listed again: {err}"));
                return Ok(());
            }
        };
        if change == AddonSetChange::Unchanged {
            return Ok(());
        }
        self.belt = ToolBelt::new(
            &self.addons,
            Arc::clone(&self.blender),
            self.config.render,
            Arc::clone(&self.translator),
            self.belt.results().cloned(),
        )
        .map_err(CoreError::Config)?;
        self.system = fill(SYSTEM_PROMPT, &[("addons", self.addons.prompt_section())]);
        self.transcript.addons = self.addons.ids().into_iter().map(str::to_owned).collect();
        self.transcript.tools = self.belt.names();
        let now = self.addons.ids().join(", ");
        self.warn(&format!("the add-ons changed; offered now: {now}"));
        Ok(())
    }

    /// The request and the scene as it is, so the first step already knows every object's
    /// exact name.
    async fn opening(&mut self) -> Result<String, CoreError> {
        let scene = self
            .blender
            .scene_info(0, OPENING_SCENE_OBJECTS)
            .await
            .map_err(|err| crate::blender_error("Blender could not describe the scene", err))?;
        self.transcript.opening_scene = summarize(&scene);
        self.write_transcript()?;
        let earlier = viga_core::conversation::earlier_turns_text(
            &self.config.conversation,
            self.config.starts_from,
        )
        .map(|text| format!("{text}\n\n"))
        .unwrap_or_default();
        Ok(format!(
            "{earlier}Request: {}\n\nThe scene now:\n{}\n\nCarry out the request with the add-on tools, then answer without a tool call.",
            self.config.task, self.transcript.opening_scene
        ))
    }

    /// One model call as the agent; a cancel abandons it at once.
    async fn ask(
        &mut self,
        step: u32,
        messages: &[ChatMessage],
    ) -> Result<ModelResponse, CoreError> {
        let mut request =
            ModelRequest::for_role(ModelRole::Agent, self.system.clone(), messages.to_vec());
        request.tools = self.belt.specs();
        request.max_tokens = self.config.max_tokens;
        let started = Instant::now();
        let response = self
            .link
            .ask_model(self.provider.as_ref(), &request, step, ModelRole::Agent)
            .await??;
        self.steps_taken = step;
        self.emit(RunEvent::ModelCalled {
            index: step,
            role: ModelRole::Agent,
            latency_ms: started.elapsed().as_secs_f64() * 1000.0,
            usage: response.usage,
        })?;
        Ok(response)
    }

    /// What the model is told about an answer without a call that is not an answer: cut off
    /// at the output limit, or a call written so that nobody could read it.
    fn what_went_wrong(&mut self, response: &ModelResponse) -> Option<String> {
        let told = viga_core::written_calls::not_an_answer(
            response,
            self.config.max_tokens,
            "one or two tool calls, or your final answer in a few sentences",
            &self.belt.specs(),
        )?;
        let problem = viga_core::written_calls::first_sentence(&told);
        self.warn(&format!("step {}: {problem}", self.steps_taken));
        Some(told)
    }

    /// Runs one step's tool calls in order: the assistant's turn as the conversation keeps
    /// it, one result per call for the next message, and whether an add-on command ran.
    async fn use_tools(
        &mut self,
        step: u32,
        response: &ModelResponse,
    ) -> Result<(Vec<ContentPart>, Vec<ContentPart>, bool), CoreError> {
        let mut assistant = Vec::new();
        if !response.text.trim().is_empty() {
            assistant.push(ContentPart::text(response.text.clone()));
        }
        self.transcript.steps.push(AgentStep {
            index: step,
            text: response.text.trim().to_owned(),
            calls: Vec::new(),
        });
        let mut results = Vec::new();
        let mut commanded = false;
        for call in &response.tool_calls {
            if self.link.is_cancelled() {
                return Err(CoreError::Cancelled);
            }
            assistant.push(ContentPart::ToolCall(call.clone()));
            let ran = self.run_call(step, call).await;
            // A camera instruction its look translated with the model is a call of the run.
            for translated in self.translations.take() {
                self.emit(RunEvent::ModelCalled {
                    index: step,
                    role: translated.role,
                    latency_ms: translated.latency_ms,
                    usage: translated.usage,
                })?;
            }
            let (record, result) = ran?;
            commanded |= record.undo_step.is_some();
            self.emit(RunEvent::ToolInvoked {
                index: step,
                tool: record.tool.clone(),
                ok: record.ok,
                summary: summary(&record),
                arguments: Some(record.arguments.clone()),
                result: Some(told_to_model(&record)),
            })?;
            if let Some(current) = self.transcript.steps.last_mut() {
                current.calls.push(record);
            }
            self.write_transcript()?;
            results.push(ContentPart::ToolResult(result));
        }
        Ok((assistant, results, commanded))
    }

    /// One tool call: its record for the transcript and its result for the model.
    async fn run_call(
        &mut self,
        step: u32,
        call: &ToolCall,
    ) -> Result<(CommandRecord, ToolResult), CoreError> {
        if self.belt.is_look(&call.name) {
            self.belt.keep_renders_in(self.folder.renders_dir(step)?);
        }
        let mut record = CommandRecord {
            tool: call.name.clone(),
            arguments: call.arguments.clone(),
            ok: true,
            result: Value::Null,
            scene: Vec::new(),
            render_ids: Vec::new(),
            undo_step: None,
        };
        let mut result = ToolResult {
            call_id: call.id.clone(),
            text: String::new(),
            images: Vec::new(),
            is_error: false,
        };
        self.emit(RunEvent::ToolStarted {
            index: step,
            tool: call.name.clone(),
            arguments: call.arguments.clone(),
        })?;
        match self.belt.call(call).await? {
            CallOutcome::Commanded { reply, undo_step } => {
                // The bridge's own reply, as JSON: the model reads the scene after its
                // command as data.
                result.text = serde_json::to_string(&reply).map_err(|err| {
                    CoreError::Tool(format!("the add-on reply cannot be sent on: {err}"))
                })?;
                record.result = reply.result;
                record.scene = reply.scene;
                record.undo_step = Some(undo_step);
                // An add-on that declares a scene listing gives its view of the scene too
                // (seed 004), beside viga's summary, which has every object's place. Not in
                // a person's Blender, where every add-on command is an undo step of its own
                // and a listing would be a Ctrl-Z that does nothing.
                if call.name != SCENE_LISTING_TOOL
                    && !self.config.attached
                    && let Some(listing) = self.belt.declared_scene_listing().await
                {
                    result.text = serde_json::json!({
                        "result": record.result,
                        "scene": record.scene,
                        "listed_by_addon": listing,
                    })
                    .to_string();
                }
            }
            CallOutcome::Answered(output) => {
                record.render_ids = self.save_renders(step, &output.renders)?;
                record.result = Value::String(output.text.clone());
                result.text = output.text;
                result.images = output.images;
            }
            CallOutcome::Refused(message) => {
                record.ok = false;
                record.result = Value::String(message.clone());
                result.text = message;
                result.is_error = true;
            }
        }
        Ok((record, result))
    }

    /// Keeps a look's renders in the run folder and announces them; returns their ids.
    fn save_renders(
        &mut self,
        step: u32,
        renders: &[CapturedRender],
    ) -> Result<Vec<String>, CoreError> {
        let mut ids = Vec::with_capacity(renders.len());
        for render in renders {
            // Only renders written here take a number.
            let mut saved = self.renders_saved;
            let (render_id, announced) = self.folder.keep_render(step, render, || {
                saved += 1;
                saved as usize
            })?;
            self.renders_saved = saved;
            self.emit(announced)?;
            ids.push(render_id);
        }
        Ok(ids)
    }

    /// viga's own Blender goes away with the run: its scene is kept as `final.blend`.
    async fn save_final_scene(&self) -> Result<(), String> {
        let path = absolute(&self.folder.final_blend_path()).map_err(|err| err.to_string())?;
        crate::save_scene_as(self.blender.as_ref(), &path)
            .await
            .map_err(|err| err.to_string())
    }

    fn write_transcript(&self) -> Result<(), CoreError> {
        self.folder.write_json(TRANSCRIPT_FILE, &self.transcript)
    }

    fn emit(&mut self, event: RunEvent) -> Result<(), CoreError> {
        let timed = self.log.append(event)?;
        self.link.send(timed);
        Ok(())
    }

    /// A warning in the log; one that cannot be written is not worth stopping the run for.
    fn warn(&mut self, message: &str) {
        let _ = self.emit(RunEvent::Warning {
            message: message.to_owned(),
        });
    }
}

/// What the model was told about a call, as data: an add-on command's result with the scene
/// after it, or the text of a scene tool's answer or of a refusal.
fn told_to_model(record: &CommandRecord) -> Value {
    if record.undo_step.is_some() {
        serde_json::json!({"result": record.result, "scene": record.scene})
    } else {
        record.result.clone()
    }
}

/// `tool(arguments) -> result`, short enough for a progress line.
fn summary(record: &CommandRecord) -> String {
    let outcome = match &record.result {
        Value::String(text) => text.lines().next().unwrap_or_default().to_owned(),
        other => other.to_string(),
    };
    let text = format!(
        "{}({}) {} {outcome}",
        record.tool,
        record.arguments,
        if record.ok { "->" } else { "refused:" }
    );
    if text.chars().count() <= SUMMARY_CHARS {
        return text;
    }
    let mut cut: String = text.chars().take(SUMMARY_CHARS - 3).collect();
    cut.push_str("...");
    cut
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn record(ok: bool, result: Value) -> CommandRecord {
        CommandRecord {
            tool: "place_object_relative".to_owned(),
            arguments: json!({"side": "left"}),
            ok,
            result,
            scene: Vec::new(),
            render_ids: Vec::new(),
            undo_step: None,
        }
    }

    #[test]
    fn summaries_name_the_call_and_what_came_back_in_one_short_line() {
        assert_eq!(
            summary(&record(true, json!({"object": "Lamp"}))),
            r#"place_object_relative({"side":"left"}) -> {"object":"Lamp"}"#
        );
        let refused = summary(&record(false, json!("invalid arguments\nsecond line")));
        assert!(refused.ends_with("refused: invalid arguments"), "{refused}");
        let long = summary(&record(true, json!("é".repeat(500))));
        assert_eq!(long.chars().count(), SUMMARY_CHARS);
        assert!(long.ends_with("..."));
    }
}
