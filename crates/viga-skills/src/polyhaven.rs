//! Poly Haven (<https://polyhaven.com>) as an asset source: its public API lists every model
//! with its name, tags and categories (no key needed); viga ranks them against the query like
//! a local folder, downloads the chosen models' glTF (the `.gltf` with the `.bin` and textures
//! it includes, at one resolution, 1k by default) into a cache folder, and hands out the
//! cached `.gltf`. A model once downloaded is never downloaded again (one Poly Haven offers
//! only at other resolutions included: the one it came at is noted in the cache), and the
//! model list is kept for a day, so a search that only finds cached models makes no request
//! at all. When the API cannot be reached, the list kept in the cache stands in for a few
//! minutes, and then the API is asked again.
//!
//! What comes from the API is untrusted: asset ids and include paths become paths only after
//! [`crate::names`] checks (no `..`, no absolute paths, no backslashes), download URLs must be
//! on Poly Haven's download host (or the API's own origin), redirects elsewhere are refused,
//! and every body is bounded in size and time. A download is written into a private
//! `.partial-*` folder and renamed into place whole, so a killed run never leaves half a
//! model behind under the real name; a partial folder in which nothing has changed for an
//! hour is a killed run's and is removed.
//!
//! The API's terms ask for a user agent that names the software (`viga/<version>`) and a
//! "Powered by Poly Haven" credit where its content is shown: the source's description and
//! every hit carry one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use reqwest::Url;
use serde::Deserialize;
use serde_json::Value;
use tokio::io::AsyncWriteExt as _;
use viga_provider::net::error_chain;

use crate::assets::{AssetHit, AssetSource, match_score, text_words, wanted_words};
use crate::names;
use crate::registry::ToolError;

/// Where the public API is.
pub const POLYHAVEN_API: &str = "https://api.polyhaven.com";
/// Where the API's download URLs point.
pub const POLYHAVEN_DOWNLOAD_HOST: &str = "dl.polyhaven.org";

/// How viga talks to Poly Haven. [`Default`] is the real service with a cache under the
/// user's cache folder ([`default_cache_dir`]).
#[derive(Debug, Clone, PartialEq)]
pub struct PolyHavenConfig {
    /// The API's base URL, without a trailing slash (tests point it at a local server).
    pub api_url: String,
    /// Hosts download URLs may point at (over HTTPS). URLs on the API's own origin are
    /// always allowed.
    pub download_hosts: Vec<String>,
    /// Where downloads are kept; `None` is [`default_cache_dir`].
    pub cache_dir: Option<PathBuf>,
    /// The texture resolution to download (`1k`, `2k`, `4k`, ...). A model without it comes
    /// at its smallest one.
    pub resolution: String,
    /// At most this many models are downloaded for one search (a hit is a downloaded model).
    pub max_downloads: usize,
    /// Models matching less of the query than this share are not offered (or downloaded).
    pub min_score: f32,
    /// How long the model list is kept before it is asked for again.
    pub listing_max_age: Duration,
    /// When the API cannot be reached and an older model list kept in the cache stands in,
    /// how long before the API is asked again.
    pub listing_retry_after: Duration,
    pub connect_timeout: Duration,
    /// The whole of one API call (the model list, a model's file list).
    pub request_timeout: Duration,
    /// How long a response may send nothing before viga gives up on it.
    pub idle_timeout: Duration,
    /// The whole of one file's download.
    pub download_timeout: Duration,
    /// The largest model list read.
    pub max_listing_bytes: u64,
    /// The largest file downloaded.
    pub max_file_bytes: u64,
    /// The largest model (the `.gltf` and all it includes) downloaded.
    pub max_model_bytes: u64,
    /// The most files a model may include.
    pub max_includes: usize,
}

