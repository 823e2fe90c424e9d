//! `viga gn "<request>" --object Plane`: the Geometry Nodes assistant from the command line,
//! `viga gn --preset FILE` to apply a saved preset as a run of its own, and `viga gn preset
//! list|export|import` to manage the preset store. Thin: it builds the provider, Blender and
//! run configuration, prints the run's events and leaves everything else to viga-gn.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};
use clap::{Args, Subcommand};
use viga_blender::{BlenderCommands as _, BlenderTransport, ContainmentStatus};
use viga_gn::run::StepStatus;
use viga_gn::{
    ExecutorRegistry, GnBlender, GnRun, GnRunConfig, Preset, PresetStore, PythonPolicy,
    ResponseCache, RunState,
};
use viga_protocol::event::{FailureKind, RunEvent, TimedEvent};
use viga_provider::{Provider, ProviderKind, build_provider};

use crate::args::ProviderArgs;
use crate::attach::UserBlender;
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
    /// Where run folders go (<output>/gn/<run id>/).
    #[arg(long, default_value = "output")]
    pub output: PathBuf,
    /// Replay the stored reply of an identical request (same scene, conversation and model)
    /// instead of calling the model, and store new replies (<output>/gn/cache/).
    #[arg(long, conflicts_with = "preset")]
    pub cache: bool,
    /// Let PYTHON steps run unrestricted. You are asked to confirm it for this run; the
    /// default safe mode is advisory, the worker process is the real boundary.
    #[arg(long)]
    pub trusted_python: bool,
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
    /// enabled there): the result shows at once and is one undo step; a cancelled or failed
    /// run leaves the scene as it was.
    #[command(flatten)]
    pub attach: crate::attach::AttachArgs,
    /// With --trusted-python: the front end already asked the person and they agreed.
    #[arg(long, requires = "trusted_python")]
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

pub async fn run(args: GnArgs, contain: &crate::contain::Contain) -> Result<ExitCode> {
    if let Some(GnCommand::Preset {
        command,
        presets_dir,
    }) = &args.command
    {
        return manage_presets(command, &PresetStore::new(presets_dir));
    }
    // Read before Blender starts, so a bad file fails at once.
    let preset = args.preset.as_deref().map(Preset::read).transpose()?;
    let python = python_policy(args.trusted_python, args.confirm_trusted)?;
    let registry = ExecutorRegistry::with_defaults(python);
    let out = Output::new(args.events, args.max_rounds);
    let (user, blender, containment) = open_scene(&args, contain).await?;
    let config = run_config(&args, preset.as_ref());
    // Attached, the state before the run is the last undo step (the add-on makes sure one
    // exists): a finished run becomes one step on top of it, anything else goes back to it.
    let request = config.request.clone();
    let undo_name = viga_core::attached::undo_name(&request);
    let run = match preset {
        Some(preset) => GnRun::from_preset(config, preset, blender.clone(), registry),
        None => GnRun::new(config, model(&args, &out)?, blender.clone(), registry),
    };
    let mut run = run.start();
    crate::progress::follow_events(&mut run, &out, "the run", show).await;
    let outcome = run.wait().await?;
    if let Some(folder) = &outcome.folder {
        if let Some(status) = &containment {
            viga_core::folder::write_containment(folder, status)?;
        }
        out.run_folder(folder);
    }
    if user.is_some() {
        if outcome.state == RunState::Done {
            blender.transport().undo_push(&undo_name).await?;
        } else {
            discard_changes(blender.transport().as_ref(), &undo_name).await?;
        }
    }
    let (word, message, code) = match outcome.state {
        RunState::Done => ("done", outcome.final_message.clone(), 0),
        RunState::Cancelled => ("cancelled", String::new(), 130),
        _ => {
            let kind = outcome.failure_kind.unwrap_or(FailureKind::Other);
            let mut message = outcome
                .error
                .clone()
                .unwrap_or_else(|| "(no message)".to_owned());
            // `other` here is mostly the model's (rounds ran out, gates failed), not a bug.
            if let Some(advice) = crate::advice(kind, None).filter(|_| kind != FailureKind::Other) {
                message.push_str(&format!("\nwhat to do: {advice}"));
            }
            ("error", message, crate::exit_code(kind))
        }
    };
    out.say(&format!("{word}: {message}"));
    if user.is_some() && code != 0 {
        out.say("your scene is as it was before the run");
    }
    if let Some(name) = &args.save_preset
        && outcome.state == RunState::Done
    {
        let mut preset = Preset::new(name.clone(), request, outcome.applied);
        preset.metadata.object.clone_from(&args.object);
        let path = PresetStore::new(&args.presets_dir).save(&preset)?;
        out.say(&format!("preset saved: {}", path.display()));
    }
    out.finished(word, &message, None, code);
    Ok(ExitCode::from(code))
}

