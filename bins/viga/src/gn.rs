//! `viga gn "<request>" --object Plane`: the Geometry Nodes assistant from the command line.
//! Thin: it builds the provider, Blender and run configuration, prints the run's events and
//! leaves everything else to viga-gn.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};
use clap::Args;
use viga_blender::{BlenderCommands as _, BlenderTransport};
use viga_gn::run::StepStatus;
use viga_gn::{
    ExecutorRegistry, GateConfig, GnBlender, GnRun, GnRunConfig, GnRunHandle, Preset, PresetStore,
    PythonPolicy, RunState, apply_preset,
};
use viga_protocol::event::{RunEvent, TimedEvent};
use viga_provider::{ProviderKind, build_provider};

use crate::args::ProviderArgs;
use crate::progress::Output;

#[derive(Debug, Args)]
pub struct GnArgs {
    /// What to build, e.g. "scatter cubes on the plane scaled by noise".
    pub request: String,
    /// The object to work on (default: the active object).
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
    /// Let PYTHON steps run unrestricted. You are asked to confirm it for this run; the
    /// default safe mode is advisory, the worker process is the real boundary.
    #[arg(long)]
    pub trusted_python: bool,
    /// Save the steps the run applied as a preset of this name.
    #[arg(long)]
    pub save_preset: Option<String>,
    /// Apply this preset file instead of asking a model.
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

pub async fn run(args: GnArgs) -> Result<ExitCode> {
    let python = python_policy(args.trusted_python, args.confirm_trusted)?;
    let registry = ExecutorRegistry::with_defaults(python);
    let out = Output::new(args.events, args.max_rounds);
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
    let blender = match &user {
        Some(user) => GnBlender::new(user.transport.clone()),
        None => GnBlender::new(crate::start_blender().await?),
    };
    if let Some(blend) = &args.blend {
        blender
            .transport()
            .load_blend(&blend.to_string_lossy())
            .await
            .with_context(|| format!("cannot open {}", blend.display()))?;
    }
    if let Some(path) = &args.preset {
        return apply(path, &blender, &registry).await;
    }
    let settings = crate::provider_config(&args.provider, None)?;
    let provider = build_provider(&settings)?;
    if settings.kind == ProviderKind::Scripted {
        out.say("[scripted provider] every model answer is replayed from a script");
    }
    let mut config = GnRunConfig::new(args.request.clone());
    config.object.clone_from(&args.object);
    config.max_rounds = args.max_rounds;
    config.output = Some(args.output.clone());
    // Attached, the state before the run is the last undo step (the add-on makes sure one
    // exists): a finished run becomes one step on top of it, anything else goes back to it.
    let undo_name = viga_core::attached::undo_name(&args.request);
    let mut run = GnRun::new(config, provider, blender.clone(), registry).start();
    follow(&mut run, &out).await;
    let outcome = run.wait().await?;
    if let Some(folder) = &outcome.folder {
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
        _ => (
            "error",
            outcome
                .error
                .clone()
                .unwrap_or_else(|| "(no message)".to_owned()),
            1,
        ),
    };
    out.say(&format!("{word}: {message}"));
    if user.is_some() && code != 0 {
        out.say("your scene is as it was before the run");
    }
    if let Some(name) = &args.save_preset
        && outcome.state == RunState::Done
    {
        let mut preset = Preset::new(name.clone(), args.request.clone(), outcome.applied);
        preset.metadata.object.clone_from(&args.object);
        let path = PresetStore::new(&args.presets_dir).save(&preset)?;
        out.say(&format!("preset saved: {}", path.display()));
    }
    out.finished(word, &message, None, code);
    Ok(ExitCode::from(code))
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

async fn apply(
    path: &std::path::Path,
    blender: &GnBlender,
    registry: &ExecutorRegistry,
) -> Result<ExitCode> {
    let preset = Preset::read(path)?;
    let applied = apply_preset(&preset, blender, registry, &GateConfig::default()).await?;
    for outcome in &applied.outcomes {
        println!("  {}", outcome.message);
    }
    let report = &applied.gates.report;
    if !report.success {
        for message in &report.messages {
            println!("gate failed: {message}");
        }
        bail!(
            "preset {:?} applied, but gates failed",
            preset.metadata.name
        );
    }
    println!("preset {:?} applied; all gates pass", preset.metadata.name);
    Ok(ExitCode::SUCCESS)
}

/// Shows the run's events until it ends. Ctrl-C (or SIGINT from the Blender panel) cancels
/// it: a model call in flight is abandoned at once, a Blender step in flight finishes first,
/// and the run then ends as cancelled, so the caller can take its changes back over the
/// same connection.
async fn follow(run: &mut GnRunHandle, out: &Output) {
    let jsonl = out.is_jsonl();
    let mut cancelled = false;
    loop {
        tokio::select! {
            event = run.next_event() => match event {
                Some(event) => show(&event, jsonl),
                None => return,
            },
            signal = tokio::signal::ctrl_c(), if !cancelled => {
                if signal.is_ok() {
                    out.say("stopping the run (Ctrl-C)...");
                    run.cancel();
                    cancelled = true;
                }
            },
        }
    }
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
