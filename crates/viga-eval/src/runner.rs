//! The one runner: every selected instance of one shard of any [`Benchmark`], each on a
//! renderer it borrows from the benchmark's pool (as many at once as the pool lends), from goal
//! to scores. Instances that already have a finished `scores.json` are skipped, so a killed
//! evaluation resumes where it stopped; progress goes out as [`EvalEvent`]s; at the end the
//! benchmark's report is written.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::mpsc::UnboundedSender;
use tokio::task::JoinSet;

use crate::EvalError;
use crate::benchmark::{Attempt, Benchmark, Proposer};
use crate::scores::{HARNESS_FAILURE_FILE, InstanceScores, SCORES_FILE, read_json, write_json};
use crate::shard::Shard;
use crate::summary::{Report, write_report};

/// The file in an instance's folder that records its worker's containment.
pub const CONTAINMENT_FILE: &str = "containment.json";

/// Where a run's results go and which shard of the selection it takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunConfig {
    pub out: PathBuf,
    pub shard: Shard,
}

impl RunConfig {
    pub fn new(out: impl Into<PathBuf>) -> Self {
        Self {
            out: out.into(),
            shard: Shard::ALL,
        }
    }
}

/// Progress, for a front end to show; `S` is the benchmark's per-instance result.
#[derive(Debug, Clone, PartialEq)]
pub enum EvalEvent<S = InstanceScores> {
    /// `total` instances in this shard, `skipped` of them already scored.
    Started {
        total: usize,
        skipped: usize,
    },
    Scored(Box<S>),
    /// A harness failure (the goal does not run, the renderer is unavailable): no result was
    /// written, so the next run retries the instance.
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
    /// The report written at the end, over everything the output folder holds.
    pub report: Report,
}

/// Evaluates `proposer` on the selected instances of `config.shard` of `benchmark`, writing
/// `<out>/<instance>/scores.json` for each, then the report. Progress goes to `events` when
/// given.
pub async fn run<B: Benchmark>(
    benchmark: Arc<B>,
    config: &RunConfig,
    proposer: Arc<dyn Proposer<B>>,
    events: Option<UnboundedSender<EvalEvent<B::Scores>>>,
) -> Result<RunSummary, EvalError> {
    let instances = config.shard.select(benchmark.discover()?);
    proposer.check(&instances)?;
    // Begun before the output folder is made, so a run refused at its start (unusable CLIP
    // weights, say) writes nothing.
    benchmark
        .begin(&config.out, proposer.as_ref(), &instances)
        .await?;
    std::fs::create_dir_all(&config.out).map_err(|err| EvalError::io(&config.out, err))?;
    let system = proposer.system();
    let pending = unfinished(benchmark.as_ref(), &config.out, &instances, &system)?;
    let send = |event: EvalEvent<B::Scores>| {
        if let Some(events) = &events {
            let _ = events.send(event);
        }
    };
    let skipped = instances.len() - pending.len();
    send(EvalEvent::Started {
        total: instances.len(),
        skipped,
    });
    let jobs = spawn_attempts(&benchmark, &config.out, &proposer, &system, pending);
    let (scored, mut failed) = collect_results(jobs, send).await?;
    failed.sort();
    let report = benchmark.report(&config.out, &system)?;
    write_report(&config.out, &report)?;
    Ok(RunSummary {
        total: instances.len(),
        skipped,
        scored,
        failed,
        report,
    })
}

/// The instances without a finished `scores.json` yet, in order. An existing one is parsed,
/// not just seen, so a damaged file is reported rather than trusted, and the benchmark says
/// whether it is finished for this system (or must stop the run).
fn unfinished<B: Benchmark>(
    benchmark: &B,
    out: &Path,
    instances: &[B::Instance],
    system: &str,
) -> Result<Vec<B::Instance>, EvalError> {
    let mut pending = Vec::new();
    for instance in instances {
        let path = out.join(B::instance_name(instance)).join(SCORES_FILE);
        let finished = path.is_file() && {
            let scores: B::Scores = read_json(&path)?;
            benchmark.finished(&path, &scores, system)?
        };
        if !finished {
            pending.push(instance.clone());
        }
    }
    Ok(pending)
}

type Jobs<S> = JoinSet<(String, Result<S, EvalError>)>;

