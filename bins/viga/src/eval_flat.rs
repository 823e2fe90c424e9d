//! `viga eval slidebench` and `viga eval pages`: the 2D benchmarks (the logic lives in
//! `viga_eval::slidebench` and `viga_eval::pages`; this parses flags, starts the contained
//! renderer and prints the table).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Result, bail};
use clap::{Args, ValueEnum};
use viga_blender::Access;
use viga_eval::pages::{self, PageAgent, PageBaseline, PageEvalConfig, PageProposer};
use viga_eval::slidebench::{
    self, InstructionKind, SlideAgent, SlideBaseline, SlideEvalConfig, SlideEvent, SlideProposer,
};
use viga_slides::{SlideTools, SlideWorker, SlidesConfig};
use viga_web::{WebConfig, WebWorker};

use crate::eval::{JudgeArgs, agent_provider};
use viga_blender::ContainedWorkers;

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum FlatBaseline {
    /// SlideBench: a deck of one blank slide; pages: an empty document.
    Noop,
    /// SlideBench: the reference slide itself; pages: the goal page.
    Oracle,
}

/// What both 2D benchmarks take.
#[derive(Debug, Args)]
pub struct FlatSystemArgs {
    /// The data folder.
    #[arg(long)]
    data: PathBuf,
    /// Where results go; rerunning with the same folder resumes.
    #[arg(long)]
    out: PathBuf,
    /// Comma-separated instance names (SlideBench: deck/slide_N; pages: the folder names).
    #[arg(long, value_delimiter = ',')]
    instances: Option<Vec<String>>,
    /// A baseline system (no model); without it, the agent runs with --provider.
    #[arg(long, value_enum, conflicts_with = "provider")]
    baseline: Option<FlatBaseline>,
    #[command(flatten)]
    agent: crate::args::ProviderArgs,
    /// The agent's iteration budget per instance.
    #[arg(long, default_value_t = 5)]
    max_iterations: u32,
    /// How long one program (a page's load) may run.
    #[arg(long, value_name = "SECONDS", default_value_t = 60.0)]
    program_timeout: f64,
    #[command(flatten)]
    judge: JudgeArgs,
}

#[derive(Debug, Args)]
pub struct SlidebenchArgs {
    #[command(flatten)]
    system: FlatSystemArgs,
    /// Which instruction the system gets: detailed (instruction.txt), high_level or
    /// no_image.
    #[arg(long, default_value = "detailed")]
    instruction: InstructionKind,
    /// Give the agent the instruction alone (AutoPresent's setting), not also the reference
    /// slide's picture (VIGA's).
    #[arg(long)]
    instruction_only: bool,
}

#[derive(Debug, Args)]
pub struct PagesArgs {
    #[command(flatten)]
    system: FlatSystemArgs,
    /// CLIP ViT-B/32 weights for N-CLIP (see docs/eval.md); without them N-CLIP is
    /// unavailable.
    #[arg(long)]
    clip_weights: Option<PathBuf>,
}

impl FlatSystemArgs {
    fn timeout(&self) -> Result<Duration> {
        Duration::try_from_secs_f64(self.program_timeout)
            .ok()
            .filter(|limit| !limit.is_zero())
            .ok_or_else(|| anyhow::anyhow!("--program-timeout must be a number of seconds above 0"))
    }

    /// The agent's provider, or why there is no system.
    fn agent_provider(&self) -> Result<Arc<dyn viga_provider::Provider>> {
        if self.agent.provider.is_none() {
            bail!(
                "choose the system: --baseline noop|oracle, or --provider P --model M for the agent"
            );
        }
        if self.max_iterations == 0 {
            bail!("--max-iterations must be at least 1");
        }
        agent_provider(&self.agent)
    }
}

