//! The optional local cache of model replies (seed 003, "Local cache for prompts/responses").
//!
//! A reply is stored under the SHA-256 of the whole request as the provider would see it
//! (system prompt, messages — which carry the request and the scene snapshot —, the response
//! schema and limits) together with the provider's name and model. An identical request, so
//! the same scene, the same conversation and the same model, is answered from the cache
//! without a model call. Any difference, even one object moved, misses.
//!
//! One file per reply, `<dir>/<key>.json`, each written whole, so a killed run never leaves
//! half an entry and two runs sharing the folder at worst both store the same reply.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use viga_io::files::unix_ms;
use viga_provider::{ModelRequest, ModelResponse};

use crate::GnError;
use crate::recorder::write_whole;

/// The entry format; an entry of another version is a miss, never an error.
const ENTRY_VERSION: u32 = 1;

/// A folder of stored replies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseCache {
    dir: PathBuf,
}

/// One stored reply, with what it answered for a person reading the folder.
#[derive(Debug, Serialize, Deserialize)]
struct CacheEntry {
    version: u32,
    key: String,
    provider: String,
    model: String,
    stored_unix_ms: u64,
    response: ModelResponse,
}

/// What a key is the hash of.
#[derive(Serialize)]
struct CacheIdentity<'a> {
    provider: &'a str,
    model: &'a str,
    request: &'a ModelRequest,
}

/// A reply found in the cache.
#[derive(Debug, Clone, PartialEq)]
pub struct CachedReply {
    pub response: ModelResponse,
    /// The entry's file.
    pub file: PathBuf,
}

impl ResponseCache {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The cache beside the run folders of an output root: `<output>/gn/cache/`.
    pub fn in_output(output: &Path) -> Self {
        Self::new(output.join("gn").join("cache"))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The key of a request to a provider's model: a SHA-256, as 64 hex digits.
    pub fn key(provider: &str, model: &str, request: &ModelRequest) -> Result<String, GnError> {
        let identity = CacheIdentity {
            provider,
            model,
            request,
        };
        let bytes = serde_json::to_vec(&identity).map_err(|err| GnError::Decode {
            function: "cache key".to_owned(),
            message: err.to_string(),
        })?;
        let digest = Sha256::digest(&bytes);
        Ok(digest.iter().map(|byte| format!("{byte:02x}")).collect())
    }

    fn path_of(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.json"))
    }

    /// The stored reply for `key`, if any. An entry that cannot be read as one (another
    /// version, a hand-edited file) is an error naming the file, so the caller can say so
    /// and ask the model instead.
    pub fn load(&self, key: &str) -> Result<Option<CachedReply>, GnError> {
        let file = self.path_of(key);
        let text = match std::fs::read_to_string(&file) {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(err) => return Err(GnError::file(&file, format!("cannot read it: {err}"))),
        };
        let entry: CacheEntry = serde_json::from_str(&text)
            .map_err(|err| GnError::file(&file, format!("not a cached reply: {err}")))?;
        if entry.version != ENTRY_VERSION || entry.key != key {
            return Err(GnError::file(
                &file,
                format!(
                    "a cached reply of version {} for key {}, expected version {ENTRY_VERSION} for this key",
                    entry.version, entry.key
                ),
            ));
        }
        Ok(Some(CachedReply {
            response: entry.response,
            file,
        }))
    }

    /// Stores a reply under `key` (replacing an older one); returns its file.
    pub fn store(
        &self,
        key: &str,
        provider: &str,
        model: &str,
        response: &ModelResponse,
    ) -> Result<PathBuf, GnError> {
        std::fs::create_dir_all(&self.dir)
            .map_err(|err| GnError::file(&self.dir, format!("cannot create it: {err}")))?;
        let entry = CacheEntry {
            version: ENTRY_VERSION,
            key: key.to_owned(),
            provider: provider.to_owned(),
            model: model.to_owned(),
            stored_unix_ms: unix_ms(),
            response: response.clone(),
        };
        let text = serde_json::to_string_pretty(&entry).map_err(|err| GnError::Decode {
            function: "cache entry".to_owned(),
            message: err.to_string(),
        })?;
        let file = self.path_of(key);
        write_whole(&file, text.as_bytes())?;
        Ok(file)
    }
}

#[cfg(test)]
mod tests {
    use viga_protocol::message::ChatMessage;
    use viga_provider::FinishReason;

    use super::*;

    fn request(text: &str) -> ModelRequest {
        ModelRequest::new("system", vec![ChatMessage::user_text(text)])
    }

    #[test]
    fn keys_depend_on_the_request_and_the_model() {
        let key = ResponseCache::key("openai", "gpt", &request("scene A")).unwrap();
        assert_eq!(key.len(), 64);
        assert!(key.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(
            key,
            ResponseCache::key("openai", "gpt", &request("scene A")).unwrap()
        );
        assert_ne!(
            key,
            ResponseCache::key("openai", "gpt", &request("scene B")).unwrap()
        );
        assert_ne!(
            key,
            ResponseCache::key("openai", "other", &request("scene A")).unwrap()
        );
    }

    #[test]
    fn replies_round_trip_and_bad_entries_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ResponseCache::in_output(dir.path());
        let key = ResponseCache::key("p", "m", &request("x")).unwrap();
        assert_eq!(cache.load(&key).unwrap(), None);
        let response = ModelResponse::text_only("{\"version\": 1}", FinishReason::Stop);
        let file = cache.store(&key, "p", "m", &response).unwrap();
        assert_eq!(
            file,
            dir.path().join("gn/cache").join(format!("{key}.json"))
        );
        let cached = cache.load(&key).unwrap().unwrap();
        assert_eq!(cached.response, response);
        assert_eq!(cached.file, file);

        std::fs::write(&file, "{half").unwrap();
        let err = cache.load(&key).unwrap_err().to_string();
        assert!(err.contains(&format!("{key}.json")), "{err}");
    }
}
