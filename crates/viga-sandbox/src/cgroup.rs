//! A cgroup v2 leaf for one contained program, where a cgroup is delegated to this user:
//! `memory.max` and `pids.max` then bound the program and everything it starts, together.
//! Found from `/proc/self/cgroup` (`0::/path`) and the cgroup file system; every function
//! takes the root it looks under, so the tests use made-up trees.

use std::path::{Path, PathBuf};

/// Where the cgroup v2 file system is mounted.
pub(crate) const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// The names of this launcher's leaves: the next launcher removes those left empty.
const LEAF_PREFIX: &str = "viga-contain-";

/// This process's cgroup v2 path, from the text of `/proc/self/cgroup`: its `0::` line.
pub(crate) fn own_path(proc_self_cgroup: &str) -> Option<&str> {
    proc_self_cgroup
        .lines()
        .find_map(|line| line.strip_prefix("0::"))
        .map(str::trim)
        .filter(|path| path.starts_with('/'))
}

/// Whether `text` (a `cgroup.controllers` or `cgroup.subtree_control` file) names every
/// one of `wanted`.
fn names_all(text: &str, wanted: &[&str]) -> bool {
    let named: Vec<&str> = text.split_whitespace().collect();
    wanted.iter().all(|controller| named.contains(controller))
}

/// The cgroup a leaf can be made in: the nearest one from this process's own upwards whose
/// children get `wanted` controllers (its `cgroup.subtree_control`) and in which this user
/// may make a folder and move processes. Or why there is none, in plain words.
pub(crate) fn delegated(
    root: &Path,
    proc_self_cgroup: &str,
    wanted: &[&str],
) -> Result<PathBuf, String> {
    if !root.join("cgroup.controllers").is_file() {
        return Err(format!(
            "no cgroup v2 at {} (this machine mounts cgroup v1, or a hybrid of both)",
            root.display()
        ));
    }
    let Some(own) = own_path(proc_self_cgroup) else {
        return Err("this process is in no cgroup v2 (/proc/self/cgroup has no 0:: line)".into());
    };
    let mut dir = root.join(own.trim_start_matches('/'));
    loop {
        let enabled = std::fs::read_to_string(dir.join("cgroup.subtree_control"))
            .is_ok_and(|text| names_all(&text, wanted));
        if enabled && writable(&dir) {
            return Ok(dir);
        }
        if dir == root || !dir.starts_with(root) {
            break;
        }
        match dir.parent() {
            Some(parent) => dir = parent.to_path_buf(),
            None => break,
        }
    }
    Err(format!(
        "no cgroup v2 delegated to this user with the {} controllers for its children (from {own} upwards); start viga in one (systemd-run --user -p Delegate=yes)",
        wanted.join(" and ")
    ))
}

/// Whether this user may make a folder in `dir` and move processes into it.
fn writable(dir: &Path) -> bool {
    use nix::unistd::{AccessFlags, access};
    access(dir, AccessFlags::W_OK).is_ok()
        && access(&dir.join("cgroup.procs"), AccessFlags::W_OK).is_ok()
}

/// A value to write into one of a leaf's files.
#[derive(Debug)]
pub(crate) struct Setting {
    file: &'static str,
    value: u64,
    /// Without it the limit does not hold; an optional one is written where the kernel has
    /// its file.
    needed: bool,
}

impl Setting {
    pub(crate) fn needed(file: &'static str, value: u64) -> Self {
        Self {
            file,
            value,
            needed: true,
        }
    }

    pub(crate) fn if_there(file: &'static str, value: u64) -> Self {
        Self {
            file,
            value,
            needed: false,
        }
    }
}

/// Makes the leaf `<parent>/viga-contain-<id>`, writes `settings` into it and moves this
/// process there, so all it starts next is inside. Empty leaves of launchers that ended are
/// removed first (a launcher cannot remove its own: it is in it).
pub(crate) fn make_leaf(parent: &Path, id: u32, settings: &[Setting]) -> Result<PathBuf, String> {
    remove_empty_leaves(parent);
    let leaf = parent.join(format!("{LEAF_PREFIX}{id}"));
    std::fs::create_dir(&leaf)
        .map_err(|err| format!("could not make the cgroup {}: {err}", leaf.display()))?;
    let filled = settings
        .iter()
        .filter(|setting| setting.needed || leaf.join(setting.file).exists())
        .try_for_each(|setting| {
            std::fs::write(leaf.join(setting.file), setting.value.to_string()).map_err(|err| {
                format!(
                    "could not write {} in {}: {err}",
                    setting.file,
                    leaf.display()
                )
            })
        })
        .and_then(|()| {
            // "0" is the writer itself.
            std::fs::write(leaf.join("cgroup.procs"), "0")
                .map_err(|err| format!("could not move into the cgroup {}: {err}", leaf.display()))
        });
    if let Err(why) = filled {
        let _ = std::fs::remove_dir(&leaf);
        return Err(why);
    }
    Ok(leaf)
}

