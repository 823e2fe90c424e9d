//! `cargo xtask`: project automation in Rust (the matklad pattern).
//!
//! - `setup`: make a Blender available (the project-local bpy virtual environment, or the
//!   user's own binary named by `VIGA_BLENDER`); idempotent and instant when already done.
//! - `test`: `setup` with the test peers (mcp-for-blender), the Debian packages the slide and page tests need (installed in CI as
//!   root, else named), then the whole test suite (with cargo-nextest when installed).
//! - `demo`: `setup`, then the smallest real thing viga does today: build a scene in real
//!   Blender and render it.
//! - `addon-host`: `setup`, then `viga addon host`: a headless Blender with the viga
//!   extension installed from its zip, its timers driven, until killed.

#![warn(clippy::too_many_lines)] // no function over 80 lines: clippy.toml sets the threshold

mod blender;
mod demo;
mod eval;
mod setup;
mod system;
mod test;

use std::process::Command;

use anyhow::{Context as _, Result, bail};
use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "cargo xtask", about = "viga project automation")]
struct Cli {
    #[command(subcommand)]
    command: Task,
}

#[derive(Debug, Subcommand)]
enum Task {
    /// Install Blender and python-pptx (bpy 5.0.1, numpy<2, python-pptx 1.0.2 into
    /// .viga/venv), or check VIGA_BLENDER.
    Setup {
        /// Also install what the tests drive viga beside (mcp-for-blender 2.2.4 and requests);
        /// `cargo xtask test` does so itself.
        #[arg(long)]
        test_peers: bool,
    },
    /// Run setup, then build and render a small scene in real Blender (output/demo/).
    Demo,
    /// Run setup, check LibreOffice and Chromium (CI as root installs them), then the whole
    /// test suite (with cargo-nextest when it is installed); extra arguments go to `cargo
    /// test` instead.
    Test {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        cargo_args: Vec<String>,
    },
    /// Run setup, then a headless Blender with the viga extension installed from its zip and
    /// its timers driven (`viga addon host`); extra arguments go to it. Runs until killed.
    AddonHost {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        host_args: Vec<String>,
    },
    /// BlenderGym and BlenderBench evaluation: `eval blendergym`, `blenderbench`, `report`,
    /// `merge`, `bench` (forwarded to `viga eval`), `make-mini` and `make-bench-mini`
    /// (regenerate fixtures/blendergym-mini and fixtures/blenderbench-mini).
    Eval {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Task::Setup { test_peers } => {
            let launcher = setup::run()?;
            if test_peers {
                setup::test_peers(&launcher)?;
            }
            Ok(())
        }
        Task::Demo => {
            // viga builds while setup makes the venv: on a fresh clone both take about a
            // minute and a half, one on the network and one on the CPU.
            let launcher = build_while(&["build", "--package", "viga"], setup::run)?;
            demo::run(launcher)
        }
        Task::Eval { args } => eval::run(&args, setup::run),
        Task::AddonHost { host_args } => {
            setup::run()?;
            cargo(
                &["run", "--package", "viga", "--", "addon", "host"],
                &host_args,
            )
        }
        Task::Test { cargo_args } => test::run(&cargo_args),
    }
}

/// Runs `cargo <build_args>` while `work` runs, and returns what `work` gave once both are
/// done; when `work` fails, the build is stopped (nothing will use it).
fn build_while<T>(build_args: &[&str], work: impl FnOnce() -> Result<T>) -> Result<T> {
    build_while_with(build_args, &[], work)
}

/// [`build_while`] with `env` set for cargo.
fn build_while_with<T>(
    build_args: &[&str],
    env: &[(String, String)],
    work: impl FnOnce() -> Result<T>,
) -> Result<T> {
    let cargo = crate::cargo_program();
    let mut build = Command::new(&cargo)
        .current_dir(setup::workspace_root())
        .args(build_args)
        .envs(env.iter().map(|(name, value)| (name, value)))
        .spawn()
        .with_context(|| format!("could not start `cargo {}`", build_args.join(" ")))?;
    let done = match work() {
        Ok(done) => done,
        Err(err) => {
            let _ = build.kill();
            let _ = build.wait();
            return Err(err);
        }
    };
    let built = build.wait().context("could not wait for cargo")?;
    if !built.success() {
        bail!(
            "`cargo {}` failed ({built}); the compiler's messages are above",
            build_args.join(" ")
        );
    }
    Ok(done)
}

/// The cargo running us (`CARGO`), else the one on `PATH`.
fn cargo_program() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned())
}

/// Runs cargo (the one running us) from the workspace root.
fn cargo(args: &[&str], extra: &[String]) -> Result<()> {
    cargo_with(args, extra, &[])
}

/// [`cargo`] with `env` set for it.
fn cargo_with(args: &[&str], extra: &[String], env: &[(String, String)]) -> Result<()> {
    let cargo = crate::cargo_program();
    let status = Command::new(&cargo)
        .envs(env.iter().map(|(name, value)| (name, value)))
        .args(args)
        .args(extra)
        .current_dir(setup::workspace_root())
        .status()
        .with_context(|| format!("could not run {cargo}"))?;
    if !status.success() {
        bail!("`cargo {}` failed ({status})", args.join(" "));
    }
    Ok(())
}