impl Default for PolyHavenConfig {
    fn default() -> Self {
        Self {
            api_url: POLYHAVEN_API.to_owned(),
            download_hosts: vec![POLYHAVEN_DOWNLOAD_HOST.to_owned()],
            cache_dir: None,
            resolution: "1k".to_owned(),
            max_downloads: 3,
            min_score: 0.5,
            listing_max_age: Duration::from_secs(24 * 60 * 60),
            listing_retry_after: Duration::from_secs(5 * 60),
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(30),
            download_timeout: Duration::from_secs(600),
            max_listing_bytes: 64 << 20,
            max_file_bytes: 256 << 20,
            max_model_bytes: 512 << 20,
            max_includes: 64,
        }
    }
}

/// `$XDG_CACHE_HOME/viga/polyhaven`, else `~/.cache/viga/polyhaven` (on Windows
/// `%LOCALAPPDATA%\viga\polyhaven`); `None` when none of those is set to an absolute path.
pub fn default_cache_dir() -> Option<PathBuf> {
    let absolute = |name: &str| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|path| path.is_absolute())
    };
    let base = absolute("XDG_CACHE_HOME")
        .or_else(|| absolute("HOME").map(|home| home.join(".cache")))
        .or_else(|| absolute("LOCALAPPDATA"))?;
    Some(base.join("viga").join("polyhaven"))
}

/// One model of the list, checked.
#[derive(Debug, Clone)]
struct Model {
    id: String,
    name: String,
    description: String,
    category: String,
    /// Changes whenever the model's files do; part of the cache folder's name.
    files_hash: Option<String>,
    download_count: u64,
    words: Vec<String>,
    name_words: Vec<String>,
}

/// What the list says of one asset (the fields viga uses; the rest is ignored).
#[derive(Debug, Deserialize)]
struct RawAsset {
    #[serde(default)]
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default, rename = "type")]
    kind: Option<u64>,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    categories: Vec<String>,
    #[serde(default)]
    category: Option<String>,
    #[serde(default)]
    files_hash: Option<String>,
    #[serde(default)]
    download_count: u64,
}

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

#[derive(Debug)]
struct Listing {
    /// When it was fetched (or, for a kept list standing in for the API, last tried).
    fetched: SystemTime,
    /// How long it is used from then on before the API is asked again.
    keep_for: Duration,
    models: Arc<Vec<Model>>,
}

/// Poly Haven's models as an [`AssetSource`].
pub struct PolyHaven {
    config: PolyHavenConfig,
    api: Url,
    cache: PathBuf,
    client: reqwest::Client,
    listing: tokio::sync::Mutex<Option<Listing>>,
}

impl std::fmt::Debug for PolyHaven {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolyHaven")
            .field("api", &self.api.as_str())
            .field("cache", &self.cache)
            .finish_non_exhaustive()
    }
}

/// The model list's file in the cache folder.
const LISTING_FILE: &str = "models.json";
/// The largest file list of one model read.
const MAX_FILES_JSON_BYTES: u64 = 8 << 20;
/// Leftover `.partial-*` folders in which nothing changed for this long (a killed run's)
/// are removed.
const STALE_PARTIAL: Duration = Duration::from_secs(60 * 60);
/// A `.partial-*` folder with more entries than this is no download of viga's (a model has at
/// most `max_includes` files, a few folders deep) and is left alone.
const MAX_PARTIAL_ENTRIES: usize = 4096;

