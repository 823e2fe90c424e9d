//! The warm renderer process: `python office.py`, which runs LibreOffice in itself through
//! LibreOfficeKit and answers one JSON request per line (`python/office.py`).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncWriteExt as _, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use viga_process::{
    CONTAINED_MARKER, Confinement, LostReason, OutputTail, kill_group, read_message,
};

/// The helper, embedded so the crate needs no files at run time.
pub(crate) const OFFICE_SCRIPT: &str = include_str!("../python/office.py");
const READY_MARKER: &str = "VIGA_SLIDES_READY ";
/// A reply longer than this is not the helper's (it bounds every text it sends).
const MAX_REPLY_BYTES: usize = 16 * 1024 * 1024;
const STDERR_LINES: usize = 40;

/// How to start the helper.
#[derive(Debug, Clone)]
pub(crate) struct OfficeLaunch {
    pub python: PathBuf,
    pub script: PathBuf,
    pub office_program_dir: PathBuf,
    /// Writable: LibreOffice's profile, temporary files, renders.
    pub scratch: PathBuf,
    /// What the helper reads besides the scratch folder (installs, kept decks).
    pub readable: Vec<PathBuf>,
    pub confinement: Option<Confinement>,
    pub startup_timeout: Duration,
    pub name: String,
}

/// What the helper said when it was ready.
#[derive(Debug, Clone, serde::Deserialize)]
pub(crate) struct Ready {
    pub office: String,
    pub pptx: String,
}

#[derive(Debug)]
pub(crate) struct OfficeProcess {
    child: Child,
    stdin: ChildStdin,
    replies: BufReader<ChildStdout>,
    stderr: OutputTail,
    leader: Option<u32>,
    pub ready: Ready,
    /// What the containment launcher reported, as JSON.
    pub contained: Option<String>,
}

impl Drop for OfficeProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

