//! Where `get_better_assets` finds assets: a trait for any source, a local folder of asset
//! files (`.blend`, `.glb`, `.gltf`, `.fbx`, `.obj`) described by text sidecars, Poly Haven
//! ([`crate::polyhaven`]), and [`AssetSources`], which asks several at once.
//!
//! Every source ranks by the same text match ([`query_words`], [`match_score`]): the share of
//! the query's words an asset's text contains. Every hit imports through one snippet of
//! Blender Python ([`AssetHit::import_snippet`]) whose file path is a Python string literal
//! escaped for any path.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;

use crate::polyhaven::{PolyHaven, PolyHavenConfig};
use crate::registry::ToolError;

#[derive(Debug, Clone, PartialEq)]
pub struct AssetHit {
    pub name: String,
    pub path: PathBuf,
    pub description: String,
    /// Share of the query's words the asset's text contains (0..=1).
    pub score: f32,
}

/// The file formats an asset can come in, each with its Blender importer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AssetFormat {
    /// Appended with `bpy.data.libraries.load`: every object of the file.
    Blend,
    Glb,
    Gltf,
    Fbx,
    Obj,
}

impl AssetFormat {
    pub const ALL: [AssetFormat; 5] = [Self::Blend, Self::Glb, Self::Gltf, Self::Fbx, Self::Obj];

    /// The format a file's extension names (any case), if viga can import it.
    pub fn of_path(path: &Path) -> Option<Self> {
        let extension = path.extension()?.to_str()?.to_ascii_lowercase();
        Self::ALL
            .into_iter()
            .find(|format| format.extension() == extension)
    }

    pub fn extension(self) -> &'static str {
        match self {
            Self::Blend => "blend",
            Self::Glb => "glb",
            Self::Gltf => "gltf",
            Self::Fbx => "fbx",
            Self::Obj => "obj",
        }
    }
}

/// `text` as a Python `str` literal: a JSON string is one (`"`, `\`, control characters and
/// line breaks are escaped; everything else is kept as UTF-8, which Python source is).
pub fn python_string(text: &str) -> String {
    serde_json::Value::String(text.to_owned()).to_string()
}

impl AssetHit {
    pub fn format(&self) -> Option<AssetFormat> {
        AssetFormat::of_path(&self.path)
    }

    /// Blender Python that brings the asset into the current scene and leaves the new objects
    /// in the list `imported`. The path is a Python string literal, so any file name
    /// (quotes, backslashes, line breaks) is safe.
    pub fn import_snippet(&self) -> String {
        let path = python_string(&self.path.to_string_lossy());
        let operator = match self.format() {
            Some(AssetFormat::Blend) => {
                return format!(
                    "import bpy\nwith bpy.data.libraries.load({path}, link=False) as (data_from, data_to):\n    data_to.objects = data_from.objects\nimported = [obj for obj in data_to.objects if obj is not None]\nfor obj in imported:\n    bpy.context.scene.collection.objects.link(obj)\n"
                );
            }
            Some(AssetFormat::Glb | AssetFormat::Gltf) => "bpy.ops.import_scene.gltf",
            Some(AssetFormat::Fbx) => "bpy.ops.import_scene.fbx",
            Some(AssetFormat::Obj) => "bpy.ops.wm.obj_import",
            None => {
                return format!(
                    "raise RuntimeError(\"viga cannot import \" + {path} + \": not a .blend, .glb, .gltf, .fbx or .obj file\")\n"
                );
            }
        };
        format!(
            "import bpy\nviga_objects_before = set(bpy.data.objects.keys())\n{operator}(filepath={path})\nimported = [obj for obj in bpy.data.objects if obj.name not in viga_objects_before]\n"
        )
    }
}

/// A place assets come from. Remote services (text-to-3D, asset stores) implement this in
/// their own crates.
#[async_trait]
pub trait AssetSource: Send + Sync {
    fn describe(&self) -> String;
    async fn search(&self, query: &str, limit: usize) -> Result<Vec<AssetHit>, ToolError>;
}

/// Words that say nothing about which asset is meant.
const STOP_WORDS: [&str; 14] = [
    "an", "and", "for", "in", "of", "on", "or", "some", "the", "to", "with", "my", "at", "by",
];

/// The words of `text` as the ranking compares them: lower case, letters and digits, at least
/// two characters, stop words dropped, a plural `-s`/`-ies` taken off, and camel case also
/// split (`ArmChair` gives `armchair`, `arm` and `chair`).
pub fn text_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    for raw in text.split(|c: char| !c.is_alphanumeric()) {
        push_word(&mut words, raw);
        let parts = camel_parts(raw);
        if parts.len() > 1 {
            for part in parts {
                push_word(&mut words, part);
            }
        }
    }
    words
}

