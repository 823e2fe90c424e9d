//! The benchmark trait every benchmark implements for the one runner ([`crate::runner`]):
//! how it finds its instances, lends a renderer, prepares an instance's goal, gives a
//! system its context, scores what the system proposed and writes its report. Also the
//! system under test ([`Proposer`]) and the baselines every benchmark has ([`Baseline`]).
//!
//! The four benchmarks: BlenderGym and BlenderBench ([`crate::scenes::SceneBenchmark`], one
//! implementation for both layouts), SlideBench ([`crate::slidebench::SlideBench`]) and web
//! pages ([`crate::pages::PageBench`]).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use async_trait::async_trait;
use serde::Serialize;
use serde::de::DeserializeOwned;
use viga_blender::ContainmentStatus;

use crate::EvalError;
use crate::summary::Report;

/// A benchmark, as the runner drives it. Every method but [`Benchmark::report`] works on one
/// instance or the run's start, so the runner alone decides order, concurrency and resumption.
#[async_trait]
pub trait Benchmark: Sized + Send + Sync + 'static {
    /// One instance, as its layout describes it.
    type Instance: Clone + Send + Sync + 'static;
    /// A renderer lent for one instance (a pooled Blender, a slide renderer, a browser),
    /// which the system may use too; it goes back when the last clone is dropped.
    type Worker: Clone + Send + Sync + 'static;
    /// What the benchmark prepared for an instance before the system works on it (the goal's
    /// renders, the reference picture).
    type Target: Send + Sync + 'static;
    /// One instance's result, as `scores.json` holds it.
    type Scores: Serialize + DeserializeOwned + Clone + std::fmt::Debug + Send + Sync + 'static;

    /// The benchmark's name in reports, e.g. `BlenderGym`.
    fn name(&self) -> &'static str;

    /// The instance's name, which is also its folder under the output folder.
    fn instance_name(instance: &Self::Instance) -> &str;

    /// Every selected instance in a fixed order (the runner takes its shard of them).
    fn discover(&self) -> Result<Vec<Self::Instance>, EvalError>;

    /// A renderer for one instance; waits while every one is lent.
    async fn acquire(&self) -> Result<Self::Worker, EvalError>;

    /// What the worker's programs are contained under, when it can say.
    fn containment(worker: &Self::Worker) -> Option<ContainmentStatus>;

    /// Before any instance: checks and records the run's settings in `out` (which may not
    /// exist yet: nothing is to be written there before the checks pass); `instances` is this
    /// shard's selection.
    async fn begin(
        &self,
        _out: &Path,
        _system: &dyn Proposer<Self>,
        _instances: &[Self::Instance],
    ) -> Result<(), EvalError> {
        Ok(())
    }

    /// Whether a result found in `path` counts as finished for `system` (resume skips the
    /// instance); an error when it must not be mixed with this run's.
    fn finished(&self, path: &Path, scores: &Self::Scores, system: &str)
    -> Result<bool, EvalError>;

    /// The instance's goal, prepared in `worker` (results under `dir`).
    async fn prepare(
        &self,
        instance: &Self::Instance,
        worker: &Self::Worker,
        dir: &Path,
    ) -> Result<Self::Target, EvalError>;

    /// What the system is given to work on the instance.
    fn context(
        &self,
        target: &Self::Target,
        worker: &Self::Worker,
        dir: &Path,
    ) -> Context<Self::Worker>;

    /// Scores what the system proposed. Only harness failures are errors: a proposal that
    /// does not run is a result.
    async fn score(&self, attempt: Attempt<'_, Self>) -> Result<Self::Scores, EvalError>;

    /// Records a harness failure of `instance` where the reports find it; the error to
    /// report (which says so when even the record failed).
    fn record_failure(
        &self,
        _dir: &Path,
        _instance: &Self::Instance,
        error: EvalError,
    ) -> EvalError {
        error
    }

    /// The report of everything `out` holds for `system`.
    fn report(&self, out: &Path, system: &str) -> Result<Report, EvalError>;
}

/// One instance's attempt, for [`Benchmark::score`].
pub struct Attempt<'a, B: Benchmark> {
    pub instance: &'a B::Instance,
    pub target: B::Target,
    pub proposal: Proposal,
    pub worker: &'a B::Worker,
    /// The instance's results folder.
    pub dir: &'a Path,
    /// The system's name.
    pub system: &'a str,
    /// When the instance started (for its wall time).
    pub started: Instant,
}

/// What a system is given for one instance.
#[derive(Debug, Clone)]
pub struct Context<W> {
    /// The instance's renderer, which the system may use freely.
    pub worker: W,
    /// The pictures of the goal the system works to match, first the main one.
    pub goal: Vec<PathBuf>,
    /// Where the system may keep its own files for the instance (an agent's run folders).
    pub scratch: PathBuf,
}

/// What a system under test proposes for one instance.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Proposal {
    /// The program to score; `None` when the system produced none (not executable).
    pub code: Option<String>,
    /// Recorded in `scores.json` (what the system did, how much it spent).
    pub note: Option<String>,
    /// The system's intermediate programs, oldest first (e.g. every agent iteration that ran).
    /// Only BlenderGym's oracle-selected figure looks at them.
    pub candidates: Vec<String>,
}

