//! BlenderGym and BlenderBench as one [`Benchmark`]: every selected instance on a pool of
//! warm Blender workers, each instance's goal re-rendered by the Blender that renders its
//! proposal, and scored with PL, Chamfer distance and N-CLIP (and, on BlenderBench, the
//! answer-leakage check and the reference-free judge).
//!
//! This module owns the benchmark's run settings (`eval.json`, `instance.json`); `instance`
//! owns one instance from goal to scores and `scoring` the scoring of one program.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;
use viga_blender::{BlenderTransport, PooledWorker, TransportError, WorkerPool};
use viga_protocol::bridge::BridgeCommand;

use crate::benchmark::{Attempt, Baseline, Benchmark, Context, Proposal, Proposer};
use crate::chamfer::{DEFAULT_POINTS, SurfaceIndex};
#[cfg(feature = "clip")]
use crate::clip::ClipBackend;
use crate::judge::Judge;
use crate::layout::{Instance, Selection, Suite};
use crate::leak::CameraPose;
#[cfg(not(feature = "clip"))]
use crate::no_clip::ClipBackend;
use crate::runner::{self, EvalEvent, RunConfig, RunSummary};
use crate::scores::{
    ChamferDefinition, EvalSettings, HARNESS_FAILURE_FILE, HarnessFailure, InstanceScores,
    RenderSpec, SELECTED_FILE, SETTINGS_FILE, SelectedInstance, ViewScore, read_json, write_json,
};
use crate::shard::Shard;
use crate::summary::Report;
use crate::{EvalError, write_atomic};

mod instance;
mod scoring;

#[derive(Debug, Clone)]
pub struct EvalConfig {
    /// Which benchmark's layout `data` holds.
    pub suite: Suite,
    /// The `bench_data` folder.
    pub data: PathBuf,
    pub out: PathBuf,
    pub selection: Selection,
    pub shard: Shard,
    pub render: RenderSpec,
    /// Points sampled per surface for Chamfer distance.
    pub chamfer_points: usize,
    /// Limit for one program run or one render.
    pub timeout: Duration,
    /// CLIP ViT-B/32 weights (safetensors, Hugging Face layout) for N-CLIP; without them
    /// N-CLIP is reported as unavailable.
    pub clip_weights: Option<PathBuf>,
    /// Also score every other program the system proposed, and start.py, for the labelled
    /// oracle-selected figure. Costs one run and render set per distinct program.
    pub oracle_selected: bool,
    /// BlenderBench's reference-free judge; without one no result is judged.
    pub judge: Option<Judge>,
}

impl EvalConfig {
    pub fn new(data: impl Into<PathBuf>, out: impl Into<PathBuf>, render: RenderSpec) -> Self {
        Self {
            suite: Suite::BlenderGym,
            data: data.into(),
            out: out.into(),
            selection: Selection::default(),
            shard: Shard::ALL,
            render,
            chamfer_points: DEFAULT_POINTS,
            timeout: Duration::from_secs(1800),
            clip_weights: None,
            oracle_selected: false,
            judge: None,
        }
    }
}

#[async_trait]
impl Proposer<SceneBenchmark> for Baseline {
    fn system(&self) -> String {
        match self {
            Baseline::Noop => "noop".to_owned(),
            Baseline::Oracle => "oracle".to_owned(),
        }
    }

    async fn propose(
        &self,
        instance: &Instance,
        _context: Context<Arc<dyn BlenderTransport>>,
    ) -> Result<Proposal, EvalError> {
        let path = match self {
            Baseline::Noop => &instance.start_py,
            Baseline::Oracle => &instance.goal_py,
        };
        let code = std::fs::read_to_string(path).map_err(|err| EvalError::io(path, err))?;
        Ok(Proposal::code(Some(code)))
    }
}

/// A pooled worker as an owned transport, so a proposer can hold it as an
/// `Arc<dyn BlenderTransport>`; it returns to the pool when the last clone is dropped.
struct Lent(PooledWorker);

