//! `viga eval`: every benchmark's command line (the evaluation itself lives in `viga-eval`,
//! its set-up in `viga_app::eval`; this parses flags into settings, builds the model
//! providers, and shows progress and the report). `cargo xtask eval …` forwards here.
//!
//! - `blendergym`: score a baseline or the agent on a BlenderGym-layout folder, one shard of it.
//! - `blenderbench`: the same on a BlenderBench-layout folder, with the answer-leakage check,
//!   and the reference-free judge when given a provider for it.
//! - `slidebench`, `pages`: the 2D benchmarks, on LibreOffice and Chromium.
//! - `report`: rewrite an output folder's summary and tables.
//! - `merge`: combine shard outputs into one folder.
//! - `bench`: instances per hour with 1 and 2 workers on the mini-suite.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use clap::{Args, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use viga_app::eval::{
    Common, EvalSetupError, PageSettings, Prepared, RenderSettings, SceneSettings, SlideSettings,
    System,
};
use viga_blender::ContainedWorkers;
use viga_eval::judge::Judgement;
use viga_eval::leak::LeakStatus;
use viga_eval::runner::{EvalEvent, RunSummary};
use viga_eval::slidebench::InstructionKind;
use viga_eval::summary::{MARKDOWN_FILE, Table};
use viga_eval::{Baseline, Benchmark, InstanceScores, RenderEngine, Shard, Suite};
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
    Slidebench(Box<SlidebenchArgs>),
    /// Score a system on web pages (<name>/task.txt with goal.html or target.png): PL and
    /// N-CLIP against the target screenshot, and the judge with `--judge-provider`.
    Pages(Box<PagesArgs>),
    /// Rewrite summary.json, report.md and report.html of an output folder.
    Report { out: PathBuf },
    /// How much of the gap between noop and the goal the results in OUT closed, per task, on
    /// the views the system did not see (its fit views left out): 1 - PL(system) / PL(noop).
    Gap {
        /// An output folder of `--baseline noop` on the same instances and render settings.
        #[arg(long)]
        noop: PathBuf,
        out: PathBuf,
    },
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
    fn settings(&self) -> RenderSettings {
        RenderSettings {
            engine: self.engine,
            resolution: self.resolution,
            samples: self.samples,
        }
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
    /// How long the agent may take per instance (90s, 30m, 2h; none for no limit).
    #[arg(long, value_name = "DURATION", default_value = "30m")]
    time_limit: viga_core::time_limit::TimeLimit,
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
    /// Programs the search baseline may render and score per instance.
    #[arg(long, default_value_t = 80)]
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
    /// The judge's model these flags name, if any.
    fn provider(&self) -> Result<Option<Arc<dyn Provider>>> {
        self.judge_provider
            .as_deref()
            .map(|kind| {
                provider_from(
                    kind,
                    self.judge_model.as_deref(),
                    self.judge_base_url.as_deref(),
                    self.judge_script.as_deref(),
                )
            })
            .transpose()
    }
}

/// A set-up error with its kind, so the exit code says what kind it is.
fn setup(err: EvalSetupError) -> anyhow::Error {
    anyhow::Error::new(viga_app::AppError::from(err))
}

/// The system the flags choose: a baseline, or the agent when a provider is given.
fn system(baseline: Option<System>, agent: &crate::args::ProviderArgs) -> Result<Option<System>> {
    Ok(match (baseline, &agent.provider) {
        (Some(baseline), _) => Some(baseline),
        (None, Some(_)) => Some(System::Agent(agent_provider(agent)?)),
        (None, None) => None,
    })
}

impl SystemArgs {
    fn common(&self, judge: Option<&JudgeArgs>) -> Result<Common> {
        let baseline = self.baseline.map(|baseline| match baseline {
            BaselineArg::Noop => System::Baseline(Baseline::Noop),
            BaselineArg::Oracle => System::Baseline(Baseline::Oracle),
            BaselineArg::Search => System::Search,
        });
        Ok(Common {
            data: self.data.clone(),
            out: self.out.clone(),
            instances: self.instances.clone(),
            system: system(baseline, &self.agent)?,
            max_iterations: self.max_iterations,
            time_limit: self.time_limit.0,
            workers: self.workers,
            shard: self.shard.parse::<Shard>()?,
            judge: judge.map(JudgeArgs::provider).transpose()?.flatten(),
        })
    }

