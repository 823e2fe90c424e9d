//! The runner: every selected instance of one shard, on a pool of warm Blender workers, each
//! instance on one borrowed worker from goal to scores. Instances that already have a
//! `scores.json` are skipped, so a killed evaluation resumes where it stopped.
//!
//! This module owns the shard's run (pool, selection, resumption, events); `instance` owns
//! one instance from goal to scores and `scoring` the scoring of one program.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;
use tokio::task::JoinSet;
use viga_blender::{BlenderTransport, PooledWorker, TransportError, WorkerPool};
use viga_protocol::bridge::BridgeCommand;

use crate::chamfer::{DEFAULT_POINTS, SurfaceIndex};
#[cfg(feature = "clip")]
use crate::clip::ClipBackend;
use crate::judge::Judge;
use crate::layout::{Instance, Selection, Suite};
use crate::leak::CameraPose;
#[cfg(not(feature = "clip"))]
use crate::no_clip::ClipBackend;
use crate::scores::{
    ChamferDefinition, EvalSettings, FitViews, HARNESS_FAILURE_FILE, HarnessFailure,
    InstanceScores, RenderSpec, SCORES_FILE, SELECTED_FILE, SETTINGS_FILE, SelectedInstance,
    ViewScore, read_json, write_json,
};
use crate::shard::Shard;
use crate::{EvalError, write_atomic};

mod instance;
mod scoring;

use instance::evaluate;

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

/// What a system under test proposes for one instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proposal {
    /// The program to score; `None` when the system produced none (not executable).
    pub code: Option<String>,
    /// Recorded in `scores.json` (what the system did, how much it spent).
    pub note: Option<String>,
    /// The system's intermediate programs, oldest first (e.g. every agent iteration that ran).
    /// Only the oracle-selected figure looks at them.
    pub candidates: Vec<String>,
}

/// A system under test. It sees the instance's base scene, its start program and the goal
/// renders, and a Blender it may use freely; it must not read `goal.py` (only the `oracle`
/// baseline does, by definition).
#[async_trait]
pub trait Proposer: Send + Sync {
    /// The name recorded with every result, e.g. `noop` or `agent openai/gpt-4o`.
    fn system(&self) -> String;

    /// The goal views the system sees and works to match (recorded in `eval.json` and shown
    /// in the reports beside the views scored); `None` when it never looks at them.
    fn fit_views(&self) -> Option<FitViews> {
        None
    }

    /// Refuses a selection the system cannot work on (e.g. a fit view an instance does not
    /// have), before anything is rendered.
    fn check(&self, _instances: &[Instance]) -> Result<(), EvalError> {
        Ok(())
    }

    async fn propose(
        &self,
        instance: &Instance,
        goal_renders: &[PathBuf],
        blender: Arc<dyn BlenderTransport>,
        work_dir: &Path,
    ) -> Result<Proposal, EvalError>;
}

/// The baselines that need no model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Baseline {
    /// The start program unchanged: the score of doing nothing.
    Noop,
    /// The goal program: must score PL = 0, which proves the harness renders and compares
    /// goal and proposal identically.
    Oracle,
}

#[async_trait]
impl Proposer for Baseline {
    fn system(&self) -> String {
        match self {
            Baseline::Noop => "noop".to_owned(),
            Baseline::Oracle => "oracle".to_owned(),
        }
    }

    async fn propose(
        &self,
        instance: &Instance,
        _goal_renders: &[PathBuf],
        _blender: Arc<dyn BlenderTransport>,
        _work_dir: &Path,
    ) -> Result<Proposal, EvalError> {
        let path = match self {
            Baseline::Noop => &instance.start_py,
            Baseline::Oracle => &instance.goal_py,
        };
        let code = std::fs::read_to_string(path).map_err(|err| EvalError::io(path, err))?;
        Ok(Proposal {
            code: Some(code),
            note: None,
            candidates: Vec::new(),
        })
    }
}