#[async_trait]
impl BlenderTransport for Lent {
    async fn call(
        &self,
        command: BridgeCommand,
        timeout: Option<Duration>,
    ) -> Result<Value, TransportError> {
        self.0.call(command, timeout).await
    }

    fn describe(&self) -> String {
        self.0.describe()
    }

    fn shared_folder(&self) -> Option<&viga_blender::ScratchFolder> {
        self.0.shared_folder()
    }

    async fn distrust(&self, why: &str) -> viga_blender::Recovery {
        self.0.distrust(why).await
    }

    fn last_program_output(&self) -> Option<String> {
        self.0.last_program_output()
    }

    fn containment(&self) -> Option<viga_blender::ContainmentStatus> {
        Some(self.0.containment())
    }
}

/// The settings recorded in `<out>/eval.json`; an existing file must agree, so results made
/// with other settings are never mixed with these.
fn check_settings(out: &Path, settings: &EvalSettings) -> Result<(), EvalError> {
    let path = out.join(SETTINGS_FILE);
    if path.is_file() {
        let existing: EvalSettings = read_json(&path)?;
        let differences = existing.differences(settings);
        if !differences.is_empty() {
            return Err(EvalError::BadResults {
                path,
                message: format!(
                    "this output folder holds results made with other settings ({}); use another --out or the same settings",
                    differences.join("; ")
                ),
            });
        }
        return Ok(());
    }
    write_json(&path, settings)
}

/// BlenderGym or BlenderBench (`config.suite`) on a pool of warm Blender workers.
#[derive(Debug)]
pub struct SceneBenchmark {
    config: EvalConfig,
    pool: Arc<WorkerPool>,
    /// What [`Benchmark::begin`] settled for this run.
    begun: Mutex<Option<Arc<Begun>>>,
}

/// A run's settings as each instance's scores carry them, and its CLIP backend.
#[derive(Debug)]
struct Begun {
    settings: EvalSettings,
    clip: Option<Arc<ClipBackend>>,
}

impl SceneBenchmark {
    pub fn new(config: EvalConfig, pool: Arc<WorkerPool>) -> Self {
        Self {
            config,
            pool,
            begun: Mutex::new(None),
        }
    }

    pub fn config(&self) -> &EvalConfig {
        &self.config
    }

    fn begun(&self) -> Result<Arc<Begun>, EvalError> {
        self.begun
            .lock()
            .ok()
            .and_then(|begun| begun.clone())
            .ok_or_else(|| EvalError::Harness {
                instance: "(all)".to_owned(),
                message: "an instance was evaluated before the run began (a bug)".to_owned(),
            })
    }

    /// The checks no instance needs: Chamfer points, and the judge only on BlenderBench.
    fn check_config(&self) -> Result<(), EvalError> {
        let config = &self.config;
        let refuse = |message: String| EvalError::Harness {
            instance: "(all)".to_owned(),
            message,
        };
        if config.chamfer_points == 0 {
            return Err(refuse(
                "Chamfer distance needs at least one point per surface".to_owned(),
            ));
        }
        if config.judge.is_some() && config.suite != Suite::BlenderBench {
            return Err(refuse(format!(
                "the reference-free judge is BlenderBench's; {} is scored against its goal renders only",
                config.suite.name()
            )));
        }
        Ok(())
    }
}

/// Evaluates the selected instances of `config.shard` with `proposer` on the one runner,
/// writing `<out>/<instance>/scores.json` for each and the reports. Progress goes to
/// `events` when given.
pub async fn run(
    config: &EvalConfig,
    pool: Arc<WorkerPool>,
    proposer: Arc<dyn Proposer<SceneBenchmark>>,
    events: Option<UnboundedSender<EvalEvent>>,
) -> Result<RunSummary, EvalError> {
    let run = RunConfig {
        out: config.out.clone(),
        shard: config.shard,
    };
    let benchmark = Arc::new(SceneBenchmark::new(config.clone(), pool));
    runner::run(benchmark, &run, proposer, events).await
}

