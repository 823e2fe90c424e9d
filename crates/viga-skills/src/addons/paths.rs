//! The files add-on commands read and write, confined to one folder: a gateway user's own,
//! or an agent run's results folder. Without this a client, or a model steered by what it
//! reads, could have Blender save over, or read, any file the account can reach.
//!
//! A value is a path when its parameter is declared `file_path` in the add-on's manifest,
//! or when its name says so (its last word is `path`, `file`, `filename`, `dir`,
//! `directory` or `folder`: `filepath`, `output_path`, `imageFile`, `file_name`), at any
//! depth: a key named like a path inside an object, and every string inside a path
//! parameter's object or array, count too. Each is resolved under the folder and handed to
//! Blender as that absolute path; `..`, an absolute path elsewhere, and links leading out
//! are refused.

use std::ffi::OsStr;
use std::io;
use std::path::{Component, Path, PathBuf};

use serde_json::Value;
use viga_protocol::manifest::{AddonTool, ParameterType};

/// Last words of a parameter name that make it a path.
const PATH_WORDS: [&str; 8] = [
    "path",
    "filepath",
    "filename",
    "file",
    "dir",
    "dirpath",
    "directory",
    "folder",
];

/// The words of a parameter name: split at anything not a letter or digit and where a
/// lower-case letter meets an upper-case one, all lower-cased.
fn words(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut previous_lower = false;
    for c in name.chars() {
        let boundary = !c.is_alphanumeric() || (c.is_uppercase() && previous_lower);
        if boundary && !current.is_empty() {
            words.push(std::mem::take(&mut current));
        }
        if c.is_alphanumeric() {
            current.extend(c.to_lowercase());
        }
        previous_lower = c.is_lowercase() || c.is_ascii_digit();
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

/// Whether a parameter's name says it holds a path. Only the last word counts, so
/// `file_format` (an image format) is not a path but `image_file` is.
pub fn looks_like_path(name: &str) -> bool {
    match words(name).as_slice() {
        [.., first, last] if first == "file" && last == "name" => true,
        [.., last] => PATH_WORDS.contains(&last.as_str()),
        [] => false,
    }
}

/// Why a path was refused.
#[derive(Debug, thiserror::Error)]
pub enum PathRefused {
    #[error("an empty path names no file")]
    Empty,
    #[error("`..` may not appear in a path")]
    ParentDirectory,
    #[error("it is outside {0}")]
    Outside(String),
    #[error("it leads out of {0} through a link")]
    LinkOut(String),
    #[error("it is a link that leads nowhere")]
    DanglingLink,
    #[error("it cannot be checked: {0}")]
    Unreadable(#[source] io::Error),
    #[error("the folder's path is not valid UTF-8, so Blender cannot be given it")]
    NotUtf8,
}

/// The one folder add-on commands' paths may name.
#[derive(Debug, Clone)]
pub struct ConfinedFolder {
    /// Absolute and free of links, so a resolved path is checked by its prefix.
    path: PathBuf,
    /// How refusals name it to whoever sent the path ("your folder").
    called: String,
}

impl ConfinedFolder {
    /// The existing folder `path`, named `called` in refusals.
    pub fn new(path: &Path, called: impl Into<String>) -> io::Result<Self> {
        let path = std::fs::canonicalize(path)?;
        if !path.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("{} is not a folder", path.display()),
            ));
        }
        Ok(Self {
            path,
            called: called.into(),
        })
    }

    /// The folder, absolute and free of links.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where `requested` (relative to the folder, or absolute inside it) is, refusing
    /// anything that ends up outside. The file itself need not exist yet.
    pub fn confine(&self, requested: &str) -> Result<PathBuf, PathRefused> {
        if requested.is_empty() {
            return Err(PathRefused::Empty);
        }
        let requested = Path::new(requested);
        if requested
            .components()
            .any(|part| part == Component::ParentDir)
        {
            return Err(PathRefused::ParentDirectory);
        }
        let candidate = if requested.is_absolute() {
            if !requested.starts_with(&self.path) {
                return Err(PathRefused::Outside(self.called.clone()));
            }
            requested.to_path_buf()
        } else {
            self.path.join(requested)
        };
        self.resolve_links(&candidate)
    }

    /// Follows the links in the part of `candidate` that exists (what does not exist yet
    /// cannot be a link) and checks the result is still inside the folder.
    fn resolve_links(&self, candidate: &Path) -> Result<PathBuf, PathRefused> {
        let mut existing = candidate;
        let mut missing: Vec<&OsStr> = Vec::new();
        loop {
            match std::fs::symlink_metadata(existing) {
                Ok(_) => break,
                Err(err) if err.kind() == io::ErrorKind::NotFound => {
                    let (Some(parent), Some(name)) = (existing.parent(), existing.file_name())
                    else {
                        return Err(PathRefused::Outside(self.called.clone()));
                    };
                    missing.push(name);
                    existing = parent;
                }
                Err(err) => return Err(PathRefused::Unreadable(err)),
            }
        }
        let real = match std::fs::canonicalize(existing) {
            Ok(real) => real,
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                return Err(PathRefused::DanglingLink);
            }
            Err(err) => return Err(PathRefused::Unreadable(err)),
        };
        if !real.starts_with(&self.path) {
            return Err(PathRefused::LinkOut(self.called.clone()));
        }
        Ok(missing
            .iter()
            .rev()
            .fold(real, |path, name| path.join(name)))
    }
}