/// The Blender the run works in: the person's (attached) or one of viga's own, with
/// `--blend` opened, and the containment of viga's own.
async fn open_scene(
    args: &GnArgs,
    contain: &crate::contain::Contain,
) -> Result<(Option<UserBlender>, GnBlender, Option<ContainmentStatus>)> {
    let user = if args.attach.wanted() {
        if args.blend.is_some() {
            bail!(
                "--attach works on the scene open in Blender; drop --blend or run without --attach"
            );
        }
        Some(crate::attach::attach(&args.attach).await?)
    } else {
        None
    };
    let (blender, containment) = match &user {
        Some(user) => (GnBlender::new(user.transport.clone()), None),
        None => {
            let access = viga_blender::Access::reading(args.blend.iter().cloned().collect());
            let worker = crate::start_blender(contain, &access).await?;
            let containment = worker.containment();
            (GnBlender::new(worker), Some(containment))
        }
    };
    if let Some(blend) = &args.blend {
        blender
            .transport()
            .load_blend(&blend.to_string_lossy())
            .await
            .with_context(|| format!("cannot open {}", blend.display()))?;
    }
    Ok((user, blender, containment))
}

/// The run's configuration; a preset run takes the preset's request and object unless the
/// command line names them.
fn run_config(args: &GnArgs, preset: Option<&Preset>) -> GnRunConfig {
    let request = match (&args.request, preset) {
        (Some(request), _) => request.clone(),
        (None, Some(preset)) if !preset.metadata.request.is_empty() => {
            preset.metadata.request.clone()
        }
        (None, Some(preset)) => format!("preset {}", preset.metadata.name),
        (None, None) => String::new(),
    };
    let mut config = GnRunConfig::new(request);
    config.object = args
        .object
        .clone()
        .or_else(|| preset.and_then(|preset| preset.metadata.object.clone()));
    config.max_rounds = args.max_rounds;
    config.output = Some(args.output.clone());
    if args.cache {
        config.cache = Some(ResponseCache::in_output(&args.output));
    }
    config
}

/// The model the run asks, from the provider flags.
fn model(args: &GnArgs, out: &Output) -> Result<std::sync::Arc<dyn Provider>> {
    let settings = crate::provider_config(&args.provider, None)?;
    let provider = build_provider(&settings)?;
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

/// Takes back what a run changed in a person's scene: back to the last undo step, the
/// state before the run.
async fn discard_changes(transport: &dyn BlenderTransport, undo_name: &str) -> Result<()> {
    transport
        .undo_push(&format!("{undo_name} (discarded)"))
        .await?;
    transport.undo().await?;
    Ok(())
}

fn python_policy(trusted: bool, confirmed: bool) -> Result<PythonPolicy> {
    if !trusted {
        return Ok(PythonPolicy::safe());
    }
    if confirmed {
        return Ok(PythonPolicy::trusted(true, true)?);
    }
    eprint!(
        "--trusted-python lets model-written Python run with full access to files, processes and the network inside the Blender worker.\nType 'yes' to allow it for this run: "
    );
    let mut answer = String::new();
    std::io::stdin()
        .read_line(&mut answer)
        .context("cannot read the confirmation")?;
    Ok(PythonPolicy::trusted(true, answer.trim() == "yes")?)
}

fn show(timed: &TimedEvent, jsonl: bool) {
    if jsonl {
        crate::progress::event_line(timed);
        return;
    }
    match &timed.event {
        RunEvent::GnStateChanged { round, to, .. } => println!("[round {round}] {to:?}"),
        RunEvent::GnStepFinished { record } => match record.status {
            StepStatus::Running => {}
            StepStatus::Succeeded => println!("  step {}: {}", record.step_id, record.message),
            StepStatus::Failed => println!(
                "  step {} FAILED: {}",
                record.step_id,
                record.error.as_deref().unwrap_or("")
            ),
        },
        RunEvent::GatesChecked { report, .. } if !report.success => {
            for message in &report.messages {
                println!("  gate failed: {message}");
            }
        }
        RunEvent::Warning { message } => println!("  warning: {message}"),
        _ => {}
    }
}
