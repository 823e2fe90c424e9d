//! Reading what a contained process left in its scratch folder, and putting viga's own files
//! there. The process may write anything in the folder, and a model's program (or a process
//! it left behind) can keep changing it while viga works in it: any name may have become a
//! symbolic link to one of viga's own files (`/proc/self/environ`, with the API keys) or to a
//! file of the person's (`~/.ssh/…`), a folder on the way may have become a link elsewhere, a
//! file may be a FIFO that blocks a reader forever, or grow without end. So every file is
//! reached beneath the scratch folder without following any link on the way (Linux: `openat2`
//! with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`), without blocking, must be a regular file,
//! and is read up to a limit; a file viga puts there is created new, never written through
//! what is already there.
//!
//! The one rule for replies: viga reads only files it named itself ([`ScratchFolder::fresh_name`])
//! beneath the folder. A worker's reply that names any other file is not read.

use std::fs::File;
use std::io::{self, Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

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

    /// A plain file name nobody in this process has used yet (`stem-<pid>-<n>.extension`),
    /// for a file viga asks the worker to write; the worker is told [`Self::full_path`].
    pub fn fresh_name(&self, stem: &str, extension: &str) -> PathBuf {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        PathBuf::from(format!("{stem}-{}-{n}.{extension}", std::process::id()))
    }

    /// The path a worker on this machine is given for `relative`.
    pub fn full_path(&self, relative: &Path) -> PathBuf {
        self.root.join(relative)
    }

    /// Whether `reported` (a path a worker's reply names) is exactly the file `named`
    /// beneath this folder, as [`Self::full_path`] gave it.
    pub fn is_named(&self, named: &Path, reported: &str) -> bool {
        Path::new(reported) == self.full_path(named)
    }

    /// Opens the regular file `relative` (plain names only, no `..`) beneath the folder,
    /// following no link on the way.
    pub fn open(&self, relative: &Path) -> io::Result<File> {
        let file = open_beneath(&self.root, plain(relative)?, Access::Read)?;
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

    /// The last `limit` bytes of the regular file `relative` (all of it when shorter).
    pub fn read_tail(&self, relative: &Path, limit: u64) -> io::Result<Vec<u8>> {
        let mut file = self.open(relative)?;
        let length = file.metadata()?.len();
        file.seek(SeekFrom::Start(length.saturating_sub(limit)))?;
        let mut bytes = Vec::new();
        file.take(limit).read_to_end(&mut bytes)?;
        Ok(bytes)
    }

    /// Copies the regular file `relative` (at most `limit` bytes) to `to`, a path outside the
    /// folder that viga trusts; `to` is written under a fresh temporary name beside it first
    /// and renamed into place, so it is never half written. Returns the number of bytes.
    pub fn copy_out(&self, relative: &Path, limit: u64, to: &Path) -> io::Result<u64> {
        let mut source = self.open(relative)?.take(limit.saturating_add(1));
        let parent = match to.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        let mut partial = tempfile::Builder::new()
            .prefix(".viga-partial-")
            .tempfile_in(parent)?;
        let written = io::copy(&mut source, partial.as_file_mut())?;
        if written > limit {
            return Err(too_large(relative, limit));
        }
        partial.as_file_mut().flush()?;
        partial.persist(to).map_err(|err| err.error)?;
        Ok(written)
    }

    /// Puts a copy of viga's own file `from` into the folder as `relative`: whatever stands
    /// there is removed first and the file is created new, so a link a program left under
    /// that name is never written through. Returns the number of bytes.
    pub fn place(&self, relative: &Path, from: &Path) -> io::Result<u64> {
        let relative = plain(relative)?;
        self.remove(relative)?;
        let mut target = open_beneath(&self.root, relative, Access::CreateNew)?;
        let copied = io::copy(&mut File::open(from)?, &mut target)?;
        target.flush()?;
        Ok(copied)
    }

    /// Removes everything directly in the folder but the names in `keep` (a restarted
    /// worker's room for its next program: its checkpoint, its program log and owner marker
    /// stay). Links are removed, never followed; what cannot be removed stays, said in a
    /// warning, and the next program has less room.
    pub fn empty_except(&self, keep: &[&str]) {
        let Ok(listing) = std::fs::read_dir(&self.root) else {
            return;
        };
        for entry in listing.flatten() {
            let name = entry.file_name();
            if keep.iter().any(|kept| name == *kept) {
                continue;
            }
            let path = entry.path();
            let removed = match entry.file_type() {
                Ok(kind) if kind.is_dir() => std::fs::remove_dir_all(&path),
                _ => std::fs::remove_file(&path),
            };
            if let Err(err) = removed {
                tracing::warn!(
                    "could not empty the scratch folder: {}: {err}",
                    path.display()
                );
            }
        }
    }

    /// Removes the file (or link, never what a link points to) `relative` when it is there;
    /// the folders on the way are reached like files to read, following no link.
    pub fn remove(&self, relative: &Path) -> io::Result<()> {
        match remove_beneath(&self.root, plain(relative)?) {
            Err(err) if err.kind() != io::ErrorKind::NotFound => Err(err),
            _ => Ok(()),
        }
    }
}

/// `relative` when it is a plain relative path (names only: no root, no `.` or `..`).
fn plain(relative: &Path) -> io::Result<&Path> {
    let names_only = relative
        .components()
        .all(|part| matches!(part, Component::Normal(_)));
    if !names_only || relative.as_os_str().is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a plain relative path", relative.display()),
        ));
    }
    Ok(relative)
}