/// Removes the leaves of launchers that ended (a cgroup with a process in it refuses).
fn remove_empty_leaves(parent: &Path) {
    let Ok(listing) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in listing.flatten() {
        if entry.file_name().to_string_lossy().starts_with(LEAF_PREFIX) {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

/// Whether the kernel killed a process of `leaf` for going past `memory.max`.
pub(crate) fn oom_killed(leaf: &Path) -> bool {
    std::fs::read_to_string(leaf.join("memory.events")).is_ok_and(|events| {
        events.lines().any(|line| {
            line.strip_prefix("oom_kill ")
                .and_then(|count| count.trim().parse::<u64>().ok())
                .is_some_and(|count| count > 0)
        })
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const WANTED: [&str; 2] = ["memory", "pids"];

    /// A made-up cgroup v2 tree: the root, `user.slice/app.scope` (where this process is)
    /// and what each `cgroup.subtree_control` enables.
    fn tree(subtree_control: &[(&str, &str)]) -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("cgroup.controllers"), "cpu memory pids\n").unwrap();
        for folder in ["", "user.slice", "user.slice/app.scope"] {
            let dir = root.path().join(folder);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("cgroup.procs"), "").unwrap();
            std::fs::write(dir.join("cgroup.subtree_control"), "").unwrap();
        }
        for (folder, enabled) in subtree_control {
            let file = root.path().join(folder).join("cgroup.subtree_control");
            std::fs::write(file, enabled).unwrap();
        }
        root
    }

    #[test]
    fn the_own_cgroup_is_the_0_line_of_proc_self_cgroup() {
        assert_eq!(
            own_path("0::/user.slice/app.scope\n"),
            Some("/user.slice/app.scope")
        );
        let hybrid = "12:pids:/\n1:name=systemd:/init.scope\n0::/init.scope\n";
        assert_eq!(own_path(hybrid), Some("/init.scope"));
        assert_eq!(own_path("9:name=systemd:/\n8:pids:/\n"), None);
    }

    #[test]
    fn a_leaf_goes_in_the_nearest_cgroup_that_delegates_memory_and_pids() {
        let root = tree(&[("user.slice", "memory pids cpu\n")]);
        let found = delegated(root.path(), "0::/user.slice/app.scope\n", &WANTED).unwrap();
        assert_eq!(found, root.path().join("user.slice"));
        // Enabled for the process's own cgroup (a namespace's root): used there.
        let root = tree(&[("user.slice/app.scope", "memory pids")]);
        let found = delegated(root.path(), "0::/user.slice/app.scope", &WANTED).unwrap();
        assert_eq!(found, root.path().join("user.slice/app.scope"));
    }

    #[test]
    fn no_delegated_cgroup_says_why() {
        let root = tree(&[("user.slice", "memory\n")]);
        let err = delegated(root.path(), "0::/user.slice/app.scope", &WANTED).unwrap_err();
        assert!(err.contains("no cgroup v2 delegated"), "{err}");
        let err = delegated(root.path(), "8:pids:/\n", &WANTED).unwrap_err();
        assert!(err.contains("no 0:: line"), "{err}");
        std::fs::remove_file(root.path().join("cgroup.controllers")).unwrap();
        let err = delegated(root.path(), "0::/user.slice", &WANTED).unwrap_err();
        assert!(err.contains("cgroup v1, or a hybrid"), "{err}");
    }

    #[test]
    fn a_leaf_is_made_filled_and_entered_and_old_empty_ones_go() {
        let root = tree(&[]);
        let parent = root.path().join("user.slice");
        std::fs::create_dir(parent.join("viga-contain-1")).unwrap();
        let settings = [
            Setting::needed("memory.max", 1 << 30),
            Setting::if_there("memory.swap.max", 0),
        ];
        let leaf = make_leaf(&parent, 42, &settings).unwrap();
        // A file the kernel does not have is not made up.
        assert!(!leaf.join("memory.swap.max").exists());
        assert_eq!(leaf, parent.join("viga-contain-42"));
        assert!(!parent.join("viga-contain-1").exists());
        let max = std::fs::read_to_string(leaf.join("memory.max")).unwrap();
        assert_eq!(max, "1073741824");
        assert_eq!(
            std::fs::read_to_string(leaf.join("cgroup.procs")).unwrap(),
            "0"
        );
        assert!(!oom_killed(&leaf));
        std::fs::write(leaf.join("memory.events"), "low 0\noom 1\noom_kill 1\n").unwrap();
        assert!(oom_killed(&leaf));
    }
}