impl OfficeProcess {
    pub async fn start(launch: &OfficeLaunch) -> Result<Self, String> {
        let profile = launch.scratch.join("office-profile");
        let args: Vec<OsString> = vec![
            "-I".into(),
            launch.script.clone().into(),
            "--office".into(),
            launch.office_program_dir.clone().into(),
            "--profile".into(),
            profile.into(),
        ];
        let mut command = contained_command(
            launch.confinement.as_ref(),
            &launch.scratch,
            &launch.readable,
            &launch.python,
            &args,
        )?;
        let mut child = command
            .current_dir(&launch.scratch)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|err| format!("could not run {}: {err}", launch.python.display()))?;
        let leader = child.id();
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err("the helper's pipes could not be opened".to_owned());
        };
        let stderr = OutputTail::follow(stderr, launch.name.clone(), STDERR_LINES);
        let mut process = Self {
            child,
            stdin,
            replies: BufReader::new(stdout),
            stderr,
            leader,
            ready: Ready {
                office: String::new(),
                pptx: String::new(),
            },
            contained: None,
        };
        match tokio::time::timeout(launch.startup_timeout, process.wait_until_ready()).await {
            Ok(Ok(())) => Ok(process),
            Ok(Err(why)) => {
                // Its last words explain why it stopped (no python-pptx, no LibreOfficeKit).
                let waited =
                    tokio::time::timeout(Duration::from_secs(2), process.child.wait()).await;
                if let Ok(Ok(_)) = waited {
                    process.leader = None;
                }
                let words = process.stderr.last_words(Duration::from_secs(2)).await;
                Err(format!("{why}; its last output:\n{words}"))
            }
            Err(_) => Err(format!(
                "LibreOffice was not ready within {:?}; its last output:\n{}",
                launch.startup_timeout,
                process.stderr.text()
            )),
        }
    }

    async fn wait_until_ready(&mut self) -> Result<(), String> {
        loop {
            let line = read_message(&mut self.replies, b'\n', MAX_REPLY_BYTES)
                .await
                .map_err(|err| format!("the helper's output could not be read: {err}"))?
                .ok_or_else(|| "the helper exited before it was ready".to_owned())?;
            let line = String::from_utf8_lossy(&line);
            if let Some(ready) = line.strip_prefix(READY_MARKER) {
                self.ready = serde_json::from_str(ready)
                    .map_err(|err| format!("the helper's ready line is unreadable: {err}"))?;
                return Ok(());
            }
            match line.strip_prefix(CONTAINED_MARKER) {
                Some(report) if self.contained.is_none() => {
                    self.contained = Some(report.to_owned())
                }
                _ => tracing::debug!(target: "viga_slides::office", "{line}"),
            }
        }
    }

    /// Sends one request and returns its reply, or why the process is lost.
    pub async fn call(&mut self, request: &Value, limit: Duration) -> Result<Value, LostReason> {
        match tokio::time::timeout(limit, self.exchange(request)).await {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(why)) => Err(self.lost(why).await),
            Err(_) => Err(LostReason::Timeout(limit)),
        }
    }

    async fn exchange(&mut self, request: &Value) -> Result<Value, String> {
        let mut line = serde_json::to_vec(request).map_err(|err| err.to_string())?;
        line.push(b'\n');
        self.stdin
            .write_all(&line)
            .await
            .map_err(|err| format!("could not send the request: {err}"))?;
        self.stdin
            .flush()
            .await
            .map_err(|err| format!("could not send the request: {err}"))?;
        let reply = read_message(&mut self.replies, b'\n', MAX_REPLY_BYTES)
            .await
            .map_err(|err| format!("unreadable reply: {err}"))?
            .ok_or_else(|| "the helper closed its output".to_owned())?;
        serde_json::from_slice(&reply).map_err(|err| format!("a reply that is not JSON: {err}"))
    }

    /// A crash or a broken pipe: give the process a moment to exit, to tell which.
    async fn lost(&mut self, why: String) -> LostReason {
        match tokio::time::timeout(Duration::from_secs(2), self.child.wait()).await {
            Ok(Ok(status)) => {
                // Reaped: its process id may be reused, so its group is not named again.
                self.leader = None;
                let tail = self.stderr.last_words(Duration::from_secs(1)).await;
                LostReason::Exited(if tail.is_empty() {
                    status.to_string()
                } else {
                    format!("{status}; last output:\n{tail}")
                })
            }
            _ => LostReason::Disconnected(why),
        }
    }

    pub fn pid(&self) -> Option<u32> {
        self.leader
    }

    /// Kills the helper and everything in its process group, once.
    pub fn kill(&mut self) {
        if let Some(leader) = self.leader.take() {
            kill_group(leader);
        }
        let _ = self.child.start_kill();
    }

    /// Asks the helper to stop (end of its input), and kills it if it does not at once.
    pub async fn shutdown(mut self) {
        let _ = self.stdin.shutdown().await;
        if let Ok(Ok(_)) = tokio::time::timeout(Duration::from_secs(3), self.child.wait()).await {
            // Reaped: its process id may be reused, so its group is not named again.
            self.leader = None;
        }
        self.kill();
    }
}

/// `program args` as a command, through the containment launcher when one is given, in a
/// process group of its own with a clean environment whose home and temporary folder are
/// `scratch`.
pub(crate) fn contained_command(
    confinement: Option<&Confinement>,
    scratch: &Path,
    readable: &[PathBuf],
    program: &Path,
    args: &[OsString],
) -> Result<Command, String> {
    let (program, args) = match confinement {
        Some(confinement) => {
            let readable: Vec<&Path> = readable.iter().map(PathBuf::as_path).collect();
            confinement
                .command_line(&[scratch], &readable, program, args)
                .map_err(|err| err.to_string())?
        }
        None => (program.to_path_buf(), args.to_vec()),
    };
    let mut command = Command::new(program);
    viga_process::clean_environment(&mut command, scratch);
    command.args(args);
    // A launcher leads a session of its own (which it could not start as a group leader);
    // without one the process leads its own group. Either way its id names the group.
    if confinement.is_none() {
        command.process_group(0);
    }
    Ok(command)
}
