//! Containment at the binary edge: `viga contain` (the launcher a contained Blender is
//! started through; hidden from help), the process-wide policy from `--containment`, and the
//! worker configuration every command that runs model-written programs starts Blender with.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{Context as _, Result};
use viga_blender::containment::{CONTAINED_MARKER, ContainRequest, launch};
use viga_blender::{
    BlenderLauncher, Containment, ContainmentPolicy, ContainmentStatus, WorkerConfig,
};

/// The policy of this process, set once from `--containment` / `VIGA_CONTAINMENT`.
static POLICY: OnceLock<ContainmentPolicy> = OnceLock::new();

/// Names the policy when `--containment` is not given.
pub const POLICY_ENV: &str = "VIGA_CONTAINMENT";

/// `--containment` if given, else `$VIGA_CONTAINMENT`, else auto.
pub fn chosen_policy(flag: Option<ContainmentPolicy>) -> Result<ContainmentPolicy> {
    if let Some(policy) = flag {
        return Ok(policy);
    }
    match std::env::var(POLICY_ENV) {
        Ok(text) if !text.trim().is_empty() => text
            .trim()
            .parse()
            .with_context(|| format!("{POLICY_ENV}={text:?}")),
        _ => Ok(ContainmentPolicy::default()),
    }
}

pub fn set_policy(policy: ContainmentPolicy) {
    // Set once in main; a second call would be a bug, and keeping the first is the safe side.
    let _ = POLICY.set(policy);
}

fn policy() -> ContainmentPolicy {
    POLICY.get().copied().unwrap_or_default()
}

/// `viga contain …`: runs before any async runtime starts, because a process with threads
/// cannot enter a user namespace. Only returns on failure, or after a probe.
pub fn run_launcher(args: &[OsString]) -> std::process::ExitCode {
    let outcome = ContainRequest::parse(args).and_then(|request| launch(&request));
    match outcome {
        Ok(_) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("viga contain: {err}");
            std::process::ExitCode::from(7)
        }
    }
}

/// The configuration of a Blender worker that runs model-written programs: contained under
/// the process's policy, allowed to write in `writable` (created if missing) and its own
/// scratch folder.
pub fn worker_config(launcher: BlenderLauncher, writable: &[&Path]) -> Result<WorkerConfig> {
    let mut config = WorkerConfig::new(launcher);
    config.containment = containment(writable)?;
    Ok(config)
}

fn containment(writable: &[&Path]) -> Result<Option<Containment>> {
    let policy = policy();
    if policy == ContainmentPolicy::Off {
        return Ok(None);
    }
    let mut folders = Vec::with_capacity(writable.len());
    for folder in writable {
        std::fs::create_dir_all(folder)
            .with_context(|| format!("cannot create {}", folder.display()))?;
        // Landlock rules name real folders; a relative name would follow the launcher's
        // working directory, which is this one, but say it plainly in the status.
        folders.push(
            folder
                .canonicalize()
                .with_context(|| format!("cannot resolve {}", folder.display()))?,
        );
    }
    Ok(Some(Containment {
        launcher: launcher()?,
        writable: folders,
        policy,
    }))
}

/// This binary, with the `contain` subcommand.
fn launcher() -> Result<Vec<OsString>> {
    let exe: PathBuf = std::env::current_exe()
        .context("cannot find the viga binary to start a contained Blender with")?;
    Ok(vec![exe.into_os_string(), "contain".into()])
}

/// What containment this system gives Blender under the process's policy, found by running
/// the launcher in probe mode (for `viga doctor`).
pub async fn probe() -> Result<ContainmentStatus> {
    let policy = policy();
    if policy == ContainmentPolicy::Off {
        return Ok(ContainmentStatus::off());
    }
    let mut command = tokio::process::Command::new(std::env::current_exe()?);
    command
        .arg("contain")
        .arg("--policy")
        .arg(policy.as_str())
        .arg("--probe");
    let output = command.output().await.context("cannot run the launcher")?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if let Some(json) = stdout
        .lines()
        .find_map(|line| line.strip_prefix(CONTAINED_MARKER))
    {
        return serde_json::from_str(json).context("the launcher's status is unreadable");
    }
    anyhow::bail!(
        "{}",
        String::from_utf8_lossy(&output.stderr)
            .trim()
            .trim_start_matches("viga contain: ")
    )
}
