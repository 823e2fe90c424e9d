//! Room in a worker's scratch folder after a restart: what the lost program left there is
//! removed, so the next program does not start near the scratch limit (the launcher stops a
//! program whose writable folders grew past it).

use std::path::Path;

/// Removes everything in `scratch` but the files named in `keep` (the checkpoint a restart
/// restores, the program log the next error message quotes). Links are removed, never
/// followed. What cannot be removed stays; the next program then has less room.
pub(crate) fn empty_scratch(scratch: &Path, keep: &[&str]) {
    let Ok(listing) = std::fs::read_dir(scratch) else {
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_scratch_folder_is_emptied_but_for_what_is_kept() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("precious"), "x").unwrap();
        let scratch = tempfile::tempdir().unwrap();
        let folder = scratch.path();
        std::fs::write(folder.join("checkpoint.blend"), "scene").unwrap();
        std::fs::write(folder.join("big.bin"), vec![0u8; 4096]).unwrap();
        std::fs::create_dir_all(folder.join("renders/deep")).unwrap();
        std::fs::write(folder.join("renders/deep/a.png"), "png").unwrap();
        std::os::unix::fs::symlink(outside.path(), folder.join("link")).unwrap();
        empty_scratch(folder, &["checkpoint.blend", "program-output.log"]);
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
