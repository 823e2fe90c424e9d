//! Keys in files only the user can read: one file per key in a private folder.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use crate::{KeyError, Place};

/// The folder keys are kept in when no keyring keeps them.
pub(crate) fn default_dir() -> Result<PathBuf, KeyError> {
    if let Some(dir) = std::env::var_os("VIGA_KEY_DIR").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    #[cfg(windows)]
    let config = std::env::var_os("APPDATA").map(PathBuf::from);
    #[cfg(not(windows))]
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".config")));
    config
        .map(|config| config.join("viga").join("keys"))
        .ok_or_else(|| {
            KeyError::Setting(
                "no folder for keys: HOME is not set; set VIGA_KEY_DIR to a folder of your own"
                    .to_owned(),
            )
        })
}

/// One file per key, named after its variable, in a folder only the user may enter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileStore {
    dir: PathBuf,
}

impl FileStore {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Writes the key to `<dir>/<name>` (mode 0600), replacing any earlier one at once: it is
    /// written to a new file beside it first.
    pub(crate) fn set(&self, name: &str, secret: &str) -> Result<Place, KeyError> {
        private::make_dir(&self.dir)?;
        let path = self.dir.join(name);
        let failed = |err: std::io::Error| KeyError::File {
            path: path.clone(),
            message: err.to_string(),
        };
        let mut partial = tempfile::Builder::new()
            .prefix(".partial-")
            .tempfile_in(&self.dir)
            .map_err(failed)?;
        // tempfile makes the file 0600; said again here, since a key depends on it.
        private::owner_only(partial.as_file()).map_err(failed)?;
        partial.write_all(secret.as_bytes()).map_err(failed)?;
        partial.as_file().sync_all().map_err(failed)?;
        partial.persist(&path).map_err(|err| failed(err.error))?;
        Ok(Place::File(path))
    }

    pub(crate) fn get(&self, name: &str) -> Result<Option<(String, Place)>, KeyError> {
        let path = self.dir.join(name);
        if !path.exists() {
            return Ok(None);
        }
        private::check_dir(&self.dir)?;
        private::check_file(&path)?;
        let secret = std::fs::read_to_string(&path).map_err(|err| KeyError::File {
            path: path.clone(),
            message: err.to_string(),
        })?;
        let secret = secret.trim().to_owned();
        Ok((!secret.is_empty()).then_some((secret, Place::File(path))))
    }

    pub(crate) fn delete(&self, name: &str) -> Result<Option<Place>, KeyError> {
        let path = self.dir.join(name);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(Some(Place::File(path))),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(err) => Err(KeyError::File {
                path,
                message: err.to_string(),
            }),
        }
    }
}

#[cfg(unix)]
mod private {
    use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, PermissionsExt as _};
    use std::path::Path;

    use crate::KeyError;

    fn refuse(path: &Path, why: &str) -> KeyError {
        KeyError::File {
            path: path.to_path_buf(),
            message: format!(
                "{why}; viga keeps keys only in a folder of yours that nobody else may enter (fix it, or set VIGA_KEY_DIR to another folder)"
            ),
        }
    }

    fn io(path: &Path, err: std::io::Error) -> KeyError {
        KeyError::File {
            path: path.to_path_buf(),
            message: err.to_string(),
        }
    }

    /// This process's user id, read from a file it has just created (no `libc` call).
    fn current_uid(near: &Path) -> Result<u32, KeyError> {
        let file = tempfile::tempfile().map_err(|err| io(near, err))?;
        Ok(file.metadata().map_err(|err| io(near, err))?.uid())
    }

    /// Makes the folder (and missing parents) mode 0700, then checks it.
    pub(super) fn make_dir(dir: &Path) -> Result<(), KeyError> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|err| io(dir, err))?;
        check_dir(dir)
    }

    pub(super) fn check_dir(dir: &Path) -> Result<(), KeyError> {
        let metadata = std::fs::symlink_metadata(dir).map_err(|err| io(dir, err))?;
        if !metadata.file_type().is_dir() {
            return Err(refuse(dir, "is not a plain folder (a link?)"));
        }
        if metadata.uid() != current_uid(dir)? {
            return Err(refuse(dir, "belongs to another user"));
        }
        if metadata.mode() & 0o077 != 0 {
            return Err(refuse(dir, "can be entered by other users"));
        }
        Ok(())
    }

    pub(super) fn check_file(path: &Path) -> Result<(), KeyError> {
        let metadata = std::fs::symlink_metadata(path).map_err(|err| io(path, err))?;
        if !metadata.file_type().is_file() {
            return Err(refuse(path, "is not a plain file (a link?)"));
        }
        if metadata.uid() != current_uid(path)? {
            return Err(refuse(path, "belongs to another user"));
        }
        if metadata.mode() & 0o077 != 0 {
            return Err(refuse(path, "can be read by other users"));
        }
        Ok(())
    }

    pub(super) fn owner_only(file: &std::fs::File) -> std::io::Result<()> {
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
    }
}

#[cfg(not(unix))]
mod private {
    //! Elsewhere (Windows) the folder is in the user's profile, whose permissions keep it
    //! private; there are no mode bits to check.
    use std::path::Path;

    use crate::KeyError;

    pub(super) fn make_dir(dir: &Path) -> Result<(), KeyError> {
        std::fs::create_dir_all(dir).map_err(|err| KeyError::File {
            path: dir.to_path_buf(),
            message: err.to_string(),
        })
    }

    pub(super) fn check_dir(_dir: &Path) -> Result<(), KeyError> {
        Ok(())
    }

    pub(super) fn check_file(_path: &Path) -> Result<(), KeyError> {
        Ok(())
    }

    pub(super) fn owner_only(_file: &std::fs::File) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    #[test]
    fn keys_are_kept_in_private_files_and_replaced_whole() {
        let home = tempfile::tempdir().unwrap();
        let store = FileStore::new(home.path().join("viga").join("keys"));
        assert_eq!(store.get("OPENAI_API_KEY").unwrap(), None);
        let place = store.set("OPENAI_API_KEY", "sk-one").unwrap();
        let path = store.dir().join("OPENAI_API_KEY");
        assert_eq!(place, Place::File(path.clone()));
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(store.dir()), 0o700);
        assert_eq!(mode(&home.path().join("viga")), 0o700);
        store.set("OPENAI_API_KEY", "sk-two").unwrap();
        assert_eq!(store.get("OPENAI_API_KEY").unwrap().unwrap().0, "sk-two");
        assert_eq!(
            std::fs::read_dir(store.dir()).unwrap().count(),
            1,
            "no partial file left"
        );
        assert!(store.delete("OPENAI_API_KEY").unwrap().is_some());
        assert_eq!(store.delete("OPENAI_API_KEY").unwrap(), None);
    }

    #[test]
    fn a_folder_or_file_others_may_read_is_refused() {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join("keys");
        let store = FileStore::new(&dir);
        store.set("KEY", "sk-x").unwrap();
        std::fs::set_permissions(dir.join("KEY"), std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = store.get("KEY").unwrap_err().to_string();
        assert!(err.contains("can be read by other users"), "{err}");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let err = store.set("KEY", "sk-y").unwrap_err().to_string();
        assert!(err.contains("can be entered by other users"), "{err}");
        let link = home.path().join("link");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        let err = FileStore::new(&link)
            .set("KEY", "sk-z")
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a plain folder"), "{err}");
    }
}