/// One task per pending instance, each on a worker it borrows from the benchmark; a task
/// yields the instance's name with its result.
fn spawn_attempts<B: Benchmark>(
    benchmark: &Arc<B>,
    out: &Path,
    proposer: &Arc<dyn Proposer<B>>,
    system: &str,
    pending: Vec<B::Instance>,
) -> Jobs<B::Scores> {
    // Each job takes the next instance only once it has a worker, so instances start in
    // order (one worker: one after the other, as listed), whichever job the runtime polls
    // first: a run is reproducible, scripted sessions included.
    let count = pending.len();
    let queue = Arc::new(std::sync::Mutex::new(std::collections::VecDeque::from(
        pending,
    )));
    let mut jobs = JoinSet::new();
    for _ in 0..count {
        let benchmark = Arc::clone(benchmark);
        let proposer = Arc::clone(proposer);
        let queue = Arc::clone(&queue);
        let out = out.to_path_buf();
        let system = system.to_owned();
        jobs.spawn(async move {
            let worker = benchmark.acquire().await;
            let Some(instance) = queue.lock().ok().and_then(|mut queue| queue.pop_front()) else {
                return (
                    String::new(),
                    Err(EvalError::Harness {
                        instance: String::new(),
                        message: "no instance left for a worker (a bug)".to_owned(),
                    }),
                );
            };
            let name = B::instance_name(&instance).to_owned();
            let dir = out.join(&name);
            let result = match worker {
                Ok(worker) => {
                    attempt(
                        &*benchmark,
                        proposer.as_ref(),
                        &instance,
                        worker,
                        &dir,
                        &system,
                    )
                    .await
                }
                Err(err) => Err(err),
            }
            .map_err(|err| benchmark.record_failure(&dir, &instance, err));
            (name, result)
        });
    }
    jobs
}

/// One instance: its worker's containment recorded, the goal prepared, the system's proposal
/// asked for and scored, `scores.json` written (and an earlier run's harness failure of it,
/// which is history now, removed).
async fn attempt<B: Benchmark>(
    benchmark: &B,
    proposer: &dyn Proposer<B>,
    instance: &B::Instance,
    worker: B::Worker,
    dir: &Path,
    system: &str,
) -> Result<B::Scores, EvalError> {
    let started = Instant::now();
    std::fs::create_dir_all(dir).map_err(|err| EvalError::io(dir, err))?;
    // What the worker that runs this instance's programs is contained under, whichever
    // system proposes them (a baseline's folder too).
    if let Some(status) = B::containment(&worker) {
        write_json(&dir.join(CONTAINMENT_FILE), &status)?;
    }
    let target = benchmark.prepare(instance, &worker, dir).await?;
    let context = benchmark.context(&target, &worker, dir);
    let proposal = proposer.propose(instance, context).await?;
    let scores = benchmark
        .score(Attempt {
            instance,
            target,
            proposal,
            worker: &worker,
            dir,
            system,
            started,
        })
        .await?;
    write_json(&dir.join(SCORES_FILE), &scores)?;
    let failure = dir.join(HARNESS_FAILURE_FILE);
    match std::fs::remove_file(&failure) {
        Err(err) if err.kind() != std::io::ErrorKind::NotFound => Err(EvalError::io(&failure, err)),
        _ => Ok(scores),
    }
}

/// Waits for every attempt, reporting each through `send` as it finishes; the count scored
/// and the failures. A failed instance is a result; only a panicked task ends the run with
/// an error.
async fn collect_results<S>(
    mut jobs: Jobs<S>,
    send: impl Fn(EvalEvent<S>),
) -> Result<(usize, Vec<(String, String)>), EvalError>
where
    S: Send + 'static,
{
    let (mut scored, mut failed) = (0, Vec::new());
    while let Some(joined) = jobs.join_next().await {
        let (name, result) = joined.map_err(|err| EvalError::Harness {
            instance: "(unknown)".to_owned(),
            message: format!("an evaluation task panicked: {err}"),
        })?;
        match result {
            Ok(scores) => {
                scored += 1;
                send(EvalEvent::Scored(Box::new(scores)));
            }
            Err(err) => {
                let error = err.to_string();
                failed.push((name.clone(), error.clone()));
                send(EvalEvent::Failed {
                    instance: name,
                    error,
                });
            }
        }
    }
    Ok((scored, failed))
}
