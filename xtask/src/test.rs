//! `cargo xtask test`: the whole suite. The guard rails first: `cargo fmt --check`, then,
//! while setup makes the venv and the renderers' packages are checked (in CI, as root,
//! installed), clippy over every target with warnings as errors and the tests' build; then
//! the tests run, with cargo-nextest when it is installed (test binaries side by side,
//! `.config/nextest.toml`), else with `cargo test`. Extra arguments always go to `cargo test`,
//! whose filters they are, and skip the guard rails.

use std::process::{Command, Stdio};

use anyhow::Result;

/// Clippy over everything the suite builds and every other target (benches), warnings as
/// errors: the lints in `Cargo.toml` and the function length in `clippy.toml`.
const CLIPPY: [&str; 8] = [
    "clippy",
    "--workspace",
    "--all-targets",
    "--features",
    "viga-eval/clip",
    "--",
    "-D",
    "warnings",
];

/// N-CLIP's network is a feature of its own; the tests check it too.
const WHOLE_SUITE: [&str; 4] = [
    "--workspace",
    "--features",
    "viga-eval/clip",
    "--no-fail-fast",
];

pub fn run(cargo_args: &[String]) -> Result<()> {
    let test = test_command(cargo_args);
    let mut build: Vec<&str> = test.clone();
    build.extend(
        cargo_args
            .iter()
            .take_while(|arg| *arg != "--")
            .map(String::as_str),
    );
    if !build.contains(&"--no-run") {
        build.push("--no-run");
    }
    let setup = || {
        crate::setup::run()?;
        crate::system::ensure_packages()
    };
    if !cargo_args.is_empty() {
        crate::build_while(&build, setup)?;
        return crate::cargo(&test, cargo_args);
    }
    crate::cargo(&["fmt", "--all", "--check"], &[])?;
    crate::builds_while(&[&CLIPPY, &build], setup)?;
    if !nextest_installed() {
        println!(
            "test: cargo-nextest is not installed, so the test binaries run one after another \
             (`cargo install cargo-nextest` runs them side by side)"
        );
        return crate::cargo(&test, &[]);
    }
    let mut nextest = vec!["nextest", "run"];
    nextest.extend(WHOLE_SUITE);
    crate::cargo(&nextest, &[])?;
    // nextest runs no doc tests; these are the crates' examples.
    crate::cargo(
        &[
            "test",
            "--doc",
            "--workspace",
            "--features",
            "viga-eval/clip",
        ],
        &[],
    )
}

/// `cargo test` over the whole suite, or over the packages `cargo_args` names (`-p`), which
/// may not have N-CLIP's feature.
fn test_command(cargo_args: &[String]) -> Vec<&'static str> {
    let names_packages = cargo_args
        .iter()
        .take_while(|arg| *arg != "--")
        .any(|arg| arg.starts_with("-p") || arg.starts_with("--package"));
    let mut test = vec!["test"];
    if !names_packages {
        test.extend(WHOLE_SUITE);
    }
    test
}

fn nextest_installed() -> bool {
    let cargo = crate::cargo_program();
    Command::new(cargo)
        .args(["nextest", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}