    fn scenes(
        &self,
        suite: Suite,
        tasks: Option<&[String]>,
        judge: Option<&JudgeArgs>,
    ) -> Result<SceneSettings> {
        Ok(SceneSettings {
            suite,
            common: self.common(judge)?,
            tasks: tasks.map(<[String]>::to_vec),
            render: self.render.settings(),
            verifier_resolution: self.verifier_resolution,
            clip_weights: self.clip_weights.clone(),
            oracle_selected: self.oracle_selected,
            chamfer_points: None,
            search_budget: 0,
            search_views: None,
        })
    }
}

impl FlatSystemArgs {
    fn common(&self) -> Result<Common> {
        let baseline = self.baseline.map(|baseline| {
            System::Baseline(match baseline {
                FlatBaseline::Noop => Baseline::Noop,
                FlatBaseline::Oracle => Baseline::Oracle,
            })
        });
        Ok(Common {
            data: self.data.clone(),
            out: self.out.clone(),
            instances: self.instances.clone(),
            system: system(baseline, &self.agent)?,
            max_iterations: self.max_iterations,
            time_limit: self.time_limit.0,
            workers: self.workers,
            shard: self.shard.parse::<Shard>()?,
            judge: self.judge.provider()?,
        })
    }

    fn timeout(&self) -> Result<Duration> {
        Duration::try_from_secs_f64(self.program_timeout)
            .ok()
            .filter(|limit| !limit.is_zero())
            .ok_or_else(|| anyhow::anyhow!("--program-timeout must be a number of seconds above 0"))
    }
}

/// `viga eval bench`: instances per hour on the mini-suite in `data`.
async fn bench(
    data: &std::path::Path,
    render: viga_app::eval::RenderSettings,
    model_latency_ms: u64,
    contained: &ContainedWorkers,
) -> Result<()> {
    let latency = Duration::from_millis(model_latency_ms);
    let (rows, render, containment) = viga_app::eval::throughput(data, render, latency, contained)
        .await
        .map_err(setup)?;
    println!(
        "\n{render} on {}, workers {containment}; the agent's model is a stand-in answering after {} ms per call:",
        data.display(),
        latency.as_millis()
    );
    print_throughput(&rows);
    Ok(())
}

pub async fn run(
    command: EvalCommand,
    contained: &ContainedWorkers,
) -> Result<std::process::ExitCode> {
    match command {
        EvalCommand::Blendergym(args) => {
            let mut settings =
                args.system
                    .scenes(Suite::BlenderGym, args.tasks.as_deref(), None)?;
            settings.chamfer_points = Some(args.chamfer_points);
            settings.search_budget = args.search_budget;
            settings.search_views = args.search_views.clone();
            let prepared = viga_app::eval::prepare_scenes(&settings, contained)
                .await
                .map_err(setup)?;
            evaluate(prepared, print_scene_scores).await?;
        }
        EvalCommand::Blenderbench(args) => {
            let settings = args.system.scenes(
                Suite::BlenderBench,
                args.levels.as_deref(),
                Some(&args.judge),
            )?;
            let prepared = viga_app::eval::prepare_scenes(&settings, contained)
                .await
                .map_err(setup)?;
            evaluate(prepared, print_scene_scores).await?;
        }
        EvalCommand::Slidebench(args) => {
            let settings = SlideSettings {
                common: args.system.common()?,
                instruction: args.instruction,
                instruction_only: args.instruction_only,
                program_timeout: args.system.timeout()?,
            };
            let prepared = viga_app::eval::prepare_slidebench(&settings, contained)
                .await
                .map_err(setup)?;
            evaluate(prepared, print_slide_scores).await?;
        }
        EvalCommand::Pages(args) => {
            let settings = PageSettings {
                common: args.system.common()?,
                clip_weights: args.clip_weights.clone(),
                program_timeout: args.system.timeout()?,
            };
            let prepared = viga_app::eval::prepare_pages(&settings, contained)
                .await
                .map_err(setup)?;
            evaluate(prepared, print_page_scores).await?;
        }
        EvalCommand::Report { out } => {
            print_table(&viga_app::eval::report(&out).map_err(setup)?, &out);
        }
        EvalCommand::Gap { noop, out } => {
            print!(
                "{}",
                viga_app::eval::gap(&noop, &out).map_err(setup)?.markdown()
            );
        }
        EvalCommand::Merge { into, shards } => {
            print_table(
                &viga_app::eval::merge(&shards, &into).map_err(setup)?,
                &into,
            );
        }
        EvalCommand::Bench {
            data,
            render,
            model_latency_ms,
        } => bench(&data, render.settings(), model_latency_ms, contained).await?,
    }
    Ok(std::process::ExitCode::SUCCESS)
}

