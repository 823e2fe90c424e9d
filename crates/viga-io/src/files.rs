//! The primitives every file viga publishes is written with, kept in one place: whole files
//! and whole folders that a kill can never leave half done, and the clock the records are
//! stamped with.
//!
//! Everything is made under a temporary name beside where it goes, then renamed into place:
//! a reader sees the old version or the new one, never half of one. The temporary name is
//! new for every call (this process's id and a counter), so two threads or two processes
//! writing the same file never write into each other's; an xtask test
//! (`xtask/tests/atomic_writes.rs`) holds every other rename of the workspace to this module.

use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// What every temporary name carries after the final name: how a partial is told from a
/// published file or folder ([`is_partial`]).
const PARTIAL_MARK: &str = ".partial-";

/// Counts this process's temporary names, so no two calls share one.
static PARTIALS: AtomicU64 = AtomicU64::new(0);

/// How many taken names a call skips before it gives up: a name is taken only when a killed
/// process with this process's id left it.
const NAME_ATTEMPTS: u32 = 64;

/// Writes `bytes` to `path` whole: to a temporary sibling, then renamed into place, so a killed
/// process never leaves a half-written file that a later reader (resume, a report) would trust.
/// Creates the parent folder if needed.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    let mut partial = PartialFile::create(path)?;
    partial.file.write_all(bytes)?;
    partial.publish()
}

/// Whether `name` (a file name) is one of this module's temporary names: what a cleaner of
/// partials a killed process left removes.
pub fn is_partial(name: &std::ffi::OsStr) -> bool {
    let name = name.to_string_lossy();
    name.starts_with('.') && name.contains(PARTIAL_MARK)
}

/// A file being written beside `path` under a temporary name, published at `path` whole by
/// [`PartialFile::publish`]; dropped unpublished (an error on the way), it is removed. For a
/// file written piece by piece (a download); a file in hand goes through [`write_atomic`].
#[derive(Debug)]
pub struct PartialFile {
    file: File,
    partial: PathBuf,
    /// Where it is published.
    destination: PathBuf,
    published: bool,
}

impl PartialFile {
    /// Creates the temporary file beside `path`, in a folder that exists. It is created new,
    /// so nothing that stood under its name (a link) is written through.
    pub fn create(path: &Path) -> std::io::Result<Self> {
        let (file, partial) = claim_partial(path, |partial| {
            File::options().write(true).create_new(true).open(partial)
        })?;
        Ok(Self {
            file,
            partial,
            destination: path.to_path_buf(),
            published: false,
        })
    }

    /// Where the file is being written: to hand to a writer that opens it by path.
    pub fn path(&self) -> &Path {
        &self.partial
    }

    /// The open file, to write to.
    pub fn file_mut(&mut self) -> &mut File {
        &mut self.file
    }

    /// Renames the file into place at the path it was created for, replacing what is there.
    pub fn publish(mut self) -> std::io::Result<()> {
        self.file.flush()?;
        std::fs::rename(&self.partial, &self.destination)?;
        self.published = true;
        Ok(())
    }
}

impl Drop for PartialFile {
    fn drop(&mut self) {
        if !self.published {
            let _ = std::fs::remove_file(&self.partial);
        }
    }
}

/// A folder being filled beside `path` under a temporary name, published at `path` whole by
/// [`PartialFolder::publish`]; dropped unpublished, it is removed with what is in it.
#[derive(Debug)]
pub struct PartialFolder {
    partial: PathBuf,
    /// Where it is published.
    destination: PathBuf,
    published: bool,
}

impl PartialFolder {
    /// Creates the temporary folder beside `path`, in a folder that exists.
    pub fn create(path: &Path) -> std::io::Result<Self> {
        let ((), partial) = claim_partial(path, |partial| std::fs::create_dir(partial))?;
        Ok(Self {
            partial,
            destination: path.to_path_buf(),
            published: false,
        })
    }

    /// The folder to fill.
    pub fn path(&self) -> &Path {
        &self.partial
    }

