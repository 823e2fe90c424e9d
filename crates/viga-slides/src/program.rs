//! Running one python-pptx program: a fresh Python in a working folder of its own, stopped
//! at its time limit, with everything it started killed when it ends.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use viga_process::{
    BoundedCapture, CONTAINED_MARKER, Confinement, Ended, ScratchFolder, wait_then_kill_group,
};

use crate::office::contained_command;

/// The runner, embedded so the crate needs no files at run time.
pub(crate) const RUNNER_SCRIPT: &str = include_str!("../python/run_program.py");
/// The variable that names the file a program saves its deck to.
pub const DECK_PATH_ENV: &str = "VIGA_DECK_PATH";
/// The deck's name in the program's working folder: `prs.save("deck.pptx")` works too.
pub const DECK_FILE: &str = "deck.pptx";
const PROGRAM_FILE: &str = "program.py";
const RESULT_FILE: &str = "result.json";
const MAX_RESULT_BYTES: u64 = 1024 * 1024;
/// What is kept of each of a program's output streams (its head and tail).
const MAX_OUTPUT_BYTES: usize = 64 * 1024;

/// How a program ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ProgramStatus {
    /// It ran to its end and saved a deck.
    Saved,
    /// It raised (or did not compile).
    Failed(ProgramError),
    /// It ran to its end without saving a deck where it should.
    NoDeck { detail: String },
    /// It was still running at its limit and was stopped.
    TimedOut { limit_ms: u64 },
    /// It ended without a report (killed, `os._exit`, a crash of Python itself).
    Died { detail: String },
}

/// A program's exception, as data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProgramError {
    /// The exception's class (`NameError`, `SyntaxError`).
    #[serde(rename = "type")]
    pub kind: String,
    pub message: String,
    /// The line of the program where it was raised (the last frame in the program).
    pub line: Option<u32>,
    /// Python's traceback, without viga's runner.
    pub traceback: String,
}

/// A program's run, when it could be started.
#[derive(Debug, Clone)]
pub struct ProgramRun {
    pub status: ProgramStatus,
    /// Head and tail of what it printed.
    pub stdout: BoundedCapture,
    pub stderr: BoundedCapture,
    pub elapsed: Duration,
}

/// What the runner wrote.
#[derive(Debug, Deserialize)]
struct RunnerReport {
    ok: bool,
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    message: String,
    #[serde(default)]
    line: Option<u32>,
    #[serde(default)]
    traceback: String,
}

pub(crate) struct ProgramLaunch<'a> {
    pub python: &'a Path,
    pub runner: &'a Path,
    /// The scratch folder; the program's working folder `work` is beneath it.
    pub scratch: &'a ScratchFolder,
    pub work: &'a Path,
    pub readable: &'a [PathBuf],
    pub confinement: Option<&'a Confinement>,
    pub limit: Duration,
}

/// Runs `source` as `program.py` in `launch.work` (already made, empty).
pub(crate) async fn run(source: &str, launch: &ProgramLaunch<'_>) -> Result<ProgramRun, String> {
    let work = launch.scratch.path().join(launch.work);
    std::fs::write(work.join(PROGRAM_FILE), source)
        .map_err(|err| format!("could not write the program: {err}"))?;
    let args: Vec<OsString> = vec![
        "-I".into(),
        launch.runner.into(),
        PROGRAM_FILE.into(),
        RESULT_FILE.into(),
    ];
    let mut command = contained_command(
        launch.confinement,
        launch.scratch.path(),
        launch.readable,
        launch.python,
        &args,
    )?;
    let started = Instant::now();
    let mut child = command
        .current_dir(&work)
        .env("HOME", &work)
        .env(DECK_PATH_ENV, work.join(DECK_FILE))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|err| format!("could not run {}: {err}", launch.python.display()))?;
    let stdout = child
        .stdout
        .take()
        .map(|out| tokio::spawn(BoundedCapture::read(out, MAX_OUTPUT_BYTES)));
    let stderr = child
        .stderr
        .take()
        .map(|err| tokio::spawn(BoundedCapture::read(err, MAX_OUTPUT_BYTES)));
    let ended = wait_then_kill_group(&mut child, launch.limit)
        .await
        .map_err(|err| format!("could not wait for the program: {err}"))?;
    let elapsed = started.elapsed();
    let status = match ended {
        Ended::TimedOut => ProgramStatus::TimedOut {
            limit_ms: u64::try_from(launch.limit.as_millis()).unwrap_or(u64::MAX),
        },
        Ended::Exited(exit) => {
            let report = launch
                .scratch
                .read(&launch.work.join(RESULT_FILE), MAX_RESULT_BYTES);
            match report.map(|bytes| serde_json::from_slice::<RunnerReport>(&bytes)) {
                Ok(Ok(report)) if !report.ok => ProgramStatus::Failed(ProgramError {
                    kind: report.kind,
                    message: report.message,
                    line: report.line,
                    traceback: report.traceback,
                }),
                Ok(Ok(_)) => deck_status(launch),
                Ok(Err(err)) => ProgramStatus::Died {
                    detail: format!("{exit}; its report is unreadable: {err}"),
                },
                Err(err) => ProgramStatus::Died {
                    detail: format!("{exit}; no report ({err})"),
                },
            }
        }
    };
    let mut stdout = collect(stdout).await;
    if launch.confinement.is_some() {
        drop_launcher_report(&mut stdout);
    }
    Ok(ProgramRun {
        status,
        stdout,
        stderr: collect(stderr).await,
        elapsed,
    })
}

/// The containment launcher's report line comes first on the program's output; it is not
/// the program's.
fn drop_launcher_report(stdout: &mut BoundedCapture) {
    if stdout.text.starts_with(CONTAINED_MARKER) {
        let end = stdout
            .text
            .find('\n')
            .map_or(stdout.text.len(), |at| at + 1);
        stdout.text.replace_range(..end, "");
        stdout.total_bytes = stdout.total_bytes.saturating_sub(end as u64);
    }
}

fn deck_status(launch: &ProgramLaunch<'_>) -> ProgramStatus {
    match launch.scratch.open(&launch.work.join(DECK_FILE)) {
        Ok(_) => ProgramStatus::Saved,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => ProgramStatus::NoDeck {
            detail: format!(
                "the program saved no deck: save it with prs.save(os.environ[\"{DECK_PATH_ENV}\"]) (or prs.save(\"{DECK_FILE}\"))"
            ),
        },
        Err(err) => ProgramStatus::NoDeck {
            detail: format!("the deck it saved cannot be used: {err}"),
        },
    }
}

async fn collect(capture: Option<tokio::task::JoinHandle<BoundedCapture>>) -> BoundedCapture {
    let empty = BoundedCapture {
        text: String::new(),
        total_bytes: 0,
        left_out_bytes: 0,
    };
    match capture {
        // The group is dead, so the pipes close; a process that escaped the group and holds
        // them open is not waited for long.
        Some(task) => tokio::time::timeout(Duration::from_secs(2), task)
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or(empty),
        None => empty,
    }
}
