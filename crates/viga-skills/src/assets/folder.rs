//! The local asset library: a folder of asset files and their text sidecars, indexed once
//! within fixed bounds (depth, files, entries, sidecar size) and searched by the text match.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use async_trait::async_trait;

use crate::registry::ToolError;

use super::words::{match_score, text_words, wanted_words};
use super::{AssetFormat, AssetHit, AssetOrigin, AssetRequest, AssetSource};

#[derive(Debug, Clone)]
struct Entry {
    hit: AssetHit,
    format: AssetFormat,
    /// Everything the asset is matched on: its path's words, its sidecars' text and tags.
    words: Vec<String>,
    /// The file name's and the tags' words, which break ties between equal scores.
    name_words: Vec<String>,
}

/// How deep [`LocalAssetFolder::open`] goes below the root.
pub const MAX_FOLDER_DEPTH: usize = 8;
/// How many assets one folder indexes at most; the rest is left out with a warning.
pub const MAX_FOLDER_ASSETS: usize = 10_000;
/// How many folder entries one scan looks at at most.
const MAX_FOLDER_ENTRIES: usize = 200_000;
/// How much of a sidecar is read.
const MAX_SIDECAR_BYTES: u64 = 64 << 10;

/// A folder of asset files (`.blend`, `.glb`, `.gltf`, `.fbx`, `.obj`), searched down to
/// [`MAX_FOLDER_DEPTH`] levels of subfolders (hidden ones skipped, each real folder once).
/// Each file is matched on its path below the root and its sidecars next to it: `<name>.txt`
/// (a description) and `<name>.json` (`{"description": "...", "tags": ["..."]}`). A hit's
/// name is its path below the root without the extension (`furniture/oak_chair`). Files
/// Blender could not open are left out: paths that are not UTF-8, and outside Windows paths
/// with a backslash (Blender reads it as a separator).
#[derive(Debug, Clone)]
pub struct LocalAssetFolder {
    root: PathBuf,
    entries: Vec<Entry>,
}

impl LocalAssetFolder {
    pub fn open(root: &Path) -> Result<Self, ToolError> {
        if blender_cannot_open(root) {
            return Err(ToolError::Fatal(format!(
                "asset folder {} has a backslash in its path, which Blender reads as a folder separator, so it could open none of its files; rename the folder",
                root.display()
            )));
        }
        let listing = std::fs::read_dir(root).map_err(|err| {
            ToolError::Fatal(format!(
                "asset folder {} cannot be read: {err}; check the --assets path",
                root.display()
            ))
        })?;
        let FolderWalk {
            mut entries,
            truncated,
            ..
        } = FolderWalk::walk(root, listing);
        if truncated {
            tracing::warn!(
                root = %root.display(),
                indexed = entries.len(),
                "the asset folder is larger than viga indexes ({MAX_FOLDER_ASSETS} assets, {MAX_FOLDER_ENTRIES} entries); the rest is left out"
            );
        }
        entries.sort_by(|a, b| {
            a.hit
                .name
                .cmp(&b.hit.name)
                .then(a.format.cmp(&b.format))
                .then_with(|| a.hit.path.cmp(&b.hit.path))
        });
        Ok(Self {
            root: root.to_path_buf(),
            entries,
        })
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// A walk down an asset folder, depth first with each folder's entries in name order,
/// bounded by [`MAX_FOLDER_DEPTH`], [`MAX_FOLDER_ENTRIES`] and [`MAX_FOLDER_ASSETS`].
struct FolderWalk<'a> {
    root: &'a Path,
    entries: Vec<Entry>,
    /// The real paths of the folders taken so far: a folder reached again through a link
    /// is walked once.
    seen_folders: HashSet<PathBuf>,
    looked_at: usize,
    /// Whether a bound stopped the walk before its end.
    truncated: bool,
}

impl<'a> FolderWalk<'a> {
    /// Walks down from `root`, whose `listing` is already open.
    fn walk(root: &'a Path, listing: std::fs::ReadDir) -> Self {
        let mut walk = Self {
            root,
            entries: Vec::new(),
            seen_folders: HashSet::new(),
            looked_at: 0,
            truncated: false,
        };
        if let Ok(real) = root.canonicalize() {
            walk.seen_folders.insert(real);
        }
        let mut pending = vec![(root.to_path_buf(), 0usize, Some(listing))];
        while let Some((folder, depth, listing)) = pending.pop() {
            let listing = match listing.map_or_else(|| std::fs::read_dir(&folder), Ok) {
                Ok(listing) => listing,
                Err(err) => {
                    tracing::warn!(folder = %folder.display(), %err, "asset subfolder skipped: it cannot be read");
                    continue;
                }
            };
            let subfolders = walk.index_folder(listing, depth);
            if walk.truncated {
                break;
            }
            // Subfolders are pushed in reverse, so they are walked in name order.
            for subfolder in subfolders.into_iter().rev() {
                pending.push((subfolder, depth + 1, None));
            }
        }
        walk
    }