fn too_large(relative: &Path, limit: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{} is larger than {limit} bytes", relative.display()),
    )
}

/// How a file beneath the folder is opened.
#[derive(Debug, Clone, Copy)]
enum Access {
    /// For reading, without blocking (a FIFO answers at once).
    Read,
    /// A new file for writing; an existing name (a link too) is an error.
    CreateNew,
    /// A folder, only to be named by later calls.
    Folder,
}

#[cfg(target_os = "linux")]
fn open_beneath(root: &Path, relative: &Path, access: Access) -> io::Result<File> {
    use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat2};
    use nix::sys::stat::Mode;
    let root = File::open(root)?;
    let flags = match access {
        Access::Read => OFlag::O_RDONLY | OFlag::O_NONBLOCK,
        Access::CreateNew => OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL,
        Access::Folder => OFlag::O_PATH | OFlag::O_DIRECTORY,
    };
    let mut how = OpenHow::new()
        .flags(flags | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW)
        .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS);
    if let Access::CreateNew = access {
        // openat2 refuses a mode without O_CREAT.
        how = how.mode(Mode::from_bits_truncate(0o600));
    }
    let fd = openat2(&root, relative, how).map_err(io::Error::from)?;
    Ok(File::from(fd))
}

#[cfg(target_os = "linux")]
fn remove_beneath(root: &Path, relative: &Path) -> io::Result<()> {
    use nix::unistd::{UnlinkatFlags, unlinkat};
    let (folder, name) = match (relative.parent(), relative.file_name()) {
        (Some(parent), Some(name)) if !parent.as_os_str().is_empty() => {
            (open_beneath(root, parent, Access::Folder)?, name)
        }
        (_, Some(name)) => (File::open(root)?, name),
        _ => return Ok(()),
    };
    unlinkat(&folder, name, UnlinkatFlags::NoRemoveDir).map_err(io::Error::from)
}

/// Elsewhere renderers are not contained (nothing else writes their scratch folders), so a
/// check of every part of the path before opening it is enough.
#[cfg(not(target_os = "linux"))]
fn open_beneath(root: &Path, relative: &Path, access: Access) -> io::Result<File> {
    let mut path = root.to_path_buf();
    for part in relative.components() {
        path.push(part);
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{} is a symbolic link", path.display()),
                ));
            }
            Err(err) if !matches!(access, Access::CreateNew) => return Err(err),
            _ => {}
        }
    }
    match access {
        Access::Read | Access::Folder => File::open(path),
        Access::CreateNew => std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path),
    }
}

