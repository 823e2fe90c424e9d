//! `viga gn "<request>" --object Plane`: the Geometry Nodes assistant from the command line,
//! `viga gn --preset FILE` to apply a saved preset as a run of its own, and `viga gn preset
//! list|export|import` to manage the preset store. Thin: it builds the provider, Blender and
//! run configuration, prints the run's events and leaves everything else to viga-gn (what
//! becomes of a person's scene after the run too: `viga_gn::Workbench`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::{Args, Subcommand};
use viga_gn::run::StepStatus;
use viga_gn::{ExecutorRegistry, GnRun, GnRunConfig, Preset, PresetStore, ResponseCache, RunState};
use viga_protocol::event::{RunEvent, StopReason, TimedEvent};
use viga_provider::{Provider, ProviderKind};

use crate::args::ProviderArgs;
use crate::progress::Output;

#[derive(Debug, Args)]
// `viga gn preset …` manages presets; every other form is a run, whose flags do not apply
// there.
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct GnArgs {
    #[command(subcommand)]
    pub command: Option<GnCommand>,
    /// What to build, e.g. "scatter cubes on the plane scaled by noise" (with --preset: the
    /// preset's own request when left out).
    #[arg(required_unless_present = "preset")]
    pub request: Option<String>,
    /// The object to work on (default: the active object; with --preset: the preset's).
    #[arg(long)]
    pub object: Option<String>,
    /// A .blend to open first (default: an empty scene).
    #[arg(long)]
    pub blend: Option<PathBuf>,
    #[command(flatten)]
    pub provider: ProviderArgs,
    /// Model replies allowed before the run gives up.
    #[arg(long, default_value_t = 6)]
    pub max_rounds: u32,
    /// How long the whole run may take (90s, 30m, 2h; none for no limit).
    #[arg(long, value_name = "DURATION", default_value = "1h")]
    pub time_limit: viga_core::time_limit::TimeLimit,
    /// The gates that must pass before the run is done, comma-separated (default: all five:
    /// single_group_output, output_connected, no_modifier_error, no_unexpected_new_modifier,
    /// no_unexpected_new_node_group); the others only warn.
    #[arg(long, value_delimiter = ',', value_name = "GATE,GATE,...", value_parser = parse_gate)]
    pub gates: Vec<viga_protocol::gn::GateName>,
    /// Where run folders go (<output>/gn/<run id>/).
    #[arg(long, default_value = "output")]
    pub output: PathBuf,
    /// Replay the stored reply of an identical request (same scene, conversation and model)
    /// instead of calling the model, and store new replies (<output>/gn/cache/).
    #[arg(long, conflicts_with = "preset")]
    pub cache: bool,
    /// Let PYTHON steps run unrestricted. You are asked to confirm it for this run; the
    /// default safe mode is only a first filter, the contained worker is the boundary.
    #[arg(long)]
    pub trusted_python: bool,
    /// With --attach: run the steps in your own Blender instead of viga's contained worker
    /// (trusted mode). Model-written Python then runs as you, with your files, network and
    /// the keys in Blender's environment. You are asked to confirm it for this run.
    #[arg(long)]
    pub trusted: bool,
    /// Save the steps the run applied as a preset of this name.
    #[arg(long)]
    pub save_preset: Option<String>,
    /// Apply this preset file instead of asking a model: a run with its own run folder and
    /// final.blend.
    #[arg(long, conflicts_with = "save_preset")]
    pub preset: Option<PathBuf>,
    /// The preset store used by --save-preset.
    #[arg(long, default_value = "presets")]
    pub presets_dir: PathBuf,
    /// Work on the active object of the Blender you have open (the viga add-on must be
    /// enabled there): the run works on a copy in viga's own contained worker, and a finished
    /// run's node groups and modifiers come back into your scene as one undo step; a
    /// cancelled or failed run leaves the scene as it was.
    #[command(flatten)]
    pub attach: crate::attach::AttachArgs,
    /// Continue the conversation of an earlier Geometry Nodes run (a follow-up request): the
    /// model sees its requests, what each left and how it ended; the object is the earlier
    /// run's unless --object names one. Attached, the run starts from your scene as it is now
    /// (the earlier result applied or not); else from the earlier run's result (see --from).
    #[arg(
        long = "continue",
        value_name = "RUN_FOLDER",
        conflicts_with = "preset"
    )]
    pub continue_run: Option<PathBuf>,
    /// With --continue, in viga's own Blender: start from the earlier run's result, or from
    /// the .blend it started from.
    #[arg(long, value_enum, default_value = "result")]
    pub from: crate::args::StartFromArg,
    /// With --trusted or --trusted-python: the front end already asked the person and they
    /// agreed, for this run.
    #[arg(long)]
    pub confirm_trusted: bool,
    /// text for a person, jsonl for a program (the Blender add-on).
    #[arg(long, value_enum, default_value = "text")]
    pub events: crate::progress::EventsFormat,
}

