//! The one error type of the crate. Every message says what was wrong and what to do.

use std::io;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    /// A [`crate::MemoryConfig`] that cannot work; the message names the field and a fix.
    #[error("invalid memory configuration: {0}")]
    Config(String),
    /// Reading or writing a run log failed.
    #[error("{}", describe_io(path, source))]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A line of a run log that is not a valid event and is not the last line, so it cannot be
    /// a write cut off by a kill: skipping it would silently lose part of the run.
    #[error(
        "run log {} is corrupt at line {line}: {message}. Only a cut-off last line is skipped; repair or delete line {line} by hand, or start a new run",
        path.display()
    )]
    Corrupt {
        path: PathBuf,
        /// 1-based line number in the file.
        line: usize,
        message: String,
    },
}

impl MemoryError {
    pub(crate) fn io(path: &Path) -> impl FnOnce(io::Error) -> MemoryError + '_ {
        move |source| MemoryError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

fn describe_io(path: &Path, source: &io::Error) -> String {
    let path = path.display();
    match source.kind() {
        io::ErrorKind::AlreadyExists => format!(
            "run log {path} already exists and viga never overwrites a run: choose a new run folder, or continue this run with RunLog::open_append"
        ),
        io::ErrorKind::NotFound => format!(
            "run log {path} not found ({source}): check the path and that its folder exists"
        ),
        io::ErrorKind::PermissionDenied => {
            format!("run log {path}: permission denied ({source}): check the file's permissions")
        }
        io::ErrorKind::InvalidData => format!("run log {path}: {source}"),
        _ => format!("run log {path}: {source}: check the disk (space, mount) and the path"),
    }
}
