//! Containment at the binary edge: `viga contain` (the launcher contained workers are
//! started through; hidden from help), and the policy from `--containment` that main hands
//! to every command as a value ([`chosen`]), as viga-blender's `ContainedWorkers`.

use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::{Context as _, Result};
use viga_blender::{ContainedWorkers, ContainmentPolicy};
use viga_sandbox::{ContainRequest, Launched, launch};

/// Names the policy when `--containment` is not given.
pub const POLICY_ENV: &str = "VIGA_CONTAINMENT";

/// For tests only: halves of containment to leave out (comma-separated: network, writes,
/// reads, unix-sockets, processes, environment), so a test can show that each protection
/// is what stops an attack and that `require` refuses without it.
pub const TEST_WITHOUT_ENV: &str = "VIGA_CONTAIN_TEST_WITHOUT";

/// `viga contain …`: runs before any async runtime starts, because a process with threads
/// cannot enter a user namespace. Returns the program's exit code, or 7 when it could not
/// be started as asked.
pub fn run_launcher(args: &[OsString]) -> std::process::ExitCode {
    match ContainRequest::parse(args).and_then(|request| launch(&request)) {
        Ok(Launched::Probed(_)) => std::process::ExitCode::SUCCESS,
        Ok(Launched::Exited(code)) => std::process::ExitCode::from(code),
        Err(err) => {
            eprintln!("viga contain: {err}");
            std::process::ExitCode::from(7)
        }
    }
}

/// How this viga contains the workers that run model-written programs: `--containment` if
/// given, else `$VIGA_CONTAINMENT`, else auto, through this binary's `viga contain`.
pub fn chosen(flag: Option<ContainmentPolicy>) -> Result<ContainedWorkers> {
    let policy = match flag {
        Some(policy) => policy,
        None => match std::env::var(POLICY_ENV) {
            Ok(text) if !text.trim().is_empty() => text
                .trim()
                .parse()
                .with_context(|| format!("{POLICY_ENV}={text:?}"))?,
            _ => ContainmentPolicy::default(),
        },
    };
    let test_without = std::env::var(TEST_WITHOUT_ENV)
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(|name| name.parse().context(TEST_WITHOUT_ENV))
        .collect::<Result<_>>()?;
    Ok(ContainedWorkers::new(policy, launcher()?).leaving_out(test_without))
}

/// This binary, with the `contain` subcommand.
fn launcher() -> Result<Vec<OsString>> {
    let exe: PathBuf = std::env::current_exe()
        .context("cannot find the viga binary to start a contained worker with")?;
    Ok(vec![exe.into_os_string(), crate::CONTAIN_LAUNCHER.into()])
}