#[cfg(not(target_os = "linux"))]
fn remove_beneath(root: &Path, relative: &Path) -> io::Result<()> {
    if let Some(parent) = relative.parent().filter(|p| !p.as_os_str().is_empty()) {
        open_beneath(root, parent, Access::Folder)?;
    }
    std::fs::remove_file(root.join(relative))
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

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

    #[test]
    fn a_file_placed_in_the_folder_never_writes_through_a_link() {
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("victim");
        std::fs::write(&victim, b"the person's file").unwrap();
        let ours = outside.path().join("ours.blend");
        std::fs::write(&ours, b"viga's copy").unwrap();
        let root = tempfile::tempdir().unwrap();
        let scratch = ScratchFolder::new(root.path().to_path_buf());
        std::os::unix::fs::symlink(&victim, root.path().join("staged.blend")).unwrap();
        assert_eq!(scratch.place(Path::new("staged.blend"), &ours).unwrap(), 11);
        assert_eq!(std::fs::read(&victim).unwrap(), b"the person's file");
        assert_eq!(
            scratch.read(Path::new("staged.blend"), 100).unwrap(),
            b"viga's copy"
        );
        // Removing a link removes the link, and a folder on the way that is a link is refused.
        std::os::unix::fs::symlink(&victim, root.path().join("gone.png")).unwrap();
        scratch.remove(Path::new("gone.png")).unwrap();
        assert!(victim.exists());
        std::os::unix::fs::symlink(outside.path(), root.path().join("renders")).unwrap();
        assert!(scratch.remove(Path::new("renders/victim")).is_err());
        assert!(victim.exists());
        scratch.remove(Path::new("never-there.png")).unwrap();
        assert!(scratch.place(Path::new("../escape"), &ours).is_err());
    }

    #[test]
    fn names_are_fresh_and_a_reply_must_name_exactly_the_file_viga_named() {
        let scratch = ScratchFolder::new(PathBuf::from("/scratch"));
        let first = scratch.fresh_name("render", "png");
        let second = scratch.fresh_name("render", "png");
        assert_ne!(first, second);
        let told = scratch.full_path(&first);
        assert!(scratch.is_named(&first, &told.to_string_lossy()));
        assert!(!scratch.is_named(&first, &scratch.full_path(&second).to_string_lossy()));
        assert!(!scratch.is_named(&first, "/etc/shadow"));
        assert!(!scratch.is_named(&first, &format!("/scratch/x/../{}", first.display())));
    }

    #[test]
    fn the_tail_of_a_file_is_its_last_bytes() {
        let root = tempfile::tempdir().unwrap();
        let scratch = ScratchFolder::new(root.path().to_path_buf());
        std::fs::write(root.path().join("out.log"), b"0123456789").unwrap();
        assert_eq!(scratch.read_tail(Path::new("out.log"), 4).unwrap(), b"6789");
        assert_eq!(
            scratch.read_tail(Path::new("out.log"), 40).unwrap(),
            b"0123456789"
        );
        std::os::unix::fs::symlink("/etc/hostname", root.path().join("log")).unwrap();
        assert!(scratch.read_tail(Path::new("log"), 4).is_err());
    }

    #[test]
    fn the_folder_is_emptied_but_for_what_is_kept() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("precious"), "x").unwrap();
        let root = tempfile::tempdir().unwrap();
        let folder = root.path();
        std::fs::write(folder.join("checkpoint.blend"), "scene").unwrap();
        std::fs::write(folder.join("big.bin"), vec![0u8; 4096]).unwrap();
        std::fs::create_dir_all(folder.join("renders/deep")).unwrap();
        std::fs::write(folder.join("renders/deep/a.png"), "png").unwrap();
        std::os::unix::fs::symlink(outside.path(), folder.join("link")).unwrap();
        ScratchFolder::new(folder.to_path_buf())
            .empty_except(&["checkpoint.blend", "program-output.log"]);
        let left: Vec<_> = std::fs::read_dir(folder)
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(left, vec!["checkpoint.blend"]);
        assert!(
            outside.path().join("precious").exists(),
            "a link is not followed"
        );
    }
}
