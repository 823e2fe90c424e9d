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
//! and every body is bounded in size and time. A download is written into a partial folder
//! of its own beside its place (`viga_io::files::PartialFolder`) and renamed into place
//! whole, so a killed run never leaves half a model behind under the real name; a partial
//! folder in which nothing has changed for an hour is a killed run's and is removed.
//!
//! The API's terms ask for a user agent that names the software (`viga/<version>`) and a
//! "Powered by Poly Haven" credit where its content is shown: the source's description and
//! every hit carry one.

mod cache;
mod download;
mod listing;

use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use reqwest::Url;

pub use self::cache::default_cache_dir;
use self::listing::{Listing, Model, is_plain_token};
use crate::assets::{AssetHit, AssetOrigin, AssetRequest, AssetSource, match_score, wanted_words};
use crate::http::{ServiceClient, ServiceSpec, base_url};
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

/// Poly Haven's models as an [`AssetSource`].
pub struct PolyHaven {
    config: PolyHavenConfig,
    api: Url,
    cache: PathBuf,
    http: ServiceClient,
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

impl PolyHaven {
    /// Checks the configuration and prepares the cache folder; nothing is asked of Poly
    /// Haven until the first search.
    pub fn new(config: PolyHavenConfig) -> Result<Self, ToolError> {
        let api = base_url(&config.api_url, "the Poly Haven API address").map_err(|why| {
            ToolError::Fatal(format!("{why}; leave it unset for {POLYHAVEN_API}"))
        })?;
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
        let http = ServiceClient::new(ServiceSpec {
            hosts: config.download_hosts.clone(),
            connect_timeout: config.connect_timeout,
            idle_timeout: config.idle_timeout,
            unreachable_hint: format!(
                "Check the network connection (and HTTPS_PROXY); models downloaded before stay usable from {}. Meanwhile, model the object with Blender Python",
                cache.display()
            ),
            retry_hint: "try again later, or model the object with Blender Python".to_owned(),
            ..ServiceSpec::new("Poly Haven", api.clone())
        })
        .map_err(ToolError::Fatal)?;
        Ok(Self {
            config,
            api,
            cache,
            http,
            listing: tokio::sync::Mutex::new(None),
        })
    }

    /// Where downloads are kept: `<cache>/<asset id>/<resolution>-<files hash>/`.
    pub fn cache_dir(&self) -> &Path {
        &self.cache
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

    async fn find(&self, request: &AssetRequest) -> Result<Vec<AssetHit>, ToolError> {
        let wanted = wanted_words(&request.query)?;
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
        let wanted_hits = request.limit.min(self.config.max_downloads);
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
                    origin: AssetOrigin::Polyhaven,
                    licence: Some("CC0".to_owned()),
                    generation: None,
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