/// Runs a prepared evaluation with a progress bar (instances done, ETA, and what `line`
/// says of each result), then prints the report; fails when an instance could not be scored.
async fn evaluate<B: Benchmark>(
    prepared: Prepared<B>,
    line: fn(&B::Scores) -> String,
) -> Result<()> {
    println!("eval: {}", prepared.description);
    // Said as `viga run` says it for its worker; the results record it.
    for status in &prepared.containment {
        viga_app::workers::warn_if_less(status, &crate::Terminal);
    }
    let out = prepared.run.out.clone();
    let summary = run_with_progress(prepared, line).await?;
    for (instance, error) in &summary.failed {
        eprintln!("FAILED {instance}: {error}");
    }
    print_table(&summary.report.table, &out);
    if !summary.failed.is_empty() {
        bail!(
            "{} instance(s) could not be scored (listed above); rerun to retry them",
            summary.failed.len()
        );
    }
    Ok(())
}

async fn run_with_progress<B: Benchmark>(
    prepared: Prepared<B>,
    line: fn(&B::Scores) -> String,
) -> Result<RunSummary> {
    let (events, mut receiver) = tokio::sync::mpsc::unbounded_channel::<EvalEvent<B::Scores>>();
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} instances, ETA {eta} {msg}")
            .context("bad progress template")?,
    );
    let shown = bar.clone();
    let printer = tokio::spawn(async move {
        // Without a terminal the bar is hidden, and so would its lines be: a batch job's log
        // gets them plainly.
        let say = |line: String| {
            if shown.is_hidden() {
                println!("{line}");
            } else {
                shown.println(line);
            }
        };
        while let Some(event) = receiver.recv().await {
            match event {
                EvalEvent::Started { total, skipped } => {
                    shown.set_length((total - skipped) as u64);
                    if skipped > 0 {
                        say(format!("resuming: {skipped} of {total} already scored"));
                    }
                }
                EvalEvent::Scored(scores) => {
                    say(line(&scores));
                    shown.inc(1);
                }
                EvalEvent::Failed { instance, error } => {
                    say(format!("{instance}: FAILED {error}"));
                    shown.inc(1);
                }
            }
        }
    });
    let summary = prepared.run(Some(events)).await;
    let _ = printer.await;
    bar.finish_and_clear();
    summary.map_err(setup)
}

/// A BlenderGym or BlenderBench result in a line.
fn print_scene_scores(scores: &InstanceScores) -> String {
    format!(
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
            Some(Judgement::Judged { scores, .. }) => format!(" judge {:.2}/5", scores.mean()),
            Some(Judgement::Failed { .. }) => " judge failed".to_owned(),
            Some(Judgement::NotJudged { .. }) | None => String::new(),
        },
        match &scores.answer_leak {
            Some(check) if check.status == LeakStatus::Leaks => {
                format!(" ANSWER LEAK: {}", check.leaked.join(", "))
            }
            _ => String::new(),
        },
    )
}

/// A SlideBench result in a line.
fn print_slide_scores(scores: &viga_eval::slidebench::SlideScores) -> String {
    match &scores.figures.reference {
        Some(reference) => format!(
            "{:<24} match {:5.1} text {:5.1} color {:5.1} position {:5.1}",
            scores.instance,
            reference.block_match,
            reference.text,
            reference.color,
            reference.position
        ),
        None => format!(
            "{:<24} not executed: {}",
            scores.instance,
            scores.failure.as_deref().unwrap_or("no deck")
        ),
    }
}

/// A page's result in a line.
fn print_page_scores(scores: &viga_eval::pages::PageScores) -> String {
    match scores.figures.pl {
        Some(pl) => format!(
            "{:<24} PL {pl:.6}{}",
            scores.instance,
            scores
                .figures
                .n_clip
                .map_or(String::new(), |n_clip| format!(" N-CLIP {n_clip:.4}"))
        ),
        None => format!(
            "{:<24} not loaded: {}",
            scores.instance,
            scores.failure.as_deref().unwrap_or("no page")
        ),
    }
}

fn print_table(table: &Table, out: &Path) {
    println!("\n{}", table.markdown());
    println!("results: {}", out.join(MARKDOWN_FILE).display());
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
    /// How long the agent may take per instance (90s, 30m, 2h; none for no limit).
    #[arg(long, value_name = "DURATION", default_value = "30m")]
    time_limit: viga_core::time_limit::TimeLimit,
    /// How long one program (a page's load) may run.
    #[arg(long, value_name = "SECONDS", default_value_t = 60.0)]
    program_timeout: f64,
    /// Renderers (LibreOffice, Chromium) working in parallel.
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// i/n: this process's shard (0 <= i < n), e.g. $SLURM_ARRAY_TASK_ID/$N.
    #[arg(long, default_value = "0/1")]
    shard: String,
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
