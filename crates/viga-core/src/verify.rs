//! The verifier's turn: score against the target, render the canonical views, then let the
//! model look around with its tools until it calls `end_process` with a verdict.

use viga_protocol::event::{ModelRole, RunEvent};
use viga_protocol::iteration::{ExecutionResult, Feedback};
use viga_protocol::message::{ChatMessage, ContentPart, ToolResult};
use viga_provider::{ModelRequest, ModelResponse};
use viga_skills::generator::describe_execution;
use viga_skills::verifier::{initialize_viewpoint, verifier_tools};
use viga_skills::{CapturedRender, Control, ToolError, ToolRegistry};

use crate::run::{Interrupt, Run, Tally};

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
) -> Result<(), Interrupt> {
    for render in renders {
        tally.timings.render_ms += render.output.render_ms;
        // Renders Blender wrote into the run folder itself are already in place.
        let kept = render
            .file
            .as_deref()
            .and_then(|file| run.folder.id_of(file));
        let render_id = match kept {
            Some(id) => id,
            None => {
                let view = format!("{}-{}", render.view, ids.len() + 1);
                run.folder
                    .write_render(index, &view, &render.output.image.data)?
            }
        };
        run.emit(RunEvent::RenderProduced {
            index,
            render_id: render_id.clone(),
            view: render.view.clone(),
            width: render.output.width,
            height: render.output.height,
            render_ms: render.output.render_ms,
        })?;
        ids.push(render_id);
    }
    Ok(())
}

/// The verifier's turn for one iteration: what it is shown first, then up to
/// `verifier_max_turns` model turns with its tools until `end_process` gives the verdict.
pub(crate) async fn verify(
    run: &mut Run,
    index: u32,
    execution: &ExecutionResult,
    tally: &mut Tally,
) -> Result<Verdict, Interrupt> {
    let mut render_ids = Vec::new();
    let opening = first_look(run, index, execution, &mut render_ids, tally).await?;
    let tools = verifier_tools().map_err(|err| Interrupt::Fatal(err.to_string()))?;
    let mut messages = vec![ChatMessage::user(opening)];
    let mut thoughts = format!("# Verification of iteration {index}\n");
    let mut last_text = String::new();
    for _turn in 0..run.config.verifier_max_turns {
        let mut request = ModelRequest::new(run.prompts.verifier.clone(), messages.clone());
        request.tools = tools.specs();
        request.max_tokens = run.config.max_tokens;
        let response = run
            .call_model(index, ModelRole::Verifier, request, tally)
            .await?;
        if !response.text.trim().is_empty() {
            thoughts.push_str(&format!("\n{}\n", response.text.trim()));
            last_text = response.text.clone();
        }
        if response.tool_calls.is_empty() {
            let feedback = feedback_from_text(&response.text);
            return Ok(Verdict {
                feedback,
                render_ids,
                thoughts,
            });
        }
        let turn = use_tools(run, &tools, index, &response, &mut render_ids, tally).await?;
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

/// The verifier's first message: the task and target, the scene camera's render scored
/// against the target (when there is one), the canonical views, and how the program ran.
async fn first_look(
    run: &mut Run,
    index: u32,
    execution: &ExecutionResult,
    render_ids: &mut Vec<String>,
    tally: &mut Tally,
) -> Result<Vec<ContentPart>, Interrupt> {
    let mut content = vec![ContentPart::text(format!("Task: {}", run.config.task))];
    if let Some(target) = &run.target {
        content.push(ContentPart::text("Target:"));
        content.push(ContentPart::Image {
            image: target.clone(),
            label: Some("target".to_owned()),
        });
    }
    if let Some((render_id, image)) = run.score_against_target(index).await? {
        render_ids.push(render_id);
        content.push(ContentPart::text(
            "The current scene from the scene camera (same view as the target):",
        ));
        content.push(ContentPart::Image {
            image,
            label: Some("current, scene camera".to_owned()),
        });
    }
    content.extend(canonical_views(run, index, render_ids, tally).await?);
    content.push(ContentPart::text(format!(
        "Iteration {index}. {}\nCompare the scene with the target and finish with end_process.",
        describe_execution(execution)
    )));
    Ok(content)
}

/// The scene from iso, front, right and top as one labelled montage; a scene that cannot
/// be rendered is said in words, so the verifier still gets its turn.
async fn canonical_views(
    run: &mut Run,
    index: u32,
    render_ids: &mut Vec<String>,
    tally: &mut Tally,
) -> Result<Vec<ContentPart>, Interrupt> {
    let viewpoint = run
        .cancellable(initialize_viewpoint(&run.tools, Vec::new(), None))
        .await?;
    match viewpoint {
        Ok(output) => {
            save_renders(run, index, &output.renders, render_ids, tally)?;
            let mut content = vec![ContentPart::text(format!(
                "The current scene, canonical views. {}",
                output.text
            ))];
            content.extend(output.images.into_iter().map(|image| ContentPart::Image {
                image,
                label: Some("current: iso, front, right, top".to_owned()),
            }));
            Ok(content)
        }
        Err(ToolError::Recoverable(message)) => Ok(vec![ContentPart::text(format!(
            "No canonical views could be rendered: {message}"
        ))]),
        Err(ToolError::Fatal(message)) => Err(Interrupt::Fatal(message)),
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
    tools: &ToolRegistry,
    index: u32,
    response: &ModelResponse,
    render_ids: &mut Vec<String>,
    tally: &mut Tally,
) -> Result<ToolTurn, Interrupt> {
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
        let invoked = run
            .cancellable(tools.invoke(&run.tools, &call.name, call.arguments.clone()))
            .await?;
        turn.thoughts
            .push_str(&format!("\n- tool `{}` {}\n", call.name, call.arguments));
        let (text, images, is_error) = match invoked {
            Ok(output) => {
                save_renders(run, index, &output.renders, render_ids, tally)?;
                if let Control::EndVerification(feedback) = output.control {
                    turn.verdict = Some(feedback);
                }
                (output.text, output.images, false)
            }
            Err(ToolError::Recoverable(message)) => (message, Vec::new(), true),
            Err(ToolError::Fatal(message)) => return Err(Interrupt::Fatal(message)),
        };
        run.emit(RunEvent::ToolInvoked {
            index,
            tool: call.name.clone(),
            ok: !is_error,
            summary: text.chars().take(200).collect(),
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

/// A verdict written as text: a JSON object (fenced or bare) in the Feedback shape, or else
/// the text itself as one difference, never accepted.
pub(crate) fn feedback_from_text(text: &str) -> Feedback {
    let candidate = text
        .find('{')
        .zip(text.rfind('}'))
        .filter(|(start, end)| start < end)
        .map(|(start, end)| &text[start..=end]);
    if let Some(json) = candidate
        && let Ok(feedback) = viga_protocol::parse_json::<Feedback>(json)
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
