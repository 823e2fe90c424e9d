//! # viga-process
//!
//! What viga's renderer workers (LibreOffice for slides, Chromium for web pages) share about
//! the processes they start. Those processes read what a model wrote (a deck, a page), and a
//! python-pptx program is itself model-written, so every one of them is treated like the
//! Blender that runs a model's program: started through an optional containment launcher
//! ([`Confinement`]), with an allowlisted environment ([`clean_environment`]), in a process
//! group of its own that is killed whole ([`kill_group`]), its output kept within bounds
//! ([`OutputTail`], [`BoundedCapture`]), and whatever it leaves in its scratch folder read as
//! untrusted ([`ScratchFolder`]).
//!
//! **Must not:** know about decks, pages, models or the loop.

#![warn(clippy::too_many_lines)] // no library function over 80 lines: clippy.toml sets the threshold

mod capture;
mod confine;
mod environment;
mod group;
mod lost;
mod owned;
mod scratch;

pub use capture::{BoundedCapture, OutputTail, read_message};
pub use confine::{CONTAINED_MARKER, Confinement, EmptyLauncher};
pub use environment::clean_environment;
pub use group::{Ended, kill_group, wait_then_kill_group};
pub use lost::{LostReason, Recovery, WorkerLost};
pub use owned::{OWNER_FILE, PrivateFolder, private_folder, remove_stale_folders};
pub use scratch::ScratchFolder;
