//! A folder only this user can enter, for the files viga hands to Blender (the bridge, the
//! add-on host, one-shot scripts). The shared temporary folder is writable by every local
//! user: a script at a predictable path there, or a `json.py` planted beside it, would run
//! code as the user.

use std::io;
use std::path::PathBuf;

/// `viga-<uid>` in the temporary folder, made with mode 0700, or checked when it exists: a
/// link, a folder of another user, or one others may enter is refused.
pub fn private_temp_dir() -> io::Result<PathBuf> {
    #[cfg(unix)]
    {
        unix::private_temp_dir()
    }
    #[cfg(not(unix))]
    {
        // Per-user temporary folders are the norm elsewhere (Windows' %TEMP%).
        Ok(std::env::temp_dir())
    }
}

#[cfg(unix)]
mod unix {
    use std::io;
    use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _};
    use std::path::PathBuf;

    pub(super) fn private_temp_dir() -> io::Result<PathBuf> {
        let uid = current_uid()?;
        let dir = std::env::temp_dir().join(format!("viga-{uid}"));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => {}
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {}
            Err(err) => return Err(err),
        }
        let refuse = |why: &str| {
            Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "{} {why}; viga will not put scripts there (remove it, or set TMPDIR to a folder of your own)",
                    dir.display()
                ),
            ))
        };
        let metadata = std::fs::symlink_metadata(&dir)?;
        if !metadata.file_type().is_dir() {
            return refuse("is not a plain folder (a link?)");
        }
        if metadata.uid() != uid {
            return refuse("belongs to another user");
        }
        if metadata.mode() & 0o077 != 0 {
            return refuse("can be entered by other users");
        }
        Ok(dir)
    }

    /// This process's user id, read from a file it has just created (no `libc` call).
    fn current_uid() -> io::Result<u32> {
        Ok(tempfile::tempfile()?.metadata()?.uid())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(unix)]
    fn the_folder_is_private_and_reused() {
        use std::os::unix::fs::PermissionsExt as _;
        let first = private_temp_dir().unwrap();
        let mode = std::fs::metadata(&first).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        assert_eq!(private_temp_dir().unwrap(), first);
    }
}
