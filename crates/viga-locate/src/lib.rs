//! # viga-locate
//!
//! Where viga finds the programs it runs, and what to tell a person when one is missing:
//! a Blender ([`blender`]: `VIGA_BLENDER`, `VIGA_PYTHON`, or the venv `cargo xtask setup`
//! makes at the root of the checkout), a Python with python-pptx and LibreOffice
//! ([`office`]), Chromium ([`chromium`]), and any program named by a variable or found on
//! `PATH` ([`find_program`]). The versions `cargo xtask setup` installs are pinned here too.
//!
//! It has no dependency beyond the standard library and thiserror, so `xtask` builds in
//! seconds on a fresh clone before anything heavy is compiled.
//!
//! **Must not:** start, run or talk to any of these programs; depend on any other viga crate.

#![warn(clippy::too_many_lines)] // no library function over 80 lines: clippy.toml sets the threshold

pub mod blender;
pub mod chromium;
pub mod office;
mod program;

pub use blender::{BlenderLauncher, LocateError};
pub use program::{NotFound, find_program, real_folder};

/// The root of the checkout viga was built in: where `cargo xtask setup` makes the venv.
/// Nothing is searched for from the current folder: a `.viga/venv` planted in a parent
/// folder (a shared `/tmp`) would otherwise run as the user.
pub fn workspace_root() -> std::path::PathBuf {
    // This crate is crates/viga-locate in the workspace.
    let manifest_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .ancestors()
        .nth(2)
        .unwrap_or(manifest_dir)
        .to_path_buf()
}