/// A query's words, each once.
pub fn query_words(query: &str) -> Vec<String> {
    let mut seen = HashSet::new();
    // Camel case parts of a query would count a word twice; a query is plain words.
    query
        .split(|c: char| !c.is_alphanumeric())
        .filter_map(normal_word)
        .filter(|word| seen.insert(word.clone()))
        .collect()
}

fn push_word(words: &mut Vec<String>, raw: &str) {
    if let Some(word) = normal_word(raw) {
        words.push(word);
    }
}

fn normal_word(raw: &str) -> Option<String> {
    let word = raw.to_lowercase();
    if word.chars().count() < 2 || STOP_WORDS.contains(&word.as_str()) {
        return None;
    }
    Some(singular(word))
}

fn singular(word: String) -> String {
    if word.len() > 4
        && let Some(stem) = word.strip_suffix("ies")
    {
        return format!("{stem}y");
    }
    if word.len() > 3 && word.ends_with('s') && !word.ends_with("ss") && !word.ends_with("us") {
        let mut word = word;
        word.pop();
        return word;
    }
    word
}

/// `ArmChair01` → `Arm`, `Chair01`; a word without an inner capital is one part.
fn camel_parts(raw: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut previous_lower = false;
    for (index, c) in raw.char_indices() {
        if c.is_uppercase() && previous_lower {
            parts.push(&raw[start..index]);
            start = index;
        }
        previous_lower = c.is_lowercase() || c.is_ascii_digit();
    }
    parts.push(&raw[start..]);
    parts
}

/// How well `words` (an asset's text) match `wanted` (from [`query_words`]): the share of
/// the wanted words present, and how many that is.
pub fn match_score(wanted: &[String], words: &[String]) -> (f32, usize) {
    if wanted.is_empty() {
        return (0.0, 0);
    }
    let matched = wanted.iter().filter(|w| words.contains(w)).count();
    (matched as f32 / wanted.len() as f32, matched)
}

/// The query's words, or the error that tells the model to say what it needs.
pub(crate) fn wanted_words(query: &str) -> Result<Vec<String>, ToolError> {
    let wanted = query_words(query);
    if wanted.is_empty() {
        return Err(ToolError::Recoverable(
            "the asset query has no words; describe the asset you need (\"wooden chair\")"
                .to_owned(),
        ));
    }
    Ok(wanted)
}

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
        let mut entries = Vec::new();
        let mut seen_folders = HashSet::new();
        if let Ok(real) = root.canonicalize() {
            seen_folders.insert(real);
        }
        let mut pending = vec![(root.to_path_buf(), 0usize, Some(listing))];
        let mut looked_at = 0usize;
        let mut truncated = false;
        while let Some((folder, depth, listing)) = pending.pop() {
            let listing = match listing.map_or_else(|| std::fs::read_dir(&folder), Ok) {
                Ok(listing) => listing,
                Err(err) => {
                    tracing::warn!(folder = %folder.display(), %err, "asset subfolder skipped: it cannot be read");
                    continue;
                }
            };
            let mut items: Vec<PathBuf> = listing.flatten().map(|item| item.path()).collect();
            items.sort();
            // Subfolders are pushed in reverse, so they are scanned in name order.
            let mut subfolders = Vec::new();
            for path in items {
                looked_at += 1;
                if looked_at > MAX_FOLDER_ENTRIES || entries.len() >= MAX_FOLDER_ASSETS {
                    truncated = true;
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
                            .is_ok_and(|real| seen_folders.insert(real))
                    {
                        subfolders.push(path);
                    }
                    continue;
                }
                if let Some(entry) = index_file(root, &path) {
                    entries.push(entry);
                }
            }
            if truncated {
                break;
            }
            for subfolder in subfolders.into_iter().rev() {
                pending.push((subfolder, depth + 1, None));
            }
        }
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
    let (json_description, tags) = read_json_sidecar(&path.with_extension("json"));
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

/// A `<name>.json` sidecar's description and tags; an unreadable one is left out.
fn read_json_sidecar(path: &Path) -> (String, Vec<String>) {
    let Some(text) = read_sidecar(path) else {
        return Default::default();
    };
    let value: serde_json::Value = match serde_json::from_str(&text) {
        Ok(value) => value,
        Err(err) => {
            tracing::warn!(sidecar = %path.display(), %err, "asset sidecar ignored: not JSON");
            return Default::default();
        }
    };
    let description = value
        .get("description")
        .and_then(|d| d.as_str())
        .unwrap_or_default()
        .to_owned();
    let tags = value
        .get("tags")
        .and_then(|t| t.as_array())
        .into_iter()
        .flatten()
        .filter_map(|tag| tag.as_str().map(str::to_owned))
        .collect();
    (description, tags)
}

