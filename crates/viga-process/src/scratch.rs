//! Reading what a contained process left in its scratch folder. The process may write
//! anything there, and a model's program (or a process it left behind) can keep changing it
//! while viga reads: any name may have become a symbolic link to one of viga's own files
//! (`/proc/self/environ`, with the API keys), a folder on the way may have become a link
//! elsewhere, a file may be a FIFO that blocks a reader forever, or grow without end. So a
//! file is opened beneath the scratch folder without following any link on the way (Linux:
//! `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`), without blocking, must be a
//! regular file, and is read up to a limit.

use std::fs::File;
use std::io::{self, Read as _, Write as _};
use std::path::{Component, Path, PathBuf};

/// A folder a contained process writes in; viga made it and knows its path.
#[derive(Debug, Clone)]
pub struct ScratchFolder {
    root: PathBuf,
}

impl ScratchFolder {
    /// `root` must be a folder viga created itself: only what is beneath it is distrusted.
    pub fn new(root: PathBuf) -> Self {
        Self { root }
    }

    pub fn path(&self) -> &Path {
        &self.root
    }

    /// Opens the regular file `relative` (plain names only, no `..`) beneath the folder,
    /// following no link on the way.
    pub fn open(&self, relative: &Path) -> io::Result<File> {
        let plain = relative
            .components()
            .all(|part| matches!(part, Component::Normal(_)));
        if !plain || relative.as_os_str().is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is not a plain relative path", relative.display()),
            ));
        }
        let file = open_beneath(&self.root, relative)?;
        if !file.metadata()?.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} is not a regular file", relative.display()),
            ));
        }
        Ok(file)
    }

    /// The whole of the regular file `relative` when it holds at most `limit` bytes.
    pub fn read(&self, relative: &Path, limit: u64) -> io::Result<Vec<u8>> {
        let mut bytes = Vec::new();
        self.open(relative)?
            .take(limit.saturating_add(1))
            .read_to_end(&mut bytes)?;
        if bytes.len() as u64 > limit {
            return Err(too_large(relative, limit));
        }
        Ok(bytes)
    }

    /// Copies the regular file `relative` (at most `limit` bytes) to `to`, a path outside the
    /// folder that viga trusts; `to` is written under another name first and renamed into
    /// place, so it is never half written. Returns the number of bytes.
    pub fn copy_out(&self, relative: &Path, limit: u64, to: &Path) -> io::Result<u64> {
        let mut source = self.open(relative)?.take(limit.saturating_add(1));
        let mut partial = to.as_os_str().to_owned();
        partial.push(".partial");
        let partial = PathBuf::from(partial);
        let copied = File::create(&partial).and_then(|mut target| {
            let written = io::copy(&mut source, &mut target)?;
            if written > limit {
                return Err(too_large(relative, limit));
            }
            target.flush()?;
            std::fs::rename(&partial, to)?;
            Ok(written)
        });
        if copied.is_err() {
            let _ = std::fs::remove_file(&partial);
        }
        copied
    }
}

/// A new folder in the temporary folder, named `prefix` and random letters, that only this
/// user may enter (mode 0700; `tempfile`'s default is 0755), removed when dropped: a worker's
/// scratch folder, scripts and kept results.
pub fn private_folder(prefix: &str) -> io::Result<tempfile::TempDir> {
    let mut builder = tempfile::Builder::new();
    builder.prefix(prefix);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        builder.permissions(std::fs::Permissions::from_mode(0o700));
    }
    builder.tempdir()
}

fn too_large(relative: &Path, limit: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{} is larger than {limit} bytes", relative.display()),
    )
}

#[cfg(target_os = "linux")]
fn open_beneath(root: &Path, relative: &Path) -> io::Result<File> {
    use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat2};
    let root = File::open(root)?;
    let how = OpenHow::new()
        .flags(OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW)
        .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS);
    let fd = openat2(&root, relative, how).map_err(io::Error::from)?;
    Ok(File::from(fd))
}

/// Elsewhere renderers are not contained (nothing else writes their scratch folders), so a
/// check of every part of the path before opening it is enough.
#[cfg(not(target_os = "linux"))]
fn open_beneath(root: &Path, relative: &Path) -> io::Result<File> {
    let mut path = root.to_path_buf();
    for part in relative.components() {
        path.push(part);
        if std::fs::symlink_metadata(&path)?.file_type().is_symlink() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} is a symbolic link", path.display()),
            ));
        }
    }
    File::open(path)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn a_private_folder_is_for_this_user_alone() {
        use std::os::unix::fs::PermissionsExt as _;
        let folder = private_folder("viga-test-").unwrap();
        let mode = std::fs::metadata(folder.path())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
    }

    #[test]
    fn links_anywhere_fifos_and_big_files_are_refused() {
        let outside = tempfile::tempdir().unwrap();
        let secret = outside.path().join("secret");
        std::fs::write(&secret, b"sk-canary").unwrap();
        let root = tempfile::tempdir().unwrap();
        let scratch = ScratchFolder::new(root.path().to_path_buf());
        std::os::unix::fs::symlink(&secret, root.path().join("slide.png")).unwrap();
        assert!(scratch.read(Path::new("slide.png"), 1024).is_err());
        // A folder on the way that is a link out of the scratch folder.
        std::os::unix::fs::symlink(outside.path(), root.path().join("render")).unwrap();
        assert!(scratch.read(Path::new("render/secret"), 1024).is_err());
        assert!(scratch.read(Path::new("../secret"), 1024).is_err());
        assert!(scratch.read(&secret, 1024).is_err(), "absolute paths");

        let fifo = root.path().join("out.log");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        assert!(scratch.read(Path::new("out.log"), 1024).is_err());

        std::fs::create_dir(root.path().join("deck")).unwrap();
        std::fs::write(root.path().join("deck/deck.pptx"), vec![b'x'; 100]).unwrap();
        let deck = Path::new("deck/deck.pptx");
        assert!(scratch.read(deck, 99).is_err());
        assert_eq!(scratch.read(deck, 100).unwrap().len(), 100);
        let kept = outside.path().join("kept.pptx");
        assert!(scratch.copy_out(deck, 99, &kept).is_err());
        assert!(!kept.exists());
        assert_eq!(scratch.copy_out(deck, 100, &kept).unwrap(), 100);
        assert_eq!(std::fs::read(&kept).unwrap().len(), 100);
        assert!(
            scratch
                .copy_out(Path::new("slide.png"), 1024, &outside.path().join("x"))
                .is_err()
        );
    }
}
