//! # viga-blender
//!
//! Real Blender, and the only crate that starts it.
//!
//! **Owns:** finding a Blender ([`locate`]: the project's `bpy` virtual environment made by
//! `cargo xtask setup`, or a user's own `blender` binary); running scripts in a fresh Blender
//! process ([`oneshot`], the cold path the reference systems use for everything).
//!
//! **Must not:** know about models, prompts, memory or the agent loop. Layers above talk to
//! Blender only through the types this crate exports.

pub mod locate;
pub mod oneshot;

pub use locate::{BlenderLauncher, LocateError, locate};