    /// Indexes the asset files of one folder, `depth` levels below the root, in name
    /// order; returns its subfolders still to walk, hidden ones and those too deep or
    /// walked before left out.
    fn index_folder(&mut self, listing: std::fs::ReadDir, depth: usize) -> Vec<PathBuf> {
        let mut items: Vec<PathBuf> = listing.flatten().map(|item| item.path()).collect();
        items.sort();
        let mut subfolders = Vec::new();
        for path in items {
            self.looked_at += 1;
            if self.looked_at > MAX_FOLDER_ENTRIES || self.entries.len() >= MAX_FOLDER_ASSETS {
                self.truncated = true;
                break;
            }
            let hidden = path
                .file_name()
                .is_some_and(|name| name.to_string_lossy().starts_with('.'));
            if hidden {
                continue;
            }
            if path.is_dir() {
                if depth < MAX_FOLDER_DEPTH
                    && path
                        .canonicalize()
                        .is_ok_and(|real| self.seen_folders.insert(real))
                {
                    subfolders.push(path);
                }
                continue;
            }
            if let Some(entry) = index_file(self.root, &path) {
                self.entries.push(entry);
            }
        }
        subfolders
    }
}

/// One asset file's entry, or `None` for a file that is no asset (or has a name Python
/// could not be handed: not UTF-8).
fn index_file(root: &Path, path: &Path) -> Option<Entry> {
    let format = AssetFormat::of_path(path)?;
    if path.to_str().is_none() {
        tracing::warn!(path = %path.display(), "asset skipped: its path is not UTF-8");
        return None;
    }
    if blender_cannot_open(path) {
        tracing::warn!(path = %path.display(), "asset skipped: Blender reads the backslash in its path as a folder separator; rename it");
        return None;
    }
    let relative = path.strip_prefix(root).unwrap_or(path).with_extension("");
    let name = relative
        .components()
        .map(|part| part.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/");
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let text = read_sidecar(&path.with_extension("txt")).unwrap_or_default();
    let sidecar = read_json_sidecar(&path.with_extension("json"));
    let (json_description, tags) = (sidecar.description, sidecar.tags);
    let description = [text.trim(), json_description.trim()]
        .into_iter()
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let tags = tags.join(" ");
    let words = text_words(&format!("{name} {description} {tags}"));
    let name_words = text_words(&format!("{stem} {tags}"));
    Some(Entry {
        hit: AssetHit {
            name,
            path: path.to_path_buf(),
            description,
            score: 0.0,
            origin: AssetOrigin::Local,
            licence: sidecar.licence,
            generation: None,
        },
        format,
        words,
        name_words,
    })
}

/// Blender turns a backslash in a file path into a folder separator on every platform, so
/// outside Windows (where it is one) such a path names a file Blender cannot open.
fn blender_cannot_open(path: &Path) -> bool {
    cfg!(not(windows)) && path.to_string_lossy().contains('\\')
}

fn read_sidecar(path: &Path) -> Option<String> {
    use std::io::Read as _;
    let file = std::fs::File::open(path).ok()?;
    let mut bytes = Vec::new();
    file.take(MAX_SIDECAR_BYTES).read_to_end(&mut bytes).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// What a `<name>.json` sidecar says.
#[derive(Debug, Default)]
struct JsonSidecar {
    description: String,
    tags: Vec<String>,
    licence: Option<String>,
}

/// A `<name>.json` sidecar's description, tags and licence (`licence` or `license`); an
/// unreadable one is left out.
fn read_json_sidecar(path: &Path) -> JsonSidecar {
    let Some(text) = read_sidecar(path) else {
        return JsonSidecar::default();
    };
    let value: serde_json::Value = match serde_json::from_str(&text) {
        Ok(value) => value,
        Err(err) => {
            tracing::warn!(sidecar = %path.display(), %err, "asset sidecar ignored: not JSON");
            return JsonSidecar::default();
        }
    };
    let text_of = |key: &str| value.get(key).and_then(|v| v.as_str()).map(str::to_owned);
    JsonSidecar {
        description: text_of("description").unwrap_or_default(),
        tags: value
            .get("tags")
            .and_then(|t| t.as_array())
            .into_iter()
            .flatten()
            .filter_map(|tag| tag.as_str().map(str::to_owned))
            .collect(),
        licence: text_of("licence")
            .or_else(|| text_of("license"))
            .map(|licence| licence.trim().chars().take(MAX_LICENCE_CHARS).collect())
            .filter(|licence: &String| !licence.is_empty()),
    }
}

/// The longest licence text a sidecar may give.
const MAX_LICENCE_CHARS: usize = 120;

#[async_trait]
impl AssetSource for LocalAssetFolder {
    fn describe(&self) -> String {
        format!(
            "local asset folder {} ({} assets)",
            self.root.display(),
            self.entries.len()
        )
    }

    async fn find(&self, request: &AssetRequest) -> Result<Vec<AssetHit>, ToolError> {
        let wanted = wanted_words(&request.query)?;
        let mut ranked: Vec<(usize, &Entry, f32)> = self
            .entries
            .iter()
            .filter_map(|entry| {
                let (score, matched) = match_score(&wanted, &entry.words);
                let (_, in_name) = match_score(&wanted, &entry.name_words);
                (matched > 0).then_some((in_name, entry, score))
            })
            .collect();
        // Best score first; then more of the query in the file name or tags; then the order
        // of `entries` (name, format, path), so equal hits always come in the same order.
        ranked.sort_by(|(a_name, _, a), (b_name, _, b)| {
            b.total_cmp(a).then_with(|| b_name.cmp(a_name))
        });
        Ok(ranked
            .into_iter()
            .take(request.limit)
            .map(|(_, entry, score)| AssetHit {
                score,
                ..entry.hit.clone()
            })
            .collect())
    }
}