#[async_trait]
impl Benchmark for SceneBenchmark {
    type Instance = Instance;
    type Worker = Arc<dyn BlenderTransport>;
    type Target = Goal;
    type Scores = InstanceScores;

    fn name(&self) -> &'static str {
        self.config.suite.name()
    }

    fn instance_name(instance: &Instance) -> &str {
        &instance.name
    }

    fn discover(&self) -> Result<Vec<Instance>, EvalError> {
        self.config
            .suite
            .discover(&self.config.data, &self.config.selection)
    }

    async fn acquire(&self) -> Result<Self::Worker, EvalError> {
        Ok(Arc::new(Lent(self.pool.acquire().await?)))
    }

    fn containment(worker: &Self::Worker) -> Option<viga_blender::ContainmentStatus> {
        worker.containment()
    }

    async fn begin(
        &self,
        out: &Path,
        system: &dyn Proposer<Self>,
        instances: &[Instance],
    ) -> Result<(), EvalError> {
        self.check_config()?;
        let config = &self.config;
        let clip = load_clip(config.clip_weights.as_deref()).await?;
        let (blender_version, containment) = {
            let worker = self.pool.acquire().await?;
            (worker.hello().blender_version.clone(), worker.containment())
        };
        let settings = EvalSettings {
            suite: config.suite,
            system: system.system(),
            render: config.render,
            chamfer_points: config.chamfer_points,
            blender_version,
            clip_weights: clip.as_ref().map(|clip| clip.recorded_path.clone()),
            oracle_selected: config.oracle_selected,
            fit_views: system.fit_views(),
            cd_definition: ChamferDefinition::CURRENT,
            judge: config.judge.as_ref().map(Judge::label),
            containment: crate::scores::Observed(Some(containment)),
        };
        check_settings(out, &settings)?;
        mark_selected(out, instances)?;
        // An instance's scores carry the settings, not the machine's facts: its own worker's
        // containment is in its folder's containment.json.
        let begun = Begun {
            settings: EvalSettings {
                containment: crate::scores::Observed(None),
                ..settings
            },
            clip: clip.map(|clip| clip.backend),
        };
        if let Ok(mut slot) = self.begun.lock() {
            *slot = Some(Arc::new(begun));
        }
        Ok(())
    }

    fn finished(
        &self,
        path: &Path,
        scores: &InstanceScores,
        _system: &str,
    ) -> Result<bool, EvalError> {
        if scores.settings != self.begun()?.settings {
            return Err(EvalError::BadResults {
                path: path.to_path_buf(),
                message: "made with other settings than eval.json; delete it to recompute"
                    .to_owned(),
            });
        }
        Ok(true)
    }

    async fn prepare(
        &self,
        instance: &Instance,
        worker: &Self::Worker,
        dir: &Path,
    ) -> Result<Goal, EvalError> {
        instance::prepare(&self.config, instance, worker.as_ref(), dir).await
    }

    fn context(&self, goal: &Goal, worker: &Self::Worker, dir: &Path) -> Context<Self::Worker> {
        Context {
            worker: Arc::clone(worker),
            goal: goal.paths.clone(),
            scratch: dir.to_path_buf(),
        }
    }

    async fn score(&self, attempt: Attempt<'_, Self>) -> Result<InstanceScores, EvalError> {
        let begun = self.begun()?;
        instance::score(&self.config, &begun.settings, begun.clip.clone(), attempt).await
    }

    fn record_failure(&self, dir: &Path, instance: &Instance, error: EvalError) -> EvalError {
        record_failure(dir, instance, error)
    }

    fn report(&self, out: &Path, _system: &str) -> Result<Report, EvalError> {
        crate::report::report(out).map(|(_, report)| report)
    }
}

/// The CLIP backend for N-CLIP, and the weights' path as `eval.json` records it.
struct LoadedClip {
    backend: Arc<ClipBackend>,
    recorded_path: String,
}

