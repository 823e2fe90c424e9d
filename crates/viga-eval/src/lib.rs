//! # viga-eval
//!
//! Evaluation of viga and of baselines on four benchmarks, on real renderers: BlenderGym and
//! BlenderBench on Blender, SlideBench on LibreOffice, web pages on Chromium.
//!
//! **Owns:** the [`Benchmark`] trait (find instances, lend a renderer, prepare the goal, give a
//! system its [`Context`], score its [`Proposal`], write the report) and the one runner for
//! it ([`runner`]: worker pool, shards ([`shard`]), resume, each instance's containment, typed
//! [`EvalEvent`]s), with one summary and report writer ([`summary`]); the systems under test
//! ([`Proposer`]: the baselines `noop` and `oracle` ([`Baseline`]), the search ([`search`]),
//! the agent ([`agent`])). The four implementations:
//! BlenderGym and BlenderBench ([`scenes::SceneBenchmark`]: the layouts ([`layout`]), PL
//! exactly as BlenderGym defines it (from `viga_skills::metrics`), Chamfer distance
//! ([`chamfer`], our documented point-to-surface definition, since the public evaluator has
//! none; labelled as ours beside the published column), N-CLIP ([`clip`], CLIP ViT-B/32 from a
//! local weights file), BlenderBench's answer-leakage check ([`leak`]) and reference-free judge
//! ([`judge`], only with a provider), per-task reports beside the published leaderboard
//! ([`report`])); SlideBench ([`slidebench`]: execution rate, AutoPresent's reference-based
//! metrics and its reference-free design judge with the overall score); pages ([`pages`]: PL,
//! N-CLIP and the judge). What the two flat benchmarks share is [`flat`].
//!
//! **Must not:** invent metrics or fill in a metric it cannot compute (N-CLIP without CLIP
//! weights is reported as unavailable, never estimated); show the goal program to a system
//! under test (only `oracle` sees it, and it is labelled as such); score against the shipped
//! goal PNGs (the goal is re-rendered by the same Blender that renders the proposals); print
//! to a terminal (progress goes out as [`EvalEvent`]s).

#![warn(clippy::too_many_lines)] // no library function over 80 lines: clippy.toml sets the threshold

pub mod agent;
pub mod benchmark;
pub mod chamfer;
#[cfg(feature = "clip")]
pub mod clip;
pub mod flat;
pub mod gap;
pub mod judge;
pub mod layout;
pub mod leak;
#[cfg(not(feature = "clip"))]
pub mod no_clip;
pub mod pages;
pub mod report;
pub mod runner;
pub mod scene;
pub mod scene_search;
pub mod scenes;
pub mod scores;
pub mod search;
pub mod shard;
pub mod slidebench;
pub mod summary;
pub mod throughput;

use std::path::{Path, PathBuf};

pub use benchmark::{Baseline, Benchmark, Context, Proposal, Proposer, Shelf};
pub use layout::{Instance, Selection, Suite, Task, discover, discover_levels};
pub use runner::{EvalEvent, RunConfig, RunSummary};
pub use scenes::{EvalConfig, SceneBenchmark, run};
pub use scores::{FitViews, InstanceScores, RenderSpec};
pub use shard::Shard;
/// Re-exported so front ends can build a [`RenderSpec`] without depending on the protocol.
pub use viga_protocol::bridge::RenderEngine;

#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error("cannot read the data folder {}: {message}; pass the benchmark's data folder (--data)", path.display())]
    DataDir { path: PathBuf, message: String },
    #[error("{}: {message}", path.display())]
    Io { path: PathBuf, message: String },
    #[error("no {layout} in {} match the selection", data.display())]
    NoInstances { data: PathBuf, layout: &'static str },
    #[error("{task} is not a {suite} task; {suite}'s are {tasks}")]
    WrongSuite {
        task: String,
        suite: &'static str,
        tasks: String,
    },
    #[error("instance {name} is not in {} (or not in the selected tasks)", data.display())]
    NoSuchInstance { name: String, data: PathBuf },
    #[error("instance {instance} is missing {file} (looked in {}); the layout needs blender_file.blend, start.py, goal.py and renders/goal/render1.png", dir.display())]
    MissingFile {
        instance: String,
        file: String,
        dir: PathBuf,
    },
    #[error(
        "unknown task {0:?}; use blendshape, placement, geometry, lighting or material (BlenderGym), or level1, level2 or level3 (BlenderBench)"
    )]
    UnknownTask(String),
    #[error("bad shard {spec:?}: {why}")]
    BadShard { spec: String, why: String },
    #[error("{}: {message}", path.display())]
    BadResults { path: PathBuf, message: String },
    #[error("instance {instance}: {message}")]
    Harness { instance: String, message: String },
    #[error("--search-views: {message}")]
    BadFitViews { message: String },
    #[cfg(feature = "clip")]
    #[error("N-CLIP: {0}")]
    Clip(#[from] clip::ClipError),
    #[error(
        "N-CLIP is not in this build of viga: build it with `cargo build --release -p viga --features clip` (`cargo xtask eval … --clip-weights W` does that itself)"
    )]
    ClipNotBuilt,
    #[error("Blender: {0}")]
    Blender(#[from] viga_blender::TransportError),
}

impl EvalError {
    /// What kind of failure this is, for the exit code: files that cannot be read or written
    /// are `io`, a renderer going away is `worker_unavailable`, a harness that cannot score an
    /// instance is `other`, and everything about the selection and the data is `config`.
    pub fn kind(&self) -> viga_protocol::event::FailureKind {
        use viga_protocol::event::FailureKind;
        match self {
            Self::Io { .. } | Self::BadResults { .. } => FailureKind::Io,
            Self::Blender(err) => viga_domain_scene::blender_failure_kind(err),
            Self::Harness { .. } => FailureKind::Other,
            #[cfg(feature = "clip")]
            Self::Clip(_) => FailureKind::Other,
            Self::DataDir { .. }
            | Self::NoInstances { .. }
            | Self::NoSuchInstance { .. }
            | Self::MissingFile { .. }
            | Self::UnknownTask(_)
            | Self::BadShard { .. }
            | Self::BadFitViews { .. }
            | Self::WrongSuite { .. }
            | Self::ClipNotBuilt => FailureKind::Config,
        }
    }

    pub(crate) fn io(path: &Path, err: impl std::fmt::Display) -> Self {
        EvalError::Io {
            path: path.to_path_buf(),
            message: err.to_string(),
        }
    }
}

/// Writes a file whole (see [`viga_io::files::write_atomic`]), so a killed run never
/// leaves a half-written `scores.json` that resume would trust.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), EvalError> {
    viga_io::files::write_atomic(path, bytes).map_err(|err| EvalError::io(path, err))
}