#[derive(Debug, Subcommand)]
pub enum GnCommand {
    /// List the stored presets, export one to a file, or import a file into the store.
    Preset {
        #[command(subcommand)]
        command: PresetCommand,
        /// The preset store.
        #[arg(long, global = true, default_value = "presets")]
        presets_dir: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
pub enum PresetCommand {
    /// The stored presets, by name.
    List,
    /// Write the stored preset NAME to FILE.
    Export { name: String, file: PathBuf },
    /// Check FILE and copy it into the store (a stored preset of the same name is kept).
    Import { file: PathBuf },
}

pub async fn run(args: GnArgs, contained: &viga_blender::ContainedWorkers) -> Result<ExitCode> {
    if let Some(GnCommand::Preset {
        command,
        presets_dir,
    }) = &args.command
    {
        return manage_presets(command, &PresetStore::new(presets_dir));
    }
    // Read before Blender starts, so a bad file fails at once.
    let preset = args.preset.as_deref().map(Preset::read).transpose()?;
    let mut args = args;
    let starts_from = if args.attach.wanted() || args.blend.is_some() {
        viga_core::conversation::StartFrom::Current
    } else {
        args.from.into()
    };
    let follow_up = match args.continue_run.clone() {
        Some(previous) => Some(viga_app::gn::follow_up(
            &previous,
            &mut args.object,
            &mut args.blend,
            args.attach.wanted(),
            args.from.into(),
        )?),
        None => None,
    };
    let trust = viga_app::trust::GnTrust {
        live: args.trusted,
        unrestricted: args.trusted_python,
        attached: args.attach.wanted(),
        confirmed: args.confirm_trusted,
    };
    let python = viga_app::trust::gn_policy(trust, crate::ask_trust)?;
    let registry = ExecutorRegistry::with_defaults(python);
    let out = Output::new(args.events, args.max_rounds);
    let workbench = open_workbench(&args, contained, &out).await?;
    let blender = workbench.blender().clone();
    let mut config = run_config(&args, preset.as_ref());
    if let Some(follow_up) = follow_up {
        config.conversation = follow_up.turns;
        config.starts_from = starts_from;
    }
    let request = config.request.clone();
    let run = match preset {
        Some(preset) => GnRun::from_preset(config, preset, blender, registry),
        None => GnRun::new(config, model(&args, &out)?, blender, registry),
    };
    let mut run = run.start();
    crate::progress::stream_model_text(&run, &out);
    crate::progress::follow_events(&mut run, &out, "the run", show, None).await;
    let outcome = run.wait().await?;
    if let Some(folder) = &outcome.folder {
        out.run_folder(folder);
    }
    // What becomes of the person's scene: the result brought in or the run taken back.
    let finished = workbench.finish(&outcome, &request).await?;
    if let Some(imported) = &finished.imported {
        out.say(&viga_app::gn::imported_summary(imported));
    }
    say_how_it_ended(
        &args,
        &out,
        &outcome,
        finished.stop,
        request,
        workbench.is_attached(),
    )
}

/// The run's last lines (how it ended, the person's scene, a saved preset) and exit code.
fn say_how_it_ended(
    args: &GnArgs,
    out: &Output,
    outcome: &viga_gn::GnOutcome,
    stop: StopReason,
    request: String,
    attached: bool,
) -> Result<ExitCode> {
    let message = match &stop {
        StopReason::Accepted | StopReason::MaxIterations | StopReason::TimeLimit { .. } => {
            outcome.final_message.clone()
        }
        StopReason::Cancelled | StopReason::Failed { .. } | StopReason::GeneratorEnded { .. } => {
            String::new()
        }
    };
    match &stop {
        StopReason::Failed { message, .. } => out.say(&format!("error: {message}")),
        StopReason::Cancelled => out.say("cancelled"),
        other @ StopReason::GeneratorEnded { .. } => out.say(&other.in_words()),
        StopReason::Accepted => out.say(&format!("done: {message}")),
        StopReason::MaxIterations => out.say(&format!("rounds spent: {message}")),
        StopReason::TimeLimit { .. } => out.say(&format!("stopped: {message}")),
    }
    if attached && stop != StopReason::Accepted {
        out.say("your scene is as it was before the run");
    }
    if let Some(name) = &args.save_preset
        && outcome.state == RunState::Done
    {
        let mut preset = Preset::new(name.clone(), request, outcome.applied.clone());
        preset.metadata.object.clone_from(&args.object);
        let path = PresetStore::new(&args.presets_dir).save(&preset)?;
        out.say(&format!("preset saved: {}", path.display()));
    }
    Ok(crate::ending::finish(
        out,
        crate::ending::RunEnd {
            stop: Some(&stop),
            message,
            final_program: None,
            folder: None,
        },
    ))
}

/// The Blender the run works in: one of viga's own (contained), on a copy of the person's
/// scene when attached, or the person's own in trusted mode.
async fn open_workbench(
    args: &GnArgs,
    contained: &viga_blender::ContainedWorkers,
    out: &Output,
) -> Result<viga_gn::Workbench> {
    use viga_app::gn::GnPlace;
    if args.attach.wanted() && args.blend.is_some() {
        bail!("--attach works on the scene open in Blender; drop --blend or run without --attach");
    }
    let place = if !args.attach.wanted() {
        GnPlace::Own {
            blend: args.blend.clone(),
        }
    } else {
        let user = viga_app::attach::attach(args.attach.connection.as_deref()).await?;
        if args.trusted {
            GnPlace::Live(user)
        } else {
            GnPlace::CopyOf(user)
        }
    };
    Ok(viga_app::gn::workbench(place, contained, out).await?)
}

/// The run's configuration; a preset run takes the preset's request and object unless the
/// command line names them.
fn run_config(args: &GnArgs, preset: Option<&Preset>) -> GnRunConfig {
    let mut config =
        GnRunConfig::with_preset_defaults(args.request.clone(), args.object.clone(), preset);
    config.max_rounds = args.max_rounds;
    config.time_limit = args.time_limit.0;
    if !args.gates.is_empty() {
        config.gates.required = args.gates.iter().copied().collect();
    }
    config.output = Some(args.output.clone());
    config.blend = args
        .blend
        .as_deref()
        .map(|blend| std::path::absolute(blend).unwrap_or_else(|_| blend.to_path_buf()));
    if args.cache {
        config.cache = Some(ResponseCache::in_output(&args.output));
    }
    config
}

/// A gate's name as `--gates` takes it: `output_connected` or `OUTPUT_CONNECTED`.
fn parse_gate(text: &str) -> Result<viga_protocol::gn::GateName, String> {
    serde_json::from_value(serde_json::Value::String(text.trim().to_ascii_uppercase())).map_err(
        |_| {
            format!(
                "{text:?} is not a gate; the gates are single_group_output, output_connected, no_modifier_error, no_unexpected_new_modifier and no_unexpected_new_node_group"
            )
        },
    )
}

/// The model the run asks, from the provider flags.
fn model(args: &GnArgs, out: &Output) -> Result<std::sync::Arc<dyn Provider>> {
    let settings = viga_app::provider::settings(&args.provider.choice(), None)?;
    let provider = viga_app::provider::build(&settings)?;
    if settings.kind == ProviderKind::Scripted {
        out.say("[scripted provider] every model answer is replayed from a script");
    }
    Ok(provider)
}

/// `viga gn preset list|export|import`.
fn manage_presets(command: &PresetCommand, store: &PresetStore) -> Result<ExitCode> {
    match command {
        PresetCommand::List => {
            let presets = store.list()?;
            if presets.is_empty() {
                println!("no presets in {}", store.dir().display());
            }
            for preset in presets {
                let mut line = format!("{}: {}", preset.name, preset.request);
                if let Some(object) = &preset.object {
                    line.push_str(&format!(" (on {object})"));
                }
                if !preset.tags.is_empty() {
                    line.push_str(&format!(" [{}]", preset.tags.join(", ")));
                }
                println!("{line}");
            }
        }
        PresetCommand::Export { name, file } => {
            store.export(name, file)?;
            println!("exported preset {name:?} to {}", file.display());
        }
        PresetCommand::Import { file } => {
            let preset = store.import(file)?;
            println!(
                "imported preset {:?} into {}",
                preset.metadata.name,
                store.dir().display()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn show(timed: &TimedEvent, jsonl: bool) {
    if jsonl {
        crate::progress::event_line(timed);
        return;
    }
    match &timed.event {
        RunEvent::GnStateChanged { round, to, .. } => say!("[round {round}] {to:?}"),
        RunEvent::GnStepFinished { record } => match record.status {
            StepStatus::Running => {}
            StepStatus::Succeeded => say!("  step {}: {}", record.step_id, record.message),
            StepStatus::Failed => say!(
                "  step {} FAILED: {}",
                record.step_id,
                record.error.as_deref().unwrap_or("")
            ),
        },
        RunEvent::GatesChecked { report, .. } if !report.success => {
            for message in &report.messages {
                say!("  gate failed: {message}");
            }
        }
        RunEvent::Warning { message } => say!("  warning: {message}"),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use viga_protocol::gn::GateName;

    use super::parse_gate;

    #[test]
    fn gates_are_named_in_either_case() {
        assert_eq!(
            parse_gate("output_connected").unwrap(),
            GateName::OutputConnected
        );
        assert_eq!(
            parse_gate("NO_MODIFIER_ERROR").unwrap(),
            GateName::NoModifierError
        );
        let err = parse_gate("everything").unwrap_err();
        assert!(err.contains("single_group_output"), "{err}");
    }
}
