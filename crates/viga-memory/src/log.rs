//! The run log: `events.jsonl`, one [`TimedEvent`] per line, append-only.
//!
//! A line counts once its newline is written: each event goes to the file in one write of
//! the JSON and its newline, straight to the OS (no user-space buffer), so a killed run loses
//! at most the line being written, and that line is recognisable because it cannot be read.
//! There is no fsync per line: the guarantee is against a killed process, not a power cut,
//! and an fsync would cost milliseconds per event.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use viga_io::files::unix_ms;

use viga_protocol::event::{RunEvent, TimedEvent};
use viga_protocol::iteration::IterationRecord;
use viga_protocol::parse_json;

use crate::MemoryError;

/// An open run log that events are appended to.
#[derive(Debug)]
pub struct RunLog {
    path: PathBuf,
    file: File,
    next_seq: u64,
    /// Bytes of complete lines in the file, to cut a failed write back off.
    len: u64,
}

impl RunLog {
    /// Creates a new log; fails if the file exists (a run is never clobbered).
    pub fn create(path: &Path) -> Result<RunLog, MemoryError> {
        let file = OpenOptions::new()
            .append(true)
            .create_new(true)
            .open(path)
            .map_err(MemoryError::io(path))?;
        Ok(RunLog {
            path: path.to_path_buf(),
            file,
            next_seq: 0,
            len: 0,
        })
    }

    /// Opens an existing log to continue it: numbering continues after the last valid line.
    /// A last line cut off by a kill is removed first, so the next event starts on a clean
    /// line; a corrupt line before it is an error and nothing is changed.
    pub fn open_append(path: &Path) -> Result<RunLog, MemoryError> {
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .open(path)
            .map_err(MemoryError::io(path))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(MemoryError::io(path))?;
        let scan = scan(path, &bytes)?;
        if scan.truncated_tail {
            tracing::warn!(
                path = %path.display(),
                removed_bytes = bytes.len() - scan.valid_len,
                "the run log ended in a cut-off line (the run was stopped while writing it); truncated it back to its last complete line"
            );
            file.set_len(scan.valid_len as u64)
                .map_err(MemoryError::io(path))?;
        }
        Ok(RunLog {
            path: path.to_path_buf(),
            file,
            next_seq: scan.events.last().map_or(0, |last| last.seq + 1),
            len: scan.valid_len as u64,
        })
    }

    /// Writes one event with the next sequence number (0, 1, 2, ...) and the current time.
    pub fn append(&mut self, event: RunEvent) -> Result<TimedEvent, MemoryError> {
        let timed = TimedEvent {
            seq: self.next_seq,
            unix_ms: unix_ms(),
            event,
        };
        let invalid = |message: String| MemoryError::Io {
            path: self.path.clone(),
            source: io::Error::new(
                io::ErrorKind::InvalidData,
                format!("event {} was not written: {message}", timed.seq),
            ),
        };
        let mut line = serde_json::to_string(&timed).map_err(|err| invalid(err.to_string()))?;
        // A line that cannot be read back would make the whole log unreadable later (serde
        // writes a NaN or infinite number as null, for example), so refuse it now.
        decode(line.as_bytes()).map_err(|message| {
            invalid(format!(
                "it would not read back ({message}); a number in it is probably NaN or infinite"
            ))
        })?;
        line.push('\n');
        if let Err(source) = self.file.write_all(line.as_bytes()) {
            // A partial line followed by later events would be a corrupt middle line.
            if let Err(err) = self.file.set_len(self.len) {
                tracing::warn!(path = %self.path.display(), %err, "could not remove a partly written line from the run log");
            }
            return Err(MemoryError::Io {
                path: self.path.clone(),
                source,
            });
        }
        self.len += line.len() as u64;
        self.next_seq += 1;
        Ok(timed)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// What a run log holds.
#[derive(Debug, Clone, PartialEq)]
pub struct LogContents {
    pub events: Vec<TimedEvent>,
    /// A last line cut off by a kill, ignored.
    pub truncated_tail: bool,
}

/// Reads a whole run log. Blank lines are skipped; a last line that is not a valid event is
/// ignored and reported in [`LogContents::truncated_tail`]; any other bad line is
/// [`MemoryError::Corrupt`].
pub fn read_run_log(path: &Path) -> Result<LogContents, MemoryError> {
    let bytes = std::fs::read(path).map_err(MemoryError::io(path))?;
    let scan = scan(path, &bytes)?;
    Ok(LogContents {
        events: scan.events,
        truncated_tail: scan.truncated_tail,
    })
}

/// The IterationRecords of the IterationFinished events, in order.
pub fn iterations_in(events: &[TimedEvent]) -> Vec<IterationRecord> {
    events
        .iter()
        .filter_map(|timed| match &timed.event {
            RunEvent::IterationFinished { record } => Some(record.as_ref().clone()),
            _ => None,
        })
        .collect()
}

struct Scan {
    events: Vec<TimedEvent>,
    /// Bytes up to the end of the last complete, valid line.
    valid_len: usize,
    truncated_tail: bool,
}

fn scan(path: &Path, bytes: &[u8]) -> Result<Scan, MemoryError> {
    let mut scan = Scan {
        events: Vec::new(),
        valid_len: 0,
        truncated_tail: false,
    };
    let corrupt = |line: usize, message: String| MemoryError::Corrupt {
        path: path.to_path_buf(),
        line,
        message,
    };
    for (index, chunk) in bytes.split_inclusive(|&b| b == b'\n').enumerate() {
        let line_number = index + 1;
        let end = scan.valid_len + chunk.len();
        let is_last = end == bytes.len();
        let Some(line) = chunk.strip_suffix(b"\n") else {
            // No newline: the write of this line never finished.
            scan.truncated_tail = true;
            break;
        };
        if line.trim_ascii().is_empty() {
            scan.valid_len = end;
            continue;
        }
        let event = match decode(line) {
            Ok(event) => event,
            Err(_) if is_last => {
                scan.truncated_tail = true;
                break;
            }
            Err(message) => return Err(corrupt(line_number, message)),
        };
        // Not a cut-off line but a sign of two writers or a spliced file, so an error even
        // on the last line. Strictly increasing rather than consecutive, so that deleting a
        // corrupt line by hand (as the error suggests) leaves a readable log.
        if let Some(previous) = scan.events.last()
            && event.seq <= previous.seq
        {
            return Err(corrupt(
                line_number,
                format!(
                    "event seq {} does not follow seq {}: two processes may have written this log",
                    event.seq, previous.seq
                ),
            ));
        }
        scan.events.push(event);
        scan.valid_len = end;
    }
    Ok(scan)
}

/// One line (without its newline) as an event, validated against the protocol schema so
/// that errors name the field at fault.
fn decode(line: &[u8]) -> Result<TimedEvent, String> {
    let text = std::str::from_utf8(line).map_err(|err| format!("not UTF-8 text ({err})"))?;
    parse_json::<TimedEvent>(text).map_err(|err| err.to_string())
}