impl PolyHaven {
    /// Checks the configuration and prepares the cache folder; nothing is asked of Poly
    /// Haven until the first search.
    pub fn new(config: PolyHavenConfig) -> Result<Self, ToolError> {
        let api = Url::parse(config.api_url.trim_end_matches('/')).map_err(|err| {
            ToolError::Fatal(format!(
                "the Poly Haven API address {:?} is not a URL ({err}); leave it unset for {POLYHAVEN_API}",
                config.api_url
            ))
        })?;
        if !matches!(api.scheme(), "http" | "https") || api.host_str().is_none() {
            return Err(ToolError::Fatal(format!(
                "the Poly Haven API address {:?} is not an http(s) URL with a host; leave it unset for {POLYHAVEN_API}",
                config.api_url
            )));
        }
        if !is_plain_token(&config.resolution, 16) {
            return Err(ToolError::Fatal(format!(
                "the Poly Haven resolution {:?} is not one (\"1k\", \"2k\", \"4k\", ...)",
                config.resolution
            )));
        }
        let cache = match &config.cache_dir {
            Some(dir) => dir.clone(),
            None => default_cache_dir().ok_or_else(|| {
                ToolError::Fatal(
                    "there is no cache folder for Poly Haven downloads: neither XDG_CACHE_HOME nor HOME is set to an absolute path; set one, or name a cache folder in the configuration".to_owned(),
                )
            })?,
        };
        if cache.to_str().is_none() {
            return Err(ToolError::Fatal(format!(
                "the Poly Haven cache folder {} is not a UTF-8 path, which Blender Python cannot be handed; choose another",
                cache.display()
            )));
        }
        std::fs::create_dir_all(&cache).map_err(|err| {
            ToolError::Fatal(format!(
                "the Poly Haven cache folder {} cannot be created: {err}; choose a writable one",
                cache.display()
            ))
        })?;
        viga_provider::net::install_crypto_provider();
        let client = build_client(&config, &api)?;
        Ok(Self {
            config,
            api,
            cache,
            client,
            listing: tokio::sync::Mutex::new(None),
        })
    }

    /// Where downloads are kept: `<cache>/<asset id>/<resolution>-<files hash>/`.
    pub fn cache_dir(&self) -> &Path {
        &self.cache
    }

    /// The model list: from memory or the cache folder while it is younger than
    /// `listing_max_age`, else from the API. When the API cannot be reached, an older list
    /// in the cache folder is used, so models downloaded before stay usable offline, for
    /// `listing_retry_after` before the API is tried again.
    async fn models(&self) -> Result<Arc<Vec<Model>>, ToolError> {
        let mut kept = self.listing.lock().await;
        let max_age = self.config.listing_max_age;
        if let Some(listing) = kept.as_ref()
            && age(listing.fetched) < listing.keep_for
        {
            return Ok(listing.models.clone());
        }
        let file = self.cache.join(LISTING_FILE);
        let on_disk = read_cached_listing(&file);
        if let Some((fetched, models)) = &on_disk
            && age(*fetched) < max_age
        {
            *kept = Some(Listing {
                fetched: *fetched,
                keep_for: max_age,
                models: models.clone(),
            });
            return Ok(models.clone());
        }
        let url = self.endpoint(&["assets"], Some(("type", "models")));
        let fetched = match self
            .get_bytes(&url, self.config.max_listing_bytes, "the model list")
            .await
        {
            Ok(body) => body,
            Err(err) => {
                let Some((_, models)) = on_disk else {
                    return Err(err);
                };
                let retry_after = self.config.listing_retry_after;
                tracing::warn!(%err, ?retry_after, "Poly Haven's model list cannot be fetched; using the one kept in the cache until the API is tried again");
                // Not kept as if fetched now: the API is asked again once it may be back.
                *kept = Some(Listing {
                    fetched: SystemTime::now(),
                    keep_for: retry_after,
                    models: models.clone(),
                });
                return Ok(models);
            }
        };
        let models = Arc::new(parse_listing(&fetched).map_err(|why| {
            ToolError::Recoverable(format!(
                "Poly Haven's model list from {url} cannot be read: {why}; model the object with Blender Python instead"
            ))
        })?);
        if let Err(err) = viga_memory::files::write_atomic(&file, &fetched) {
            tracing::warn!(file = %file.display(), %err, "Poly Haven's model list cannot be kept in the cache");
        }
        *kept = Some(Listing {
            fetched: SystemTime::now(),
            keep_for: max_age,
            models: models.clone(),
        });
        Ok(models)
    }

