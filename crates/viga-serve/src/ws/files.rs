//! The files add-on commands read and write, confined to a folder per user. Without this a
//! client could have its Blender save over, or read, any file the gateway's account can
//! reach, including another user's.
//!
//! A parameter is a path when its add-on's manifest declares it `file_path`, or when its
//! name says so (its last word is `path`, `file`, `filename`, `dir`, `directory` or
//! `folder`: `filepath`, `output_path`, `imageFile`, `file_name`). Its value is resolved
//! under `<files root>/<user>/` and handed to Blender as that absolute path; `..`, an
//! absolute path elsewhere, and links leading out are refused.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::io;
use std::path::{Component, Path, PathBuf};

use serde_json::Value;
use viga_protocol::manifest::{AddonManifest, ParameterType};

use super::credentials::UserName;

/// The files root when none is given: a folder of this name in the gateway's working
/// folder (never the shared temporary folder, which other local users can enter).
pub const DEFAULT_FILES_ROOT: &str = "gateway-files";

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

/// The parameters add-on manifests declare `file_path`, by add-on and command.
#[derive(Debug, Clone, Default)]
pub struct FilePathParameters {
    by_command: HashMap<(String, String), HashSet<String>>,
}

impl FilePathParameters {
    pub fn from_manifests<'a>(manifests: impl IntoIterator<Item = &'a AddonManifest>) -> Self {
        let mut by_command: HashMap<(String, String), HashSet<String>> = HashMap::new();
        for manifest in manifests {
            for tool in &manifest.ai_integration.tools {
                let paths = tool
                    .parameters
                    .iter()
                    .filter(|parameter| parameter.kind == ParameterType::FilePath)
                    .map(|parameter| parameter.name.clone());
                by_command
                    .entry((manifest.addon_info.id.clone(), tool.name.clone()))
                    .or_default()
                    .extend(paths);
            }
        }
        Self { by_command }
    }

    fn declares(&self, addon_id: &str, command: &str, parameter: &str) -> bool {
        self.by_command
            .get(&(addon_id.to_owned(), command.to_owned()))
            .is_some_and(|names| names.contains(parameter))
    }
}

/// Why a path parameter was refused.
#[derive(Debug, thiserror::Error)]
pub enum PathRefused {
    #[error("an empty path names no file")]
    Empty,
    #[error("`..` may not appear in a path")]
    ParentDirectory,
    #[error("it is outside your folder")]
    Outside,
    #[error("it leads out of your folder through a link")]
    LinkOut,
    #[error("it is a link that leads nowhere")]
    DanglingLink,
    #[error("it cannot be checked: {0}")]
    Unreadable(#[source] io::Error),
    #[error("the gateway's files root is not valid UTF-8, so Blender cannot be given the path")]
    NotUtf8,
}

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
    /// Absolute and free of links, so a resolved path is checked by its prefix.
    path: PathBuf,
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
        let path = std::fs::canonicalize(&path)?;
        if path.parent() != Some(files_root) {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("the folder of {user} leads out of the files root (a link?)"),
            ));
        }
        Ok(Self { path })
    }

    /// Where `requested` (relative to the folder, or absolute inside it) is, refusing
    /// anything that ends up outside. The file itself need not exist yet.
    pub(crate) fn confine(&self, requested: &str) -> Result<PathBuf, PathRefused> {
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
                return Err(PathRefused::Outside);
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
                        return Err(PathRefused::Outside);
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
            return Err(PathRefused::LinkOut);
        }
        Ok(missing
            .iter()
            .rev()
            .fold(real, |path, name| path.join(name)))
    }
}

/// `params` with every path parameter resolved in `folder` (see the module's notes), or
/// why one was refused. Values that are not strings are left to the command's schema.
pub(crate) fn confine_parameters(
    params: Value,
    addon_id: &str,
    command: &str,
    declared: &FilePathParameters,
    folder: &UserFolder,
) -> Result<Value, String> {
    let Value::Object(mut map) = params else {
        return Ok(params);
    };
    for (name, value) in &mut map {
        let is_path = declared.declares(addon_id, command, name) || looks_like_path(name);
        let Value::String(requested) = value else {
            continue;
        };
        if !is_path {
            continue;
        }
        let confined = folder
            .confine(requested)
            .and_then(|path| {
                path.into_os_string()
                    .into_string()
                    .map_err(|_| PathRefused::NotUtf8)
            })
            .map_err(|why| {
                format!(
                    "parameter {name:?} ({requested:?}) is refused: {why}; a path names a file in your own folder, relative to it"
                )
            })?;
        *value = Value::String(confined);
    }
    Ok(Value::Object(map))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use serde_json::json;

    use super::*;

    fn folder() -> (tempfile::TempDir, UserFolder) {
        let root = tempfile::tempdir().unwrap();
        let prepared = prepare_files_root(&root.path().join("files")).unwrap();
        let folder = UserFolder::create(&prepared, &UserName::parse("alice").unwrap()).unwrap();
        (root, folder)
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
    fn paths_stay_in_the_users_folder() {
        let (_root, folder) = folder();
        let inside = folder.confine("scenes/a.blend").unwrap();
        assert_eq!(inside, folder.path.join("scenes/a.blend"));
        assert_eq!(folder.confine(inside.to_str().unwrap()).unwrap(), inside);
        assert_eq!(
            folder.confine("./b.txt").unwrap(),
            folder.path.join("b.txt")
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
            Err(PathRefused::Outside)
        ));
        assert!(matches!(folder.confine(""), Err(PathRefused::Empty)));
    }

    #[test]
    #[cfg(unix)]
    fn links_out_of_the_folder_are_refused() {
        let (root, folder) = folder();
        let outside = root.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, folder.path.join("out")).unwrap();
        std::os::unix::fs::symlink(outside.join("gone"), folder.path.join("dangling")).unwrap();
        std::os::unix::fs::symlink(&folder.path, folder.path.join("here")).unwrap();
        assert!(matches!(
            folder.confine("out/x.blend"),
            Err(PathRefused::LinkOut)
        ));
        assert!(matches!(folder.confine("out"), Err(PathRefused::LinkOut)));
        assert!(matches!(
            folder.confine("dangling"),
            Err(PathRefused::DanglingLink)
        ));
        assert_eq!(folder.confine("here/x").unwrap(), folder.path.join("x"));
    }

    #[test]
    fn declared_and_named_paths_are_rewritten_others_untouched() {
        let (_root, folder) = folder();
        let manifest: AddonManifest = serde_json::from_value(json!({
            "addon_info": {"id": "saver", "name": "Saver"},
            "ai_integration": {"agent_description": "saves", "tools": [{
                "name": "save", "description": "saves",
                "parameters": [{"name": "target", "type": "file_path", "description": "where"}]
            }]}
        }))
        .unwrap();
        let declared = FilePathParameters::from_manifests([&manifest]);
        let params =
            json!({"target": "a.blend", "output_path": "b.png", "file_format": "PNG", "count": 3});
        let confined = confine_parameters(params, "saver", "save", &declared, &folder).unwrap();
        let within = |name: &str| folder.path.join(name).to_str().unwrap().to_owned();
        assert_eq!(
            confined,
            json!({"target": within("a.blend"), "output_path": within("b.png"), "file_format": "PNG", "count": 3})
        );
        let refused = confine_parameters(
            json!({"target": "/tmp/x"}),
            "saver",
            "save",
            &declared,
            &folder,
        )
        .unwrap_err();
        assert!(
            refused.contains("\"target\"") && refused.contains("outside your folder"),
            "{refused}"
        );
    }
}
