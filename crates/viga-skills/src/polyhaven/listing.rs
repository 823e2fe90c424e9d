//! Poly Haven's model list: fetched from the API, checked, kept in memory and in the cache
//! folder for `listing_max_age`, and standing in for the API for a while when it cannot be
//! reached.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::Deserialize;
use serde_json::Value;

use super::PolyHaven;
use super::cache::age;
use crate::assets::text_words;
use crate::registry::ToolError;

/// One model of the list, checked.
#[derive(Debug, Clone)]
pub(super) struct Model {
    pub(super) id: String,
    pub(super) name: String,
    pub(super) description: String,
    pub(super) category: String,
    /// Changes whenever the model's files do; part of the cache folder's name.
    pub(super) files_hash: Option<String>,
    pub(super) download_count: u64,
    pub(super) words: Vec<String>,
    pub(super) name_words: Vec<String>,
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

#[derive(Debug)]
pub(super) struct Listing {
    /// When it was fetched (or, for a kept list standing in for the API, last tried).
    fetched: SystemTime,
    /// How long it is used from then on before the API is asked again.
    keep_for: Duration,
    models: Arc<Vec<Model>>,
}

/// The model list's file in the cache folder.
const LISTING_FILE: &str = "models.json";

impl PolyHaven {
    /// The model list: from memory or the cache folder while it is younger than
    /// `listing_max_age`, else from the API. When the API cannot be reached, an older list
    /// in the cache folder is used, so models downloaded before stay usable offline, for
    /// `listing_retry_after` before the API is tried again.
    pub(super) async fn models(&self) -> Result<Arc<Vec<Model>>, ToolError> {
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
            .http
            .get_bytes(
                &url,
                self.config.max_listing_bytes,
                self.config.request_timeout,
                "the model list",
            )
            .await
        {
            Ok(body) => body,
            Err(err) => {
                let Some((_, models)) = on_disk else {
                    return Err(err.into());
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
        if let Err(err) = viga_io::files::write_atomic(&file, &fetched) {
            tracing::warn!(file = %file.display(), %err, "Poly Haven's model list cannot be kept in the cache");
        }
        *kept = Some(Listing {
            fetched: SystemTime::now(),
            keep_for: max_age,
            models: models.clone(),
        });
        Ok(models)
    }
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
pub(super) fn is_plain_token(text: &str, max: usize) -> bool {
    !text.is_empty()
        && text.len() <= max
        && !text.starts_with('-')
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_resolutions_are_plain_tokens() {
        for good in ["ArmChair_01", "dining_chair_02", "1k", "a-b"] {
            assert!(is_plain_token(good, 128), "{good}");
        }
        for bad in ["", "..", "../x", "a/b", "a\\b", "-rf", "a b", "ü", "a.gltf"] {
            assert!(!is_plain_token(bad, 128), "{bad}");
        }
    }
}
