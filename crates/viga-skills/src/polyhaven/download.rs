//! Downloading one Poly Haven model: its file list, the `.gltf` at the chosen resolution and
//! every file it includes, each URL and path checked before anything is fetched, written into
//! a private partial folder and moved into the cache whole.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use reqwest::Url;
use serde::Deserialize;
use serde_json::Value;
use viga_io::files::PartialFolder;

use super::PolyHaven;
use super::cache::{STALE_PARTIAL, read_fallback_note, remove_stale_partials};
use super::listing::{Model, is_plain_token};
use crate::http::bytes_text;
use crate::names;
use crate::registry::ToolError;

/// One file of a model's file list.
#[derive(Debug, Deserialize)]
struct RawFile {
    url: String,
    #[serde(default)]
    size: Option<u64>,
    #[serde(default)]
    include: BTreeMap<String, RawFile>,
}

/// A file to download: where from, where to (relative to the model's folder), how big.
#[derive(Debug)]
struct Download {
    url: Url,
    relative: PathBuf,
    size: Option<u64>,
}

/// The largest file list of one model read.
const MAX_FILES_JSON_BYTES: u64 = 8 << 20;

/// Where one model's files are in the cache: `<cache>/<id>/<resolution>-<files hash>/`
/// holding `<id>_<resolution>.gltf` and its includes, and beside it the note of the
/// resolution the model came at when Poly Haven does not offer the one asked for.
struct CachedModel<'a> {
    id: &'a str,
    /// `<cache>/<id>`: each resolution's folder, the fallback notes and partial downloads.
    root: PathBuf,
    files_hash: &'a str,
}

impl<'a> CachedModel<'a> {
    fn new(cache: &Path, model: &'a Model) -> Self {
        Self {
            id: &model.id,
            root: cache.join(&model.id),
            files_hash: model.files_hash.as_deref().unwrap_or("latest"),
        }
    }

    fn folder(&self, resolution: &str) -> PathBuf {
        self.root.join(format!("{resolution}-{}", self.files_hash))
    }

    fn gltf_name(&self, resolution: &str) -> String {
        format!("{}_{resolution}.gltf", self.id)
    }

    fn gltf(&self, resolution: &str) -> PathBuf {
        self.folder(resolution).join(self.gltf_name(resolution))
    }

    fn fallback_note(&self, resolution: &str) -> PathBuf {
        self.root
            .join(format!("{resolution}-{}.fallback", self.files_hash))
    }

    /// The `.gltf` the cache holds for `resolution`: at that resolution, or at the one
    /// noted as its fallback.
    fn cached(&self, resolution: &str) -> Option<PathBuf> {
        let cached = self.gltf(resolution);
        if cached.is_file() {
            return Some(cached);
        }
        let chosen = read_fallback_note(&self.fallback_note(resolution))?;
        let cached = self.gltf(&chosen);
        cached.is_file().then_some(cached)
    }

    /// Notes that the model asked for at `resolution` came at `chosen`, so the next search
    /// finds it in the cache without asking for its file list.
    fn note_fallback(&self, resolution: &str, chosen: &str) {
        let note = self.fallback_note(resolution);
        if chosen != resolution
            && let Err(err) = viga_io::files::write_atomic(&note, chosen.as_bytes())
        {
            tracing::warn!(note = %note.display(), %err, "the resolution a Poly Haven model came at cannot be noted; its file list will be asked for again");
        }
    }
}

impl PolyHaven {
    /// The model's cached `.gltf`, downloaded first unless it is in the cache already.
    pub(super) async fn fetch_model(&self, model: &Model) -> Result<PathBuf, ToolError> {
        let resolution = &self.config.resolution;
        let cached = CachedModel::new(&self.cache, model);
        if let Some(gltf_path) = cached.cached(resolution) {
            return Ok(gltf_path);
        }
        let (chosen, gltf) = self.choose_from_file_list(model, resolution).await?;
        let gltf_path = cached.gltf(&chosen);
        if !gltf_path.is_file() {
            let downloads = self
                .plan(&cached.gltf_name(&chosen), gltf)
                .map_err(|why| self.refused(model, why))?;
            self.download_into_cache(model, &cached, &chosen, &downloads)
                .await?;
        }
        cached.note_fallback(resolution, &chosen);
        Ok(gltf_path)
    }

    /// Asks for the model's file list and chooses its `.gltf` in it: at `resolution`, or
    /// at the resolution offered instead, which must be a plain name (it names a folder).
    async fn choose_from_file_list(
        &self,
        model: &Model,
        resolution: &str,
    ) -> Result<(String, RawFile), ToolError> {
        let url = self.endpoint(&["files", &model.id], None);
        let body = self
            .http
            .get_bytes(
                &url,
                MAX_FILES_JSON_BYTES,
                self.config.request_timeout,
                "the model's file list",
            )
            .await?;
        let files: Value = serde_json::from_slice(&body).map_err(|err| {
            self.refused(
                model,
                format!("its file list from {url} is not JSON ({err})"),
            )
        })?;
        let (chosen, gltf) =
            choose_gltf(&files, resolution).map_err(|why| self.refused(model, why.to_owned()))?;
        if !is_plain_token(&chosen, 16) {
            return Err(self.refused(
                model,
                format!("its file list names the resolution {chosen:?}, which is no plain name"),
            ));
        }
        Ok((chosen, gltf))
    }

