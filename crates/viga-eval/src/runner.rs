//! The runner: every selected instance of one shard, on a pool of warm Blender workers, each
//! instance on one borrowed worker from goal to scores. Instances that already have a
//! `scores.json` are skipped, so a killed evaluation resumes where it stopped.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;
use tokio::task::JoinSet;
use viga_blender::{BlenderTransport, PooledWorker, TransportError, WorkerPool};
use viga_protocol::bridge::BridgeCommand;

use crate::chamfer::{self, DEFAULT_POINTS, SurfaceIndex};
#[cfg(feature = "clip")]
use crate::clip::ClipBackend;
use crate::judge::{Judge, Judgement};
use crate::layout::{Instance, Selection, Suite};
use crate::leak::{self, CameraPose};
#[cfg(not(feature = "clip"))]
use crate::no_clip::ClipBackend;
use crate::scene::{self, Surface};
use crate::scores::{
    ChamferDefinition, EvalSettings, FitViews, HARNESS_FAILURE_FILE, HarnessFailure,
    InstanceScores, N_CLIP_NOT_EXECUTABLE, N_CLIP_UNAVAILABLE, OracleSelected, RenderSpec,
    SCORES_FILE, SELECTED_FILE, SETTINGS_FILE, SelectedInstance, StartProgram, ViewScore,
    read_json, write_json,
};
use crate::shard::Shard;
use crate::{EvalError, write_atomic};

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

    fn shared_folder(&self) -> Option<&Path> {
        self.0.shared_folder()
    }

    fn last_program_output(&self) -> Option<String> {
        self.0.last_program_output()
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
    let blender_version = pool.acquire().await?.hello().blender_version.clone();
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
    let settings = Arc::new(settings);
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

async fn render_goal(
    config: &EvalConfig,
    instance: &Instance,
    blender: &dyn BlenderTransport,
    dir: &Path,
) -> Result<Goal, EvalError> {
    let code = std::fs::read_to_string(&instance.goal_py)
        .map_err(|err| EvalError::io(&instance.goal_py, err))?;
    let ran = scene::run_program(blender, instance, &code, config.timeout).await?;
    if let Some(error) = ran.error {
        return Err(harness(
            instance,
            format!("goal.py fails in this Blender ({error}); the instance cannot be scored"),
        ));
    }
    let cameras = scene::camera_objects(blender, config.timeout)
        .await
        .map_err(|err| harness(instance, format!("the scene's cameras: {err}")))?;
    scene::check_views(instance, &cameras).map_err(|message| harness(instance, message))?;
    let camera_poses = if instance.task.suite() == Suite::BlenderBench {
        Some(
            scene::camera_poses(blender, None, config.timeout)
                .await
                .map_err(|err| harness(instance, format!("the goal's camera poses: {err}")))?,
        )
    } else {
        None
    };
    let renders = scene::render_views(blender, instance, config.render, config.timeout)
        .await
        .map_err(|err| harness(instance, format!("the goal cannot be rendered: {err}")))?;
    let paths = write_pngs(&dir.join("goal"), &renders)?;
    let surface = if instance.task.has_chamfer() {
        let surface = scene::surface(blender, config.timeout)
            .await
            .map_err(|err| harness(instance, format!("goal surface: {err}")))?;
        Some(Arc::new(index_off_the_runtime(instance, surface).await?))
    } else {
        None
    };
    Ok(Goal {
        renders,
        paths,
        surface,
        camera_poses,
    })
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

/// One instance: goal, proposal, scores. Only harness failures are errors; a proposal that
/// does not run or render is a result (`executable: false`).
async fn evaluate(
    config: &EvalConfig,
    instance: &Instance,
    settings: &EvalSettings,
    blender: Arc<dyn BlenderTransport>,
    proposer: &dyn Proposer,
    clip: Option<Arc<ClipBackend>>,
) -> Result<InstanceScores, EvalError> {
    let started = Instant::now();
    let dir = config.out.join(&instance.name);
    let goal = render_goal(config, instance, blender.as_ref(), &dir).await?;
    let answer_leak = match &goal.camera_poses {
        Some(poses) => Some(
            leak::check(blender.as_ref(), instance, poses, config.timeout)
                .await
                .map_err(|err| harness(instance, format!("the answer-leakage check: {err}")))?,
        ),
        None => None,
    };
    let proposal = proposer
        .propose(instance, &goal.paths, blender.clone(), &dir)
        .await?;
    let scorer = Scorer {
        config,
        instance,
        blender: blender.as_ref(),
        goal: &goal,
        clip: clip.clone(),
    };
    let headline = match &proposal.code {
        None => ProgramScores {
            error: Some("the system proposed no program".to_owned()),
            ..ProgramScores::default()
        },
        Some(code) => {
            write_atomic(&dir.join("proposal.py"), code.as_bytes())?;
            scorer.score(code, &dir.join("proposal")).await?
        }
    };
    // The all-instances figure counts start.py where the proposal is not executable.
    let start_program = score_start_program(&scorer, &proposal, &headline, &dir).await?;
    let oracle_selected = if settings.oracle_selected {
        Some(
            select_with_ground_truth(&scorer, &proposal, &headline, start_program.as_ref(), &dir)
                .await?,
        )
    } else {
        None
    };
    let judge = match &config.judge {
        Some(judge) => Some(judge_proposal(judge, instance, &goal, &headline, &dir).await?),
        None => None,
    };
    let n_clip_note = n_clip_note(clip.is_some(), &headline);
    let scores = InstanceScores {
        instance: instance.name.clone(),
        task: instance.task,
        settings: settings.clone(),
        executable: headline.error.is_none(),
        error: headline.error,
        cameras: instance.cameras().collect(),
        views: headline.views,
        pl: headline.pl,
        n_clip: headline.n_clip,
        n_clip_note,
        cd: headline.cd,
        cd_note: headline.cd_note,
        proposal_note: proposal.note,
        oracle_selected,
        start_program: start_program.map(|start| StartProgram {
            executable: start.error.is_none(),
            error: start.error,
            pl: start.pl,
            n_clip: start.n_clip,
            cd: start.cd,
        }),
        answer_leak,
        judge,
        seconds: started.elapsed().as_secs_f64(),
    };
    write_scores(&dir, &scores)?;
    Ok(scores)
}

/// The start program's scores, needed when the proposal is not executable: the
/// all-instances figure counts start.py there. A proposal that is start.py is not run again.
async fn score_start_program(
    scorer: &Scorer<'_>,
    proposal: &Proposal,
    headline: &ProgramScores,
    dir: &Path,
) -> Result<Option<ProgramScores>, EvalError> {
    if headline.error.is_none() {
        return Ok(None);
    }
    let start = read_start(scorer.instance)?;
    Ok(Some(if proposal.code.as_deref() == Some(start.as_str()) {
        headline.clone()
    } else {
        scorer.score(&start, &dir.join("start")).await?
    }))
}

/// What the N-CLIP figure of an instance is: unavailable without CLIP, missing when the
/// proposal did not render, else how it was measured.
fn n_clip_note(has_clip: bool, headline: &ProgramScores) -> String {
    match (has_clip, headline.n_clip) {
        (false, _) => N_CLIP_UNAVAILABLE.to_owned(),
        (true, None) => N_CLIP_NOT_EXECUTABLE.to_owned(),
        (true, Some(_)) => format!(
            "CLIP ViT-B/32 (the weights in settings.clip_weights), mean over {} views",
            headline.views.len()
        ),
    }
}

/// Writes an instance's scores and clears an earlier run's harness failure of it, which is
/// history now.
fn write_scores(dir: &Path, scores: &InstanceScores) -> Result<(), EvalError> {
    write_json(&dir.join(SCORES_FILE), scores)?;
    let failure = dir.join(HARNESS_FAILURE_FILE);
    match std::fs::remove_file(&failure) {
        Err(err) if err.kind() != std::io::ErrorKind::NotFound => Err(EvalError::io(&failure, err)),
        _ => Ok(()),
    }
}

/// The judge's ratings of the headline proposal's Camera1 render, against the picture of the
/// goal the agent is shown (the instance's visual prompt, else the goal's Camera1 render).
async fn judge_proposal(
    judge: &Judge,
    instance: &Instance,
    goal: &Goal,
    headline: &ProgramScores,
    dir: &Path,
) -> Result<Judgement, EvalError> {
    if let Some(error) = &headline.error {
        return Ok(Judgement::NotJudged {
            reason: format!("the proposal is not executable ({error})"),
        });
    }
    let reference =
        match &instance.visual_prompt {
            Some(path) => std::fs::read(path).map_err(|err| EvalError::io(path, err))?,
            None => goal.renders.first().cloned().ok_or_else(|| {
                harness(instance, "the goal has no Camera1 render to judge against")
            })?,
        };
    let render_path = dir.join("proposal").join("render1.png");
    let render = std::fs::read(&render_path).map_err(|err| EvalError::io(&render_path, err))?;
    Ok(judge.judge(instance, reference, render).await)
}

fn read_start(instance: &Instance) -> Result<String, EvalError> {
    std::fs::read_to_string(&instance.start_py)
        .map_err(|err| EvalError::io(&instance.start_py, err))
}

/// The oracle-selected figure: every distinct program of the proposal (the headline, the
/// start program, the system's intermediate programs) scored, and the lowest mean PL chosen.
/// `start_scores` is start.py's result when it was already scored (for the all-instances
/// figure), so it is not run twice.
async fn select_with_ground_truth(
    scorer: &Scorer<'_>,
    proposal: &Proposal,
    headline: &ProgramScores,
    start_scores: Option<&ProgramScores>,
    dir: &Path,
) -> Result<OracleSelected, EvalError> {
    let start = read_start(scorer.instance)?;
    let mut others: Vec<(String, &str)> = vec![("start.py".to_owned(), start.as_str())];
    others.extend(
        proposal
            .candidates
            .iter()
            .enumerate()
            .map(|(k, code)| (format!("candidate {}", k + 1), code.as_str())),
    );
    // Identical programs score identically: each distinct text is scored once.
    let mut scored: Vec<(String, &str, OracleSelected)> = Vec::new();
    let figures = |scores: &ProgramScores| OracleSelected {
        chosen: String::new(),
        programs: 0,
        executable: 0,
        pl: scores.pl,
        n_clip: scores.n_clip,
        cd: scores.cd,
    };
    if let Some(code) = &proposal.code {
        scored.push(("final".to_owned(), code.as_str(), figures(headline)));
    }
    for (label, code) in others {
        if scored.iter().any(|(_, seen, _)| *seen == code) {
            continue;
        }
        if let (Some(known), true) = (start_scores, label == "start.py") {
            scored.push((label, code, figures(known)));
            continue;
        }
        let folder = dir.join("candidates").join(label.replace(' ', "-"));
        let scores = scorer.score(code, &folder).await?;
        scored.push((label, code, figures(&scores)));
    }
    let programs = scored.len();
    let executable = scored.iter().filter(|(.., f)| f.pl.is_some()).count();
    let best = scored
        .into_iter()
        .filter_map(|(label, _, f)| f.pl.map(|pl| (label, pl, f)))
        .min_by(|a, b| a.1.total_cmp(&b.1));
    Ok(match best {
        Some((chosen, _, best)) => OracleSelected {
            chosen,
            programs,
            executable,
            ..best
        },
        None => OracleSelected {
            chosen: "none executable".to_owned(),
            programs,
            executable,
            pl: None,
            n_clip: None,
            cd: None,
        },
    })
}

/// Scores programs of one instance against its goal, in this Blender.
struct Scorer<'a> {
    config: &'a EvalConfig,
    instance: &'a Instance,
    blender: &'a dyn BlenderTransport,
    goal: &'a Goal,
    clip: Option<Arc<ClipBackend>>,
}

impl Scorer<'_> {
    /// Runs, renders (into `folder`) and scores the program.
    async fn score(&self, code: &str, folder: &Path) -> Result<ProgramScores, EvalError> {
        let Scorer {
            config,
            instance,
            blender,
            goal,
            ref clip,
        } = *self;
        let mut scores = ProgramScores::default();
        // A program that hangs or crashes Blender is the proposal's failure, as is one that
        // raises; the worker has been restarted by its supervisor either way.
        let ran = match scene::run_program(blender, instance, code, config.timeout).await {
            Ok(ran) => ran,
            Err(err @ TransportError::Lost { .. }) => {
                scores.error = Some(format!("the program lost the Blender worker: {err}"));
                return Ok(scores);
            }
            Err(err) => return Err(err.into()),
        };
        if let Some(error) = ran.error {
            scores.error = Some(format!("the program raised {error}"));
            return Ok(scores);
        }
        let renders =
            match scene::render_views(blender, instance, config.render, config.timeout).await {
                Ok(renders) => renders,
                // E.g. the program deleted a camera: the public evaluator's "no PNG written".
                Err(err @ (TransportError::Refused { .. } | TransportError::Lost { .. })) => {
                    scores.error = Some(format!("a view could not be rendered: {err}"));
                    return Ok(scores);
                }
                Err(err) => return Err(err.into()),
            };
        write_pngs(folder, &renders)?;
        for ((camera, proposal), target) in instance.cameras().zip(&renders).zip(&goal.renders) {
            let pl = viga_skills::metrics::photometric_loss(proposal, target)
                .map_err(|err| harness(instance, format!("PL of {camera}: {err}")))?;
            scores.views.push(ViewScore {
                camera,
                pl,
                n_clip: None,
            });
        }
        scores.pl =
            Some(scores.views.iter().map(|view| view.pl).sum::<f64>() / scores.views.len() as f64);
        if let Some(goal_surface) = &goal.surface {
            match scene::surface(blender, config.timeout).await {
                Ok(surface) => match chamfer_off_the_runtime(
                    instance,
                    surface,
                    Arc::clone(goal_surface),
                    config.chamfer_points,
                )
                .await?
                {
                    Ok(cd) => scores.cd = Some(cd),
                    Err(err) => scores.cd_note = Some(err.to_string()),
                },
                Err(err) => scores.cd_note = Some(format!("surface unavailable: {err}")),
            }
        }
        if let Some(clip) = clip {
            let n_clips =
                n_clip_per_view(instance, Arc::clone(clip), renders, goal.renders.clone()).await?;
            for (view, n_clip) in scores.views.iter_mut().zip(&n_clips) {
                view.n_clip = Some(*n_clip);
            }
            scores.n_clip = Some(n_clips.iter().sum::<f64>() / n_clips.len() as f64);
        }
        Ok(scores)
    }
}