impl Proposal {
    /// Just a program (or none).
    pub fn code(code: Option<String>) -> Self {
        Self {
            code,
            ..Self::default()
        }
    }
}

/// A system under test on benchmark `B`. It sees the instance's task and goal pictures and a
/// renderer it may use freely; it must not read the goal program (only the `oracle` baseline
/// does, by definition).
#[async_trait]
pub trait Proposer<B: Benchmark>: Send + Sync {
    /// The name recorded with every result, e.g. `noop` or `agent openai/gpt-4o`.
    fn system(&self) -> String;

    /// The goal views the system sees and works to match (BlenderGym and BlenderBench record
    /// them in `eval.json`); `None` when it never looks at them.
    fn fit_views(&self) -> Option<crate::scores::FitViews> {
        None
    }

    /// Refuses a selection the system cannot work on (e.g. a fit view an instance does not
    /// have), before anything is rendered.
    fn check(&self, _instances: &[B::Instance]) -> Result<(), EvalError> {
        Ok(())
    }

    async fn propose(
        &self,
        instance: &B::Instance,
        context: Context<B::Worker>,
    ) -> Result<Proposal, EvalError>;
}

/// The baselines that need no model, on every benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Baseline {
    /// Doing nothing: the start program unchanged (BlenderGym, BlenderBench), a deck of one
    /// blank slide (SlideBench), an empty document (pages).
    Noop,
    /// The answer: the goal program, the reference slide itself, the goal page. It must score
    /// perfectly, which proves the harness renders and compares goal and proposal alike.
    Oracle,
}

impl<B: Benchmark> std::fmt::Debug for Attempt<'_, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attempt")
            .field("instance", &B::instance_name(self.instance))
            .field("system", &self.system)
            .finish_non_exhaustive()
    }
}

/// Renderers of one kind lent one instance at a time: the pool of a benchmark whose
/// renderers are not Blender's (SlideBench's LibreOffice, pages' Chromium).
pub struct Shelf<T> {
    free: Mutex<Vec<Shelved<T>>>,
    available: tokio::sync::Semaphore,
}

impl<T> std::fmt::Debug for Shelf<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shelf")
            .field("free", &self.available.available_permits())
            .finish_non_exhaustive()
    }
}

/// A renderer with what its containment launcher reported for it.
struct Shelved<T> {
    worker: Arc<T>,
    containment: Option<ContainmentStatus>,
}

impl<T: Send + Sync + 'static> Shelf<T> {
    /// A shelf of started renderers, each with its containment when known.
    pub fn new(workers: Vec<(Arc<T>, Option<ContainmentStatus>)>) -> Arc<Self> {
        let count = workers.len();
        Arc::new(Self {
            free: Mutex::new(
                workers
                    .into_iter()
                    .map(|(worker, containment)| Shelved {
                        worker,
                        containment,
                    })
                    .collect(),
            ),
            available: tokio::sync::Semaphore::new(count),
        })
    }

    /// A renderer, once one is free.
    pub async fn acquire(self: &Arc<Self>) -> Result<Lent<T>, EvalError> {
        let closed = |why: &str| EvalError::Harness {
            instance: "(all)".to_owned(),
            message: format!("no renderer to lend: {why}"),
        };
        self.available
            .acquire()
            .await
            .map_err(|_| closed("the shelf is closed"))?
            .forget();
        let shelved = self
            .free
            .lock()
            .ok()
            .and_then(|mut free| free.pop())
            .ok_or_else(|| closed("none is free although one was counted (a bug)"))?;
        Ok(Lent(Arc::new(Lending {
            worker: shelved.worker,
            containment: shelved.containment,
            shelf: Arc::clone(self),
        })))
    }

    /// Every renderer, for shutting them down once nothing is lent.
    pub fn take_all(&self) -> Vec<Arc<T>> {
        self.available.close();
        self.free
            .lock()
            .map(|mut free| free.drain(..).map(|shelved| shelved.worker).collect())
            .unwrap_or_default()
    }
}

/// A renderer lent from a [`Shelf`]; it goes back when the last clone is dropped.
pub struct Lent<T: Send + Sync + 'static>(Arc<Lending<T>>);

impl<T: Send + Sync + 'static> Clone for Lent<T> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<T: Send + Sync + 'static> std::fmt::Debug for Lent<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lent").finish_non_exhaustive()
    }
}

impl<T: Send + Sync + 'static> Lent<T> {
    pub fn worker(&self) -> &Arc<T> {
        &self.0.worker
    }

    pub fn containment(&self) -> Option<ContainmentStatus> {
        self.0.containment.clone()
    }
}

struct Lending<T: Send + Sync + 'static> {
    worker: Arc<T>,
    containment: Option<ContainmentStatus>,
    shelf: Arc<Shelf<T>>,
}

impl<T: Send + Sync + 'static> Drop for Lending<T> {
    fn drop(&mut self) {
        if let Ok(mut free) = self.shelf.free.lock() {
            free.push(Shelved {
                worker: Arc::clone(&self.worker),
                containment: self.containment.take(),
            });
            self.shelf.available.add_permits(1);
        }
    }
}
