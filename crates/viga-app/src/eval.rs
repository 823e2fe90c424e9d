//! Evaluation set-up: from a front end's choices to a benchmark run. The front end fills
//! plain settings ([`SceneSettings`], [`SlideSettings`], [`PageSettings`], each with the
//! [`Common`] part); this module checks them, chooses the system (a baseline, the search or
//! the agent), starts the benchmark's renderers contained (Blender workers, LibreOffice,
//! Chromium) and gives a [`Prepared`] run of `viga_eval`'s one runner, which it then runs and
//! winds down. Printing progress and the report is the front end's.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use viga_blender::StartBlender as _;

use tokio::sync::mpsc::UnboundedSender;
use viga_blender::{
    Access, ContainedWorkers, ContainedWorkersError, ContainmentStatus, LocateError,
    TransportError, WorkerPool, WorkerRequest, locate,
};
use viga_eval::agent::AgentProposer;
use viga_eval::judge::Judge;
use viga_eval::pages::PageBench;
use viga_eval::runner::{self, EvalEvent, RunConfig, RunSummary};
use viga_eval::search::SearchProposer;
use viga_eval::slidebench::{InstructionKind, SlideBench};
use viga_eval::summary::Table;
use viga_eval::throughput::ThroughputRow;
use viga_eval::{
    Baseline, Benchmark, EvalConfig, EvalError, FitViews, Proposer, RenderEngine, RenderSpec,
    SceneBenchmark, Selection, Shard, Shelf, Suite, Task,
};
use viga_provider::Provider;
use viga_slides::SlideWorker;
use viga_web::WebWorker;