    /// Downloads the planned files into a partial folder, checks what the `.gltf` refers
    /// to, and moves the folder into the cache at `chosen` whole; a partial folder that
    /// fails is removed (dropped unpublished).
    async fn download_into_cache(
        &self,
        model: &Model,
        cached: &CachedModel<'_>,
        chosen: &str,
        downloads: &[Download],
    ) -> Result<(), ToolError> {
        let partial = self.new_partial_folder(cached, chosen)?;
        self.download_all(downloads, partial.path()).await?;
        check_references(partial.path(), downloads).map_err(|why| self.refused(model, why))?;
        let final_folder = cached.folder(chosen);
        if let Err(err) = partial.publish() {
            // Another search (or viga) finished the same download first.
            if cached.gltf(chosen).is_file() {
                return Ok(());
            }
            return Err(ToolError::Recoverable(format!(
                "the Poly Haven model {} could not be moved into the cache at {}: {err}",
                model.id,
                final_folder.display()
            )));
        }
        Ok(())
    }

    /// A partial folder of this call's own for a download at `chosen`, beside its place in
    /// the model's cache folder (made if needed), once the partial folders of downloads that
    /// were killed are removed from it.
    fn new_partial_folder(
        &self,
        cached: &CachedModel<'_>,
        chosen: &str,
    ) -> Result<PartialFolder, ToolError> {
        let unwritable = |err: std::io::Error| {
            ToolError::Recoverable(format!(
                "the Poly Haven cache folder {} cannot be written: {err}",
                cached.root.display()
            ))
        };
        std::fs::create_dir_all(&cached.root).map_err(unwritable)?;
        // A live download writes at least every `idle_timeout` (a file's headers may take
        // up to `download_timeout`), so it is never taken for a killed one.
        let stale_after = STALE_PARTIAL
            .max(self.config.idle_timeout)
            .max(self.config.download_timeout);
        remove_stale_partials(&cached.root, stale_after);
        PartialFolder::create(&cached.folder(chosen)).map_err(unwritable)
    }

    /// Every file of the model, checked before anything is downloaded: URLs on allowed
    /// hosts, include paths inside the model's folder, sizes within the limits.
    fn plan(&self, gltf_name: &str, gltf: RawFile) -> Result<Vec<Download>, String> {
        if gltf.include.len() > self.config.max_includes {
            return Err(format!(
                "its glTF includes {} files, more than the {} viga accepts",
                gltf.include.len(),
                self.config.max_includes
            ));
        }
        let mut downloads = vec![self.checked(&gltf.url, PathBuf::from(gltf_name), gltf.size)?];
        for (include, file) in gltf.include {
            if !file.include.is_empty() {
                return Err(format!("its include {include:?} includes files itself"));
            }
            let relative = names::relative_path("Poly Haven include path", &include)
                .map_err(|err| err.to_string())?;
            if include.len() > 255 || relative.components().count() > 4 {
                return Err(format!(
                    "Poly Haven include path {include:?} is refused: it is longer or deeper than a texture path is"
                ));
            }
            if relative == Path::new(gltf_name) {
                return Err(format!(
                    "Poly Haven include path {include:?} is refused: it would overwrite the model's .gltf"
                ));
            }
            downloads.push(self.checked(&file.url, relative, file.size)?);
        }
        let declared: u64 = downloads.iter().filter_map(|d| d.size).sum();
        if declared > self.config.max_model_bytes {
            return Err(format!(
                "its files add up to {}, more than the {} viga downloads for one model",
                bytes_text(declared),
                bytes_text(self.config.max_model_bytes)
            ));
        }
        Ok(downloads)
    }

    fn checked(&self, url: &str, relative: PathBuf, size: Option<u64>) -> Result<Download, String> {
        let url = Url::parse(url)
            .map_err(|err| format!("its download URL {url:?} is not a URL ({err})"))?;
        if !self.http.allowed(&url) {
            return Err(format!(
                "its download URL {url} is refused: it is neither on {} over HTTPS nor on the API's own address",
                self.config.download_hosts.join(", ")
            ));
        }
        if let Some(size) = size
            && size > self.config.max_file_bytes
        {
            return Err(format!(
                "{} is {}, more than the {} viga downloads for one file",
                relative.display(),
                bytes_text(size),
                bytes_text(self.config.max_file_bytes)
            ));
        }
        Ok(Download {
            url,
            relative,
            size,
        })
    }

