//! The verifier's turn: score against the targets, show the domain's overview (a scene's
//! canonical views), then let the model look around with its tools until it calls
//! `end_process` with a verdict.

use std::sync::Arc;

use viga_protocol::event::{ModelRole, RunEvent};
use viga_protocol::iteration::{FailureClass, Feedback};
use viga_protocol::json_candidates;
use viga_protocol::message::{ChatMessage, ContentPart, ToolCall, ToolResult};
use viga_provider::{FinishReason, ModelRequest, ModelResponse};
use viga_skills::generator::describe_execution;
use viga_skills::{CapturedRender, Control, ToolError, ToolOutput};

use crate::CoreError;
use crate::excerpt::execution_for_prompt;
use crate::offered::OfferedTools;
use crate::program::Attempt;
use crate::recover::PhaseEnd;
use crate::run::{Run, Tally, task_parts};
use crate::written_calls::{not_an_answer, with_tool_call_from_text};

/// Told with a tool's result when the worker was lost while the tool ran: the result was
/// rebuilt from the program, so what earlier tools changed in it is gone.
fn rebuilt_note(worker: &str) -> String {
    format!(
        "({worker} was restarted meanwhile and the result rebuilt from the program: objects hidden and frames set earlier in this verification are back as the program left them.)"
    )
}

pub(crate) struct Verdict {
    pub feedback: Feedback,
    pub render_ids: Vec<String>,
    pub thoughts: String,
}

/// Writes renders to the run folder, announces them, and counts their time.
fn save_renders(
    run: &mut Run,
    index: u32,
    renders: &[CapturedRender],
    ids: &mut Vec<String>,
    tally: &mut Tally,
) -> Result<(), CoreError> {
    for render in renders {
        tally.timings.render_ms += render.picture.render_ms;
        let (render_id, announced) = run.folder.keep_render(index, render, || ids.len() + 1)?;
        run.emit(announced)?;
        ids.push(render_id);
    }
    Ok(())
}

/// The verifier's turn for one iteration: the domain's notes on the result, what the
/// verifier is shown first, then up to `verifier_max_turns` model turns with its tools until
/// `end_process` gives the verdict. The notes lead the verdict's differences, so the memory
/// (and with it the next generator turn) keeps them whatever the verifier concluded.
pub(crate) async fn verify(
    run: &mut Run,
    index: u32,
    attempt: &Attempt,
    tally: &mut Tally,
) -> Result<Verdict, CoreError> {
    let notes = result_notes(run, index).await?;
    for note in &notes {
        run.emit(RunEvent::Warning {
            message: format!("iteration {index}: {note}"),
        })?;
    }
    let mut verdict = verdict(run, index, attempt, &notes, tally).await?;
    let differences = &mut verdict.feedback.visual_differences;
    differences.splice(0..0, notes.iter().map(|note| format!("viga: {note}")));
    Ok(verdict)
}

/// The domain's notes on the result; the worker lost meanwhile is restarted, the result
/// rebuilt and the check made again. A check that cannot be made is a warning, not a stop.
async fn result_notes(run: &mut Run, index: u32) -> Result<Vec<String>, CoreError> {
    let phase = format!("iteration {index}: checking the result");
    let mut redos = 0;
    let checked = loop {
        let mark = run.domain.watch().mark();
        let domain = Arc::clone(&run.domain);
        let checked = run
            .cancellable(domain.result_notes())
            .await
            .and_then(|checked| {
                checked.map_err(|err| CoreError::worker("checking the result failed", err))
            });
        match run.phase_end(&phase, mark, &mut redos, &checked).await? {
            PhaseEnd::Done => break checked,
            PhaseEnd::Redo => {}
            PhaseEnd::GaveUp(_) => return Ok(Vec::new()),
        }
    };
    match checked {
        Ok(notes) => Ok(notes),
        Err(CoreError::Cancelled) => Err(CoreError::Cancelled),
        Err(err) => {
            run.emit(RunEvent::Warning {
                message: format!("{phase}: {err}"),
            })?;
            Ok(Vec::new())
        }
    }
}

