//! The local docs index (seed 003's "local docs index for retrieval helpers"), read from the
//! Blender a run uses: every node type a Geometry Nodes tree takes, with its label,
//! description, inputs and outputs (names, identifiers, socket types, default values, for
//! the node's default settings) and its settings (enum properties with their items), and the
//! Python API types a Geometry Nodes program uses (`NodeTree`, `Node`, `NodeSocket`,
//! `NodesModifier`, …) with their docstrings, properties and functions.
//!
//! It is built once per Blender version (`python/gn_docs.py`, in pages, since the bridge
//! keeps at most 256 KB of a program's output) and kept as JSON in a cache folder
//! ([`DocsCache`], by default `$XDG_CACHE_HOME/viga/gn-docs/<version>.json`). A file that
//! cannot be read, or one of another format or version, is never trusted: the reason becomes
//! a warning and the index is built again. [`DocsSearch`] ranks it for a query (BM25 over
//! labels, type names, descriptions and socket names, exact names boosted), bounded in hits
//! and characters, and deterministic.

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::{GnBlender, GnError};

mod search;

pub use search::{DocsSearch, SearchAnswer, SearchHit, SearchLimits};

/// The index's file format; a cached file of another format is built again.
pub const DOCS_FORMAT: u32 = 1;
/// Node classes read per bridge call: a page of them stays well under the bridge's 256 KB.
const PAGE: usize = 100;

/// Everything the index knows of one Blender.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DocsIndex {
    pub format: u32,
    /// `bpy.app.version_string`, e.g. `5.0.1`: the cache key.
    pub blender_version: String,
    pub build_hash: String,
    pub nodes: Vec<NodeDoc>,
    pub api_types: Vec<ApiTypeDoc>,
}

/// A node type a Geometry Nodes tree takes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeDoc {
    pub bl_idname: String,
    pub label: String,
    pub description: String,
    pub inputs: Vec<SocketDoc>,
    pub outputs: Vec<SocketDoc>,
    /// The node's own settings (`data_type`, `distribute_method`, …).
    pub properties: Vec<PropertyDoc>,
}

/// A socket of a newly added node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SocketDoc {
    pub name: String,
    pub identifier: String,
    /// The socket's `bl_idname`, e.g. `NodeSocketFloatDistance`.
    pub socket_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// False for a socket the node's default settings hide (another setting shows it).
    #[serde(default = "enabled", skip_serializing_if = "is_enabled")]
    pub enabled: bool,
}

fn enabled() -> bool {
    true
}

fn is_enabled(enabled: &bool) -> bool {
    *enabled
}

/// A node setting.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PropertyDoc {
    pub identifier: String,
    /// RNA's type in lower case: `enum`, `boolean`, `int`, `float`, `pointer`, …
    pub kind: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// An enum's choices.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
}

/// A Python API type a Geometry Nodes program uses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiTypeDoc {
    pub name: String,
    pub base: Option<String>,
    /// The class's docstring.
    pub doc: String,
    pub properties: Vec<MemberDoc>,
    pub functions: Vec<FunctionDoc>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemberDoc {
    pub identifier: String,
    pub kind: String,
    pub description: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FunctionDoc {
    pub identifier: String,
    pub description: String,
    pub parameters: Vec<String>,
}

#[derive(Deserialize)]
struct VersionReply {
    version: String,
    build_hash: String,
}

#[derive(Deserialize)]
struct NodesPage {
    classes: usize,
    nodes: Vec<NodeDoc>,
}

impl DocsIndex {
    /// Reads the whole index from `blender` (its temporary node group is removed again).
    pub async fn build(blender: &GnBlender) -> Result<Self, GnError> {
        let version: VersionReply = blender.call_docs("docs_version", &json!({})).await?;
        let mut nodes = Vec::new();
        let mut start = 0;
        loop {
            let args = json!({"start": start, "count": PAGE});
            let page: NodesPage = blender.call_docs("docs_nodes", &args).await?;
            nodes.extend(page.nodes);
            start += PAGE;
            if start >= page.classes {
                break;
            }
        }
        let api_types = blender.call_docs("docs_api_types", &json!({})).await?;
        Ok(Self {
            format: DOCS_FORMAT,
            blender_version: version.version,
            build_hash: version.build_hash,
            nodes,
            api_types,
        })
    }

    /// The node type named `bl_idname`.
    pub fn node(&self, bl_idname: &str) -> Option<&NodeDoc> {
        self.nodes.iter().find(|node| node.bl_idname == bl_idname)
    }
}

/// Where indexes are kept: one JSON file per Blender version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocsCache {
    dir: PathBuf,
}

/// An index at hand, and how it came to be.
#[derive(Debug, Clone)]
pub struct LoadedDocs {
    pub index: DocsIndex,
    /// The file it is kept in.
    pub file: PathBuf,
    /// Built now (rather than read from the cache).
    pub built: bool,
    /// How long reading or building it took.
    pub took_ms: f64,
    /// What was wrong with the cache (a file that could not be read or kept); the index
    /// itself is sound.
    pub warnings: Vec<String>,
}

