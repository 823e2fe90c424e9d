//! `viga eval`: BlenderGym and BlenderBench evaluation (the logic lives in `viga-eval`; this
//! parses flags, starts the worker pool and shows progress). `cargo xtask eval …` forwards
//! here.
//!
//! - `blendergym`: score a baseline or the agent on a BlenderGym-layout folder, one shard of it.
//! - `blenderbench`: the same on a BlenderBench-layout folder, with the answer-leakage check,
//!   and the reference-free judge when given a provider for it.
//! - `report`: rewrite an output folder's summary and tables.
//! - `merge`: combine shard outputs into one folder.
//! - `bench`: instances per hour with 1 and 2 workers on the mini-suite.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use clap::{Args, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use viga_blender::{Access, ContainedWorkers, WorkerPool, WorkerRequest, locate};
use viga_eval::agent::AgentProposer;
use viga_eval::judge::{Judge, Judgement};
use viga_eval::leak::LeakStatus;
use viga_eval::report::{self, Summary};
use viga_eval::runner::RunSummary;
use viga_eval::search::SearchProposer;
use viga_eval::{
    Baseline, EvalConfig, EvalEvent, FitViews, Proposer, RenderEngine, RenderSpec, Selection,
    Shard, Suite, Task,
};
use viga_provider::{Provider, ProviderConfig, ProviderKind};