/// `arguments` of `tool` with every path in them resolved in `folder` (see the module's
/// notes), or why one was refused. Values that are not strings and not paths are left to
/// the command's schema.
pub fn confine_path_arguments(
    tool: &AddonTool,
    arguments: Value,
    folder: &ConfinedFolder,
) -> Result<Value, String> {
    let Value::Object(mut map) = arguments else {
        return Ok(arguments);
    };
    for (name, value) in &mut map {
        let declared = tool
            .parameters
            .iter()
            .any(|parameter| parameter.name == *name && parameter.kind == ParameterType::FilePath);
        confine_value(value, declared || looks_like_path(name), name, folder)?;
    }
    Ok(Value::Object(map))
}

/// Confines `value` (found at `at`) if it is a path, and whatever paths lie inside it.
fn confine_value(
    value: &mut Value,
    is_path: bool,
    at: &str,
    folder: &ConfinedFolder,
) -> Result<(), String> {
    match value {
        Value::String(requested) if is_path => {
            let confined = folder
                .confine(requested)
                .and_then(|path| {
                    path.into_os_string()
                        .into_string()
                        .map_err(|_| PathRefused::NotUtf8)
                })
                .map_err(|why| {
                    format!(
                        "parameter {at:?} ({requested:?}) is refused: {why}; a path names a file in {}, relative to it",
                        folder.called
                    )
                })?;
            *requested = confined;
        }
        Value::Array(items) => {
            for (index, item) in items.iter_mut().enumerate() {
                confine_value(item, is_path, &format!("{at}[{index}]"), folder)?;
            }
        }
        Value::Object(map) => {
            for (name, item) in map.iter_mut() {
                let nested = is_path || looks_like_path(name);
                confine_value(item, nested, &format!("{at}.{name}"), folder)?;
            }
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use serde_json::json;

    use super::*;

    fn folder() -> (tempfile::TempDir, ConfinedFolder) {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("mine")).unwrap();
        let folder = ConfinedFolder::new(&root.path().join("mine"), "your folder").unwrap();
        (root, folder)
    }

    fn saver() -> AddonTool {
        serde_json::from_value(json!({
            "name": "save", "description": "saves",
            "parameters": [{"name": "target", "type": "file_path", "description": "where"}]
        }))
        .unwrap()
    }

    #[test]
    fn path_names_are_recognised_by_their_last_word() {
        for name in [
            "filepath",
            "path",
            "file_path",
            "output_path",
            "outputPath",
            "imageFile",
            "file_name",
            "filename",
            "directory",
            "export_dir",
            "cache_folder",
        ] {
            assert!(looks_like_path(name), "{name}");
        }
        for name in [
            "file_format",
            "profile",
            "object1_name",
            "side",
            "pathology_score",
            "",
        ] {
            assert!(!looks_like_path(name), "{name}");
        }
    }

    #[test]
    fn paths_stay_in_the_folder() {
        let (_root, folder) = folder();
        let inside = folder.confine("scenes/a.blend").unwrap();
        assert_eq!(inside, folder.path().join("scenes/a.blend"));
        assert_eq!(folder.confine(inside.to_str().unwrap()).unwrap(), inside);
        assert_eq!(
            folder.confine("./b.txt").unwrap(),
            folder.path().join("b.txt")
        );
        assert!(matches!(
            folder.confine("../bob/x"),
            Err(PathRefused::ParentDirectory)
        ));
        assert!(matches!(
            folder.confine("a/../../x"),
            Err(PathRefused::ParentDirectory)
        ));
        assert!(matches!(
            folder.confine("/etc/passwd"),
            Err(PathRefused::Outside(_))
        ));
        assert!(matches!(folder.confine(""), Err(PathRefused::Empty)));
    }

    #[test]
    #[cfg(unix)]
    fn links_out_of_the_folder_are_refused() {
        let (root, folder) = folder();
        let outside = root.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, folder.path().join("out")).unwrap();
        std::os::unix::fs::symlink(outside.join("gone"), folder.path().join("dangling")).unwrap();
        std::os::unix::fs::symlink(folder.path(), folder.path().join("here")).unwrap();
        assert!(matches!(
            folder.confine("out/x.blend"),
            Err(PathRefused::LinkOut(_))
        ));
        assert!(matches!(
            folder.confine("out"),
            Err(PathRefused::LinkOut(_))
        ));
        assert!(matches!(
            folder.confine("dangling"),
            Err(PathRefused::DanglingLink)
        ));
        assert_eq!(folder.confine("here/x").unwrap(), folder.path().join("x"));
    }

    #[test]
    fn declared_and_named_paths_are_rewritten_others_untouched() {
        let (_root, folder) = folder();
        let arguments =
            json!({"target": "a.blend", "output_path": "b.png", "file_format": "PNG", "count": 3});
        let confined = confine_path_arguments(&saver(), arguments, &folder).unwrap();
        let within = |name: &str| folder.path().join(name).to_str().unwrap().to_owned();
        assert_eq!(
            confined,
            json!({"target": within("a.blend"), "output_path": within("b.png"), "file_format": "PNG", "count": 3})
        );
        let refused =
            confine_path_arguments(&saver(), json!({"target": "/tmp/x"}), &folder).unwrap_err();
        assert!(
            refused.contains("\"target\"") && refused.contains("outside your folder"),
            "{refused}"
        );
    }

    #[test]
    fn paths_nested_in_objects_and_arrays_are_confined_too() {
        let (_root, folder) = folder();
        let within = |name: &str| folder.path().join(name).to_str().unwrap().to_owned();
        let arguments = json!({
            "export": {"filepath": "out.glb", "options": {"scale": 2, "label": "/not/a/path"}},
            "layers": [{"image_file": "l0.png"}, {"name": "x"}],
            "target": ["one.blend", {"deeper": "two.blend"}],
        });
        let confined = confine_path_arguments(&saver(), arguments, &folder).unwrap();
        assert_eq!(
            confined,
            json!({
                "export": {"filepath": within("out.glb"), "options": {"scale": 2, "label": "/not/a/path"}},
                "layers": [{"image_file": within("l0.png")}, {"name": "x"}],
                "target": [within("one.blend"), {"deeper": within("two.blend")}],
            })
        );
        for (arguments, at) in [
            (
                json!({"export": {"filepath": "/etc/passwd"}}),
                "export.filepath",
            ),
            (
                json!({"jobs": [{"out": {"dir": "../x"}}]}),
                "jobs[0].out.dir",
            ),
            (
                json!({"target": [{"deeper": "/root/.ssh/id_rsa"}]}),
                "target[0].deeper",
            ),
        ] {
            let refused = confine_path_arguments(&saver(), arguments, &folder).unwrap_err();
            assert!(refused.contains(&format!("{at:?}")), "{refused}");
        }
    }
}
