//! # viga-blender
//!
//! Real Blender, and the only crate that starts it.
//!
//! **Owns:** starting the Blender that [`locate`] finds (viga-locate's rules, re-exported:
//! the project's `bpy` virtual environment made by `cargo xtask setup`, or a user's own
//! `blender` binary); the bridge that runs inside it
//! ([`bridge`], a Python file embedded in this crate); the framed wire protocol
//! ([`frame`], [`client`]); the [`BlenderTransport`] trait and its typed commands
//! ([`BlenderCommands`]); warm, supervised workers ([`Worker`]: per-call timeout, kill and
//! restart on a hang or crash, scene restored from the last checkpoint) and a
//! [`WorkerPool`]; the one way a Blender worker for model-written programs is configured and
//! started ([`StartBlender`]), contained under the caller's choice ([`ContainedWorkers`], from
//! viga-contain, which also confines the slide and page renderers); one-shot scripts in a
//! fresh process ([`oneshot`], the cold path); the viga Blender extension built from the bridge ([`addon`]) and attaching to a person's
//! running Blender through the connection file it writes ([`attach`]).
//!
//! **Must not:** know about models, prompts, memory or the agent loop. Layers above talk to
//! Blender only through [`BlenderTransport`], so tests of those layers may swap in a fake.

#![warn(clippy::too_many_lines)] // no library function over 80 lines: clippy.toml sets the threshold

pub mod addon;
pub mod attach;
pub mod bridge;
pub mod client;
pub mod contained;
pub mod environment;
pub mod frame;
pub use viga_locate::blender as locate;
pub mod oneshot;
pub mod pool;
pub mod private_dir;
pub mod real_paths;
pub mod transport;
pub mod worker;

pub use bridge::BridgeMode;
pub use contained::{ASSETS_DIR_ENV, PACK_RESULT_ASSETS, StartBlender, StartError, WorkerRequest};
pub use locate::{BlenderLauncher, LocateError, locate};
pub use pool::{PooledWorker, WorkerPool};
pub use transport::{BlenderCommands, BlenderTransport, LostReason, Recovery, TransportError};
pub use viga_contain::{ContainedWorkers, ContainedWorkersError};
pub use viga_process::ScratchFolder;
pub use viga_sandbox::{
    Access, Containment, ContainmentPolicy, ContainmentStatus, Half, Limit, Limits, LimitsStatus,
};
pub use worker::{Worker, WorkerConfig};
