//! # viga-contain
//!
//! How every process that runs model-written programs is contained, chosen once by the front
//! end and handed to whoever starts one: the policy, the containment launcher that applies
//! it (its program and fixed arguments, which the caller says, such as its own binary and
//! `contain`), the limits every program runs under, and (for tests only) halves left out.
//! From it come a worker's [`Containment`] (what it may read and write resolved to real
//! paths), the launcher prefix a slide or page renderer starts its processes with
//! ([`Confinement`]), what a renderer's launcher reported, and a probe of what holds here.
//!
//! **Owns:** [`ContainedWorkers`] and its errors.
//!
//! **Must not:** start Blender or any renderer (viga-blender, viga-slides and viga-web do,
//! with what this crate gives them), or assume it runs inside the viga binary.

#![warn(clippy::too_many_lines)] // no library function over 80 lines: clippy.toml sets the threshold

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use viga_process::Confinement;
use viga_sandbox::{
    Access, CONTAINED_MARKER, ContainError, Containment, ContainmentPolicy, ContainmentStatus,
    Half, Limits,
};

/// How every worker that runs model-written programs is contained: the policy, the
/// containment launcher that applies it, and (for tests only) halves left out.
#[derive(Debug, Clone)]
pub struct ContainedWorkers {
    policy: ContainmentPolicy,
    /// The launcher's program and fixed arguments; the caller says what it is (for the CLI,
    /// its own binary and `contain`), so this crate assumes nothing about its process.
    launcher: Vec<OsString>,
    test_without: Vec<Half>,
    /// What each program may use (memory, processes, file size, what it writes).
    limits: Limits,
}

