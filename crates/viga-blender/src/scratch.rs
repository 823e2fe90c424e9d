//! Reading what a Blender left in its scratch folder. Model-written programs run there with
//! write access, and may leave threads or processes behind that keep writing after their
//! program returned, so any name in the folder may by the time viga reads it be a symbolic
//! link to one of viga's own files (`/proc/self/environ`, with the API keys), a FIFO that
//! blocks a reader forever, or a file without end. Files there are therefore opened without
//! following links or blocking, must be regular files, and are read up to a limit.

use std::fs::File;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::Path;

/// Opens `path` for reading if it is a regular file, not through a symbolic link.
pub fn open_regular(path: &Path) -> std::io::Result<File> {
    let file = open_no_follow(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{} is not a regular file", path.display()),
        ));
    }
    Ok(file)
}

#[cfg(target_os = "linux")]
fn open_no_follow(path: &Path) -> std::io::Result<File> {
    use nix::fcntl::OFlag;
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK).bits())
        .open(path)
}

/// Elsewhere Blender is not contained (nothing else writes its scratch folder), so a check
/// before opening is enough.
#[cfg(not(target_os = "linux"))]
fn open_no_follow(path: &Path) -> std::io::Result<File> {
    if std::fs::symlink_metadata(path)?.file_type().is_symlink() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{} is a symbolic link", path.display()),
        ));
    }
    File::open(path)
}

/// The whole of a regular file of at most `limit` bytes.
pub fn read_regular(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    open_regular(path)?
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{} is larger than {limit} bytes", path.display()),
        ));
    }
    Ok(bytes)
}

/// The last `limit` bytes of a regular file (all of it when shorter).
pub fn read_tail(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    let mut file = open_regular(path)?;
    let length = file.metadata()?.len();
    file.seek(SeekFrom::Start(length.saturating_sub(limit)))?;
    let mut bytes = Vec::new();
    file.take(limit).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Copies the regular file `from` to `to` whole: into a temporary name beside `to`, then
/// renamed into place, so `to` is never half written (and never a link `from` was swapped
/// for).
pub fn copy_regular(from: &Path, to: &Path) -> std::io::Result<()> {
    let mut source = open_regular(from)?;
    let mut partial = to.as_os_str().to_owned();
    partial.push(format!(".partial-{}", std::process::id()));
    let partial = std::path::PathBuf::from(partial);
    let copied = File::create(&partial)
        .and_then(|mut target| std::io::copy(&mut source, &mut target).map(drop))
        .and_then(|()| std::fs::rename(&partial, to));
    if copied.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    copied
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn links_fifos_and_oversized_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("secret");
        std::fs::write(&secret, b"sk-canary").unwrap();
        let link = dir.path().join("render.png");
        std::os::unix::fs::symlink(&secret, &link).unwrap();
        assert!(read_regular(&link, 1024).is_err());
        assert!(read_tail(&link, 1024).is_err());
        assert!(copy_regular(&link, &dir.path().join("final.blend")).is_err());
        assert!(!dir.path().join("final.blend").exists());

        let fifo = dir.path().join("program-output.log");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        // Returns at once (no writer would ever come): not a regular file.
        assert!(read_tail(&fifo, 1024).is_err());

        let big = dir.path().join("big");
        std::fs::write(&big, vec![b'x'; 100]).unwrap();
        assert!(read_regular(&big, 99).is_err());
        assert_eq!(read_regular(&big, 100).unwrap().len(), 100);
        assert_eq!(read_tail(&big, 10).unwrap(), vec![b'x'; 10]);
        copy_regular(&big, &dir.path().join("copy")).unwrap();
        assert_eq!(std::fs::read(dir.path().join("copy")).unwrap().len(), 100);
    }
}
