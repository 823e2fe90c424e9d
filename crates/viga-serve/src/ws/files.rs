//! The files add-on commands read and write, confined to a folder per user. Without this a
//! client could have its Blender save over, or read, any file the gateway's account can
//! reach, including another user's.
//!
//! Path parameters (declared `file_path`, or named like a path, at any depth) are resolved
//! under `<files root>/<user>/` by viga-skills' [`ConfinedFolder`], the one rule the add-on
//! agent follows too; each user's Blender, contained, may write nowhere else.

use std::io;
use std::path::{Path, PathBuf};

use viga_skills::addons::ConfinedFolder;

use super::credentials::UserName;

/// The files root when none is given: a folder of this name in the gateway's working
/// folder (never the shared temporary folder, which other local users can enter).
pub const DEFAULT_FILES_ROOT: &str = "gateway-files";

/// Creates the files root (mode 0700) if needed and returns it without links, refusing
/// one other users may enter: it holds every user's files.
pub(crate) fn prepare_files_root(root: &Path) -> io::Result<PathBuf> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(root)?;
    let root = std::fs::canonicalize(root)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        let mode = std::fs::metadata(&root)?.mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "the files root {} can be entered by other users (mode {mode:o}); it holds every gateway user's files: `chmod 700` it or choose another",
                    root.display()
                ),
            ));
        }
    }
    Ok(root)
}

/// One user's folder under the files root.
#[derive(Debug)]
pub(crate) struct UserFolder {
    confined: ConfinedFolder,
}

impl UserFolder {
    /// `<files_root>/<user>`, made with mode 0700 when missing. `files_root` comes from
    /// [`prepare_files_root`].
    pub(crate) fn create(files_root: &Path, user: &UserName) -> io::Result<Self> {
        let path = files_root.join(user.as_str());
        let mut builder = std::fs::DirBuilder::new();
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        match builder.create(&path) {
            Ok(()) => {}
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {}
            Err(err) => return Err(err),
        }
        let confined = ConfinedFolder::new(&path, "your folder")?;
        if confined.path().parent() != Some(files_root) {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("the folder of {user} leads out of the files root (a link?)"),
            ));
        }
        Ok(Self { confined })
    }

    /// The folder, as add-on command paths are confined to it.
    pub(crate) fn confined(&self) -> &ConfinedFolder {
        &self.confined
    }

    /// Where it is: absolute, without links.
    pub(crate) fn path(&self) -> &Path {
        self.confined.path()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    #[cfg(unix)]
    fn a_users_folder_is_private_and_may_not_lead_out_of_the_root() {
        use std::os::unix::fs::PermissionsExt as _;
        let root = tempfile::tempdir().unwrap();
        let prepared = prepare_files_root(&root.path().join("files")).unwrap();
        let alice = UserFolder::create(&prepared, &UserName::parse("alice").unwrap()).unwrap();
        assert_eq!(alice.path(), prepared.join("alice"));
        let mode = std::fs::metadata(alice.path())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
        let elsewhere = root.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, prepared.join("bob")).unwrap();
        let err = UserFolder::create(&prepared, &UserName::parse("bob").unwrap()).unwrap_err();
        assert!(
            err.to_string().contains("leads out of the files root"),
            "{err}"
        );
    }
}