/// A surface indexed for nearest-triangle queries, on a blocking thread.
async fn index_off_the_runtime(
    instance: &Instance,
    surface: Surface,
) -> Result<SurfaceIndex, EvalError> {
    tokio::task::spawn_blocking(move || SurfaceIndex::new(&surface.triangles))
        .await
        .map_err(|err| harness(instance, format!("indexing a surface panicked: {err}")))
}

/// Chamfer distance on a blocking thread: indexing, sampling and the nearest-triangle
/// queries take tens of milliseconds, which must not stall the async workers that drive the
/// other Blenders.
async fn chamfer_off_the_runtime(
    instance: &Instance,
    proposal: Surface,
    goal: Arc<SurfaceIndex>,
    points: usize,
) -> Result<Result<f64, chamfer::ChamferError>, EvalError> {
    tokio::task::spawn_blocking(move || {
        chamfer::chamfer_indexed(&SurfaceIndex::new(&proposal.triangles), &goal, points)
    })
    .await
    .map_err(|err| harness(instance, format!("the Chamfer computation panicked: {err}")))
}

/// N-CLIP of every proposal view against its goal view. The forward passes are CPU-bound, so
/// they run off the async workers.
async fn n_clip_per_view(
    instance: &Instance,
    clip: Arc<ClipBackend>,
    proposals: Vec<Vec<u8>>,
    goals: Vec<Vec<u8>>,
) -> Result<Vec<f64>, EvalError> {
    let cameras: Vec<String> = instance.cameras().collect();
    let computed = tokio::task::spawn_blocking(move || {
        let decode = |png: &[u8], camera: &str, which: &str| {
            image::load_from_memory(png)
                .map(|image| image.to_rgb8())
                .map_err(|err| format!("cannot decode the {which} render of {camera}: {err}"))
        };
        cameras
            .iter()
            .zip(proposals.iter().zip(&goals))
            .map(|(camera, (proposal, goal))| {
                let proposal = decode(proposal, camera, "proposal")?;
                let goal = decode(goal, camera, "goal")?;
                clip.n_clip(&proposal, &goal)
                    .map_err(|err| format!("N-CLIP of {camera}: {err}"))
            })
            .collect::<Result<Vec<f64>, String>>()
    })
    .await
    .map_err(|err| harness(instance, format!("N-CLIP panicked: {err}")))?;
    computed.map_err(|message| harness(instance, message))
}

