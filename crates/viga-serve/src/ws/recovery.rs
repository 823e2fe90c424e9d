//! A page that reconnects asks how its request went (`recover`): after a network blip the
//! request is still running here; after the server was restarted it is only in its run
//! folder. Each request's folder is remembered under its query id in an index the server
//! keeps outside the users' folders (`<files root>/.requests/<user>.jsonl`, where no Blender
//! writes), and its recorded lines are sent again, ending with its `finished` line. A run the
//! server stopped in the middle of (killed) is ended in its folder as failed, saying so.

use std::io::Write as _;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};
use viga_protocol::event::{FailureKind, RunEvent, StopReason, TimedEvent};
use viga_protocol::server::ChatOut;
use viga_protocol::stream::{StreamLine, StreamRecord};

use super::credentials::UserName;

/// The finished line of a request the server cancelled as it stopped (SIGINT, SIGTERM).
pub(super) const STOPPED_BY_SERVER: &str = "the server stopped while carrying this request out: what was done is kept (each command is one undo step in your Blender); send the request again once the server is back";

/// The finished line of a request the server stopped without waiting for, a command of it
/// still running in the user's Blender.
pub(super) const LEFT_BY_SERVER: &str = "the server stopped while a command of this request was running in your Blender: it may still finish there (each command is one undo step); send the request again once the server is back";

/// How a request ends that a server stopped in the middle of without a word (it was killed).
const INTERRUPTED: &str = "the server stopped while carrying this request out (it was killed or failed); the steps shown are what it recorded, and a command it had sent may still have finished in your Blender (each command is one undo step there)";

/// The index folder under the files root, and the most of a run log sent again.
const INDEX_FOLDER: &str = ".requests";
const MAX_LOG_BYTES: u64 = 8 << 20;
/// The most of an index read (the newest requests are at its end).
const MAX_INDEX_BYTES: u64 = 4 << 20;

#[derive(Serialize, Deserialize)]
struct Remembered {
    query_id: String,
    run: PathBuf,
}

fn index_of(files_root: &Path, user: &UserName) -> PathBuf {
    files_root
        .join(INDEX_FOLDER)
        .join(format!("{}.jsonl", user.as_str()))
}

/// Remembers that `query_id` of `user` runs in `run_folder`.
pub(super) fn remember(
    files_root: &Path,
    user: &UserName,
    query_id: &str,
    run_folder: &Path,
) -> std::io::Result<()> {
    let index = index_of(files_root, user);
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    if let Some(folder) = index.parent() {
        builder.create(folder)?;
    }
    let mut line = serde_json::to_string(&Remembered {
        query_id: query_id.to_owned(),
        run: run_folder.to_path_buf(),
    })
    .map_err(std::io::Error::other)?;
    line.push('\n');
    // One write of a whole line to a file opened for appending: lines never interleave.
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&index)?
        .write_all(line.as_bytes())
}

/// The run folder of `query_id`, when the index names one inside the user's folder.
fn find(files_root: &Path, user: &UserName, query_id: &str) -> Option<PathBuf> {
    let name = format!("{}.jsonl", user.as_str());
    let tail = viga_blender::ScratchFolder::new(files_root.join(INDEX_FOLDER))
        .read_tail(Path::new(&name), MAX_INDEX_BYTES)
        .ok()?;
    let text = String::from_utf8_lossy(&tail).into_owned();
    let user_folder = files_root.join(user.as_str());
    text.lines()
        .rev()
        .filter_map(|line| serde_json::from_str::<Remembered>(line).ok())
        .find(|remembered| remembered.query_id == query_id)
        .map(|remembered| remembered.run)
        .filter(|run| {
            run.strip_prefix(&user_folder).is_ok_and(|inside| {
                inside
                    .components()
                    .all(|part| matches!(part, Component::Normal(_)))
            })
        })
}

/// How `query_id` went, for a page that reconnected: `running` here, `finished` with its
/// recorded lines (the last a `finished` line), or `unknown`.
pub(super) fn recover(
    files_root: &Path,
    user: &UserName,
    query_id: &str,
    running: bool,
) -> (&'static str, Vec<ChatOut>) {
    if running {
        return ("running", Vec::new());
    }
    let Some(run) = find(files_root, user, query_id) else {
        return ("unknown", Vec::new());
    };
    let Some(mut events) = recorded(&files_root.join(user.as_str()), &run) else {
        return ("unknown", Vec::new());
    };
    let ended = events.iter().find_map(|timed| match &timed.event {
        RunEvent::RunFinished { stop, .. } => Some(stop.clone()),
        _ => None,
    });
    let stop = match ended {
        Some(stop) => stop,
        None => {
            let stop = StopReason::failed(INTERRUPTED, FailureKind::Other);
            // The folder says how the request ended too, unless it cannot be written.
            if let Err(err) = viga_core::RunFolder::open(&run)
                .and_then(|folder| folder.finish_left_run(stop.clone()))
            {
                tracing::warn!(%user, "an interrupted request's folder was not ended: {err}");
            }
            stop
        }
    };
    events.retain(|timed| !matches!(timed.event, RunEvent::RunFinished { .. }));
    let mut lines: Vec<ChatOut> = events
        .into_iter()
        .map(|event| progress(query_id, StreamLine::Event { event }))
        .collect();
    let message = match &stop {
        StopReason::Accepted => {
            answer_of(&files_root.join(user.as_str()), &run).unwrap_or_default()
        }
        StopReason::Failed { message, .. } => message.clone(),
        other => other.in_words(),
    };
    let exit_code = stop.exit_code();
    lines.push(progress(
        query_id,
        StreamLine::Finished {
            stop,
            message,
            final_program: None,
            exit_code,
        },
    ));
    ("finished", lines)
}

fn progress(query_id: &str, line: StreamLine) -> ChatOut {
    ChatOut::Progress {
        query_id: query_id.to_owned(),
        record: StreamRecord::new(line),
    }
}

/// The file `name` of the run in `run` (inside `user_folder`), read as untrusted: a server
/// Blender writes in the user's folder, so no link is followed on the way, and it is bounded.
fn read_in_run(user_folder: &Path, run: &Path, name: &str) -> Option<Vec<u8>> {
    let relative = run.strip_prefix(user_folder).ok()?;
    viga_blender::ScratchFolder::new(user_folder.to_path_buf())
        .read(&relative.join(name), MAX_LOG_BYTES)
        .ok()
}

/// The events of the run in `run`; a line that does not read is passed over.
fn recorded(user_folder: &Path, run: &Path) -> Option<Vec<TimedEvent>> {
    let bytes = read_in_run(user_folder, run, viga_core::folder::EVENTS_FILE)?;
    Some(
        String::from_utf8_lossy(&bytes)
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect(),
    )
}

/// The agent's answer, from its run's transcript.
fn answer_of(user_folder: &Path, run: &Path) -> Option<String> {
    let bytes = read_in_run(
        user_folder,
        run,
        viga_domain_scene::addon_agent::TRANSCRIPT_FILE,
    )?;
    serde_json::from_slice::<viga_domain_scene::addon_agent::Transcript>(&bytes)
        .ok()?
        .answer
}
