//! # viga-skills
//!
//! The skill library: what the generator and the verifier can do.
//!
//! **Owns:** the [`Tool`] trait and [`ToolRegistry`] (arguments' JSON Schemas derived with
//! schemars and validated before a tool runs; [`ToolError::Recoverable`] goes back to the
//! model, [`ToolError::Fatal`] stops the run); the generator's tools ([`generator`]) and the
//! verifier's ([`verifier`]); camera math and the fast path for camera instructions
//! ([`camera`]); labelled multi-view montages ([`montage`]); asset sources ([`assets`]);
//! compact scene summaries ([`scene`]); photometric loss ([`metrics`]); tools generated at run
//! time from Blender add-on manifests ([`addons`]); the checks on names read back from run
//! folders before they are used as paths ([`names`]).
//!
//! **Must not:** call a model or own the loop. Where a tool needs a model (a free-form camera
//! instruction), it asks through a trait ([`context::InstructionTranslator`]) that the loop
//! implements.

#![warn(clippy::too_many_lines)] // no library function over 80 lines: clippy.toml sets the threshold

pub mod addons;
pub mod assets;
pub mod camera;
pub mod context;
pub mod generator;
pub mod http;
pub mod meshfile;
pub mod meshy;
pub mod metrics;
pub mod montage;
pub mod names;
pub mod polyhaven;
pub mod reconstruct;
pub mod registry;
pub mod scene;
pub mod verifier;

pub use context::{RenderSettings, ToolContext};
pub use registry::{CapturedRender, Control, Tool, ToolError, ToolOutput, ToolRegistry};