async fn verdict(
    run: &mut Run,
    index: u32,
    attempt: &Attempt,
    notes: &[String],
    tally: &mut Tally,
) -> Result<Verdict, CoreError> {
    let mut render_ids = Vec::new();
    let refusals = run.domain.watch().refusal_mark();
    let opening = first_look(run, index, attempt, notes, &mut render_ids, tally).await?;
    if run.domain.watch().refused_since(refusals).is_some() {
        // A reply was refused while looking: the program failed, and the iteration's critique
        // says so in place of any verdict, so the verifier is not asked (and paid) for one.
        return Ok(Verdict {
            feedback: Feedback::default(),
            render_ids,
            thoughts: String::new(),
        });
    }
    let tools = OfferedTools::verifier(run.domain.as_ref())?;
    let mut messages = vec![ChatMessage::user(opening)];
    let mut thoughts = format!("# Verification of iteration {index}\n");
    let mut last_text = String::new();
    for turn in 0..run.config.verifier_max_turns {
        let mut request = ModelRequest::new(run.prompts.verifier.clone(), messages.clone());
        request.tools = tools.specs();
        let response = run
            .call_model(index, ModelRole::Verifier, request, tally)
            .await?;
        if !response.text.trim().is_empty() {
            thoughts.push_str(&format!("\n{}\n", response.text.trim()));
            last_text = response.text.clone();
        }
        let response = with_tool_call_from_text(response, |name| tools.offers(name), index, turn);
        if response.tool_calls.is_empty()
            && turn + 1 < run.config.verifier_max_turns
            && let Some(told) = what_went_wrong(run, &tools, &response)
        {
            // A cut-off reply was announced where the model was called.
            if response.finish_reason != FinishReason::Length {
                run.emit(RunEvent::Warning {
                    message: format!(
                        "iteration {index}: the verifier: {}",
                        crate::written_calls::first_sentence(&told)
                    ),
                })?;
            }
            messages.push(ChatMessage::assistant(vec![ContentPart::text(
                crate::cut_off::kept(&response),
            )]));
            messages.push(ChatMessage::user_text(told));
            continue;
        }
        if response.tool_calls.is_empty() {
            let feedback = feedback_from_text(&response.text);
            return Ok(Verdict {
                feedback,
                render_ids,
                thoughts,
            });
        }
        let turn = use_tools(run, &tools, index, &response, &mut render_ids, tally).await;
        // Calls its tools made to the model (a camera instruction translated) are the
        // iteration's too, whatever came of the turn.
        record_tool_model_calls(run, index, tally)?;
        let turn = turn?;
        thoughts.push_str(&turn.thoughts);
        if let Some(feedback) = turn.verdict {
            return Ok(Verdict {
                feedback,
                render_ids,
                thoughts,
            });
        }
        messages.push(ChatMessage::assistant(turn.assistant));
        messages.push(ChatMessage::user(turn.results));
    }
    let mut feedback = feedback_from_text(&last_text);
    feedback.visual_differences.insert(
        0,
        format!(
            "the verifier did not call end_process within {} turns",
            run.config.verifier_max_turns
        ),
    );
    Ok(Verdict {
        feedback,
        render_ids,
        thoughts,
    })
}

/// Records the model calls the domain's tools made (see [`crate::Domain::take_model_calls`])
/// as `ModelCalled` events, their tokens counted in the iteration's.
fn record_tool_model_calls(run: &mut Run, index: u32, tally: &mut Tally) -> Result<(), CoreError> {
    for call in run.domain.take_model_calls() {
        tally.usage += call.usage;
        run.emit(RunEvent::ModelCalled {
            index,
            role: call.role,
            latency_ms: call.latency_ms,
            usage: call.usage,
        })?;
    }
    Ok(())
}

/// What the verifier is told about an answer without a call that went wrong: cut off at the
/// output limit, or a call written so that nobody could read it.
fn what_went_wrong(run: &Run, tools: &OfferedTools, response: &ModelResponse) -> Option<String> {
    not_an_answer(
        response,
        run.config.verifier_max_tokens,
        "a few sentences at most, then the end_process call",
        &tools.specs(),
    )
}

