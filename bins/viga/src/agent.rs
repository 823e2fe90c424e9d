//! `viga agent "put the lamp to the left of the table" --addons DIR`: the add-on agent from
//! the command line. Thin: it builds the provider and Blender, prints the run's events and
//! leaves everything else to viga-core's `addon_agent`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::Args;
use viga_app::agent::AgentScene;
use viga_domain_scene::addon_agent::{AgentConfig, AgentOutcome};
use viga_protocol::bridge::RenderSpec;
use viga_protocol::event::{RunEvent, StopReason, TimedEvent};
use viga_provider::ProviderKind;

use crate::args::ProviderArgs;
use crate::progress::Output;
use viga_blender::ContainedWorkers;

#[derive(Debug, Args)]
pub struct AgentArgs {
    /// What to do, e.g. "put the lamp to the left of the table".
    pub request: String,
    /// A folder of add-on packages (each with addon_ai.json and VIGA_COMMANDS) to load as
    /// well as the installed add-ons that ship a manifest.
    #[arg(long)]
    pub addons: Option<PathBuf>,
    /// A .blend to open first in viga's own Blender (default: an empty scene).
    #[arg(long)]
    pub blend: Option<PathBuf>,
    #[command(flatten)]
    pub provider: ProviderArgs,
    /// Model calls the agent may make before it is stopped.
    #[arg(long, default_value_t = 12)]
    pub max_steps: u32,
    /// How long the whole run may take (90s, 30m, 2h; none for no limit).
    #[arg(long, value_name = "DURATION", default_value = "30m")]
    pub time_limit: viga_core::time_limit::TimeLimit,
    /// Size of the views the agent renders to look at the scene: N (square) or WxH.
    #[arg(long, default_value = "512")]
    pub resolution: String,
    /// Where run folders go (<output>/agent/<timestamp>/<request>/).
    #[arg(long, default_value = "output")]
    pub output: PathBuf,
    /// Work on the scene open in your Blender (the viga add-on must be enabled there): each
    /// command the agent runs is one undo step; a cancelled run keeps the steps it finished.
    #[command(flatten)]
    pub attach: crate::attach::AttachArgs,
    /// Work on the scene open in your Blender through a Blender MCP server you already run
    /// (the command your MCP client starts it with, e.g. "uvx mcp-for-blender"), without the
    /// viga add-on: each command the agent runs is one undo step there.
    #[arg(long, value_name = "COMMAND")]
    pub through_mcp: Option<String>,
    /// With --through-mcp: the server's tool that runs Python (default: mcp-for-blender's
    /// execute_blender_code).
    #[arg(long, value_name = "TOOL", requires = "through_mcp")]
    pub mcp_code_tool: Option<String>,
    /// Continue the conversation of an earlier agent run (a follow-up request): the model
    /// sees its requests, answers and the commands they ran. Attached, the agent works on
    /// your scene as it is now; else it opens the earlier run's final scene unless --blend
    /// names another.
    #[arg(long = "continue", value_name = "RUN_FOLDER")]
    pub continue_run: Option<PathBuf>,
    /// text for a person, jsonl for a program (the Blender add-on).
    #[arg(long, value_enum, default_value = "text")]
    pub events: crate::progress::EventsFormat,
}