#[cfg(test)]
#[cfg(feature = "clip")]
mod tests {
    use candle_core::{DType, Device};
    use candle_nn::{Init, VarBuilder, VarMap};
    use candle_transformers::models::clip::text_model::Activation;
    use image::{ImageFormat, Rgb, RgbImage};

    use super::*;
    use crate::clip::ClipVisionConfig;
    use crate::layout::Task;

    fn png(image: &RgbImage) -> Vec<u8> {
        let mut bytes = std::io::Cursor::new(Vec::new());
        image.write_to(&mut bytes, ImageFormat::Png).unwrap();
        bytes.into_inner()
    }

    #[tokio::test]
    async fn n_clip_is_computed_per_view_and_bad_renders_are_harness_failures() {
        let config = ClipVisionConfig {
            embed_dim: 8,
            activation: Activation::QuickGelu,
            intermediate_size: 8,
            num_hidden_layers: 1,
            num_attention_heads: 1,
            projection_dim: 4,
            num_channels: 3,
            image_size: 224,
            patch_size: 32,
        };
        let varmap = VarMap::new();
        let randn = Init::Randn {
            mean: 0.0,
            stdev: 1.0,
        };
        varmap
            .get(
                8,
                "vision_model.embeddings.class_embedding",
                randn,
                DType::F32,
                &Device::Cpu,
            )
            .unwrap();
        let vars = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
        let clip = Arc::new(ClipBackend::new(vars, &config).unwrap());
        let instance = Instance {
            name: "placement1".to_owned(),
            task: Task::Placement,
            number: 1,
            dir: PathBuf::new(),
            blend: PathBuf::new(),
            start_py: PathBuf::new(),
            goal_py: PathBuf::new(),
            views: 2,
            description: None,
            visual_prompt: None,
        };
        let red = png(&RgbImage::from_pixel(64, 64, Rgb([200, 10, 10])));
        let stripes = png(&RgbImage::from_fn(64, 64, |x, _| {
            Rgb([(x * 4) as u8, 0, 90])
        }));

        let goals = vec![red.clone(), stripes.clone()];
        let same = n_clip_per_view(&instance, clip.clone(), goals.clone(), goals.clone())
            .await
            .unwrap();
        assert_eq!(same.len(), 2);
        assert!(same.iter().all(|n_clip| n_clip.abs() < 1e-6), "{same:?}");
        let swapped = vec![stripes, red.clone()];
        let different = n_clip_per_view(&instance, clip.clone(), swapped, goals.clone())
            .await
            .unwrap();
        assert!(different.iter().all(|n_clip| (0.0..=2.0).contains(n_clip)));

        let err = n_clip_per_view(&instance, clip, vec![red, b"not a png".to_vec()], goals)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("placement1") && err.contains("proposal render of Camera2"),
            "{err}"
        );
    }
}