    /// `<api>/<segments...>?<query>`, each segment percent-encoded.
    fn endpoint(&self, segments: &[&str], query: Option<(&str, &str)>) -> Url {
        let mut url = self.api.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(segments);
        }
        if let Some((key, value)) = query {
            url.query_pairs_mut().append_pair(key, value);
        }
        url
    }

    fn allowed(&self, url: &Url) -> bool {
        url_allowed(url, &self.api, &self.config.download_hosts)
    }

    /// The model's cached `.gltf`, downloaded first unless it is in the cache already.
    async fn fetch_model(&self, model: &Model) -> Result<PathBuf, ToolError> {
        let resolution = &self.config.resolution;
        let model_root = self.cache.join(&model.id);
        let files_hash = model.files_hash.as_deref().unwrap_or("latest");
        let gltf_name = |resolution: &str| format!("{}_{resolution}.gltf", model.id);
        let folder = |resolution: &str| model_root.join(format!("{resolution}-{files_hash}"));
        let cached = folder(resolution).join(gltf_name(resolution));
        if cached.is_file() {
            return Ok(cached);
        }
        // A model Poly Haven does not offer at `resolution` came at the one noted here.
        let fallback_note = model_root.join(format!("{resolution}-{files_hash}.fallback"));
        if let Some(chosen) = read_fallback_note(&fallback_note) {
            let cached = folder(&chosen).join(gltf_name(&chosen));
            if cached.is_file() {
                return Ok(cached);
            }
        }
        let note_fallback = |chosen: &str| {
            if chosen != resolution
                && let Err(err) =
                    viga_memory::files::write_atomic(&fallback_note, chosen.as_bytes())
            {
                tracing::warn!(note = %fallback_note.display(), %err, "the resolution a Poly Haven model came at cannot be noted; its file list will be asked for again");
            }
        };

        let url = self.endpoint(&["files", &model.id], None);
        let body = self
            .get_bytes(&url, MAX_FILES_JSON_BYTES, "the model's file list")
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
        let final_folder = folder(&chosen);
        let gltf_path = final_folder.join(gltf_name(&chosen));
        if gltf_path.is_file() {
            note_fallback(&chosen);
            return Ok(gltf_path);
        }
        let downloads = self
            .plan(&gltf_name(&chosen), gltf)
            .map_err(|why| self.refused(model, why))?;

        std::fs::create_dir_all(&model_root).map_err(|err| {
            ToolError::Recoverable(format!(
                "the Poly Haven cache folder {} cannot be written: {err}",
                model_root.display()
            ))
        })?;
        // A live download writes at least every `idle_timeout` (a file's headers may take
        // up to `download_timeout`), so it is never taken for a killed one.
        let stale_after = STALE_PARTIAL
            .max(self.config.idle_timeout)
            .max(self.config.download_timeout);
        remove_stale_partials(&model_root, stale_after);
        let partial = model_root.join(format!(
            ".partial-{chosen}-{}-{}",
            std::process::id(),
            SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |since| since.as_nanos())
        ));
        let result = match self.download_all(&downloads, &partial).await {
            Ok(()) => {
                check_references(&partial, &downloads).map_err(|why| self.refused(model, why))
            }
            Err(err) => Err(err),
        };
        if let Err(err) = result {
            let _ = std::fs::remove_dir_all(&partial);
            return Err(err);
        }
        if let Err(err) = std::fs::rename(&partial, &final_folder) {
            let _ = std::fs::remove_dir_all(&partial);
            // Another search (or viga) finished the same download first.
            if gltf_path.is_file() {
                note_fallback(&chosen);
                return Ok(gltf_path);
            }
            return Err(ToolError::Recoverable(format!(
                "the Poly Haven model {} could not be moved into the cache at {}: {err}",
                model.id,
                final_folder.display()
            )));
        }
        note_fallback(&chosen);
        Ok(gltf_path)
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
        if !self.allowed(&url) {
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
        let mut response = self.send(url, self.config.download_timeout, &what).await?;
        let mut file = tokio::fs::File::create(path)
            .await
            .map_err(|err| write_error(path, &err))?;
        let mut written = 0u64;
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|err| self.transport(url, &err, &what, self.config.download_timeout))?
        {
            written += chunk.len() as u64;
            if written > limit {
                return Err(ToolError::Recoverable(format!(
                    "the Poly Haven download {url} is larger than the {} viga accepts; viga stopped it",
                    bytes_text(limit)
                )));
            }
            file.write_all(&chunk)
                .await
                .map_err(|err| write_error(path, &err))?;
        }
        file.sync_all()
            .await
            .map_err(|err| write_error(path, &err))?;
        if let Some(size) = download.size
            && size != written
        {
            return Err(ToolError::Recoverable(format!(
                "the Poly Haven download {url} has {written} bytes where its file list says {size}; it is damaged or changed, try again later"
            )));
        }
        Ok(written)
    }

    /// A successful response to GET `url`, or the error that says what went wrong.
    async fn send(
        &self,
        url: &Url,
        timeout: Duration,
        what: &str,
    ) -> Result<reqwest::Response, ToolError> {
        let response = self
            .client
            .get(url.clone())
            .timeout(timeout)
            .send()
            .await
            .map_err(|err| self.transport(url, &err, what, timeout))?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let advice = match status.as_u16() {
            300..=399 => format!(
                "it redirects to {}, which viga does not follow",
                response
                    .headers()
                    .get(reqwest::header::LOCATION)
                    .and_then(|value| value.to_str().ok())
                    .unwrap_or("(no Location header)")
            ),
            404 => "Poly Haven does not have it (any more)".to_owned(),
            429 => "Poly Haven asks viga to slow down; try again in a minute".to_owned(),
            500..=599 => "Poly Haven has a problem of its own; try again later".to_owned(),
            _ => "viga does not know what to make of that".to_owned(),
        };
        Err(ToolError::Recoverable(format!(
            "Poly Haven answered {what} ({url}) with HTTP {status}: {advice}"
        )))
    }

    /// At most `limit` bytes of GET `url`'s body.
    async fn get_bytes(&self, url: &Url, limit: u64, what: &str) -> Result<Vec<u8>, ToolError> {
        let timeout = self.config.request_timeout;
        let mut response = self.send(url, timeout, what).await?;
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|err| self.transport(url, &err, what, timeout))?
        {
            if (body.len() + chunk.len()) as u64 > limit {
                return Err(ToolError::Recoverable(format!(
                    "Poly Haven's answer to {what} ({url}) is larger than the {} viga reads; viga stopped reading it",
                    bytes_text(limit)
                )));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    fn transport(&self, url: &Url, err: &reqwest::Error, what: &str, after: Duration) -> ToolError {
        let message = if err.is_connect() {
            format!(
                "Poly Haven cannot be reached at {}: {}. Check the network connection (and HTTPS_PROXY); models downloaded before stay usable from {}. Meanwhile, model the object with Blender Python",
                origin(url),
                error_chain(err),
                self.cache.display()
            )
        } else if err.is_redirect() {
            format!(
                "Poly Haven's answer to {what} was refused: {}",
                error_chain(err)
            )
        } else if err.is_timeout() {
            format!(
                "Poly Haven did not finish {what} ({url}) within {after:?} (or went silent for {:?}); try again later, or model the object with Blender Python",
                self.config.idle_timeout
            )
        } else {
            format!(
                "{what} from Poly Haven ({url}) failed: {}; try again later, or model the object with Blender Python",
                error_chain(err)
            )
        };
        ToolError::Recoverable(message)
    }

    fn refused(&self, model: &Model, why: String) -> ToolError {
        ToolError::Recoverable(format!(
            "the Poly Haven model {} was not downloaded: {why}",
            model.id
        ))
    }
}

#[async_trait]
impl AssetSource for PolyHaven {
    fn describe(&self) -> String {
        format!(
            "Poly Haven's CC0 models ({}; powered by Poly Haven), cached in {}",
            self.api,
            self.cache.display()
        )
    }

    async fn search(&self, query: &str, limit: usize) -> Result<Vec<AssetHit>, ToolError> {
        let wanted = wanted_words(query)?;
        let models = self.models().await?;
        let mut ranked: Vec<(f32, usize, &Model)> = models
            .iter()
            .filter_map(|model| {
                let (score, matched) = match_score(&wanted, &model.words);
                let (_, in_name) = match_score(&wanted, &model.name_words);
                (matched > 0 && score >= self.config.min_score).then_some((score, in_name, model))
            })
            .collect();
        // Best score, then more of the query in the name, then the more popular, then the id.
        ranked.sort_by(|(a, a_name, a_model), (b, b_name, b_model)| {
            b.total_cmp(a)
                .then_with(|| b_name.cmp(a_name))
                .then_with(|| b_model.download_count.cmp(&a_model.download_count))
                .then_with(|| a_model.id.cmp(&b_model.id))
        });
        let wanted_hits = limit.min(self.config.max_downloads);
        let mut hits = Vec::new();
        let mut first_error = None;
        // A model that fails to download gives its place to the next, twice at most.
        for (score, _, model) in ranked.into_iter().take(wanted_hits + 2) {
            if hits.len() >= wanted_hits {
                break;
            }
            match self.fetch_model(model).await {
                Ok(path) => hits.push(AssetHit {
                    name: model.name.clone(),
                    path,
                    description: hit_description(model),
                    score,
                }),
                Err(err) => {
                    tracing::warn!(model = %model.id, %err, "Poly Haven model skipped");
                    first_error.get_or_insert(err);
                }
            }
        }
        match first_error {
            Some(err) if hits.is_empty() => Err(err),
            _ => Ok(hits),
        }
    }
}

fn hit_description(model: &Model) -> String {
    let mut text = model.description.trim().to_owned();
    if !model.category.is_empty() {
        text.push_str(&format!(" Category: {}.", model.category));
    }
    text.push_str(&format!(
        " Poly Haven model {} (CC0; powered by Poly Haven), glTF.",
        model.id
    ));
    text.trim_start().to_owned()
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

/// The models of the API's list, skipping non-models and ids that are no plain name (they
/// would become folder names).
fn parse_listing(body: &[u8]) -> Result<Vec<Model>, String> {
    let assets: BTreeMap<String, Value> = serde_json::from_slice(body)
        .map_err(|err| format!("it is not the documented JSON object ({err})"))?;
    let mut models = Vec::new();
    let mut skipped = 0usize;
    for (id, value) in assets {
        let Ok(asset) = serde_json::from_value::<RawAsset>(value) else {
            skipped += 1;
            continue;
        };
        if asset.kind.is_some_and(|kind| kind != 2) {
            continue;
        }
        if !is_plain_token(&id, 128) {
            skipped += 1;
            continue;
        }
        let files_hash = asset
            .files_hash
            .filter(|hash| is_plain_token(hash, 64))
            .map(|hash| hash.chars().take(12).collect());
        let category = asset.category.unwrap_or_default();
        let tags = asset.tags.join(" ");
        let words = text_words(&format!(
            "{id} {} {tags} {} {category}",
            asset.name,
            asset.categories.join(" ")
        ));
        let name_words = text_words(&format!("{id} {} {tags}", asset.name));
        models.push(Model {
            name: if asset.name.trim().is_empty() {
                id.clone()
            } else {
                asset.name.trim().to_owned()
            },
            id,
            description: asset.description,
            category,
            files_hash,
            download_count: asset.download_count,
            words,
            name_words,
        });
    }
    if skipped > 0 {
        tracing::warn!(
            skipped,
            "Poly Haven list entries skipped: malformed, or an id that is no plain name"
        );
    }
    Ok(models)
}

/// ASCII letters, digits, `_` and `-` only, not starting with `-`, 1 to `max` characters.
fn is_plain_token(text: &str, max: usize) -> bool {
    !text.is_empty()
        && text.len() <= max
        && !text.starts_with('-')
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
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

fn url_allowed(url: &Url, api: &Url, download_hosts: &[String]) -> bool {
    if !url.username().is_empty() || url.password().is_some() {
        return false;
    }
    let same_origin = url.scheme() == api.scheme()
        && url.host_str() == api.host_str()
        && url.port_or_known_default() == api.port_or_known_default();
    same_origin
        || (url.scheme() == "https"
            && url.host_str().is_some_and(|host| {
                download_hosts
                    .iter()
                    .any(|allowed| allowed.eq_ignore_ascii_case(host))
            }))
}

fn origin(url: &Url) -> String {
    url.origin().ascii_serialization()
}

fn build_client(config: &PolyHavenConfig, api: &Url) -> Result<reqwest::Client, ToolError> {
    let redirect_api = api.clone();
    let redirect_hosts = config.download_hosts.clone();
    let policy = reqwest::redirect::Policy::custom(move |attempt| {
        if attempt.previous().len() >= 5 {
            attempt.error("more than 5 redirects")
        } else if url_allowed(attempt.url(), &redirect_api, &redirect_hosts) {
            attempt.follow()
        } else {
            let target = attempt.url().to_string();
            attempt.error(format!(
                "a redirect to {target} is not followed: it leaves Poly Haven's hosts"
            ))
        }
    });
    let mut builder = reqwest::Client::builder()
        .connect_timeout(config.connect_timeout)
        .read_timeout(config.idle_timeout)
        .redirect(policy)
        .user_agent(concat!("viga/", env!("CARGO_PKG_VERSION")));
    if viga_provider::net::is_loopback(api) {
        builder = builder.no_proxy();
    }
    builder.build().map_err(|err| {
        ToolError::Fatal(format!(
            "the HTTP client for Poly Haven cannot be built: {}",
            error_chain(&err)
        ))
    })
}

fn age(when: SystemTime) -> Duration {
    SystemTime::now()
        .duration_since(when)
        .unwrap_or(Duration::ZERO)
}

/// The model list kept in the cache folder and when it was fetched, if it is there and
/// readable.
fn read_cached_listing(file: &Path) -> Option<(SystemTime, Arc<Vec<Model>>)> {
    let fetched = std::fs::metadata(file).and_then(|m| m.modified()).ok()?;
    let body = std::fs::read(file).ok()?;
    match parse_listing(&body) {
        Ok(models) => Some((fetched, Arc::new(models))),
        Err(why) => {
            tracing::warn!(file = %file.display(), %why, "the cached Poly Haven model list is ignored");
            None
        }
    }
}

/// The resolution noted in a model's fallback note, if there is one and it is a plain name.
fn read_fallback_note(note: &Path) -> Option<String> {
    let text = std::fs::read_to_string(note).ok()?;
    let chosen = text.trim();
    is_plain_token(chosen, 16).then(|| chosen.to_owned())
}

/// Removes the `.partial-*` folders in `folder` in which nothing (the folder itself or
/// anything inside it, however deep) has changed for longer than `stale_after`: a killed
/// download's. The folder's own time alone would not do: it does not change while files are
/// written into a subfolder of it.
fn remove_stale_partials(folder: &Path, stale_after: Duration) {
    let Ok(listing) = std::fs::read_dir(folder) else {
        return;
    };
    for item in listing.flatten() {
        if !item.file_name().to_string_lossy().starts_with(".partial-") {
            continue;
        }
        let path = item.path();
        let stale = newest_change(&path, MAX_PARTIAL_ENTRIES)
            .is_some_and(|newest| age(newest) > stale_after);
        if stale {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

/// The newest modification time of the folder `root` and of everything under it (symbolic
/// links are not followed); `None` when anything cannot be read (it may be changing right
/// now), `root` is no folder, or there are more than `limit` entries.
fn newest_change(root: &Path, limit: usize) -> Option<SystemTime> {
    let metadata = std::fs::symlink_metadata(root).ok()?;
    if !metadata.is_dir() {
        return None;
    }
    let mut newest = metadata.modified().ok()?;
    let mut folders = vec![root.to_path_buf()];
    let mut seen = 0usize;
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).ok()? {
            let entry = entry.ok()?;
            seen += 1;
            if seen > limit {
                return None;
            }
            // Of the entry itself: a symbolic link is not followed.
            let metadata = entry.metadata().ok()?;
            newest = newest.max(metadata.modified().ok()?);
            if metadata.is_dir() {
                folders.push(entry.path());
            }
        }
    }
    Some(newest)
}

/// `1167 bytes`, `3.5 MiB`.
fn bytes_text(bytes: u64) -> String {
    if bytes < 1 << 20 {
        format!("{bytes} bytes")
    } else {
        format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20))
    }
}

fn write_error(path: &Path, err: &std::io::Error) -> ToolError {
    ToolError::Recoverable(format!(
        "the Poly Haven download cannot be written to {}: {err}",
        path.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn download_urls_must_stay_on_allowed_hosts() {
        let api = Url::parse("https://api.polyhaven.com").unwrap();
        let hosts = vec![POLYHAVEN_DOWNLOAD_HOST.to_owned()];
        let allowed = |url: &str| url_allowed(&Url::parse(url).unwrap(), &api, &hosts);
        assert!(allowed(
            "https://dl.polyhaven.org/file/ph-assets/Models/gltf/1k/a/a_1k.gltf"
        ));
        assert!(allowed("https://api.polyhaven.com/files/a"));
        assert!(!allowed("http://dl.polyhaven.org/file/x"), "HTTPS only");
        assert!(!allowed("https://dl.polyhaven.org.evil.example/x"));
        assert!(!allowed("https://user:pw@dl.polyhaven.org/x"));
        assert!(!allowed("https://api.polyhaven.com:8443/files/a"));
        assert!(!allowed("file:///etc/passwd"));
    }

    #[test]
    fn ids_and_resolutions_are_plain_tokens() {
        for good in ["ArmChair_01", "dining_chair_02", "1k", "a-b"] {
            assert!(is_plain_token(good, 128), "{good}");
        }
        for bad in ["", "..", "../x", "a/b", "a\\b", "-rf", "a b", "ü", "a.gltf"] {
            assert!(!is_plain_token(bad, 128), "{bad}");
        }
    }

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

    /// Sets the modification time of `path` (a file or a folder) to `ago` before now.
    fn set_age(path: &Path, ago: Duration) {
        std::fs::File::open(path)
            .unwrap()
            .set_modified(SystemTime::now() - ago)
            .unwrap();
    }

    #[test]
    fn partial_downloads_are_stale_only_when_nothing_inside_changed_for_long() {
        let root = tempfile::tempdir().unwrap();
        let hours = |n: u64| Duration::from_secs(n * 60 * 60);
        let file = |path: PathBuf| {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, "x").unwrap();
            path
        };
        // A live download: its .gltf and the folder itself were written long ago, but a
        // texture is being written into a subfolder right now.
        let live = root.path().join(".partial-1k-7-1");
        set_age(&file(live.join("a_1k.gltf")), hours(3));
        file(live.join("textures/a_diff_1k.png"));
        set_age(&live, hours(3));
        // A killed one: nothing inside changed for hours.
        let killed = root.path().join(".partial-1k-8-2");
        let texture = file(killed.join("textures/a_diff_1k.png"));
        for path in [texture.as_path(), &killed.join("textures"), &killed] {
            set_age(path, hours(2));
        }
        // Killed just before it began writing.
        let empty = root.path().join(".partial-1k-9-3");
        std::fs::create_dir(&empty).unwrap();
        set_age(&empty, hours(2));
        // Old, but no partial download.
        let kept = root.path().join("1k-abc");
        set_age(&file(kept.join("a_1k.gltf")), hours(5));
        set_age(&kept, hours(5));

        remove_stale_partials(root.path(), hours(1));
        assert!(live.join("textures/a_diff_1k.png").is_file());
        assert!(live.join("a_1k.gltf").is_file());
        assert!(!killed.exists());
        assert!(!empty.exists());
        assert!(kept.join("a_1k.gltf").is_file());

        // Once the live one too has stopped changing for long enough, it goes.
        set_age(&live.join("textures/a_diff_1k.png"), hours(2));
        set_age(&live.join("textures"), hours(2));
        remove_stale_partials(root.path(), hours(1));
        assert!(!live.exists());
        assert!(kept.exists());
    }

    #[test]
    fn the_newest_change_walk_is_bounded() {
        let root = tempfile::tempdir().unwrap();
        for name in ["a", "b", "c"] {
            std::fs::write(root.path().join(name), "x").unwrap();
        }
        assert!(newest_change(root.path(), 3).is_some());
        assert_eq!(newest_change(root.path(), 2), None);
        assert_eq!(newest_change(&root.path().join("a"), 10), None, "no folder");
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