#[async_trait]
impl AssetSource for LocalAssetFolder {
    fn describe(&self) -> String {
        format!(
            "local asset folder {} ({} assets)",
            self.root.display(),
            self.entries.len()
        )
    }

    async fn search(&self, query: &str, limit: usize) -> Result<Vec<AssetHit>, ToolError> {
        let wanted = wanted_words(query)?;
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
            .take(limit)
            .map(|(_, entry, score)| AssetHit {
                score,
                ..entry.hit.clone()
            })
            .collect())
    }
}

/// Several sources asked as one: every source is searched, and the hits merged by score (a
/// tie keeps the sources' order). A source that fails is reported only when no source found
/// anything, so a local folder still answers while Poly Haven is unreachable.
#[derive(Clone)]
pub struct AssetSources {
    sources: Vec<Arc<dyn AssetSource>>,
}

impl std::fmt::Debug for AssetSources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.sources.iter().map(|source| source.describe()))
            .finish()
    }
}

impl AssetSources {
    pub fn new(sources: Vec<Arc<dyn AssetSource>>) -> Self {
        Self { sources }
    }

    pub fn len(&self) -> usize {
        self.sources.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sources.is_empty()
    }
}

#[async_trait]
impl AssetSource for AssetSources {
    fn describe(&self) -> String {
        match self.sources.as_slice() {
            [] => "no asset source".to_owned(),
            sources => sources
                .iter()
                .map(|source| source.describe())
                .collect::<Vec<_>>()
                .join(" and "),
        }
    }

    async fn search(&self, query: &str, limit: usize) -> Result<Vec<AssetHit>, ToolError> {
        wanted_words(query)?;
        let mut hits = Vec::new();
        let mut failures = Vec::new();
        for source in &self.sources {
            match source.search(query, limit).await {
                Ok(found) => hits.extend(found),
                Err(ToolError::Fatal(message)) => return Err(ToolError::Fatal(message)),
                Err(ToolError::Recoverable(message)) => {
                    tracing::warn!(source = %source.describe(), %message, "an asset source failed");
                    failures.push(message);
                }
            }
        }
        if hits.is_empty() && !failures.is_empty() {
            return Err(ToolError::Recoverable(failures.join("\n")));
        }
        // A stable sort: equal scores keep the sources' order.
        hits.sort_by(|a, b| b.score.total_cmp(&a.score));
        hits.truncate(limit);
        Ok(hits)
    }
}

/// The asset sources a run was configured with (`--assets DIR`, `--polyhaven`, or the run
/// config): `None` when there is none, the one source when there is one, and
/// [`AssetSources`] over the local folder first and Poly Haven second when there are both.
/// Nothing is downloaded here; Poly Haven is first asked on the first search.
pub fn open_asset_sources(
    local: Option<&Path>,
    polyhaven: Option<PolyHavenConfig>,
) -> Result<Option<Arc<dyn AssetSource>>, ToolError> {
    let mut sources: Vec<Arc<dyn AssetSource>> = Vec::new();
    if let Some(folder) = local {
        sources.push(Arc::new(LocalAssetFolder::open(folder)?));
    }
    if let Some(config) = polyhaven {
        sources.push(Arc::new(PolyHaven::new(config)?));
    }
    Ok(match sources.len() {
        0 => None,
        1 => sources.pop(),
        _ => Some(Arc::new(AssetSources::new(sources))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_normalised_the_same_on_both_sides() {
        assert_eq!(
            text_words("ArmChair_01 with leather cushions"),
            ["armchair", "arm", "chair", "01", "leather", "cushion"]
        );
        assert_eq!(
            query_words("the Chairs, chairs and a lamp"),
            ["chair", "lamp"]
        );
        assert_eq!(query_words("glass bus berries"), ["glass", "bus", "berry"]);
        assert!(query_words(" - a the ").is_empty());
    }

    #[test]
    fn scores_are_the_share_of_the_query_found() {
        let wanted = query_words("red wooden chair");
        let (score, matched) = match_score(&wanted, &text_words("oak chair, wooden"));
        assert_eq!(matched, 2);
        assert!((score - 2.0 / 3.0).abs() < 1e-6);
    }

    #[test]
    fn python_strings_escape_everything_python_would_misread() {
        assert_eq!(python_string("a\"b\\c\nd'e ü"), "\"a\\\"b\\\\c\\nd'e ü\"");
        assert_eq!(python_string("\u{0}\r\t"), "\"\\u0000\\r\\t\"");
    }
}