/// The verifier's first message: the task and targets, the domain's notes on the result,
/// each target's view of the result scored against it, the domain's overview (a scene's canonical views), how the program
/// ran, and the generator's request to stop when it made one.
async fn first_look(
    run: &mut Run,
    index: u32,
    attempt: &Attempt,
    notes: &[String],
    render_ids: &mut Vec<String>,
    tally: &mut Tally,
) -> Result<Vec<ContentPart>, CoreError> {
    let mut content = task_parts(&run.config, run.domain.as_ref(), &run.targets);
    if !notes.is_empty() {
        content.push(ContentPart::text(format!(
            "viga checked the result of iteration {index} before you look at it:\n- {}",
            notes.join("\n- ")
        )));
    }
    for look in run.score_targets(index).await? {
        render_ids.push(look.render_id);
        let (text, label) = if look.label == "default" {
            (
                "The current result from the target's view (same view as the target):".to_owned(),
                "current, target's view".to_owned(),
            )
        } else {
            (
                format!("The current result from the view of target {}:", look.label),
                format!("current {}", look.label),
            )
        };
        content.push(ContentPart::text(text));
        content.push(ContentPart::Image {
            image: look.image,
            label: Some(label),
        });
    }
    content.extend(overview(run, index, render_ids, tally).await?);
    let end_request = attempt
        .end_request
        .as_ref()
        .map(|reason| {
            format!(
                "\nThe generator asks to stop here: {reason}\nAccept only if the result really matches."
            )
        })
        .unwrap_or_default();
    let how_it_ran = if attempt.failure == Some(FailureClass::E2) {
        "No program came back in this iteration (the generator's answers held no whole program, after every fast retry): what you see is the scene the last program that ran left, or the starting scene. Say what the next program must do.".to_owned()
    } else {
        describe_execution(&execution_for_prompt(&attempt.result))
    };
    content.push(ContentPart::text(format!(
        "Iteration {index}. {how_it_ran}{end_request}\nCompare the result with the target and finish with end_process."
    )));
    Ok(content)
}

/// The domain's overview of the result (a scene from iso, front, right and top as one
/// labelled montage); one that cannot be made is said in words, so the verifier still gets
/// its turn.
async fn overview(
    run: &mut Run,
    index: u32,
    render_ids: &mut Vec<String>,
    tally: &mut Tally,
) -> Result<Vec<ContentPart>, CoreError> {
    let phase = format!("iteration {index}: rendering the overview");
    let mut redos = 0;
    let looked = loop {
        let mark = run.domain.watch().mark();
        let domain = Arc::clone(&run.domain);
        let looked = run.cancellable(domain.overview()).await;
        match run.phase_end(&phase, mark, &mut redos, &looked).await? {
            PhaseEnd::Done => break looked?,
            PhaseEnd::Redo => {}
            PhaseEnd::GaveUp(message) => break Err(ToolError::Recoverable(message)),
        }
    };
    match looked {
        Ok(output) => {
            save_renders(run, index, &output.renders, render_ids, tally)?;
            let mut content = vec![ContentPart::text(format!(
                "The current result, overview. {}",
                output.text
            ))];
            content.extend(output.images.into_iter().map(|image| ContentPart::Image {
                image,
                label: Some("current: overview".to_owned()),
            }));
            Ok(content)
        }
        Err(ToolError::Recoverable(message)) => Ok(vec![ContentPart::text(format!(
            "No overview could be rendered: {message}"
        ))]),
        Err(ToolError::Fatal(message)) => Err(CoreError::Tool(message)),
    }
}

/// What one verifier turn's tool calls produced.
struct ToolTurn {
    /// The model's turn as the conversation keeps it: its text and its calls.
    assistant: Vec<ContentPart>,
    /// One result per call, for the next user message.
    results: Vec<ContentPart>,
    /// Set when the verifier called `end_process`.
    verdict: Option<Feedback>,
    thoughts: String,
}

