//! Containment at the binary edge: `viga contain` (the launcher contained workers are
//! started through; hidden from help), and the policy from `--containment` that main hands
//! to every command as a value ([`chosen`]), as viga-blender's `ContainedWorkers`.

use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::{Context as _, Result};
use viga_blender::{ContainedWorkers, ContainmentPolicy, Limit, Limits};
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

/// The variables that give each limit's default when its flag is not given.
pub const LIMIT_ENV: [(Limit, &str); 4] = [
    (Limit::Memory, "VIGA_MEMORY_LIMIT"),
    (Limit::Processes, "VIGA_PROCESS_LIMIT"),
    (Limit::FileSize, "VIGA_FILE_SIZE_LIMIT"),
    (Limit::Scratch, "VIGA_SCRATCH_LIMIT"),
];

/// The limits of contained programs: each flag if given, else its variable, else the
/// default.
pub fn limits(args: &crate::args::LimitArgs) -> Result<Limits> {
    let flags = [
        &args.memory_limit,
        &args.process_limit,
        &args.file_size_limit,
        &args.scratch_limit,
    ];
    let mut limits = Limits::default();
    for ((limit, variable), flag) in LIMIT_ENV.into_iter().zip(flags) {
        let (text, source) = match flag {
            Some(text) => (text.clone(), format!("--{}-limit", flag_name(limit))),
            None => match std::env::var(variable) {
                Ok(text) if !text.trim().is_empty() => (text, variable.to_owned()),
                _ => continue,
            },
        };
        let value = limit
            .parse_value(&text)
            .with_context(|| format!("{source}={text:?}"))?;
        limits.set(limit, value);
    }
    Ok(limits)
}

fn flag_name(limit: Limit) -> &'static str {
    match limit {
        Limit::Processes => "process",
        other => other.as_str(),
    }
}

/// How this viga contains the workers that run model-written programs: `--containment` if
/// given, else `$VIGA_CONTAINMENT`, else auto, through this binary's `viga contain`, under
/// `limits`.
pub fn chosen(flag: Option<ContainmentPolicy>, limits: Limits) -> Result<ContainedWorkers> {
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
    Ok(ContainedWorkers::new(policy, launcher()?)
        .leaving_out(test_without)
        .with_limits(limits))
}

/// This binary, with the `contain` subcommand.
fn launcher() -> Result<Vec<OsString>> {
    let exe: PathBuf = std::env::current_exe()
        .context("cannot find the viga binary to start a contained worker with")?;
    Ok(vec![exe.into_os_string(), crate::CONTAIN_LAUNCHER.into()])
}
