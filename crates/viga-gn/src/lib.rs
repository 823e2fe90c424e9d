//! # viga-gn
//!
//! The Geometry Nodes assistant (seed 003): a model answers a request such as "scatter cubes
//! on the plane scaled by noise" with the JSON step protocol of [`viga_protocol::gn`], and
//! viga applies the steps to a real Blender, checks the result with verification gates, and
//! loops until the gates pass and the model says it is done.
//!
//! **Owns:** the executor registry, open to action types registered from outside the crate
//! ([`ExecutorRegistry::register_action_type`], with the reply schema built from the
//! registry), and the three built-in executors ([`NodeTreeExecutor`], [`GnOpsExecutor`],
//! [`PythonExecutor`] with its [`PythonPolicy`]); the local docs index of the run's Blender
//! (every node type's sockets and settings, the API types' docstrings), cached per Blender
//! version and searched by the model's `search_node_docs` tool ([`docs`]); the five gates
//! ([`gates`]); the run state machine with its step records, events and run folder
//! ([`run`]), which sends failing steps back to the model and applies presets as runs of
//! their own; the context snapshot and slices with their budgets ([`context`]); presets
//! ([`preset`]); the optional response cache ([`cache`]); local telemetry ([`telemetry`]);
//! the manifest-driven E2E harness ([`e2e`]); runs on a person's scene that work on a copy in
//! viga's worker and bring only the result back ([`attached`]), and where a run works and
//! what becomes of a person's scene after it, one call ([`workbench`]); follow-ups that
//! continue an earlier run's conversation ([`conversation`]);
//! and the Blender-side Python that does the work (`python/*.py`, sent through the bridge's
//! `execute` command by [`GnBlender`], so it runs on Blender's main thread).
//!
//! A run is driven like a loop run of viga-core, through the same [`RunHandle`]:
//! [`GnRun::start`] returns one with the shared run events out, cancel in, and a
//! [`GnOutcome`] at the end. A cancel abandons a model call in flight at once; a Blender step
//! in flight finishes first.
//!
//! **Must not:** parse CLI flags or print; talk to Blender other than through
//! `viga_blender::BlenderTransport`; run anything a reply asks for before the reply passed
//! protocol validation; treat the in-process Python policy as a security boundary (the
//! worker process is the boundary; the policy is advisory).

#![warn(clippy::too_many_lines)] // no library function over 80 lines: clippy.toml sets the threshold

pub mod attached;
mod blender;
pub mod cache;
pub mod context;
pub mod conversation;
pub mod docs;
pub mod e2e;
mod error;
mod executor;
pub mod gates;
pub mod preset;
mod recorder;
pub mod run;
pub mod telemetry;
pub mod workbench;

pub use blender::GnBlender;
pub use cache::ResponseCache;
pub use docs::{DocsCache, DocsIndex, DocsSearch, SearchLimits};
pub use error::GnError;
pub use executor::{
    ActionDeclaration, ExecContext, ExecutorRegistry, GnOpsExecutor, NodeTreeExecutor,
    PythonExecutor, PythonMode, PythonPolicy, ReplySchema, StepExecutor, StepOutcome, Target,
};
pub use gates::{Baseline, GateCheck, GateConfig, GateResult, check_gates};
pub use preset::{Preset, PresetStore};
pub use run::{
    DEFAULT_GN_TIME_LIMIT, GnOutcome, GnRun, GnRunConfig, GnRunHandle, RunState, StepRecord,
};
/// A run is driven through viga-core's queue pair, like a loop run: these come with it.
pub use viga_core::{Canceller, RunHandle};
pub use workbench::Workbench;