/// Runs the tool calls of one verifier answer in order, saving and announcing their renders.
async fn use_tools(
    run: &mut Run,
    tools: &OfferedTools,
    index: u32,
    response: &ModelResponse,
    render_ids: &mut Vec<String>,
    tally: &mut Tally,
) -> Result<ToolTurn, CoreError> {
    let mut turn = ToolTurn {
        assistant: Vec::new(),
        results: Vec::new(),
        verdict: None,
        thoughts: String::new(),
    };
    if !response.text.is_empty() {
        turn.assistant
            .push(ContentPart::text(response.text.clone()));
    }
    for call in &response.tool_calls {
        turn.assistant.push(ContentPart::ToolCall(call.clone()));
        let (invoked, rebuilt) = invoke(run, tools, "verifier", index, call).await?;
        turn.thoughts
            .push_str(&format!("\n- tool `{}` {}\n", call.name, call.arguments));
        let (mut text, images, is_error) = match invoked {
            Ok(output) => {
                save_renders(run, index, &output.renders, render_ids, tally)?;
                if let Control::EndVerification(feedback) = output.control {
                    turn.verdict = Some(feedback);
                }
                (output.text, output.images, false)
            }
            Err(ToolError::Recoverable(message)) => (message, Vec::new(), true),
            Err(ToolError::Fatal(message)) => return Err(CoreError::Tool(message)),
        };
        if rebuilt {
            text = format!("{text}\n{}", rebuilt_note(run.domain.worker_name()));
        }
        run.emit(RunEvent::ToolInvoked {
            index,
            tool: call.name.clone(),
            ok: !is_error,
            summary: text.chars().take(200).collect(),
            arguments: Some(call.arguments.clone()),
            result: None,
        })?;
        turn.results.push(ContentPart::ToolResult(ToolResult {
            call_id: call.id.clone(),
            text,
            images,
            is_error,
        }));
    }
    Ok(turn)
}

/// Runs one tool call of `role` (the verifier's, the generator's). The worker lost while it
/// ran is restarted, the result rebuilt and the call made again; `true` beside the answer
/// when that happened.
pub(crate) async fn invoke(
    run: &mut Run,
    tools: &OfferedTools,
    role: &str,
    index: u32,
    call: &ToolCall,
) -> Result<(Result<ToolOutput, ToolError>, bool), CoreError> {
    let phase = format!("iteration {index}: the {role}'s tool `{}`", call.name);
    let mut redos = 0;
    loop {
        let mark = run.domain.watch().mark();
        let domain = Arc::clone(&run.domain);
        let invoked = run
            .cancellable(tools.invoke(domain.as_ref(), &call.name, call.arguments.clone()))
            .await;
        match run.phase_end(&phase, mark, &mut redos, &invoked).await? {
            PhaseEnd::Done => return Ok((invoked?, redos > 0)),
            PhaseEnd::Redo => {}
            PhaseEnd::GaveUp(message) => return Ok((Err(ToolError::Recoverable(message)), true)),
        }
    }
}

/// A verdict written as text: a JSON object (fenced or bare) in the Feedback shape, or else
/// the text itself as one difference, never accepted.
pub(crate) fn feedback_from_text(text: &str) -> Feedback {
    if let Some(feedback) =
        json_candidates(text).find_map(|json| viga_protocol::parse_json::<Feedback>(json).ok())
    {
        return feedback;
    }
    let trimmed = text.trim();
    Feedback {
        visual_differences: if trimmed.is_empty() {
            Vec::new()
        } else {
            vec![trimmed.to_owned()]
        },
        suggestions: Vec::new(),
        accepted: false,
    }
}

#[cfg(test)]
mod tests {
    use super::feedback_from_text;

    #[test]
    fn text_verdicts() {
        let json = "Verdict:\n```json\n{\"visual_differences\": [\"too red\"], \"suggestions\": [\"blue\"], \"accepted\": false}\n```";
        assert_eq!(feedback_from_text(json).suggestions, ["blue"]);
        let prose = feedback_from_text("The sphere is too small. {not json}");
        assert_eq!((prose.visual_differences.len(), prose.accepted), (1, false));
        assert!(feedback_from_text("  ").visual_differences.is_empty());
    }
}
