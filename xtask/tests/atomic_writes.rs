//! One atomic write: a file or folder is published by rename only in viga-io's `files`
//! module, whose temporary names are new for every call. Any other rename of a non-test
//! source (`std::fs::rename`, `tokio::fs::rename`, tempfile's `persist`) is a second copy of
//! that contract, refused here unless [`ALLOWED`] names it with its reason.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic: that is how tests fail

use std::path::{Path, PathBuf};

/// The one module that renames into place.
const THE_WRITER: &str = "crates/viga-io/src/files.rs";

/// The files that may rename, each with why: only what cannot reach viga-io (its layer, or
/// xtask's rule) or waits to be moved onto it.
const ALLOWED: [(&str, &str); 3] = [
    (
        "crates/viga-process/src/scratch.rs",
        "layer 0, so viga-io is out of reach: `copy_out` copies from an fd opened beneath an \
         untrusted folder into a tempfile (a new name for every call, created exclusively) \
         and persists it",
    ),
    (
        "crates/viga-keys/src/file.rs",
        "layer 0, so viga-io is out of reach: a key is written to a tempfile (a new name for \
         every call, created exclusively, mode 0600), synced, then persisted",
    ),
    (
        "xtask/src/setup.rs",
        "xtask depends on no viga crate but viga-locate: one setup process writes its stamp \
         under a partial name with its process id",
    ),
];

/// What publishes by rename, as it is written in a source.
const RENAMES: [&str; 3] = ["fs::rename", ".persist(", ".persist_noclobber("];

/// The folders of the workspace's sources.
const SOURCE_FOLDERS: [&str; 3] = ["crates", "bins", "xtask"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The non-test Rust sources under `folder`: no `tests/` or `benches/` folder (integration
/// tests and benchmarks), nothing hidden, no build output.
fn sources(folder: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(folder).into_iter().flatten().flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || ["target", "tests", "benches"].contains(&name.as_str()) {
            continue;
        }
        if path.is_dir() {
            sources(&path, found);
        } else if name.ends_with(".rs") {
            found.push(path);
        }
    }
}

/// The lines (1-based) of `text` that rename, outside comments and the test module. The test
/// module is the file's last item (clippy's `items_after_test_module` holds every crate to
/// it), so everything from `#[cfg(test)]` before an inline `mod` on is test code.
fn renames(text: &str) -> Vec<usize> {
    let lines: Vec<&str> = text.lines().collect();
    let code = lines
        .windows(2)
        .position(|pair| {
            let item = pair[1].trim();
            pair[0].trim() == "#[cfg(test)]" && item.starts_with("mod ") && item.ends_with('{')
        })
        .unwrap_or(lines.len());
    lines[..code]
        .iter()
        .enumerate()
        .filter(|(_, line)| !line.trim_start().starts_with("//"))
        .filter(|(_, line)| RENAMES.iter().any(|rename| line.contains(rename)))
        .map(|(index, _)| index + 1)
        .collect()
}

/// Every source that renames, as its path from the root, with the lines.
fn renaming_sources() -> Vec<(String, Vec<usize>)> {
    let root = root();
    let mut files = Vec::new();
    for folder in SOURCE_FOLDERS {
        sources(&root.join(folder), &mut files);
    }
    files.sort();
    files
        .into_iter()
        .filter_map(|path| {
            let lines = renames(&std::fs::read_to_string(&path).unwrap());
            let relative = path.strip_prefix(&root).unwrap().to_string_lossy();
            (!lines.is_empty()).then(|| (relative.replace('\\', "/"), lines))
        })
        .collect()
}

#[test]
fn only_viga_io_publishes_by_rename() {
    let found = renaming_sources();
    let unexplained: Vec<String> = found
        .iter()
        .filter(|(path, _)| path != THE_WRITER && !ALLOWED.iter().any(|(file, _)| file == path))
        .map(|(path, lines)| format!("{path}: line {lines:?}"))
        .collect();
    assert!(
        unexplained.is_empty(),
        "a file is published by rename outside viga_io::files; use `write_atomic`, \
         `PartialFile` or `PartialFolder` there (or add the file to ALLOWED with the reason \
         it cannot):\n{}",
        unexplained.join("\n")
    );
    let stale: Vec<&str> = ALLOWED
        .iter()
        .map(|(file, _)| *file)
        .filter(|file| !found.iter().any(|(path, _)| path == file))
        .collect();
    assert!(
        stale.is_empty(),
        "allowed to rename but renames no longer (remove them from ALLOWED): {stale:?}"
    );
    assert!(
        found.iter().any(|(path, _)| path == THE_WRITER),
        "{THE_WRITER} renames: the check reads the sources it should"
    );
}

#[test]
fn a_rename_is_caught_in_code_and_not_in_comments_or_tests() {
    let source = "\
use std::path::Path;

/// Renames with `std::fs::rename(from, to)`.
fn publish(from: &Path, to: &Path) -> std::io::Result<()> {
    // tokio::fs::rename would do too
    std::fs::rename(from, to)
}

async fn publish_later(from: &Path, to: &Path) -> std::io::Result<()> {
    tokio::fs::rename(from, to).await
}

fn keep(partial: tempfile::NamedTempFile, to: &Path) {
    partial.persist(to).unwrap();
}

#[cfg(test)]
mod tests {
    fn copy(from: &Path, to: &Path) {
        std::fs::rename(from, to).unwrap();
    }
}
";
    assert_eq!(renames(source), [6, 10, 14]);
}
