//! viga's private folders in the temporary folder (a worker's scratch folder, its scripts,
//! kept results), and the clean-up of those whose owner is gone. A folder is removed with
//! its owner when the owner ends normally; one whose owner was killed (SIGKILL, a machine
//! that lost power) stays. So each folder holds a marker file that its owner keeps locked
//! (`flock`) for as long as it lives: the kernel drops the lock with the process, however it
//! ended. The first private folder a viga process makes sweeps the temporary folder once and
//! removes the folders of this user that hold the marker, unlocked, and are older than a
//! minute: only folders viga made, only when their owner is gone.

use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::Once;
use std::time::{Duration, SystemTime};

/// The marker file an owner keeps locked (whoever empties the folder leaves it).
pub const OWNER_FILE: &str = ".viga-owner";

/// How old an unlocked folder must be before it is taken as stale: a folder's maker creates
/// its marker and then locks it, and a sweep in between must not take it.
const STALE_AFTER: Duration = Duration::from_secs(60);

/// A private folder (mode 0700) in the temporary folder, removed when dropped, and marked as
/// in use while this process lives.
#[derive(Debug)]
pub struct PrivateFolder {
    dir: tempfile::TempDir,
    #[cfg(unix)]
    _owner: Option<nix::fcntl::Flock<File>>,
}

impl PrivateFolder {
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// A new folder in the temporary folder, named `prefix` and random letters, that only this
/// user may enter (mode 0700; `tempfile`'s default is 0755), removed when dropped: a worker's
/// scratch folder, scripts and kept results. Folders of owners that are gone are removed
/// first, once per process.
pub fn private_folder(prefix: &str) -> io::Result<PrivateFolder> {
    static SWEEP: Once = Once::new();
    SWEEP.call_once(|| {
        let removed = remove_stale_folders(&std::env::temp_dir(), STALE_AFTER);
        if removed > 0 {
            tracing::info!(
                removed,
                "removed private folders of viga processes that are gone"
            );
        }
    });
    let mut builder = tempfile::Builder::new();
    builder.prefix(prefix);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        builder.permissions(std::fs::Permissions::from_mode(0o700));
    }
    let dir = builder.tempdir()?;
    #[cfg(unix)]
    let owner = {
        use nix::fcntl::{Flock, FlockArg};
        let marker = File::create(dir.path().join(OWNER_FILE))?;
        Flock::lock(marker, FlockArg::LockExclusiveNonblock)
            .map_err(|(_, errno)| io::Error::from(errno))?
    };
    Ok(PrivateFolder {
        dir,
        #[cfg(unix)]
        _owner: Some(owner),
    })
}

/// Removes the folders directly in `parent` that are this user's, hold the owner marker,
/// whose marker nobody holds locked, and that are older than `stale_after`. Returns how many.
#[cfg(unix)]
pub fn remove_stale_folders(parent: &Path, stale_after: Duration) -> usize {
    use std::os::unix::fs::MetadataExt as _;
    let Ok(listing) = std::fs::read_dir(parent) else {
        return 0;
    };
    let me = nix::unistd::geteuid().as_raw();
    let mut removed = 0;
    for entry in listing.flatten() {
        let path = entry.path();
        // Not through a link: the folder itself, of this user, old enough.
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let old = meta
            .modified()
            .ok()
            .and_then(|when| SystemTime::now().duration_since(when).ok())
            .is_some_and(|age| age >= stale_after);
        let name = entry.file_name();
        if !meta.is_dir()
            || meta.uid() != me
            || !old
            || !name.to_string_lossy().starts_with("viga-")
        {
            continue;
        }
        if owner_is_gone(&path) && std::fs::remove_dir_all(&path).is_ok() {
            removed += 1;
        }
    }
    removed
}

#[cfg(not(unix))]
pub fn remove_stale_folders(_parent: &Path, _stale_after: Duration) -> usize {
    0
}

/// Whether `folder` holds an owner marker (a regular file, not a link) that nobody holds
/// locked.
#[cfg(unix)]
fn owner_is_gone(folder: &Path) -> bool {
    use nix::fcntl::{Flock, FlockArg};
    use std::os::unix::fs::OpenOptionsExt as _;
    let marker = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits() | nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(folder.join(OWNER_FILE));
    match marker {
        Ok(file) if file.metadata().is_ok_and(|meta| meta.is_file()) => {
            Flock::lock(file, FlockArg::LockExclusiveNonblock).is_ok()
        }
        _ => false,
    }
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
    fn only_folders_whose_owner_is_gone_are_removed() {
        let parent = tempfile::tempdir().unwrap();
        let make = |name: &str, marked: bool| {
            let folder = parent.path().join(name);
            std::fs::create_dir(&folder).unwrap();
            if marked {
                std::fs::write(folder.join(OWNER_FILE), b"").unwrap();
            }
            folder
        };
        let gone = make("viga-worker-gone", true);
        let alive = make("viga-worker-alive", true);
        let held = File::open(alive.join(OWNER_FILE)).unwrap();
        let _lock = nix::fcntl::Flock::lock(held, nix::fcntl::FlockArg::LockExclusiveNonblock)
            .map_err(|(_, errno)| errno)
            .unwrap();
        let unmarked = make("viga-worker-unmarked", false);
        let not_ours = make("other-tool", true);
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), parent.path().join("viga-worker-link")).unwrap();
        std::fs::write(outside.path().join(OWNER_FILE), b"").unwrap();

        // Too young to be taken: its maker may be about to lock it.
        assert_eq!(
            remove_stale_folders(parent.path(), Duration::from_secs(3600)),
            0
        );
        assert_eq!(remove_stale_folders(parent.path(), Duration::ZERO), 1);
        assert!(!gone.exists());
        for kept in [&alive, &unmarked, &not_ours] {
            assert!(kept.exists(), "{}", kept.display());
        }
        assert!(
            outside.path().join(OWNER_FILE).exists(),
            "a link is not followed"
        );
    }
}