    async fn download_all(&self, downloads: &[Download], folder: &Path) -> Result<(), ToolError> {
        let mut total = 0u64;
        for download in downloads {
            let path = folder.join(&download.relative);
            if let Some(parent) = path.parent() {
                tokio::fs::create_dir_all(parent).await.map_err(|err| {
                    ToolError::Recoverable(format!(
                        "the Poly Haven cache folder {} cannot be written: {err}",
                        parent.display()
                    ))
                })?;
            }
            let room = self
                .config
                .max_model_bytes
                .saturating_sub(total)
                .min(self.config.max_file_bytes);
            total += self.download_file(download, &path, room).await?;
        }
        Ok(())
    }

    /// Streams one file to `path`, at most `limit` bytes and exactly the declared size.
    async fn download_file(
        &self,
        download: &Download,
        path: &Path,
        limit: u64,
    ) -> Result<u64, ToolError> {
        let url = &download.url;
        let what = format!("the download of {}", download.relative.display());
        let written = self
            .http
            .download(url, path, limit, self.config.download_timeout, &what)
            .await?;
        if let Some(size) = download.size
            && size != written
        {
            return Err(ToolError::Recoverable(format!(
                "the Poly Haven download {url} has {written} bytes where its file list says {size}; it is damaged or changed, try again later"
            )));
        }
        Ok(written)
    }
}

/// Checks that the downloaded `.gltf` (the first download) refers to no file but the ones it
/// includes (or `data:` URIs), so importing it reads nothing outside its cache folder.
fn check_references(folder: &Path, downloads: &[Download]) -> Result<(), String> {
    let Some((gltf, includes)) = downloads.split_first() else {
        return Ok(());
    };
    let text = std::fs::read(folder.join(&gltf.relative))
        .map_err(|err| format!("its .gltf cannot be read back: {err}"))?;
    let document: Value =
        serde_json::from_slice(&text).map_err(|err| format!("its .gltf is not JSON ({err})"))?;
    for list in ["buffers", "images"] {
        let entries = document.get(list).and_then(Value::as_array);
        for uri in entries
            .into_iter()
            .flatten()
            .filter_map(|entry| entry.get("uri"))
        {
            let Some(uri) = uri.as_str() else {
                return Err(format!("its .gltf has a {list} uri that is not a string"));
            };
            if uri.starts_with("data:") {
                continue;
            }
            let decoded = percent_decode(uri);
            let included = decoded.as_deref().is_some_and(|path| {
                includes
                    .iter()
                    .any(|include| Path::new(path) == include.relative)
            });
            if !included {
                return Err(format!(
                    "its .gltf refers to {uri:?}, which is not one of the files it includes"
                ));
            }
        }
    }
    Ok(())
}

/// `%XX` escapes of a URI reference decoded; `None` when they are malformed or not UTF-8.
fn percent_decode(uri: &str) -> Option<String> {
    let bytes = uri.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'%' {
            let hex = std::str::from_utf8(bytes.get(index + 1..index + 3)?).ok()?;
            decoded.push(u8::from_str_radix(hex, 16).ok()?);
            index += 3;
        } else {
            decoded.push(bytes[index]);
            index += 1;
        }
    }
    String::from_utf8(decoded).ok()
}

/// The glTF at `resolution`, else at the smallest resolution there is.
fn choose_gltf(files: &Value, resolution: &str) -> Result<(String, RawFile), &'static str> {
    let by_resolution = files
        .get("gltf")
        .and_then(Value::as_object)
        .ok_or("Poly Haven offers it in no glTF")?;
    let chosen = if by_resolution.contains_key(resolution) {
        resolution.to_owned()
    } else {
        by_resolution
            .keys()
            .min_by_key(|key| {
                key.trim_end_matches(['k', 'K'])
                    .parse::<u32>()
                    .unwrap_or(u32::MAX)
            })
            .cloned()
            .ok_or("Poly Haven offers its glTF at no resolution")?
    };
    let file = by_resolution
        .get(&chosen)
        .and_then(|formats| formats.get("gltf"))
        .cloned()
        .ok_or("its file list has no .gltf at the chosen resolution")?;
    let file = serde_json::from_value(file)
        .map_err(|_| "its .gltf entry is not the documented {url, size, include} object")?;
    Ok((chosen, file))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_are_percent_decoded() {
        assert_eq!(
            percent_decode("textures/a%20b.jpg").as_deref(),
            Some("textures/a b.jpg")
        );
        assert_eq!(percent_decode("%2e%2e/x").as_deref(), Some("../x"));
        assert_eq!(percent_decode("bad%2"), None);
        assert_eq!(percent_decode("bad%zz"), None);
    }

    #[test]
    fn the_smallest_resolution_stands_in_for_a_missing_one() {
        let files = serde_json::json!({"gltf": {
            "4k": {"gltf": {"url": "https://x/4k.gltf"}},
            "2k": {"gltf": {"url": "https://x/2k.gltf", "size": 3}},
        }});
        let (chosen, file) = choose_gltf(&files, "1k").unwrap();
        assert_eq!(
            (chosen.as_str(), file.url.as_str()),
            ("2k", "https://x/2k.gltf")
        );
        assert!(choose_gltf(&serde_json::json!({"blend": {}}), "1k").is_err());
    }
}
