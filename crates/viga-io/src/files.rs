//! The two primitives every run folder is written with, kept in one place: whole-file writes
//! that a kill can never leave half done, and the clock the records are stamped with.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// Writes `bytes` to `path` whole: to a temporary sibling, then renamed into place, so a killed
/// process never leaves a half-written file that a later reader (resume, a report) would trust.
/// Creates the parent folder if needed. The temporary name carries this process's id, so two
/// processes writing the same file (a shared cache) never write into each other's.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let partial = path.with_file_name(format!(".{name}.partial-{}", std::process::id()));
    std::fs::write(&partial, bytes)?;
    std::fs::rename(&partial, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&partial);
    })
}

/// Milliseconds since the Unix epoch (0 for a clock set before it).
pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

/// `path` with its links and `..` resolved: the whole path when it exists, else its folder
/// and the file name (a file to be written); as given when neither exists, so whoever opens
/// it says what is missing in the person's words. A contained worker is granted its inputs
/// by these real paths, and reaches nothing else.
pub fn real_path(path: &Path) -> PathBuf {
    if let Ok(real) = path.canonicalize() {
        return real;
    }
    match (path.parent(), path.file_name()) {
        (Some(folder), Some(name)) if !folder.as_os_str().is_empty() => folder
            .canonicalize()
            .map(|folder| folder.join(name))
            .unwrap_or_else(|_| path.to_path_buf()),
        _ => path.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_whole_files_and_leaves_no_partial() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a/b/result.json");
        write_atomic(&path, b"{}").unwrap();
        write_atomic(&path, b"{\"again\": true}").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"{\"again\": true}");
        let left: Vec<_> = std::fs::read_dir(path.parent().unwrap()).unwrap().collect();
        assert_eq!(left.len(), 1);
    }
}