#[derive(Debug, Subcommand)]
pub enum EvalCommand {
    /// Score a system on a BlenderGym-layout folder (bench_data or the mini-suite).
    Blendergym(Box<BlendergymArgs>),
    /// Score a system on a BlenderBench-layout folder (level1..level3, or the mini-suite),
    /// checking each instance for a leaked answer; `--judge-provider` adds the reference-free
    /// judge.
    Blenderbench(Box<BlenderbenchArgs>),
    /// Score a system on SlideBench (AutoPresent's layout: <deck>/<deck>.pptx with
    /// slide_<n>/instruction.txt): execution rate and the reference-based metrics;
    /// `--judge-provider` adds the reference-free judge and the overall score.
    Slidebench(Box<crate::eval_flat::SlidebenchArgs>),
    /// Score a system on web pages (<name>/task.txt with goal.html or target.png): PL and
    /// N-CLIP against the target screenshot, and the judge with `--judge-provider`.
    Pages(Box<crate::eval_flat::PagesArgs>),
    /// Rewrite summary.json, report.md and report.html of an output folder.
    Report { out: PathBuf },
    /// Combine the output folders of several shards into one, then write its reports.
    Merge {
        #[arg(long)]
        into: PathBuf,
        shards: Vec<PathBuf>,
    },
    /// Instances per hour with 1 and 2 workers on the mini-suite: the oracle baseline, and
    /// the agent loop with a stand-in model that answers after a fixed latency.
    Bench {
        /// The mini-suite (regenerate it with `cargo xtask eval make-mini`).
        #[arg(long, default_value = "fixtures/blendergym-mini")]
        data: PathBuf,
        #[command(flatten)]
        render: RenderArgs,
        /// The stand-in model's latency per call, in milliseconds (hosted vision models
        /// take seconds).
        #[arg(long, default_value_t = 1000)]
        model_latency_ms: u64,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum BaselineArg {
    /// The start program unchanged.
    Noop,
    /// The goal program (the harness proof: PL 0).
    Oracle,
    /// No model: render-in-the-loop search over the start program's numeric literals.
    Search,
}

#[derive(Debug, Clone, Args)]
pub struct RenderArgs {
    /// workbench, cycles or eevee (the benchmark: cycles).
    #[arg(long, default_value = "cycles")]
    engine: RenderEngine,
    /// Square render side in pixels (the benchmark: 512).
    #[arg(long, default_value_t = 512)]
    resolution: u32,
    /// Cycles / EEVEE samples (the benchmark: 512).
    #[arg(long, default_value_t = 512)]
    samples: u32,
}

impl RenderArgs {
    fn spec(&self) -> Result<RenderSpec> {
        if !(1..=8192).contains(&self.resolution) {
            bail!("--resolution must be between 1 and 8192");
        }
        Ok(RenderSpec {
            engine: self.engine,
            width: self.resolution,
            height: self.resolution,
            samples: Some(self.samples),
        })
    }
}

/// What every benchmark's command takes: the data, the system under test, the workers.
#[derive(Debug, Args)]
pub struct SystemArgs {
    /// The benchmark's data folder (BlenderGym's bench_data, BlenderBench's folder of level1..
    /// level3, or a mini-suite under fixtures/).
    #[arg(long)]
    data: PathBuf,
    /// Where results go; rerunning with the same folder resumes.
    #[arg(long)]
    out: PathBuf,
    /// Comma-separated instance names, e.g. placement1,lighting3 (BlenderGym) or
    /// level1-camera1 (BlenderBench: level, dash, folder).
    #[arg(long, value_delimiter = ',')]
    instances: Option<Vec<String>>,
    /// A baseline system (no model); without it, the agent runs with --provider.
    #[arg(long, value_enum, conflicts_with = "provider")]
    baseline: Option<BaselineArg>,
    #[command(flatten)]
    agent: crate::args::ProviderArgs,
    /// The agent's iteration budget per instance.
    #[arg(long, default_value_t = 10)]
    max_iterations: u32,
    /// Side in pixels of the views the agent's verifier looks at while it works (the scores
    /// use --resolution).
    #[arg(long, default_value_t = 256)]
    verifier_resolution: u32,
    /// Warm Blender workers working in parallel.
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// i/n: this process's shard (0 <= i < n), e.g. $SLURM_ARRAY_TASK_ID/$N.
    #[arg(long, default_value = "0/1")]
    shard: String,
    /// CLIP ViT-B/32 weights (safetensors, Hugging Face openai/clip-vit-base-patch32 layout)
    /// for N-CLIP; without them N-CLIP is reported as unavailable. See docs/eval.md.
    #[arg(long)]
    clip_weights: Option<PathBuf>,
    /// Also score every program the system proposed along the way, and start.py, and report
    /// the best per instance chosen with the ground truth, labelled "oracle-selected" (the
    /// benchmark's "best proposal" figure; never the headline).
    #[arg(long)]
    oracle_selected: bool,
    #[command(flatten)]
    render: RenderArgs,
}

#[derive(Debug, Args)]
pub struct BlendergymArgs {
    #[command(flatten)]
    system: SystemArgs,
    /// Comma-separated tasks (blendshape, placement, geometry, lighting, material).
    #[arg(long, value_delimiter = ',')]
    tasks: Option<Vec<String>>,
    /// Programs the search baseline may score per instance.
    #[arg(long, default_value_t = 200)]
    search_budget: u32,
    /// Comma-separated views the search baseline fits (minimises PL on), e.g. Camera1;
    /// default: every scored view, which makes its figures an upper bound. Scoring is on
    /// every view either way, and the reports give PL on the fit and the held-out views.
    #[arg(long, value_delimiter = ',')]
    search_views: Option<Vec<String>>,
    #[arg(long, default_value_t = viga_eval::chamfer::DEFAULT_POINTS)]
    chamfer_points: usize,
}

#[derive(Debug, Args)]
pub struct BlenderbenchArgs {
    #[command(flatten)]
    system: SystemArgs,
    /// Comma-separated levels (level1, level2, level3).
    #[arg(long, value_delimiter = ',')]
    levels: Option<Vec<String>>,
    #[command(flatten)]
    judge: JudgeArgs,
}

/// The agent's model: the flags of `viga run` (`--provider`, `--model`, `--base-url`,
/// `--api-key-env`, `--provider-config`, `--script`).
pub fn agent_provider(flags: &crate::args::ProviderArgs) -> Result<Arc<dyn Provider>> {
    Ok(viga_app::provider::chosen(&flags.choice(), None)?.1)
}

/// A benchmark's reference-free judge.
#[derive(Debug, Args)]
pub struct JudgeArgs {
    /// The reference-free judge's provider (openai, anthropic, gemini, openai_compatible,
    /// scripted): a vision-language model rates each result 0-5 on the benchmark's criteria.
    /// Without it nothing is judged and the reports have no judge column.
    #[arg(long)]
    judge_provider: Option<String>,
    #[arg(long, requires = "judge_provider")]
    judge_model: Option<String>,
    /// The judge's API base URL (openai_compatible).
    #[arg(long, requires = "judge_provider")]
    judge_base_url: Option<String>,
    /// The scripted judge's script file.
    #[arg(long, requires = "judge_provider")]
    judge_script: Option<PathBuf>,
}

impl JudgeArgs {
    /// The judge these flags name, if any.
    pub fn judge(&self) -> Result<Option<Judge>> {
        self.judge_provider
            .as_deref()
            .map(|kind| {
                provider_from(
                    kind,
                    self.judge_model.as_deref(),
                    self.judge_base_url.as_deref(),
                    self.judge_script.as_deref(),
                )
                .map(Judge::new)
            })
            .transpose()
    }
}

pub async fn run(
    command: EvalCommand,
    contained: &ContainedWorkers,
) -> Result<std::process::ExitCode> {
    match command {
        EvalCommand::Blendergym(args) => blendergym(*args, contained).await?,
        EvalCommand::Blenderbench(args) => blenderbench(*args, contained).await?,
        EvalCommand::Slidebench(args) => crate::eval_flat::slidebench(*args, contained).await?,
        EvalCommand::Pages(args) => crate::eval_flat::pages(*args, contained).await?,
        EvalCommand::Report { out } => print_summary(&report::write_reports(&out)?, &out),
        EvalCommand::Merge { into, shards } => {
            print_summary(&report::merge(&shards, &into)?, &into);
        }
        EvalCommand::Bench {
            data,
            render,
            model_latency_ms,
        } => {
            // Contained like every evaluation, so its figures include what containment costs.
            let worker = contained.worker_config(&WorkerRequest::new(locate()?, reads(&data)))?;
            let latency = Duration::from_millis(model_latency_ms);
            let render = render.spec()?;
            let rows = viga_eval::throughput::throughput(&data, &worker, render, latency).await?;
            let containment = worker
                .containment
                .as_ref()
                .map_or("uncontained".to_owned(), |containment| {
                    format!("contained ({})", containment.policy)
                });
            println!(
                "\n{render} on {}, workers {containment}; the agent's model is a stand-in answering after {} ms per call:",
                data.display(),
                latency.as_millis()
            );
            print_throughput(&rows);
        }
    }
    Ok(std::process::ExitCode::SUCCESS)
}

/// The configuration every benchmark shares, for `suite` with its task selection.
fn config_from(args: &SystemArgs, suite: Suite, tasks: Option<&[String]>) -> Result<EvalConfig> {
    let mut config = EvalConfig::new(&args.data, &args.out, args.render.spec()?);
    config.suite = suite;
    config.shard = args.shard.parse::<Shard>()?;
    config.clip_weights = args.clip_weights.clone();
    config.oracle_selected = args.oracle_selected;
    config.selection = Selection {
        tasks: tasks
            .map(|tasks| {
                tasks
                    .iter()
                    .map(|t| t.parse::<Task>())
                    .collect::<Result<Vec<_>, _>>()
            })
            .transpose()?,
        instances: args.instances.clone(),
    };
    Ok(config)
}

/// A model provider from flags (the agent's or the judge's); keys come from the environment.
fn provider_from(
    kind: &str,
    model: Option<&str>,
    base_url: Option<&str>,
    script: Option<&Path>,
) -> Result<Arc<dyn Provider>> {
    let kind: ProviderKind = serde_json::from_value(serde_json::Value::String(kind.to_owned()))
        .map_err(|_| {
            anyhow::anyhow!(
                "unknown provider {kind:?}; use openai, anthropic, gemini, openai_compatible or scripted"
            )
        })?;
    let mut settings = ProviderConfig::new(kind, model.unwrap_or_default().to_owned());
    settings.base_url = base_url.map(str::to_owned);
    settings.script = script.map(Path::to_path_buf);
    Ok(viga_app::provider::build(&settings)?)
}

/// The system under test: a baseline, or the agent with a provider. `search` is BlenderGym's
/// search baseline, when that is the benchmark.
fn proposer_from(
    args: &SystemArgs,
    config: &EvalConfig,
    search: Option<&BlendergymArgs>,
) -> Result<Arc<dyn Proposer>> {
    match (&args.baseline, &args.agent.provider) {
        (Some(BaselineArg::Noop), _) => Ok(Arc::new(Baseline::Noop)),
        (Some(BaselineArg::Oracle), _) => Ok(Arc::new(Baseline::Oracle)),
        (Some(BaselineArg::Search), _) => {
            let Some(search) = search else {
                bail!(
                    "the search baseline is run on BlenderGym only; use --baseline noop or oracle, or the agent"
                );
            };
            if search.search_budget < 2 {
                bail!("--search-budget must be at least 2 (the start program and one move)");
            }
            let fit_views = match &search.search_views {
                Some(names) => FitViews::parse(names)?,
                None => FitViews::AllScored,
            };
            Ok(Arc::new(SearchProposer {
                budget: search.search_budget,
                render: config.render,
                timeout: config.timeout,
                fit_views,
            }))
        }
        (None, None) => bail!(
            "choose the system: --baseline noop|oracle, or --provider P --model M for the agent"
        ),
        (None, Some(_)) => {
            let provider = agent_provider(&args.agent)?;
            if args.max_iterations == 0 {
                bail!("--max-iterations must be at least 1");
            }
            if !(16..=4096).contains(&args.verifier_resolution) {
                bail!("--verifier-resolution must be between 16 and 4096");
            }
            let mut agent = AgentProposer::new(provider, args.max_iterations);
            agent.verifier_render.width = args.verifier_resolution;
            agent.verifier_render.height = args.verifier_resolution;
            Ok(Arc::new(agent))
        }
    }
}

/// What an evaluation's Blender reads: the instances' scenes in the data folder.
fn reads(data: &Path) -> Access {
    Access::reading(vec![data.to_path_buf()])
}

async fn blendergym(args: BlendergymArgs, contained: &ContainedWorkers) -> Result<()> {
    // Checked before Blender starts, so bad flags fail at once.
    let mut config = config_from(&args.system, Suite::BlenderGym, args.tasks.as_deref())?;
    config.chamfer_points = args.chamfer_points;
    if args.search_views.is_some() && !matches!(args.system.baseline, Some(BaselineArg::Search)) {
        bail!(
            "--search-views applies to --baseline search only (the views the search fits); the other systems fit no views or, the agent, Camera1"
        );
    }
    let proposer = proposer_from(&args.system, &config, Some(&args))?;
    evaluate(config, proposer, args.system.workers, contained).await
}

async fn blenderbench(args: BlenderbenchArgs, contained: &ContainedWorkers) -> Result<()> {
    let mut config = config_from(&args.system, Suite::BlenderBench, args.levels.as_deref())?;
    config.judge = args.judge.judge()?;
    let proposer = proposer_from(&args.system, &config, None)?;
    evaluate(config, proposer, args.system.workers, contained).await
}

/// Scores `proposer` as `config` says on a pool of `workers` contained Blenders, then writes
/// and prints the reports.
async fn evaluate(
    config: EvalConfig,
    proposer: Arc<dyn Proposer>,
    workers: usize,
    contained: &ContainedWorkers,
) -> Result<()> {
    let instances = config
        .shard
        .select(config.suite.discover(&config.data, &config.selection)?);
    if workers == 0 {
        bail!("--workers must be at least 1");
    }
    proposer.check(&instances)?;
    println!(
        "eval: {} on {} ({}, shard {}), {}, {} worker(s){}",
        proposer.system(),
        config.data.display(),
        config.suite.name(),
        config.shard,
        config.render,
        workers,
        config
            .judge
            .as_ref()
            .map_or(String::new(), |judge| format!(", judge {}", judge.label()))
    );
    let pool = Arc::new(
        WorkerPool::start(
            workers,
            contained.worker_config(&WorkerRequest::new(locate()?, reads(&config.data)))?,
        )
        .await?,
    );
    // Said once for the pool, as `viga run` says it for its worker; eval.json, each
    // instance's folder and the report record it.
    viga_app::workers::warn_if_less(&pool.acquire().await?.containment(), &crate::Terminal);
    let summary = run_with_progress(&config, pool, proposer).await?;
    for (instance, error) in &summary.failed {
        eprintln!("FAILED {instance}: {error}");
    }
    print_summary(&report::write_reports(&config.out)?, &config.out);
    if !summary.failed.is_empty() {
        bail!(
            "{} instance(s) could not be scored (listed above); rerun to retry them",
            summary.failed.len()
        );
    }
    Ok(())
}

/// Runs the evaluation with a progress bar: instances done, ETA, running mean PL.
async fn run_with_progress(
    config: &EvalConfig,
    pool: Arc<WorkerPool>,
    proposer: Arc<dyn Proposer>,
) -> Result<RunSummary> {
    let (events, mut receiver) = tokio::sync::mpsc::unbounded_channel();
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} instances, ETA {eta} {msg}")
            .context("bad progress template")?,
    );
    let shown = bar.clone();
    let printer = tokio::spawn(async move {
        let (mut sum, mut count) = (0.0, 0usize);
        while let Some(event) = receiver.recv().await {
            match event {
                EvalEvent::Started { total, skipped } => {
                    shown.set_length((total - skipped) as u64);
                    if skipped > 0 {
                        shown.println(format!("resuming: {skipped} of {total} already scored"));
                    }
                }
                EvalEvent::Scored(scores) => {
                    if let Some(pl) = scores.pl {
                        sum += pl;
                        count += 1;
                    }
                    shown.println(format!(
                        "{:<14} PL {:<10} CD {}{}{}{}",
                        scores.instance,
                        scores
                            .pl
                            .map_or("not executable".to_owned(), |pl| format!("{pl:.6}")),
                        scores.cd.map_or("-".to_owned(), |cd| format!("{cd:.4}")),
                        scores
                            .n_clip
                            .map_or(String::new(), |n_clip| format!(" N-CLIP {n_clip:.4}")),
                        match &scores.judge {
                            Some(Judgement::Judged { scores, .. }) => {
                                format!(" judge {:.2}/5", scores.mean())
                            }
                            Some(Judgement::Failed { .. }) => " judge failed".to_owned(),
                            Some(Judgement::NotJudged { .. }) | None => String::new(),
                        },
                        match &scores.answer_leak {
                            Some(check) if check.status == LeakStatus::Leaks => {
                                format!(" ANSWER LEAK: {}", check.leaked.join(", "))
                            }
                            _ => String::new(),
                        },
                    ));
                    if count > 0 {
                        shown.set_message(format!("mean PL {:.6}", sum / count as f64));
                    }
                    shown.inc(1);
                }
                EvalEvent::Failed { instance, error } => {
                    shown.println(format!("{instance}: FAILED {error}"));
                    shown.inc(1);
                }
            }
        }
    });
    let summary = viga_eval::run(config, pool, proposer, Some(events)).await;
    let _ = printer.await;
    bar.finish_and_clear();
    Ok(summary?)
}

fn print_summary(summary: &Summary, out: &Path) {
    println!("\n{}", report::markdown(summary));
    println!("results: {}", out.join(report::MARKDOWN_FILE).display());
}

/// The throughput rows as a Markdown table, each system's speed-up against its own 1-worker row.
fn print_throughput(rows: &[viga_eval::throughput::ThroughputRow]) {
    println!(
        "| system | workers | instances | seconds | instances/hour | speed-up | machine CPU busy |"
    );
    println!("|---|---|---|---|---|---|---|");
    let mut base = 1.0;
    for row in rows {
        let rate = row.instances_per_hour();
        if row.workers == 1 {
            base = rate;
        }
        let cpu = row.cpu_busy.map_or_else(
            || "n/a".to_owned(),
            |share| format!("{:.0}%", share * 100.0),
        );
        println!(
            "| {} | {} | {} | {:.1} | {rate:.0} | {:.2}x | {cpu} |",
            row.system,
            row.workers,
            row.scored,
            row.seconds,
            rate / base
        );
    }
}