#[derive(Debug, thiserror::Error)]
pub enum ContainedWorkersError {
    #[error(
        "cannot create {}, a folder model-written programs are to write in: {source}; check that its parent exists and that you may write there",
        folder.display()
    )]
    CreateFolder {
        folder: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "cannot resolve {} to its real path (containment names folders without links): {source}",
        path.display()
    )]
    Resolve {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the containment launcher cannot be used: {0}")]
    Launcher(#[from] ContainError),
    #[error("cannot run the containment launcher {}: {source}", launcher.display())]
    ProbeRun {
        launcher: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the containment launcher's status is unreadable: {0}")]
    ProbeStatus(#[source] serde_json::Error),
    #[error("{0}")]
    ProbeRefused(String),
    #[error("the renderer was started contained but its launcher reported nothing")]
    NoRendererReport,
}

impl ContainedWorkers {
    /// Workers contained under `policy` through `launcher` (a program and its fixed
    /// arguments, such as `["/usr/bin/viga", "contain"]`).
    pub fn new(policy: ContainmentPolicy, launcher: Vec<OsString>) -> Self {
        Self {
            policy,
            launcher,
            test_without: Vec::new(),
            limits: Limits::default(),
        }
    }

    /// The same, with every program under `limits`.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The limits every program runs under.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// The same, with `halves` of containment left out. For tests only: they show that each
    /// protection is what stops an attack, and that `require` refuses without it.
    pub fn leaving_out(mut self, halves: Vec<Half>) -> Self {
        self.test_without = halves;
        self
    }

    /// Whether programs run uncontained (the policy is off).
    pub fn is_off(&self) -> bool {
        self.policy == ContainmentPolicy::Off
    }

    /// The containment of a worker whose programs reach what `access` names; `None` when
    /// the policy is off. Writable folders are made if missing; every path is resolved to
    /// its real path, except an input that does not exist, which is left as given for the
    /// program to report.
    pub fn containment(
        &self,
        access: &Access,
    ) -> Result<Option<Containment>, ContainedWorkersError> {
        if self.is_off() {
            return Ok(None);
        }
        let mut resolved = Access::default();
        for folder in &access.writable {
            std::fs::create_dir_all(folder).map_err(|source| {
                ContainedWorkersError::CreateFolder {
                    folder: folder.clone(),
                    source,
                }
            })?;
            resolved.writable.push(real_path(folder)?);
        }
        for path in &access.readable {
            resolved
                .readable
                .push(real_path(path).unwrap_or_else(|_| path.clone()));
        }
        let mut containment = Containment::new(self.launcher.clone(), self.policy)
            .with_access(&resolved)
            .with_limits(self.limits);
        containment.test_without.clone_from(&self.test_without);
        Ok(Some(containment))
    }

    /// How a slide or page renderer starts its processes (LibreOffice, each python-pptx
    /// program, Chromium): through the same launcher under the same policy as a Blender
    /// worker, reaching what `access` names besides what the renderer adds (its scratch
    /// folder, which it alone may write, and its install); `None` when the policy is off.
    pub fn confinement(
        &self,
        access: &Access,
    ) -> Result<Option<Confinement>, ContainedWorkersError> {
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

    /// What holds for a slide or page renderer started with [`Self::confinement`], from its
    /// launcher's report (the renderer's `contained_report`); off when the policy is off. A
    /// contained renderer that reported nothing is an error: the run would not know what
    /// holds.
    pub fn renderer_status(
        &self,
        report: Option<&str>,
    ) -> Result<ContainmentStatus, ContainedWorkersError> {
        match report {
            Some(json) => serde_json::from_str(json).map_err(ContainedWorkersError::ProbeStatus),
            None if self.is_off() => Ok(ContainmentStatus::off()),
            None => Err(ContainedWorkersError::NoRendererReport),
        }
    }

    /// What containment this system gives a worker under the policy, found by running the
    /// launcher in probe mode.
    pub async fn probe(&self) -> Result<ContainmentStatus, ContainedWorkersError> {
        let Some(containment) = self.containment(&Access::default())? else {
            return Ok(ContainmentStatus::off());
        };
        let (program, args) = containment.probe_command_line()?;
        let output = tokio::process::Command::new(&program)
            .args(args)
            .output()
            .await
            .map_err(|source| ContainedWorkersError::ProbeRun {
                launcher: program.clone(),
                source,
            })?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        if let Some(json) = stdout
            .lines()
            .find_map(|line| line.strip_prefix(CONTAINED_MARKER))
        {
            return serde_json::from_str(json).map_err(ContainedWorkersError::ProbeStatus);
        }
        Err(ContainedWorkersError::ProbeRefused(
            String::from_utf8_lossy(&output.stderr)
                .trim()
                .trim_start_matches("viga contain: ")
                .to_owned(),
        ))
    }
}

/// Landlock rules and mounts name real folders: absolute, without links.
fn real_path(path: &Path) -> Result<PathBuf, ContainedWorkersError> {
    path.canonicalize()
        .map_err(|source| ContainedWorkersError::Resolve {
            path: path.to_path_buf(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workers(policy: ContainmentPolicy) -> (ContainedWorkers, tempfile::TempDir) {
        let folder = tempfile::tempdir().unwrap();
        let (launcher, _log) = viga_testkit::recording_launcher(folder.path());
        (ContainedWorkers::new(policy, launcher), folder)
    }

    #[test]
    fn a_writable_folder_is_made_and_named_by_its_real_path() {
        let (workers, folder) = workers(ContainmentPolicy::Auto);
        let results = folder.path().join("run/results");
        let containment = workers
            .containment(&Access::writing(vec![results.clone()]))
            .unwrap()
            .unwrap();
        assert!(results.is_dir());
        assert_eq!(
            containment.access.writable,
            vec![results.canonicalize().unwrap()]
        );
        assert!(containment.access.readable.is_empty());
    }

    #[test]
    fn links_are_resolved_and_a_missing_input_is_left_as_given() {
        let (workers, folder) = workers(ContainmentPolicy::Require);
        let inputs = folder.path().join("inputs");
        std::fs::create_dir(&inputs).unwrap();
        let link = folder.path().join("link-to-inputs");
        std::os::unix::fs::symlink(&inputs, &link).unwrap();
        let missing = folder.path().join("no-such-scene.blend");
        let containment = workers
            .containment(&Access::reading(vec![link, missing.clone()]))
            .unwrap()
            .unwrap();
        assert_eq!(
            containment.access.readable,
            vec![inputs.canonicalize().unwrap(), missing]
        );
        assert_eq!(containment.policy, ContainmentPolicy::Require);
    }

    #[test]
    fn a_writable_folder_that_cannot_be_made_is_named() {
        let (workers, folder) = workers(ContainmentPolicy::Auto);
        let file = folder.path().join("a-file");
        std::fs::write(&file, "").unwrap();
        let wanted = file.join("results");
        let err = workers
            .containment(&Access::writing(vec![wanted.clone()]))
            .unwrap_err();
        assert!(
            matches!(&err, ContainedWorkersError::CreateFolder { folder, .. } if *folder == wanted)
        );
        assert!(err.to_string().contains(&wanted.display().to_string()));
    }

    #[test]
    fn the_policy_off_gives_no_containment_and_no_folder() {
        let (workers, folder) = workers(ContainmentPolicy::Off);
        let results = folder.path().join("results");
        let access = Access::writing(vec![results.clone()]);
        assert_eq!(workers.containment(&access).unwrap(), None);
        assert_eq!(workers.confinement(&access).unwrap(), None);
        assert!(!results.exists());
    }

    #[test]
    fn the_launcher_and_the_halves_left_out_reach_the_command_line() {
        let (workers, _folder) = workers(ContainmentPolicy::Auto);
        let launcher = workers.launcher.clone();
        let workers = workers.leaving_out(vec![Half::Network]);
        let confinement = workers.confinement(&Access::default()).unwrap().unwrap();
        assert_eq!(confinement.launcher[..launcher.len()], launcher[..]);
        let words: Vec<String> = confinement
            .launcher
            .iter()
            .map(|word| word.to_string_lossy().into_owned())
            .collect();
        let line = words.join(" ");
        assert!(line.contains("--policy auto"), "{line}");
        assert!(line.contains("--test-without network"), "{line}");
        assert_eq!(confinement.readable, Some(Vec::new()));
    }

    /// A launcher that runs `script` (shell) in place of containing anything.
    fn scripted_launcher(
        policy: ContainmentPolicy,
        folder: &Path,
        script: &str,
    ) -> ContainedWorkers {
        let path = folder.join("launcher.sh");
        std::fs::write(&path, script).unwrap();
        ContainedWorkers::new(policy, vec!["/bin/sh".into(), path.into()])
    }

    #[tokio::test]
    async fn the_probe_reads_the_launchers_report_or_its_refusal() {
        let folder = tempfile::tempdir().unwrap();
        let status = serde_json::to_string(&ContainmentStatus::off()).unwrap();
        let reporting = scripted_launcher(
            ContainmentPolicy::Auto,
            folder.path(),
            &format!("echo '{CONTAINED_MARKER}{status}'\n"),
        );
        assert_eq!(reporting.probe().await.unwrap(), ContainmentStatus::off());
        let refusing = scripted_launcher(
            ContainmentPolicy::Require,
            folder.path(),
            "echo 'viga contain: no user namespaces here' >&2; exit 7\n",
        );
        let err = refusing.probe().await.unwrap_err();
        assert_eq!(err.to_string(), "no user namespaces here");
    }

    #[tokio::test]
    async fn the_probe_of_the_policy_off_runs_nothing() {
        let workers = ContainedWorkers::new(ContainmentPolicy::Off, Vec::new());
        assert_eq!(workers.probe().await.unwrap(), ContainmentStatus::off());
    }

    #[test]
    fn a_renderer_report_is_its_status_and_a_silent_contained_renderer_is_refused() {
        let (auto, _folder) = workers(ContainmentPolicy::Auto);
        let reported = serde_json::to_string(&ContainmentStatus::off()).unwrap();
        assert_eq!(
            auto.renderer_status(Some(&reported)).unwrap(),
            ContainmentStatus::off()
        );
        assert!(matches!(
            auto.renderer_status(None),
            Err(ContainedWorkersError::NoRendererReport)
        ));
        assert!(matches!(
            auto.renderer_status(Some("not json")),
            Err(ContainedWorkersError::ProbeStatus(_))
        ));
        let (off, _folder) = workers(ContainmentPolicy::Off);
        assert_eq!(off.renderer_status(None).unwrap(), ContainmentStatus::off());
    }
}
