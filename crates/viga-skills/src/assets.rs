//! Where `get_better_assets` finds assets: a trait for any source, and a local folder of
//! `.blend`/`.glb`/`.gltf` files described by a text index.

use std::path::{Path, PathBuf};

use async_trait::async_trait;

use crate::registry::ToolError;

#[derive(Debug, Clone, PartialEq)]
pub struct AssetHit {
    pub name: String,
    pub path: PathBuf,
    pub description: String,
    /// Share of the query's words the asset's text contains (0..=1).
    pub score: f32,
}

impl AssetHit {
    /// Blender Python that brings the asset into the current scene.
    pub fn import_snippet(&self) -> String {
        let path = self
            .path
            .display()
            .to_string()
            .replace('\\', "\\\\")
            .replace('"', "\\\"");
        match self
            .path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            Some("blend") => format!(
                "with bpy.data.libraries.load(\"{path}\", link=False) as (data_from, data_to):\n    data_to.objects = data_from.objects\nfor obj in data_to.objects:\n    if obj is not None:\n        bpy.context.scene.collection.objects.link(obj)\n"
            ),
            _ => format!("bpy.ops.import_scene.gltf(filepath=\"{path}\")\n"),
        }
    }
}

/// A place assets come from. Remote services (text-to-3D, asset stores) implement this in
/// their own crates.
#[async_trait]
pub trait AssetSource: Send + Sync {
    fn describe(&self) -> String;
    async fn search(&self, query: &str, limit: usize) -> Result<Vec<AssetHit>, ToolError>;
}

#[derive(Debug, Clone)]
struct Entry {
    hit: AssetHit,
    words: Vec<String>,
}

/// A folder of asset files. Each file's text is its name plus, when present, a sidecar
/// `<name>.txt` describing it.
#[derive(Debug, Clone)]
pub struct LocalAssetFolder {
    root: PathBuf,
    entries: Vec<Entry>,
}

const ASSET_EXTENSIONS: [&str; 3] = ["blend", "glb", "gltf"];

impl LocalAssetFolder {
    pub fn open(root: &Path) -> Result<Self, ToolError> {
        let listing = std::fs::read_dir(root).map_err(|err| {
            ToolError::Fatal(format!(
                "asset folder {} cannot be read: {err}",
                root.display()
            ))
        })?;
        let mut entries = Vec::new();
        for item in listing.flatten() {
            let path = item.path();
            let extension = path
                .extension()
                .and_then(|e| e.to_str())
                .map(str::to_ascii_lowercase);
            if !extension.is_some_and(|e| ASSET_EXTENSIONS.contains(&e.as_str())) {
                continue;
            }
            let name = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let description = std::fs::read_to_string(path.with_extension("txt"))
                .unwrap_or_default()
                .trim()
                .to_owned();
            let words = tokens(&format!("{name} {description}"));
            entries.push(Entry {
                hit: AssetHit {
                    name,
                    path,
                    description,
                    score: 0.0,
                },
                words,
            });
        }
        entries.sort_by(|a, b| a.hit.name.cmp(&b.hit.name));
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

fn tokens(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() > 1)
        .map(str::to_lowercase)
        .collect()
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
        let wanted = tokens(query);
        if wanted.is_empty() {
            return Err(ToolError::Recoverable(
                "the asset query has no words; describe the asset you need".to_owned(),
            ));
        }
        let mut hits: Vec<AssetHit> = self
            .entries
            .iter()
            .filter_map(|entry| {
                let matched = wanted.iter().filter(|w| entry.words.contains(w)).count();
                (matched > 0).then(|| AssetHit {
                    score: matched as f32 / wanted.len() as f32,
                    ..entry.hit.clone()
                })
            })
            .collect();
        hits.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| a.name.cmp(&b.name))
        });
        hits.truncate(limit);
        Ok(hits)
    }
}