pub async fn run(args: AgentArgs, contained: &ContainedWorkers) -> Result<ExitCode> {
    let out = Output::new(args.events, args.max_steps);
    if args.attach.wanted() && args.blend.is_some() {
        bail!("--attach works on the scene open in Blender; drop --blend or run without --attach");
    }
    let in_persons_blender = args.attach.wanted() || args.through_mcp.is_some();
    if args.through_mcp.is_some() && (args.attach.wanted() || args.blend.is_some()) {
        bail!("--through-mcp works on the scene open in your Blender; drop --attach and --blend");
    }
    let mut args = args;
    // A scene the person names (or their own, attached) is where a follow-up starts.
    let starts_from = if in_persons_blender || args.blend.is_some() {
        viga_core::conversation::StartFrom::Current
    } else {
        viga_core::conversation::StartFrom::Result
    };
    let conversation = match &args.continue_run {
        Some(previous) => {
            let turns = viga_domain_scene::addon_agent::turns_after(previous)?;
            if !in_persons_blender && args.blend.is_none() {
                args.blend = Some(viga_domain_scene::addon_agent::continued_scene(previous)?);
            }
            turns
        }
        None => Vec::new(),
    };
    let settings = viga_app::provider::settings(&args.provider.choice(), None)?;
    let provider = viga_app::provider::build(&settings)?;
    if settings.kind == ProviderKind::Scripted {
        out.say("[scripted provider] every model answer is replayed from a script");
    }
    let mut config = AgentConfig::new(args.request.clone());
    config.max_steps = args.max_steps;
    config.time_limit = args.time_limit.0;
    config.addons_folder.clone_from(&args.addons);
    config.attached = in_persons_blender;
    config.conversation = conversation;
    config.starts_from = starts_from;
    let (width, height) = crate::args::parse_resolution(&args.resolution)?;
    config.render = RenderSpec {
        width,
        height,
        ..config.render
    };
    config.provider = settings.kind.name().to_owned();
    config.model = provider.model().to_owned();
    let scene = if let Some(line) = &args.through_mcp {
        let server =
            viga_app::through_mcp::McpServerCommand::parse(line, args.mcp_code_tool.as_deref())?;
        AgentScene::ThroughMcp(server.connect(&out).await?)
    } else if args.attach.wanted() {
        AgentScene::Attached(viga_app::attach::attach(args.attach.connection.as_deref()).await?)
    } else {
        AgentScene::Own {
            blend: args.blend.clone(),
        }
    };
    let mut handle =
        viga_app::agent::run(config, scene, provider, &args.output, contained, &out).await?;
    crate::progress::stream_model_text(&handle, &out);
    out.run_folder(handle.folder());
    crate::progress::follow_events(&mut handle, &out, "the agent", show, None).await;
    let outcome = handle.wait().await?;
    let report = viga_core::report::write_html(&outcome.folder, None, &viga_app::domains::kinds())?;
    out.report(&report);
    Ok(finish(&outcome, &out, in_persons_blender))
}

fn show(timed: &TimedEvent, jsonl: bool) {
    if jsonl {
        crate::progress::event_line(timed);
        return;
    }
    match &timed.event {
        RunEvent::ModelCalled { index, .. } => say!("step {index}"),
        RunEvent::ToolInvoked { summary, .. } => say!("  {summary}"),
        RunEvent::Warning { message } => say!("  warning: {message}"),
        _ => {}
    }
}

/// The last lines (the answer, or why there is none) and the exit code.
fn finish(outcome: &AgentOutcome, out: &Output, attached: bool) -> ExitCode {
    let message = match &outcome.stop {
        StopReason::Accepted => outcome.answer.clone().unwrap_or_default(),
        StopReason::MaxIterations => format!(
            "stopped after {} steps without a final answer",
            outcome.steps
        ),
        StopReason::TimeLimit { seconds } => format!(
            "stopped at the time limit ({}) after {} steps without a final answer",
            viga_protocol::event::seconds_in_words(*seconds),
            outcome.steps
        ),
        StopReason::Cancelled | StopReason::Failed { .. } | StopReason::GeneratorEnded { .. } => {
            String::new()
        }
    };
    if !message.is_empty() {
        out.say(&message);
    }
    if let StopReason::Failed { message, .. } = &outcome.stop {
        out.say(&format!("failed: {message}"));
    }
    if attached && outcome.steps > 0 {
        out.say("each command the agent ran is one undo step in Blender (Ctrl-Z takes them back one by one)");
    }
    if let Some(kept) = saved_scene(outcome, attached) {
        out.say(&format!("the scene: {}", kept.display()));
    }
    crate::ending::finish(
        out,
        crate::ending::RunEnd {
            stop: Some(&outcome.stop),
            message,
            final_program: None,
            folder: None,
        },
    )
}

/// Where viga's own Blender left the scene, when the run saved it.
fn saved_scene(outcome: &AgentOutcome, attached: bool) -> Option<PathBuf> {
    let path = outcome.folder.join(viga_core::folder::FINAL_BLEND);
    (!attached && path.is_file()).then_some(path)
}