/// Progress, for a front end to show.
#[derive(Debug, Clone, PartialEq)]
pub enum EvalEvent {
    /// `total` instances in this shard, `skipped` of them already scored.
    Started {
        total: usize,
        skipped: usize,
    },
    Scored(Box<InstanceScores>),
    /// A harness failure (the goal does not run, Blender unavailable): nothing was written,
    /// so the next run retries the instance.
    Failed {
        instance: String,
        error: String,
    },
}

/// How one run ended.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSummary {
    pub total: usize,
    pub skipped: usize,
    pub scored: usize,
    /// Instance name and error of every harness failure.
    pub failed: Vec<(String, String)>,
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

/// Evaluates the selected instances of `config.shard` with `proposer`, writing
/// `<out>/<instance>/scores.json` for each. Progress goes to `events` when given.
pub async fn run(
    config: &EvalConfig,
    pool: Arc<WorkerPool>,
    proposer: Arc<dyn Proposer>,
    events: Option<UnboundedSender<EvalEvent>>,
) -> Result<RunSummary, EvalError> {
    if config.chamfer_points == 0 {
        return Err(EvalError::Harness {
            instance: "(all)".to_owned(),
            message: "Chamfer distance needs at least one point per surface".to_owned(),
        });
    }
    if config.judge.is_some() && config.suite != Suite::BlenderBench {
        return Err(EvalError::Harness {
            instance: "(all)".to_owned(),
            message: format!(
                "the reference-free judge is BlenderBench's; {} is scored against its goal renders only",
                config.suite.name()
            ),
        });
    }
    let clip = load_clip(config.clip_weights.as_deref()).await?;
    let instances = config
        .shard
        .select(config.suite.discover(&config.data, &config.selection)?);
    proposer.check(&instances)?;
    let (blender_version, containment) = {
        let worker = pool.acquire().await?;
        (worker.hello().blender_version.clone(), worker.containment())
    };
    let settings = EvalSettings {
        suite: config.suite,
        system: proposer.system(),
        render: config.render,
        chamfer_points: config.chamfer_points,
        blender_version,
        clip_weights: clip.as_ref().map(|clip| clip.recorded_path.clone()),
        oracle_selected: config.oracle_selected,
        fit_views: proposer.fit_views(),
        cd_definition: ChamferDefinition::CURRENT,
        judge: config.judge.as_ref().map(Judge::label),
        containment: crate::scores::Observed(Some(containment)),
    };
    std::fs::create_dir_all(&config.out).map_err(|err| EvalError::io(&config.out, err))?;
    check_settings(&config.out, &settings)?;
    mark_selected(&config.out, &instances)?;

    let pending = unscored(config, &instances, &settings)?;
    let send = |event: EvalEvent| {
        if let Some(events) = &events {
            let _ = events.send(event);
        }
    };
    let skipped = instances.len() - pending.len();
    send(EvalEvent::Started {
        total: instances.len(),
        skipped,
    });

    let clip = clip.map(|clip| clip.backend);
    let jobs = spawn_evaluations(config, &pool, &proposer, settings, clip.as_ref(), pending);
    let mut summary = RunSummary {
        total: instances.len(),
        skipped,
        scored: 0,
        failed: Vec::new(),
    };
    collect_results(jobs, &mut summary, send).await?;
    summary.failed.sort();
    Ok(summary)
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
fn record_failure(out: &Path, instance: &Instance, error: EvalError) -> EvalError {
    let failure = HarnessFailure {
        instance: instance.name.clone(),
        task: instance.task,
        error: error.to_string(),
    };
    match write_json(
        &out.join(&instance.name).join(HARNESS_FAILURE_FILE),
        &failure,
    ) {
        Ok(()) => error,
        Err(unrecorded) => EvalError::Harness {
            instance: instance.name.clone(),
            message: format!("{error}; and the failure could not be recorded: {unrecorded}"),
        },
    }
}

/// The instances without a `scores.json` yet, in order. An existing one is parsed, not just
/// seen, so a damaged file is reported rather than trusted, and one made with other settings
/// stops the run.
fn unscored(
    config: &EvalConfig,
    instances: &[Instance],
    settings: &EvalSettings,
) -> Result<Vec<Instance>, EvalError> {
    let mut pending = Vec::new();
    for instance in instances {
        let path = config.out.join(&instance.name).join(SCORES_FILE);
        if path.is_file() {
            let scores: InstanceScores = read_json(&path)?;
            if scores.settings != *settings {
                return Err(EvalError::BadResults {
                    path,
                    message: "made with other settings than eval.json; delete it to recompute"
                        .to_owned(),
                });
            }
        } else {
            pending.push(instance.clone());
        }
    }
    Ok(pending)
}

/// One task per pending instance, each evaluating its instance on a worker it borrows from
/// the pool; a task yields the instance's name with its result.
fn spawn_evaluations(
    config: &EvalConfig,
    pool: &Arc<WorkerPool>,
    proposer: &Arc<dyn Proposer>,
    settings: EvalSettings,
    clip: Option<&Arc<ClipBackend>>,
    pending: Vec<Instance>,
) -> JoinSet<(String, Result<InstanceScores, EvalError>)> {
    // An instance's scores carry the settings, not the machine's facts: its own worker's
    // containment is in its folder's containment.json.
    let settings = Arc::new(EvalSettings {
        containment: crate::scores::Observed(None),
        ..settings
    });
    // Each job takes the next instance only once it has a worker, so instances start in
    // order (one worker: one after the other, as listed), whichever job the runtime polls
    // first: a run is reproducible, scripted sessions included.
    let count = pending.len();
    let queue = Arc::new(std::sync::Mutex::new(std::collections::VecDeque::from(
        pending,
    )));
    let mut jobs = JoinSet::new();
    for _ in 0..count {
        let pool = pool.clone();
        let proposer = proposer.clone();
        let settings = settings.clone();
        let config = config.clone();
        let clip = clip.cloned();
        let queue = Arc::clone(&queue);
        jobs.spawn(async move {
            let lent = pool.acquire().await;
            let Some(instance) = queue.lock().ok().and_then(|mut queue| queue.pop_front()) else {
                return (
                    String::new(),
                    Err(EvalError::Harness {
                        instance: String::new(),
                        message: "no instance left for a worker (a bug)".to_owned(),
                    }),
                );
            };
            let name = instance.name.clone();
            let result = async {
                let worker: Arc<dyn BlenderTransport> = Arc::new(Lent(lent?));
                evaluate(
                    &config,
                    &instance,
                    &settings,
                    worker,
                    proposer.as_ref(),
                    clip,
                )
                .await
            }
            .await
            .map_err(|err| record_failure(&config.out, &instance, err));
            (name, result)
        });
    }
    jobs
}

/// Waits for every evaluation, counting it in `summary` and reporting it through `send` as it
/// finishes. A failed instance is a result; only a panicked task ends the run with an error.
async fn collect_results(
    mut jobs: JoinSet<(String, Result<InstanceScores, EvalError>)>,
    summary: &mut RunSummary,
    send: impl Fn(EvalEvent),
) -> Result<(), EvalError> {
    while let Some(joined) = jobs.join_next().await {
        let (name, result) = joined.map_err(|err| EvalError::Harness {
            instance: "(unknown)".to_owned(),
            message: format!("an evaluation task panicked: {err}"),
        })?;
        match result {
            Ok(scores) => {
                summary.scored += 1;
                send(EvalEvent::Scored(Box::new(scores)));
            }
            Err(err) => {
                let error = err.to_string();
                summary.failed.push((name.clone(), error.clone()));
                send(EvalEvent::Failed {
                    instance: name,
                    error,
                });
            }
        }
    }
    Ok(())
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
struct Goal {
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