    /// Renames the folder into place at the path it was created for. Fails, leaving what is
    /// there, when a folder with something in it is there already (another call published
    /// first); the temporary folder is then removed.
    pub fn publish(mut self) -> std::io::Result<()> {
        std::fs::rename(&self.partial, &self.destination)?;
        self.published = true;
        Ok(())
    }
}

impl Drop for PartialFolder {
    fn drop(&mut self) {
        if !self.published {
            let _ = std::fs::remove_dir_all(&self.partial);
        }
    }
}

/// Makes something new (`make`: a file or folder that must not exist yet) under a temporary
/// name beside `path` no other call uses, skipping names a killed process left behind.
fn claim_partial<T>(
    path: &Path,
    make: impl Fn(&Path) -> std::io::Result<T>,
) -> std::io::Result<(T, PathBuf)> {
    let name = path.file_name().ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{} names no file", path.display()),
        )
    })?;
    let name = name.to_string_lossy();
    let mut attempts = 0;
    loop {
        let count = PARTIALS.fetch_add(1, Ordering::Relaxed);
        let partial = path.with_file_name(format!(
            ".{name}{PARTIAL_MARK}{}-{count}",
            std::process::id()
        ));
        match make(&partial) {
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {
                attempts += 1;
                if attempts >= NAME_ATTEMPTS {
                    return Err(err);
                }
            }
            made => return made.map(|made| (made, partial)),
        }
    }
}

/// Milliseconds since the Unix epoch (0 for a clock set before it).
/// viga's folder `name` among this user's caches: `$XDG_CACHE_HOME/viga/<name>`, else
/// `~/.cache/viga/<name>` (on Windows `%LOCALAPPDATA%\viga\<name>`); `None` when none of
/// those is set to an absolute path (a relative one would move with the working folder).
pub fn user_cache_dir(name: &str) -> Option<std::path::PathBuf> {
    let absolute = |variable: &str| {
        std::env::var_os(variable)
            .map(std::path::PathBuf::from)
            .filter(|path| path.is_absolute())
    };
    let base = absolute("XDG_CACHE_HOME")
        .or_else(|| absolute("HOME").map(|home| home.join(".cache")))
        .or_else(|| absolute("LOCALAPPDATA"))?;
    Some(base.join("viga").join(name))
}

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
    fn threads_writing_one_file_at_once_each_write_it_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shared.json");
        let writers: Vec<_> = (0..8u8)
            .map(|writer| {
                let path = path.clone();
                std::thread::spawn(move || {
                    let bytes = vec![b'a' + writer; 64 * 1024];
                    for _ in 0..100 {
                        write_atomic(&path, &bytes)?;
                    }
                    std::io::Result::Ok(())
                })
            })
            .collect();
        for writer in writers {
            writer.join().unwrap().unwrap();
        }
        let written = std::fs::read(&path).unwrap();
        assert_eq!(written.len(), 64 * 1024);
        assert!(written.iter().all(|byte| *byte == written[0]));
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1);
    }

    #[test]
    fn a_partial_dropped_unpublished_is_removed_and_no_two_share_a_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model.glb");
        let mut partial = PartialFile::create(&path).unwrap();
        partial.file_mut().write_all(b"half").unwrap();
        assert!(is_partial(partial.path().file_name().unwrap()));
        let next = PartialFile::create(&path).unwrap();
        assert_ne!(next.path(), partial.path());
        drop((partial, next));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_folder_is_published_whole_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("1k");
        let first = PartialFolder::create(&path).unwrap();
        std::fs::write(first.path().join("a.gltf"), b"{}").unwrap();
        let second = PartialFolder::create(&path).unwrap();
        std::fs::write(second.path().join("a.gltf"), b"[]").unwrap();
        first.publish().unwrap();
        // Another call published first: this one's folder goes, the published one stays.
        assert!(second.publish().is_err());
        assert_eq!(std::fs::read(path.join("a.gltf")).unwrap(), b"{}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

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
