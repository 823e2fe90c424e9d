//! Containment at the binary edge: `viga contain` (the launcher contained workers are
//! started through; hidden from help), and [`Contain`], the policy from `--containment`
//! that main hands to every command as a value, which builds the configuration of each
//! worker that runs model-written programs.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use viga_blender::{
    Access, BlenderLauncher, Containment, ContainmentPolicy, ContainmentStatus, Half, WorkerConfig,
};
use viga_sandbox::{CONTAINED_MARKER, ContainRequest, Launched, launch};
use viga_slides::Confinement;

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

/// How this viga contains the workers that run model-written programs.
#[derive(Debug, Clone)]
pub struct Contain {
    policy: ContainmentPolicy,
    /// From [`TEST_WITHOUT_ENV`].
    test_without: Vec<Half>,
}

impl Contain {
    /// `--containment` if given, else `$VIGA_CONTAINMENT`, else auto.
    pub fn chosen(flag: Option<ContainmentPolicy>) -> Result<Self> {
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
        Ok(Self {
            policy,
            test_without,
        })
    }

    /// The configuration of a Blender worker that runs model-written programs: contained
    /// under the policy, reading and writing what `access` names besides its own scratch
    /// folder and Blender's install. Writable folders are made if missing.
    pub fn worker_config(
        &self,
        launcher: BlenderLauncher,
        access: &Access,
    ) -> Result<WorkerConfig> {
        let mut config = WorkerConfig::new(launcher);
        config.containment = self.containment(access)?;
        Ok(config)
    }

    /// The containment of a worker with `access`; `None` when the policy is off.
    pub fn containment(&self, access: &Access) -> Result<Option<Containment>> {
        if self.policy == ContainmentPolicy::Off {
            return Ok(None);
        }
        let mut resolved = Access::default();
        for folder in &access.writable {
            std::fs::create_dir_all(folder)
                .with_context(|| format!("cannot create {}", folder.display()))?;
            resolved.writable.push(real_path(folder)?);
        }
        // An input that does not exist is left for Blender to report.
        for path in &access.readable {
            resolved
                .readable
                .push(real_path(path).unwrap_or_else(|_| path.clone()));
        }
        let mut containment = Containment::new(launcher()?, self.policy).with_access(&resolved);
        containment.test_without.clone_from(&self.test_without);
        Ok(Some(containment))
    }

    /// Whether programs run uncontained (`--containment off`).
    pub fn is_off(&self) -> bool {
        self.policy == ContainmentPolicy::Off
    }

    /// How a slide or page renderer starts its processes (LibreOffice, each python-pptx
    /// program, Chromium): through the same launcher under the same policy as a Blender
    /// worker, reading and writing what `access` names besides what the renderer adds (its
    /// scratch folder, which it alone may write, and its install); `None` when the policy
    /// is off.
    pub fn confinement(&self, access: &Access) -> Result<Option<Confinement>> {
        let Some(containment) = self.containment(access)? else {
            return Ok(None);
        };
        Ok(Some(Confinement {
            launcher: containment.prefix()?,
            writable: Vec::new(),
            // Reads are limited: the renderer names what its processes read.
            readable: Some(Vec::new()),
        }))
    }

    /// What containment this system gives a worker under the policy, found by running the
    /// launcher in probe mode (for `viga doctor`).
    pub async fn probe(&self) -> Result<ContainmentStatus> {
        let Some(containment) = self.containment(&Access::default())? else {
            return Ok(ContainmentStatus::off());
        };
        let (program, args) = containment.probe_command_line()?;
        let output = tokio::process::Command::new(program)
            .args(args)
            .output()
            .await
            .context("cannot run the launcher")?;
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
}

/// Landlock rules and mounts name real folders: absolute, without links.
fn real_path(path: &Path) -> Result<PathBuf> {
    path.canonicalize()
        .with_context(|| format!("cannot resolve {}", path.display()))
}

/// This binary, with the `contain` subcommand.
fn launcher() -> Result<Vec<OsString>> {
    let exe: PathBuf = std::env::current_exe()
        .context("cannot find the viga binary to start a contained worker with")?;
    Ok(vec![exe.into_os_string(), "contain".into()])
}
