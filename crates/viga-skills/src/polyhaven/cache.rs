//! Poly Haven's cache folder: where it is by default, the note of the resolution a model came
//! at, and the removal of a killed download's partial folder.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::listing::is_plain_token;

/// `$XDG_CACHE_HOME/viga/polyhaven`, else `~/.cache/viga/polyhaven` (on Windows
/// `%LOCALAPPDATA%\viga\polyhaven`); `None` when none of those is set to an absolute path.
pub fn default_cache_dir() -> Option<PathBuf> {
    viga_io::files::user_cache_dir("polyhaven")
}

/// Leftover partial folders in which nothing changed for this long (a killed run's)
/// are removed.
pub(super) const STALE_PARTIAL: Duration = Duration::from_secs(60 * 60);
/// A partial folder with more entries than this is no download of viga's (a model has at
/// most `max_includes` files, a few folders deep) and is left alone.
const MAX_PARTIAL_ENTRIES: usize = 4096;

pub(super) fn age(when: SystemTime) -> Duration {
    SystemTime::now()
        .duration_since(when)
        .unwrap_or(Duration::ZERO)
}

/// The resolution noted in a model's fallback note, if there is one and it is a plain name.
pub(super) fn read_fallback_note(note: &Path) -> Option<String> {
    let text = std::fs::read_to_string(note).ok()?;
    let chosen = text.trim();
    is_plain_token(chosen, 16).then(|| chosen.to_owned())
}

/// Removes the partial folders in `folder` in which nothing (the folder itself or
/// anything inside it, however deep) has changed for longer than `stale_after`: a killed
/// download's. The folder's own time alone would not do: it does not change while files are
/// written into a subfolder of it.
pub(super) fn remove_stale_partials(folder: &Path, stale_after: Duration) {
    let Ok(listing) = std::fs::read_dir(folder) else {
        return;
    };
    for item in listing.flatten() {
        // viga_io's partial names; the older `.partial-*` names match too.
        if !viga_io::files::is_partial(&item.file_name()) {
            continue;
        }
        let path = item.path();
        let stale = newest_change(&path, MAX_PARTIAL_ENTRIES)
            .is_some_and(|newest| age(newest) > stale_after);
        if stale {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

/// The newest modification time of the folder `root` and of everything under it (symbolic
/// links are not followed); `None` when anything cannot be read (it may be changing right
/// now), `root` is no folder, or there are more than `limit` entries.
fn newest_change(root: &Path, limit: usize) -> Option<SystemTime> {
    let metadata = std::fs::symlink_metadata(root).ok()?;
    if !metadata.is_dir() {
        return None;
    }
    let mut newest = metadata.modified().ok()?;
    let mut folders = vec![root.to_path_buf()];
    let mut seen = 0usize;
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).ok()? {
            let entry = entry.ok()?;
            seen += 1;
            if seen > limit {
                return None;
            }
            // Of the entry itself: a symbolic link is not followed.
            let metadata = entry.metadata().ok()?;
            newest = newest.max(metadata.modified().ok()?);
            if metadata.is_dir() {
                folders.push(entry.path());
            }
        }
    }
    Some(newest)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sets the modification time of `path` (a file or a folder) to `ago` before now.
    fn set_age(path: &Path, ago: Duration) {
        std::fs::File::open(path)
            .unwrap()
            .set_modified(SystemTime::now() - ago)
            .unwrap();
    }

    #[test]
    fn partial_downloads_are_stale_only_when_nothing_inside_changed_for_long() {
        let root = tempfile::tempdir().unwrap();
        let hours = |n: u64| Duration::from_secs(n * 60 * 60);
        let file = |path: PathBuf| {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, "x").unwrap();
            path
        };
        // A live download: its .gltf and the folder itself were written long ago, but a
        // texture is being written into a subfolder right now.
        let live = root.path().join(".partial-1k-7-1");
        set_age(&file(live.join("a_1k.gltf")), hours(3));
        file(live.join("textures/a_diff_1k.png"));
        set_age(&live, hours(3));
        // A killed one: nothing inside changed for hours.
        let killed = root.path().join(".1k-abc.partial-8-2");
        let texture = file(killed.join("textures/a_diff_1k.png"));
        for path in [texture.as_path(), &killed.join("textures"), &killed] {
            set_age(path, hours(2));
        }
        // Killed just before it began writing.
        let empty = root.path().join(".partial-1k-9-3");
        std::fs::create_dir(&empty).unwrap();
        set_age(&empty, hours(2));
        // Old, but no partial download.
        let kept = root.path().join("1k-abc");
        set_age(&file(kept.join("a_1k.gltf")), hours(5));
        set_age(&kept, hours(5));

        remove_stale_partials(root.path(), hours(1));
        assert!(live.join("textures/a_diff_1k.png").is_file());
        assert!(live.join("a_1k.gltf").is_file());
        assert!(!killed.exists());
        assert!(!empty.exists());
        assert!(kept.join("a_1k.gltf").is_file());

        // Once the live one too has stopped changing for long enough, it goes.
        set_age(&live.join("textures/a_diff_1k.png"), hours(2));
        set_age(&live.join("textures"), hours(2));
        remove_stale_partials(root.path(), hours(1));
        assert!(!live.exists());
        assert!(kept.exists());
    }

    #[test]
    fn the_newest_change_walk_is_bounded() {
        let root = tempfile::tempdir().unwrap();
        for name in ["a", "b", "c"] {
            std::fs::write(root.path().join(name), "x").unwrap();
        }
        assert!(newest_change(root.path(), 3).is_some());
        assert_eq!(newest_change(root.path(), 2), None);
        assert_eq!(newest_change(&root.path().join("a"), 10), None, "no folder");
    }
}