/// Loads the CLIP weights when there are any. Loaded before any rendering, so a bad weights
/// file fails the run at once; recorded as an absolute path, so resuming from another
/// directory finds the same settings.
async fn load_clip(weights: Option<&Path>) -> Result<Option<LoadedClip>, EvalError> {
    let Some(path) = weights else {
        return Ok(None);
    };
    let absolute = std::path::absolute(path).map_err(|err| EvalError::io(path, err))?;
    let loading = absolute.clone();
    let backend = tokio::task::spawn_blocking(move || ClipBackend::load(&loading))
        .await
        .map_err(|err| EvalError::Harness {
            instance: "(all)".to_owned(),
            message: format!("loading the CLIP weights panicked: {err}"),
        })??;
    Ok(Some(LoadedClip {
        backend: Arc::new(backend),
        recorded_path: absolute.display().to_string(),
    }))
}

/// Writes `<out>/<instance>/instance.json` for every selected instance, so reports count the
/// instances selected, not only those that produced a result.
fn mark_selected(out: &Path, instances: &[Instance]) -> Result<(), EvalError> {
    for instance in instances {
        let path = out.join(&instance.name).join(SELECTED_FILE);
        let selected = SelectedInstance {
            instance: instance.name.clone(),
            task: instance.task,
            cameras: instance.cameras().collect(),
        };
        if path.is_file() && read_json::<SelectedInstance>(&path).ok().as_ref() == Some(&selected) {
            continue;
        }
        write_json(&path, &selected)?;
    }
    Ok(())
}

/// Records a harness failure in `<out>/<instance>/harness-failure.json` for the reports;
/// when even that cannot be written, the error says so too.
fn record_failure(dir: &Path, instance: &Instance, error: EvalError) -> EvalError {
    let failure = HarnessFailure {
        instance: instance.name.clone(),
        task: instance.task,
        error: error.to_string(),
    };
    match write_json(&dir.join(HARNESS_FAILURE_FILE), &failure) {
        Ok(()) => error,
        Err(unrecorded) => EvalError::Harness {
            instance: instance.name.clone(),
            message: format!("{error}; and the failure could not be recorded: {unrecorded}"),
        },
    }
}

fn harness(instance: &Instance, message: impl Into<String>) -> EvalError {
    EvalError::Harness {
        instance: instance.name.clone(),
        message: message.into(),
    }
}

fn write_pngs(dir: &Path, pngs: &[Vec<u8>]) -> Result<Vec<PathBuf>, EvalError> {
    pngs.iter()
        .enumerate()
        .map(|(k, png)| {
            let path = dir.join(format!("render{}.png", k + 1));
            write_atomic(&path, png).map(|()| path)
        })
        .collect()
}

/// The goal's renders and surface, from `goal.py` run now by this Blender.
#[derive(Debug)]
pub struct Goal {
    /// BlenderBench: the answer-leakage check of the instance's base scene.
    answer_leak: Option<crate::leak::LeakCheck>,
    renders: Vec<Vec<u8>>,
    paths: Vec<PathBuf>,
    /// Indexed once, and shared with the blocking threads that compute Chamfer distances
    /// against it.
    surface: Option<Arc<SurfaceIndex>>,
    /// BlenderBench: the goal's camera poses, for the answer-leakage check.
    camera_poses: Option<Vec<CameraPose>>,
}

/// The scores of one program against the goal.
#[derive(Debug, Default, Clone)]
struct ProgramScores {
    /// Why the program is not executable; `None` when it ran and every view rendered.
    error: Option<String>,
    views: Vec<ViewScore>,
    pl: Option<f64>,
    n_clip: Option<f64>,
    cd: Option<f64>,
    cd_note: Option<String>,
}

/// Scores programs of one instance against its goal, in this Blender.
struct Scorer<'a> {
    config: &'a EvalConfig,
    instance: &'a Instance,
    blender: &'a dyn BlenderTransport,
    goal: &'a Goal,
    clip: Option<Arc<ClipBackend>>,
}
