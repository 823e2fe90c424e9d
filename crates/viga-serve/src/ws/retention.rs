//! How long the server keeps its chat requests' run folders (`--keep-requests-days`): each
//! request leaves one under `<files root>/<user>/agent/<timestamp>/`, and a team server runs
//! for months. Folders older than the setting are removed at start and every hour after.

use std::path::Path;
use std::time::{Duration, SystemTime};

/// How often old folders are looked for.
const EVERY: Duration = Duration::from_secs(60 * 60);
/// The folder of each user's requests, as the add-on agent names it.
const REQUESTS_FOLDER: &str = viga_domain_scene::addon_agent::AGENT_MODE;

/// Removes, under every user's requests folder, the request folders last changed longer
/// than `keep` ago; returns how many. A link is never followed: a server Blender writes in
/// the user's folder.
pub(super) fn remove_old_requests(files_root: &Path, keep: Duration) -> usize {
    let Some(before) = SystemTime::now().checked_sub(keep) else {
        return 0;
    };
    let Ok(users) = std::fs::read_dir(files_root) else {
        return 0;
    };
    let mut removed = 0;
    for user in users.flatten() {
        let requests = user.path().join(REQUESTS_FOLDER);
        let real_folder = std::fs::symlink_metadata(&requests).is_ok_and(|meta| meta.is_dir());
        let Some(folders) = real_folder
            .then(|| std::fs::read_dir(&requests).ok())
            .flatten()
        else {
            continue;
        };
        for folder in folders.flatten() {
            let old = std::fs::symlink_metadata(folder.path())
                .is_ok_and(|meta| meta.is_dir() && meta.modified().is_ok_and(|at| at < before));
            if old {
                match std::fs::remove_dir_all(folder.path()) {
                    Ok(()) => removed += 1,
                    Err(err) => tracing::warn!(
                        folder = %folder.path().display(),
                        "an old request folder could not be removed: {err}"
                    ),
                }
            }
        }
    }
    removed
}

/// [`remove_old_requests`] now and every hour, for as long as the server runs.
pub(super) async fn prune_forever(files_root: std::path::PathBuf, keep: Duration) {
    let mut ticker = tokio::time::interval(EVERY);
    loop {
        ticker.tick().await;
        let root = files_root.clone();
        let removed = tokio::task::spawn_blocking(move || remove_old_requests(&root, keep))
            .await
            .unwrap_or_default();
        if removed > 0 {
            tracing::info!(
                removed,
                "removed request folders older than the retention setting"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_folders_older_than_the_setting_are_removed_and_links_are_not_followed() {
        let root = tempfile::tempdir().unwrap();
        let requests = root.path().join("alice").join(REQUESTS_FOLDER);
        let old = requests.join("20250101-000000");
        let new = requests.join("20261128-120000");
        std::fs::create_dir_all(old.join("task")).unwrap();
        std::fs::create_dir_all(new.join("task")).unwrap();
        let long_ago = SystemTime::now() - Duration::from_secs(40 * 24 * 3600);
        std::fs::File::open(&old)
            .unwrap()
            .set_modified(long_ago)
            .unwrap();
        // Bob's requests folder is a link to somewhere else: left alone.
        let elsewhere = tempfile::tempdir().unwrap();
        let kept = elsewhere.path().join("20250101-000000");
        std::fs::create_dir_all(&kept).unwrap();
        std::fs::File::open(&kept)
            .unwrap()
            .set_modified(long_ago)
            .unwrap();
        std::fs::create_dir_all(root.path().join("bob")).unwrap();
        std::os::unix::fs::symlink(
            elsewhere.path(),
            root.path().join("bob").join(REQUESTS_FOLDER),
        )
        .unwrap();
        let removed = remove_old_requests(root.path(), Duration::from_secs(30 * 24 * 3600));
        assert_eq!(removed, 1);
        assert!(!old.exists());
        assert!(new.exists());
        assert!(kept.exists());
    }
}
