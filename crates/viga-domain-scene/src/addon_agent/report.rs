//! The report of an add-on agent run: its transcript. The request, then each step's model
//! text and commands (tool, arguments, result, the scene after it, renders), then the final
//! answer, in the frame every run report shares.

use std::fmt::Write as _;
use std::path::Path;

use viga_core::report::{HEAD, escape, render_figure};
use viga_core::{CoreError, RunFolder};
use viga_memory::read_run_log;
use viga_protocol::event::RunEvent;

use super::{AgentConfig, AgentStep, CommandRecord, Transcript};

/// The report of an add-on agent run: its transcript. The request, then each step's model
/// text and commands (tool, arguments, result, the scene after it, renders), then the final
/// answer.
pub fn render_html(run_folder: &Path) -> Result<String, CoreError> {
    let folder = RunFolder::open(run_folder)?;
    let config = super::read_config(run_folder)?;
    let log = read_run_log(&folder.events_path())?;
    let transcript = super::read_transcript(run_folder)?.unwrap_or_else(|| Transcript {
        request: config.task.clone(),
        ..Transcript::default()
    });
    let stop = log.events.iter().rev().find_map(|e| match &e.event {
        RunEvent::RunFinished { stop, iterations } => Some((format!("{stop:?}"), *iterations)),
        _ => None,
    });
    let mut html = String::with_capacity(32 * 1024);
    html.push_str(HEAD);
    let _ = write!(html, "<h1>viga add-on agent: {}</h1>", escape(&config.task));
    if config.provider == "scripted" {
        html.push_str("<p class=\"scripted\">SCRIPTED PROVIDER: every model answer in this run was replayed from a script file, not produced by a model.</p>");
    }
    agent_facts(&mut html, &config, &transcript, stop.as_ref());
    if log.truncated_tail {
        html.push_str("<p class=\"warn\">The event log ends in a cut-off line (the run was killed while writing); it was ignored.</p>");
    }
    let _ = write!(
        html,
        "<section><h2>The scene at the start</h2><pre>{}</pre></section>",
        escape(&transcript.opening_scene)
    );
    for step in &transcript.steps {
        agent_step_section(&mut html, &folder, step);
    }
    let answer = match &transcript.answer {
        Some(answer) => format!("<pre>{}</pre>", escape(answer)),
        None => "<p>The run stopped without a final answer.</p>".to_owned(),
    };
    let _ = write!(html, "<section><h2>Answer</h2>{answer}</section>");
    html.push_str("</body></html>\n");
    Ok(html)
}

/// Provider, steps, how the run stopped, whose scene it worked on, and the tools it had.
fn agent_facts(
    html: &mut String,
    config: &AgentConfig,
    transcript: &Transcript,
    stop: Option<&(String, u32)>,
) {
    let scene = if config.attached {
        "the open scene in your Blender: each command is one undo step"
    } else {
        "viga's own Blender; the result is final.blend"
    };
    let steps = stop.map_or(transcript.steps.len() as u32, |(_, steps)| *steps);
    let _ = write!(
        html,
        "<table class=\"facts\"><tr><th>provider</th><td>{}</td><th>model</th><td>{}</td></tr>\
         <tr><th>steps</th><td>{} of at most {}</td><th>stopped</th><td>{}</td></tr>\
         <tr><th>scene</th><td>{}</td><th>add-ons</th><td>{}</td></tr>\
         <tr><th>tools</th><td colspan=\"3\">{}</td></tr></table>",
        escape(&config.provider),
        escape(&config.model),
        steps,
        config.max_steps,
        escape(stop.map_or("still running or killed", |(stop, _)| stop.as_str())),
        scene,
        escape(&transcript.addons.join(", ")),
        escape(&transcript.tools.join(", "))
    );
}

/// One step: what the model wrote, then each command it asked for.
fn agent_step_section(html: &mut String, folder: &RunFolder, step: &AgentStep) {
    let _ = write!(html, "<section><h2>Step {}</h2>", step.index);
    if !step.text.is_empty() {
        let _ = write!(html, "<pre>{}</pre>", escape(&step.text));
    }
    for call in &step.calls {
        agent_command_block(html, folder, call);
    }
    html.push_str("</section>");
}

/// One command: the tool and its arguments, what came back, the scene after it and the
/// renders of a look.
fn agent_command_block(html: &mut String, folder: &RunFolder, call: &CommandRecord) {
    let _ = write!(
        html,
        "<h3>{}{}</h3><p>Arguments</p><pre>{}</pre>",
        escape(&call.tool),
        if call.ok { "" } else { " (refused)" },
        escape(&pretty(&call.arguments))
    );
    let class = if call.ok { "" } else { " class=\"error\"" };
    let _ = write!(
        html,
        "<p>Result</p><pre{class}>{}</pre>",
        escape(&pretty(&call.result))
    );
    if let Some(step) = &call.undo_step {
        let _ = write!(html, "<p>Undo step: {}</p>", escape(step));
    }
    if !call.scene.is_empty() {
        let _ = write!(
            html,
            "<p>Scene after it</p><pre>{}</pre>",
            escape(&call.scene.join("\n"))
        );
    }
    if !call.render_ids.is_empty() {
        html.push_str("<div class=\"images\">");
        for render_id in &call.render_ids {
            html.push_str(&render_figure(folder, render_id, render_id));
        }
        html.push_str("</div>");
    }
}

/// A JSON value for reading: text as it is, anything else pretty-printed.
fn pretty(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(text) => text.clone(),
        other => serde_json::to_string_pretty(other).unwrap_or_else(|_| other.to_string()),
    }
}
