//! `cargo xtask test`: the whole suite. The guard rails first: `cargo fmt --check`; then,
//! while setup makes the venv and the renderers' packages are checked (in CI, as root,
//! installed), every target builds with clippy as the compiler of the workspace's own crates
//! and its warnings as errors, so the lints cost no second build; then the tests run, with
//! cargo-nextest when it is installed (test binaries side by side, `.config/nextest.toml`),
//! else with `cargo test`. Extra arguments always go to `cargo test`, whose filters they are,
//! and skip the guard rails.

use std::process::{Command, Stdio};

use anyhow::{Context as _, Result, bail};

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
        let launcher = crate::setup::run()?;
        crate::setup::test_peers(&launcher)?;
        crate::system::ensure_packages()
    };
    if !cargo_args.is_empty() {
        crate::build_while(&build, setup)?;
        return crate::cargo(&test, cargo_args);
    }
    crate::cargo(&["fmt", "--all", "--check"], &[])?;
    let clippy = clippy_as_compiler()?;
    build.push("--all-targets");
    crate::build_while_with(&build, &clippy, setup)?;
    if !nextest_installed() {
        println!(
            "test: cargo-nextest is not installed, so the test binaries run one after another \
             (`cargo install cargo-nextest` runs them side by side)"
        );
        // With the build's settings, so nothing builds again.
        return crate::cargo_with(&test, &[], &clippy);
    }
    let mut nextest = vec!["nextest", "run"];
    nextest.extend(WHOLE_SUITE);
    crate::cargo_with(&nextest, &[], &clippy)?;
    // nextest runs no doc tests; these are the crates' examples.
    crate::cargo_with(
        &[
            "test",
            "--doc",
            "--workspace",
            "--features",
            "viga-eval/clip",
        ],
        &[],
        &clippy,
    )
}

/// What makes cargo compile the workspace's own crates with `clippy-driver` (the toolchain's,
/// beside its rustc) and `-D warnings`, as `cargo clippy -- -D warnings` does, while still
/// building them: the lints in `Cargo.toml` and the function length in `clippy.toml` run in
/// the tests' own build. Every cargo call of the suite gets it, so none builds again.
fn clippy_as_compiler() -> Result<Vec<(String, String)>> {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    // From the workspace root: its rust-toolchain.toml picks the toolchain.
    let sysroot = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .current_dir(crate::setup::workspace_root())
        .output()
        .with_context(|| format!("could not run {rustc}"))?;
    if !sysroot.status.success() {
        bail!(
            "`{rustc} --print sysroot` failed: {}",
            String::from_utf8_lossy(&sysroot.stderr).trim()
        );
    }
    let driver = std::path::Path::new(String::from_utf8_lossy(&sysroot.stdout).trim())
        .join("bin")
        .join("clippy-driver");
    if !driver.is_file() {
        bail!(
            "clippy is not installed for this toolchain ({} is missing): `rustup component add clippy`",
            driver.display()
        );
    }
    Ok(vec![
        (
            "RUSTC_WORKSPACE_WRAPPER".to_owned(),
            driver.display().to_string(),
        ),
        // clippy-driver reads its own arguments here, as `cargo clippy` passes them.
        (
            "CLIPPY_ARGS".to_owned(),
            "-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__".to_owned(),
        ),
    ])
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