pub async fn slidebench(args: SlidebenchArgs, contained: &ContainedWorkers) -> Result<()> {
    let system = &args.system;
    let program_timeout = system.timeout()?;
    let proposer: Box<dyn SlideProposer> = match system.baseline {
        Some(FlatBaseline::Noop) => Box::new(SlideBaseline::Noop),
        Some(FlatBaseline::Oracle) => Box::new(SlideBaseline::Oracle),
        None => Box::new(SlideAgent {
            provider: system.agent_provider()?,
            max_iterations: system.max_iterations,
            instruction_only: args.instruction_only,
            program_timeout,
        }),
    };
    let config = SlideEvalConfig {
        data: system.data.clone(),
        out: system.out.clone(),
        instruction: args.instruction,
        instances: system.instances.clone(),
        judge: system.judge.judge()?,
        program_timeout,
    };
    // Checked before LibreOffice starts, so a wrong folder fails at once.
    slidebench::discover(
        &config.data,
        config.instruction,
        config.instances.as_deref(),
    )?;
    // Programs read the data folder (the reference decks, the slides' pictures) and nothing
    // else of yours.
    let mut worker_config = SlidesConfig::new(SlideTools::locate()?);
    worker_config.confinement =
        contained.confinement(&Access::reading(vec![config.data.clone()]))?;
    worker_config.program_timeout = program_timeout;
    let worker = Arc::new(SlideWorker::start(worker_config).await?);
    println!(
        "eval: {} on {} (SlideBench, {}){}",
        proposer.system(),
        config.data.display(),
        config.instruction.file(),
        config
            .judge
            .as_ref()
            .map_or(String::new(), |judge| format!(", judge {}", judge.label()))
    );
    let (events, mut receiver) = tokio::sync::mpsc::unbounded_channel();
    let printer = tokio::spawn(async move {
        while let Some(event) = receiver.recv().await {
            match event {
                SlideEvent::Started { total, skipped } if skipped > 0 => {
                    println!("resuming: {skipped} of {total} already scored");
                }
                SlideEvent::Started { .. } => {}
                SlideEvent::Scored(scores) => match &scores.reference {
                    Some(reference) => println!(
                        "{:<24} match {:5.1} text {:5.1} color {:5.1} position {:5.1}",
                        scores.instance,
                        reference.block_match,
                        reference.text,
                        reference.color,
                        reference.position
                    ),
                    None => println!(
                        "{:<24} not executed: {}",
                        scores.instance,
                        scores.failure.as_deref().unwrap_or("no deck")
                    ),
                },
            }
        }
    });
    let summary = slidebench::run(
        &config,
        Arc::clone(&worker),
        proposer.as_ref(),
        Some(events),
    )
    .await;
    let _ = printer.await;
    if let Ok(worker) = Arc::try_unwrap(worker) {
        worker.shutdown().await;
    }
    let summary = summary?;
    println!("\n{}", slidebench::markdown(&summary));
    println!("results: {}", config.out.join("report.md").display());
    Ok(())
}

pub async fn pages(args: PagesArgs, contained: &ContainedWorkers) -> Result<()> {
    let system = &args.system;
    let program_timeout = system.timeout()?;
    let proposer: Box<dyn PageProposer> = match system.baseline {
        Some(FlatBaseline::Noop) => Box::new(PageBaseline::Noop),
        Some(FlatBaseline::Oracle) => Box::new(PageBaseline::Oracle),
        None => Box::new(PageAgent {
            provider: system.agent_provider()?,
            max_iterations: system.max_iterations,
            program_timeout,
        }),
    };
    let config = PageEvalConfig {
        data: system.data.clone(),
        out: system.out.clone(),
        instances: system.instances.clone(),
        judge: system.judge.judge()?,
        clip_weights: args.clip_weights.clone(),
        program_timeout,
    };
    pages::discover(&config.data, config.instances.as_deref())?;
    let mut web = WebConfig::locate()?;
    web.confinement = contained.confinement(&Access::default())?;
    web.load_timeout = program_timeout;
    let worker = Arc::new(WebWorker::start(web).await?);
    println!(
        "eval: {} on {} (pages){}",
        proposer.system(),
        config.data.display(),
        config
            .judge
            .as_ref()
            .map_or(String::new(), |judge| format!(", judge {}", judge.label()))
    );
    let summary = pages::run(&config, Arc::clone(&worker), proposer.as_ref()).await;
    if let Ok(worker) = Arc::try_unwrap(worker) {
        worker.shutdown().await;
    }
    let summary = summary?;
    println!("\n{}", pages::markdown(&summary));
    println!("results: {}", config.out.join("report.md").display());
    Ok(())
}
