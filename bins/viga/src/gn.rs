//! `viga gn "<request>" --object Plane`: the Geometry Nodes assistant from the command line.
//! Thin: it builds the provider, Blender and run configuration, prints the run's events and
//! leaves everything else to viga-gn.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};
use clap::Args;
use viga_blender::BlenderCommands as _;
use viga_gn::run::StepStatus;
use viga_gn::{
    ExecutorRegistry, GateConfig, GnBlender, GnEvent, GnRun, GnRunConfig, Preset, PresetStore,
    PythonPolicy, RunState, apply_preset,
};
use viga_protocol::event::RunEvent;
use viga_provider::{ProviderKind, build_provider};

use crate::args::ProviderArgs;

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
}

pub async fn run(args: GnArgs) -> Result<ExitCode> {
    let python = python_policy(args.trusted_python)?;
    let registry = ExecutorRegistry::with_defaults(python);
    let blender = GnBlender::new(crate::start_blender().await?);
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
        println!("[scripted provider] every model answer is replayed from a script");
    }
    let mut config = GnRunConfig::new(args.request.clone());
    config.object.clone_from(&args.object);
    config.max_rounds = args.max_rounds;
    config.output = Some(args.output.clone());
    let (sender, mut events) = tokio::sync::mpsc::unbounded_channel();
    let run = GnRun::new(config, provider, blender.clone(), registry).with_events(sender);
    let canceller = run.canceller();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("\nstopping at the next step (Ctrl-C)...");
            canceller.cancel();
        }
    });
    let printer = tokio::spawn(async move {
        while let Some(event) = events.recv().await {
            show(&event);
        }
    });
    let outcome = run.run().await;
    // The run dropped its sender, so the printer ends after the last event.
    let _ = printer.await;
    if let Some(folder) = &outcome.folder {
        println!("run folder: {}", folder.display());
        if outcome.state == RunState::Done {
            let path = folder.join("final.blend");
            blender
                .transport()
                .save_blend(&path.to_string_lossy())
                .await?;
        }
    }
    match outcome.state {
        RunState::Done => println!("done: {}", outcome.final_message),
        RunState::Cancelled => println!("cancelled"),
        _ => println!(
            "error: {}",
            outcome.error.as_deref().unwrap_or("(no message)")
        ),
    }
    if let Some(name) = &args.save_preset
        && outcome.state == RunState::Done
    {
        let mut preset = Preset::new(name.clone(), args.request.clone(), outcome.applied);
        preset.metadata.object.clone_from(&args.object);
        let path = PresetStore::new(&args.presets_dir).save(&preset)?;
        println!("preset saved: {}", path.display());
    }
    Ok(if outcome.state == RunState::Done {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn python_policy(trusted: bool) -> Result<PythonPolicy> {
    if !trusted {
        return Ok(PythonPolicy::safe());
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

fn show(event: &GnEvent) {
    match event {
        GnEvent::State(change) => println!("[round {}] {:?}", change.round, change.to),
        GnEvent::Step(record) => match record.status {
            StepStatus::Running => {}
            StepStatus::Succeeded => println!("  step {}: {}", record.step_id, record.message),
            StepStatus::Failed => println!(
                "  step {} FAILED: {}",
                record.step_id,
                record.error.as_deref().unwrap_or("")
            ),
        },
        GnEvent::Run(timed) => match &timed.event {
            RunEvent::GatesChecked { report, .. } if !report.success => {
                for message in &report.messages {
                    println!("  gate failed: {message}");
                }
            }
            RunEvent::Warning { message } => println!("  warning: {message}"),
            _ => {}
        },
    }
}