impl DocsCache {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// `$XDG_CACHE_HOME/viga/gn-docs`, else `~/.cache/viga/gn-docs` (on Windows
    /// `%LOCALAPPDATA%\viga\gn-docs`); `None` when none of those is an absolute path.
    pub fn default_location() -> Option<Self> {
        viga_io::files::user_cache_dir("gn-docs").map(Self::new)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file of Blender `version` (characters other than letters, digits, `.`, `-` and
    /// `_` become `_`, so a version string cannot leave the folder).
    pub fn file_for(&self, version: &str) -> PathBuf {
        let safe: String = version
            .chars()
            .map(|c| match c {
                'a'..='z' | 'A'..='Z' | '0'..='9' | '.' | '-' | '_' => c,
                _ => '_',
            })
            .collect();
        let safe = safe.trim_start_matches('.');
        self.dir.join(format!(
            "{}.json",
            if safe.is_empty() { "unknown" } else { safe }
        ))
    }

    /// The index of `blender`'s version: read from the cache when a sound file is there,
    /// else built and kept. A file that cannot be read, parsed, or is of another format or
    /// version is a warning, and the index is built again; a file that cannot be written is
    /// a warning too (the index is still used).
    pub async fn load_or_build(&self, blender: &GnBlender) -> Result<LoadedDocs, GnError> {
        let started = Instant::now();
        let version: VersionReply = blender.call_docs("docs_version", &json!({})).await?;
        let file = self.file_for(&version.version);
        let mut warnings = Vec::new();
        match read_cached(&file, &version.version) {
            Ok(Some(index)) => {
                return Ok(LoadedDocs {
                    index,
                    file,
                    built: false,
                    took_ms: started.elapsed().as_secs_f64() * 1000.0,
                    warnings,
                });
            }
            Ok(None) => {}
            Err(why) => warnings.push(format!(
                "the cached docs index {} is not used ({why}); building it again",
                file.display()
            )),
        }
        let index = DocsIndex::build(blender).await?;
        if let Err(err) = self.keep(&file, &index) {
            warnings.push(format!("the docs index was not cached: {err}"));
        }
        Ok(LoadedDocs {
            index,
            file,
            built: true,
            took_ms: started.elapsed().as_secs_f64() * 1000.0,
            warnings,
        })
    }

    fn keep(&self, file: &Path, index: &DocsIndex) -> Result<(), GnError> {
        std::fs::create_dir_all(&self.dir)
            .map_err(|err| GnError::file(&self.dir, format!("cannot create it: {err}")))?;
        let text = serde_json::to_vec(index).map_err(|err| GnError::file(file, err))?;
        crate::recorder::write_whole(file, &text)
    }
}

/// The cached index of `version` in `file`: `Ok(None)` when there is no file, `Err` saying
/// why a file there cannot be trusted.
fn read_cached(file: &Path, version: &str) -> Result<Option<DocsIndex>, String> {
    let bytes = match std::fs::read(file) {
        Ok(bytes) => bytes,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(format!("cannot read it: {err}")),
    };
    let index: DocsIndex =
        serde_json::from_slice(&bytes).map_err(|err| format!("it is not an index: {err}"))?;
    if index.format != DOCS_FORMAT {
        return Err(format!(
            "it is of format {}, this viga writes {DOCS_FORMAT}",
            index.format
        ));
    }
    if index.blender_version != version {
        return Err(format!(
            "it is of Blender {}, not {version}",
            index.blender_version
        ));
    }
    if index.nodes.is_empty() {
        return Err("it lists no node types".to_owned());
    }
    Ok(Some(index))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_string_stays_in_the_folder() {
        let cache = DocsCache::new("/cache");
        assert_eq!(cache.file_for("5.0.1"), PathBuf::from("/cache/5.0.1.json"));
        assert_eq!(
            cache.file_for("../../etc/x"),
            PathBuf::from("/cache/_.._etc_x.json")
        );
        assert_eq!(cache.file_for(""), PathBuf::from("/cache/unknown.json"));
    }

    #[test]
    fn a_corrupt_or_foreign_cache_file_is_not_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("5.0.1.json");
        assert_eq!(read_cached(&file, "5.0.1"), Ok(None));
        std::fs::write(&file, b"{\"format\": 1, \"blender_ver").unwrap();
        assert!(
            read_cached(&file, "5.0.1")
                .unwrap_err()
                .contains("not an index")
        );
        let mut index = search::tests::sample();
        std::fs::write(&file, serde_json::to_vec(&index).unwrap()).unwrap();
        assert_eq!(read_cached(&file, "5.0.1"), Ok(Some(index.clone())));
        assert!(
            read_cached(&file, "4.2.0")
                .unwrap_err()
                .contains("of Blender 5.0.1")
        );
        index.format = 0;
        std::fs::write(&file, serde_json::to_vec(&index).unwrap()).unwrap();
        assert!(
            read_cached(&file, "5.0.1")
                .unwrap_err()
                .contains("format 0")
        );
    }
}