/// Why an evaluation could not be set up or run. Each kind keeps the library's own error, and
/// becomes an [`AppError`](crate::AppError) with its kind.
#[derive(Debug, thiserror::Error)]
pub enum EvalSetupError {
    #[error(transparent)]
    Eval(#[from] EvalError),
    #[error(transparent)]
    Locate(#[from] LocateError),
    #[error(transparent)]
    Workers(#[from] ContainedWorkersError),
    #[error(transparent)]
    Start(#[from] viga_blender::StartError),
    /// A renderer did not start (its error says which and why).
    #[error(transparent)]
    Renderer(#[from] viga_core::CoreError),
    #[error(transparent)]
    Blender(#[from] TransportError),
    /// Settings that do not go together or are out of range.
    #[error("{0}")]
    Settings(String),
}

impl From<EvalSetupError> for crate::AppError {
    fn from(err: EvalSetupError) -> Self {
        match err {
            EvalSetupError::Eval(err) => Self::Eval(Box::new(err)),
            EvalSetupError::Locate(err) => err.into(),
            EvalSetupError::Workers(err) => err.into(),
            EvalSetupError::Start(err) => err.into(),
            EvalSetupError::Renderer(err) => err.into(),
            EvalSetupError::Blender(err) => err.into(),
            EvalSetupError::Settings(message) => Self::Config(message),
        }
    }
}

fn refuse<T>(message: &str) -> Result<T, EvalSetupError> {
    Err(EvalSetupError::Settings(message.to_owned()))
}

/// The system under test, as chosen.
#[derive(Clone)]
pub enum System {
    Baseline(Baseline),
    /// BlenderGym's render-in-the-loop search (no model).
    Search,
    /// The VIGA loop with this model.
    Agent(Arc<dyn Provider>),
}

impl std::fmt::Debug for System {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Baseline(baseline) => write!(f, "Baseline({baseline:?})"),
            Self::Search => f.write_str("Search"),
            Self::Agent(provider) => write!(f, "Agent({}/{})", provider.name(), provider.model()),
        }
    }
}

/// What every benchmark's run takes.
#[derive(Clone)]
pub struct Common {
    /// The benchmark's data folder.
    pub data: PathBuf,
    /// Where results go; the same folder again resumes.
    pub out: PathBuf,
    /// The instances named; all without.
    pub instances: Option<Vec<String>>,
    /// `None`: no system was chosen, which is refused.
    pub system: Option<System>,
    /// The agent's iteration budget per instance.
    pub max_iterations: u32,
    /// How long the agent may take per instance; `None`: no limit.
    pub time_limit: Option<Duration>,
    /// Renderers working in parallel.
    pub workers: usize,
    pub shard: Shard,
    /// The reference-free judge's model (BlenderBench, SlideBench, pages).
    pub judge: Option<Arc<dyn Provider>>,
}

impl std::fmt::Debug for Common {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Common")
            .field("data", &self.data)
            .field("out", &self.out)
            .field("system", &self.system)
            .field("shard", &self.shard)
            .finish_non_exhaustive()
    }
}

impl Common {
    fn judge(&self) -> Option<Judge> {
        self.judge.clone().map(Judge::new)
    }

    fn run_config(&self) -> RunConfig {
        RunConfig {
            out: self.out.clone(),
            shard: self.shard,
        }
    }

    fn check(&self) -> Result<(), EvalSetupError> {
        if self.workers == 0 {
            return refuse("--workers must be at least 1");
        }
        if matches!(self.system, Some(System::Agent(_))) && self.max_iterations == 0 {
            return refuse("--max-iterations must be at least 1");
        }
        Ok(())
    }
}

/// How the scores render (BlenderGym and BlenderBench).
#[derive(Debug, Clone, Copy)]
pub struct RenderSettings {
    pub engine: RenderEngine,
    /// Square side in pixels.
    pub resolution: u32,
    pub samples: u32,
}

impl RenderSettings {
    pub fn spec(&self) -> Result<RenderSpec, EvalSetupError> {
        if !(1..=8192).contains(&self.resolution) {
            return refuse("--resolution must be between 1 and 8192");
        }
        Ok(RenderSpec {
            engine: self.engine,
            width: self.resolution,
            height: self.resolution,
            samples: Some(self.samples),
        })
    }
}

/// A BlenderGym or BlenderBench run.
#[derive(Debug, Clone)]
pub struct SceneSettings {
    pub suite: Suite,
    pub common: Common,
    /// Task (BlenderGym) or level (BlenderBench) names; all without.
    pub tasks: Option<Vec<String>>,
    pub render: RenderSettings,
    /// Side in pixels of the views the agent's verifier looks at while it works.
    pub verifier_resolution: u32,
    pub clip_weights: Option<PathBuf>,
    pub oracle_selected: bool,
    /// Points per surface for Chamfer distance; the default without.
    pub chamfer_points: Option<usize>,
    /// The search's budget of programs per instance.
    pub search_budget: u32,
    /// The views the search fits; every scored view without.
    pub search_views: Option<Vec<String>>,
}

/// A SlideBench run.
#[derive(Debug, Clone)]
pub struct SlideSettings {
    pub common: Common,
    pub instruction: InstructionKind,
    /// The agent gets the instruction alone, not also the reference slide's picture.
    pub instruction_only: bool,
    pub program_timeout: Duration,
}

/// A pages run.
#[derive(Debug, Clone)]
pub struct PageSettings {
    pub common: Common,
    pub clip_weights: Option<PathBuf>,
    pub program_timeout: Duration,
}

/// The renderers a prepared run started, to wind down after it.
#[derive(Debug)]
enum Renderers {
    /// The pool stops its workers when dropped.
    Blender,
    Slides(Arc<Shelf<SlideWorker>>),
    Pages(Arc<Shelf<WebWorker>>),
}

impl Renderers {
    async fn shut_down(self) {
        match self {
            Self::Blender => {}
            Self::Slides(shelf) => {
                for worker in shelf.take_all() {
                    if let Ok(worker) = Arc::try_unwrap(worker) {
                        worker.shutdown().await;
                    }
                }
            }
            Self::Pages(shelf) => {
                for worker in shelf.take_all() {
                    if let Ok(worker) = Arc::try_unwrap(worker) {
                        worker.shutdown().await;
                    }
                }
            }
        }
    }
}

/// A benchmark run ready to go: its renderers started, its system chosen.
pub struct Prepared<B: Benchmark> {
    pub benchmark: Arc<B>,
    pub run: RunConfig,
    pub proposer: Arc<dyn Proposer<B>>,
    /// One line: the system, the data, the benchmark and what it is run with.
    pub description: String,
    /// What each renderer's programs run under, for the front end to say when it is less
    /// than asked for (the results record it too).
    pub containment: Vec<ContainmentStatus>,
    renderers: Renderers,
}

impl<B: Benchmark> std::fmt::Debug for Prepared<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared")
            .field("description", &self.description)
            .field("run", &self.run)
            .finish_non_exhaustive()
    }
}

impl<B: Benchmark> Prepared<B> {
    /// Runs the benchmark on the one runner (progress to `events`), then stops its
    /// renderers.
    pub async fn run(
        self,
        events: Option<UnboundedSender<EvalEvent<B::Scores>>>,
    ) -> Result<RunSummary, EvalSetupError> {
        let result = runner::run(self.benchmark, &self.run, self.proposer, events).await;
        self.renderers.shut_down().await;
        Ok(result?)
    }
}

/// The judge's label for a description line.
fn judged(judge: Option<&Judge>) -> String {
    judge.map_or(String::new(), |judge| format!(", judge {}", judge.label()))
}

/// What an evaluation's Blender reads: the instances' scenes in the data folder.
fn reads(data: &Path) -> Access {
    Access::reading(vec![data.to_path_buf()])
}

/// The BlenderGym or BlenderBench configuration the settings describe.
pub fn scene_config(settings: &SceneSettings) -> Result<EvalConfig, EvalSetupError> {
    let common = &settings.common;
    let mut config = EvalConfig::new(&common.data, &common.out, settings.render.spec()?);
    config.suite = settings.suite;
    config.shard = common.shard;
    config.clip_weights = settings.clip_weights.clone();
    config.oracle_selected = settings.oracle_selected;
    if let Some(points) = settings.chamfer_points {
        config.chamfer_points = points;
    }
    config.judge = common.judge();
    config.selection = Selection {
        tasks: settings
            .tasks
            .as_ref()
            .map(|tasks| {
                tasks
                    .iter()
                    .map(|t| t.parse::<Task>())
                    .collect::<Result<Vec<_>, _>>()
            })
            .transpose()?,
        instances: common.instances.clone(),
    };
    Ok(config)
}

/// The system under test on BlenderGym or BlenderBench.
pub fn scene_proposer(
    settings: &SceneSettings,
    config: &EvalConfig,
) -> Result<Arc<dyn Proposer<SceneBenchmark>>, EvalSetupError> {
    let search = matches!(settings.common.system, Some(System::Search));
    if settings.search_views.is_some() && !search {
        return refuse(
            "--search-views applies to --baseline search only (the views the search fits); the other systems fit no views or, the agent, Camera1",
        );
    }
    match &settings.common.system {
        None => refuse(
            "choose the system: --baseline noop|oracle, or --provider P --model M for the agent",
        ),
        Some(System::Baseline(baseline)) => Ok(Arc::new(*baseline)),
        Some(System::Search) => {
            if settings.suite != Suite::BlenderGym {
                return refuse(
                    "the search baseline is run on BlenderGym only; use --baseline noop or oracle, or the agent",
                );
            }
            if settings.search_budget < 2 {
                return refuse(
                    "--search-budget must be at least 2 (the start program and one move)",
                );
            }
            let fit_views = match &settings.search_views {
                Some(names) => FitViews::parse(names)?,
                None => FitViews::AllScored,
            };
            Ok(Arc::new(SearchProposer {
                budget: settings.search_budget,
                render: config.render,
                timeout: config.timeout,
                fit_views,
            }))
        }
        Some(System::Agent(provider)) => {
            if !(16..=4096).contains(&settings.verifier_resolution) {
                return refuse("--verifier-resolution must be between 16 and 4096");
            }
            let mut agent =
                AgentProposer::new(Arc::clone(provider), settings.common.max_iterations);
            agent.time_limit = settings.common.time_limit;
            agent.verifier_render.width = settings.verifier_resolution;
            agent.verifier_render.height = settings.verifier_resolution;
            Ok(Arc::new(agent))
        }
    }
}

/// BlenderGym or BlenderBench, checked before Blender starts (so bad settings fail at once),
/// on a pool of `workers` contained Blenders.
pub async fn prepare_scenes(
    settings: &SceneSettings,
    contained: &ContainedWorkers,
) -> Result<Prepared<SceneBenchmark>, EvalSetupError> {
    let common = &settings.common;
    let config = scene_config(settings)?;
    let proposer = scene_proposer(settings, &config)?;
    common.check()?;
    let instances = config
        .shard
        .select(config.suite.discover(&config.data, &config.selection)?);
    proposer.check(&instances)?;
    let description = format!(
        "{} on {} ({}, shard {}), {}, {} worker(s){}",
        proposer.system(),
        config.data.display(),
        config.suite.name(),
        config.shard,
        config.render,
        common.workers,
        judged(config.judge.as_ref())
    );
    let request = WorkerRequest::new(locate()?, reads(&config.data));
    let pool =
        Arc::new(WorkerPool::start(common.workers, contained.worker_config(&request)?).await?);
    let containment = vec![pool.acquire().await?.containment()];
    Ok(Prepared {
        benchmark: Arc::new(SceneBenchmark::new(config, pool)),
        run: common.run_config(),
        proposer,
        description,
        containment,
        renderers: Renderers::Blender,
    })
}

/// The system under test on SlideBench or pages: a baseline or the agent.
fn flat_proposer<B: Benchmark>(
    common: &Common,
    program_timeout: Duration,
    instruction_only: bool,
) -> Result<Arc<dyn Proposer<B>>, EvalSetupError>
where
    Baseline: Proposer<B>,
    AgentProposer: Proposer<B>,
{
    match &common.system {
        Some(System::Baseline(baseline)) => Ok(Arc::new(*baseline)),
        Some(System::Agent(provider)) => {
            let mut agent = AgentProposer::new(Arc::clone(provider), common.max_iterations);
            agent.time_limit = common.time_limit;
            agent.program_timeout = Some(program_timeout);
            agent.instruction_only = instruction_only;
            Ok(Arc::new(agent))
        }
        Some(System::Search) => refuse(
            "the search baseline is run on BlenderGym only; use --baseline noop or oracle, or the agent",
        ),
        None => refuse(
            "choose the system: --baseline noop|oracle, or --provider P --model M for the agent",
        ),
    }
}

/// SlideBench, checked before LibreOffice starts, on `workers` contained renderers whose
/// programs read the data folder (the reference decks, the slides' pictures) and nothing else.
pub async fn prepare_slidebench(
    settings: &SlideSettings,
    contained: &ContainedWorkers,
) -> Result<Prepared<SlideBench>, EvalSetupError> {
    let common = &settings.common;
    common.check()?;
    let proposer =
        flat_proposer::<SlideBench>(common, settings.program_timeout, settings.instruction_only)?;
    viga_eval::slidebench::discover(
        &common.data,
        settings.instruction,
        common.instances.as_deref(),
    )?;
    let mut workers = Vec::new();
    let mut containment = Vec::new();
    for _ in 0..common.workers {
        let (worker, status) = viga_domain_slides::start_renderer(
            contained,
            &reads(&common.data),
            settings.program_timeout,
        )
        .await?;
        containment.push(status.clone());
        workers.push((Arc::new(worker), Some(status)));
    }
    let shelf = Shelf::new(workers);
    let benchmark = SlideBench {
        data: common.data.clone(),
        instruction: settings.instruction,
        instances: common.instances.clone(),
        judge: common.judge(),
        program_timeout: settings.program_timeout,
        workers: Arc::clone(&shelf),
    };
    let description = format!(
        "{} on {} (SlideBench, {}, shard {}), {} worker(s){}",
        proposer.system(),
        common.data.display(),
        settings.instruction.file(),
        common.shard,
        common.workers,
        judged(benchmark.judge.as_ref())
    );
    Ok(Prepared {
        benchmark: Arc::new(benchmark),
        run: common.run_config(),
        proposer,
        description,
        containment,
        renderers: Renderers::Slides(shelf),
    })
}

/// Pages, checked before Chromium starts, on `workers` contained browsers that read nothing
/// of yours.
pub async fn prepare_pages(
    settings: &PageSettings,
    contained: &ContainedWorkers,
) -> Result<Prepared<PageBench>, EvalSetupError> {
    let common = &settings.common;
    common.check()?;
    let proposer = flat_proposer::<PageBench>(common, settings.program_timeout, false)?;
    viga_eval::pages::discover(&common.data, common.instances.as_deref())?;
    let clip = PageBench::load_clip(settings.clip_weights.as_deref())?;
    let mut workers = Vec::new();
    let mut containment = Vec::new();
    for _ in 0..common.workers {
        let (worker, status) =
            viga_domain_page::start_browser(contained, settings.program_timeout).await?;
        containment.push(status.clone());
        workers.push((Arc::new(worker), Some(status)));
    }
    let shelf = Shelf::new(workers);
    let benchmark = PageBench {
        data: common.data.clone(),
        instances: common.instances.clone(),
        judge: common.judge(),
        clip,
        program_timeout: settings.program_timeout,
        workers: Arc::clone(&shelf),
    };
    let description = format!(
        "{} on {} (pages, shard {}), {} worker(s){}",
        proposer.system(),
        common.data.display(),
        common.shard,
        common.workers,
        judged(benchmark.judge.as_ref())
    );
    Ok(Prepared {
        benchmark: Arc::new(benchmark),
        run: common.run_config(),
        proposer,
        description,
        containment,
        renderers: Renderers::Pages(shelf),
    })
}

/// Rewrites the reports of a BlenderGym or BlenderBench output folder; their table.
pub fn report(out: &Path) -> Result<Table, EvalSetupError> {
    let summary = viga_eval::report::write_reports(out)?;
    Ok(viga_eval::report::table(&summary))
}

/// The share of the noop->goal PL gap the results in `system_out` closed, per task, on the
/// views the system did not see.
pub fn gap(noop_out: &Path, system_out: &Path) -> Result<viga_eval::gap::GapTable, EvalSetupError> {
    Ok(viga_eval::gap::gap(noop_out, system_out)?)
}

/// Merges shard output folders into `into` and writes its reports; their table.
pub fn merge(shards: &[PathBuf], into: &Path) -> Result<Table, EvalSetupError> {
    let summary = viga_eval::report::merge(shards, into)?;
    Ok(viga_eval::report::table(&summary))
}

/// Instances per hour on the mini-suite in `data`, with 1 and 2 contained workers (the
/// oracle, and the agent with a stand-in model answering after `model_latency`); with the
/// render settings used and what the workers are contained under, in words.
pub async fn throughput(
    data: &Path,
    render: RenderSettings,
    model_latency: Duration,
    contained: &ContainedWorkers,
) -> Result<(Vec<ThroughputRow>, RenderSpec, String), EvalSetupError> {
    // Contained like every evaluation, so its figures include what containment costs.
    let worker = contained.worker_config(&WorkerRequest::new(locate()?, reads(data)))?;
    let render = render.spec()?;
    let rows = viga_eval::throughput::throughput(data, &worker, render, model_latency).await?;
    let containment = worker
        .containment
        .as_ref()
        .map_or("uncontained".to_owned(), |containment| {
            format!("contained ({})", containment.policy)
        });
    Ok((rows, render, containment))
}
