//! Which provider to talk to and how: the serde [`ProviderConfig`] and [`build_provider`].
//!
//! API keys never live in a config file or on a command line: the config names an environment
//! variable (`api_key_env`, with a default per kind) and the key is read from it when the
//! provider is built. The key is then held in a [`Secret`], whose `Debug` shows no part of it.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::anthropic::AnthropicProvider;
use crate::gemini::GeminiProvider;
use crate::http::{Endpoint, Origin};
use crate::images::ImageLimits;
use crate::openai::{Flavour, OpenAiProvider};
use crate::retry::RetryPolicy;
use crate::{Provider, ProviderError, ScriptedProvider};

/// The wire protocol a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ProviderKind {
    /// OpenAI Chat Completions at api.openai.com.
    #[serde(rename = "openai")]
    OpenAi,
    /// Anthropic Messages.
    #[serde(rename = "anthropic")]
    Anthropic,
    /// Google Gemini `generateContent`.
    #[serde(rename = "gemini")]
    Gemini,
    /// Any server speaking Chat Completions: Ollama, vLLM, llama.cpp server, LM Studio,
    /// OpenRouter, Qwen's compatible mode. Needs `base_url`; the key is optional.
    #[serde(rename = "openai_compatible")]
    OpenAiCompatible,
    /// Replays a script file (tests, the offline demo).
    #[serde(rename = "scripted")]
    Scripted,
}

impl ProviderKind {
    /// Every kind, for front ends that list them (`viga doctor`'s keys).
    pub const ALL: [Self; 5] = [
        Self::OpenAi,
        Self::Anthropic,
        Self::Gemini,
        Self::OpenAiCompatible,
        Self::Scripted,
    ];

    /// The name the provider reports, for logs and run folders.
    pub fn name(self) -> &'static str {
        match self {
            Self::OpenAi => "openai",
            Self::Anthropic => "anthropic",
            Self::Gemini => "gemini",
            Self::OpenAiCompatible => "openai_compatible",
            Self::Scripted => "scripted",
        }
    }

    /// The variable the API key is read from when the config names none.
    pub fn default_key_env(self) -> Option<&'static str> {
        match self {
            Self::OpenAi => Some("OPENAI_API_KEY"),
            Self::Anthropic => Some("ANTHROPIC_API_KEY"),
            Self::Gemini => Some("GEMINI_API_KEY"),
            // Local servers usually need no key; one that does names its variable.
            Self::OpenAiCompatible | Self::Scripted => None,
        }
    }

    /// Whether models behind this kind can call tools when the config does not say:
    /// OpenAI, Anthropic and Gemini can; an OpenAI-compatible server cannot unless its
    /// config says so (many local models answer tool calls as text, or not at all). `None`
    /// for the scripted provider, which answers with whatever its script holds: whether a
    /// script was written for tool calls is for the caller to read from it.
    pub fn default_tool_calling(self) -> Option<bool> {
        match self {
            Self::OpenAi | Self::Anthropic | Self::Gemini => Some(true),
            Self::OpenAiCompatible => Some(false),
            Self::Scripted => None,
        }
    }

    /// Where the provider's API lives when the config names no `base_url`.
    pub fn default_base_url(self) -> Option<&'static str> {
        match self {
            Self::OpenAi => Some("https://api.openai.com/v1"),
            Self::Anthropic => Some("https://api.anthropic.com/v1"),
            Self::Gemini => Some("https://generativelanguage.googleapis.com/v1beta"),
            Self::OpenAiCompatible | Self::Scripted => None,
        }
    }
}

/// How long to wait for the network.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Timeouts {
    /// Establishing the TCP + TLS connection.
    #[serde(rename = "connect_secs", with = "secs")]
    pub connect: Duration,
    /// A whole non-streaming call (one attempt), from sending to the last byte.
    #[serde(rename = "request_secs", with = "secs")]
    pub request: Duration,
    /// The longest silence a streaming call accepts, before the headers and between chunks.
    /// Reasoning models can think silently for minutes: raise it for them.
    #[serde(rename = "stream_idle_secs", with = "secs")]
    pub stream_idle: Duration,
    /// The longest a streaming call may take in all, however steadily it streams, so a
    /// server that trickles an endless answer still ends. Generous: a slow local model can
    /// stream one long answer for many minutes.
    #[serde(rename = "stream_total_secs", with = "secs")]
    pub stream_total: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(15),
            request: Duration::from_secs(600),
            stream_idle: Duration::from_secs(300),
            stream_total: Duration::from_secs(3600),
        }
    }
}

/// One provider, as a config file describes it. API keys are not part of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawProviderConfig")]
pub struct ProviderConfig {
    pub kind: ProviderKind,
    /// The model name as the provider knows it; unused by `scripted`.
    pub model: String,
    /// Where the API lives, including its version path (`http://localhost:11434/v1`).
    /// Defaults per kind; required for `openai_compatible`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The environment variable holding the API key. Defaults to `OPENAI_API_KEY`,
    /// `ANTHROPIC_API_KEY` or `GEMINI_API_KEY`; for `openai_compatible`, no key is sent unless
    /// this is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    #[serde(default)]
    pub timeouts: Timeouts,
    #[serde(default)]
    pub retry: RetryPolicy,
    #[serde(default)]
    pub images: ImageLimits,
    /// The script file, for `scripted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<PathBuf>,
    /// Whether the model can call tools (the loop's generator is then offered its tools);
    /// unset, the kind's default ([`ProviderKind::default_tool_calling`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calling: Option<bool>,
}

impl ProviderConfig {
    /// Whether the model can call tools: `tool_calling` when the config sets it, else the
    /// kind's default; `None` for a scripted provider without the setting (its script
    /// decides).
    pub fn tool_calling(&self) -> Option<bool> {
        self.tool_calling.or(self.kind.default_tool_calling())
    }

    /// A config with default timeouts, retries and image limits.
    pub fn new(kind: ProviderKind, model: impl Into<String>) -> Self {
        Self {
            kind,
            model: model.into(),
            base_url: None,
            api_key_env: None,
            timeouts: Timeouts::default(),
            retry: RetryPolicy::default(),
            images: ImageLimits::default(),
            script: None,
            tool_calling: None,
        }
    }
}

/// What a config file may hold: [`ProviderConfig`] plus an `api_key` field that exists only
/// to be refused with advice, since a plain "unknown field" would not say where keys go.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProviderConfig {
    kind: ProviderKind,
    #[serde(default)]
    model: String,
    #[serde(default)]
    base_url: Option<String>,
    #[serde(default)]
    api_key_env: Option<String>,
    #[serde(default)]
    timeouts: Timeouts,
    #[serde(default)]
    retry: RetryPolicy,
    #[serde(default)]
    images: ImageLimits,
    #[serde(default)]
    script: Option<PathBuf>,
    #[serde(default)]
    tool_calling: Option<bool>,
    // `IgnoredAny` drops the value unread, so a pasted key is never held or echoed.
    #[serde(default)]
    api_key: Option<serde::de::IgnoredAny>,
}

impl TryFrom<RawProviderConfig> for ProviderConfig {
    type Error = String;

    fn try_from(raw: RawProviderConfig) -> Result<Self, String> {
        if raw.api_key.is_some() {
            let variable = raw
                .api_key_env
                .as_deref()
                .or(raw.kind.default_key_env())
                .unwrap_or("MY_API_KEY");
            return Err(format!(
                "API keys are not read from config files: remove `api_key`, export {variable}=<key> \
                 and name the variable with `api_key_env` if it is not the default"
            ));
        }
        Ok(Self {
            kind: raw.kind,
            model: raw.model,
            base_url: raw.base_url,
            api_key_env: raw.api_key_env,
            timeouts: raw.timeouts,
            retry: raw.retry,
            images: raw.images,
            script: raw.script,
            tool_calling: raw.tool_calling,
        })
    }
}

pub use viga_protocol::Secret;

/// Builds the provider a config describes, reading its API key from the environment.
pub fn build_provider(config: &ProviderConfig) -> Result<Arc<dyn Provider>, ProviderError> {
    build_provider_with_env(config, |name| std::env::var(name).ok())
}

/// [`build_provider`] with the environment given as a lookup function (tests, embedders
/// that keep their own environment).
pub fn build_provider_with_env(
    config: &ProviderConfig,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Arc<dyn Provider>, ProviderError> {
    Ok(Arc::new(Configured {
        inner: adapter_for(config, env)?,
        settings: config.clone(),
    }))
}

/// A provider built from settings, which it keeps for [`Provider::config`].
struct Configured {
    inner: Arc<dyn Provider>,
    settings: ProviderConfig,
}

#[async_trait::async_trait]
impl Provider for Configured {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn model(&self) -> &str {
        self.inner.model()
    }

    fn config(&self) -> Option<&ProviderConfig> {
        Some(&self.settings)
    }

    async fn complete(
        &self,
        request: &crate::ModelRequest,
    ) -> Result<crate::ModelResponse, ProviderError> {
        self.inner.complete(request).await
    }

    async fn stream(
        &self,
        request: &crate::ModelRequest,
    ) -> Result<crate::ResponseStream, ProviderError> {
        self.inner.stream(request).await
    }
}

/// The adapter of `config`'s kind, its key read through `env`.
fn adapter_for(
    config: &ProviderConfig,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Arc<dyn Provider>, ProviderError> {
    // Each HTTP kind is one constructor; the scripted provider needs no HTTP client at all.
    type Adapter = fn(Endpoint, &ProviderConfig) -> Result<Arc<dyn Provider>, ProviderError>;
    let adapter: Adapter = match config.kind {
        ProviderKind::Scripted => return scripted(config),
        ProviderKind::OpenAi => |endpoint, config| {
            Ok(Arc::new(OpenAiProvider::new(
                endpoint,
                config,
                Flavour::OpenAi,
            )?))
        },
        ProviderKind::OpenAiCompatible => |endpoint, config| {
            Ok(Arc::new(OpenAiProvider::new(
                endpoint,
                config,
                Flavour::Compatible,
            )?))
        },
        ProviderKind::Anthropic => {
            |endpoint, config| Ok(Arc::new(AnthropicProvider::new(endpoint, config)?))
        }
        ProviderKind::Gemini => {
            |endpoint, config| Ok(Arc::new(GeminiProvider::new(endpoint, config)?))
        }
    };
    validate(config)?;
    let kind = config.kind;
    let endpoint = Endpoint {
        origin: Origin {
            provider: kind.name(),
            model: config.model.trim().to_owned(),
            base_url: base_url(config)?,
            key_env: config
                .api_key_env
                .clone()
                .or(kind.default_key_env().map(str::to_owned))
                .unwrap_or_else(|| "api_key_env (none is configured)".to_owned()),
        },
        key: api_key(config, &env)?,
    };
    adapter(endpoint, config)
}

fn scripted(config: &ProviderConfig) -> Result<Arc<dyn Provider>, ProviderError> {
    let script = config.script.as_deref().ok_or_else(|| {
        ProviderError::Config(
            "the scripted provider needs `script`, the path of a script file".to_owned(),
        )
    })?;
    Ok(Arc::new(ScriptedProvider::from_file(script)?))
}

fn validate(config: &ProviderConfig) -> Result<(), ProviderError> {
    let problem = if config.model.trim().is_empty() {
        Some(format!(
            "`model` is empty; name the {} model to use",
            config.kind.name()
        ))
    } else if config.timeouts.connect.is_zero()
        || config.timeouts.request.is_zero()
        || config.timeouts.stream_idle.is_zero()
        || config.timeouts.stream_total.is_zero()
    {
        Some("timeouts must be greater than zero".to_owned())
    } else {
        config
            .retry
            .validate()
            .err()
            .or_else(|| config.images.validate().err())
    };
    problem.map_or(Ok(()), |problem| Err(ProviderError::Config(problem)))
}

fn base_url(config: &ProviderConfig) -> Result<String, ProviderError> {
    let url = match (&config.base_url, config.kind.default_base_url()) {
        (Some(url), _) => url.trim().to_owned(),
        (None, Some(default)) => default.to_owned(),
        (None, None) => {
            return Err(ProviderError::Config(format!(
                "{} needs `base_url`, the server's API root including its version path, \
                 e.g. http://localhost:11434/v1 (Ollama) or http://localhost:8000/v1 (vLLM)",
                config.kind.name()
            )));
        }
    };
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(ProviderError::Config(format!(
            "base_url {url:?} must start with http:// or https://"
        )));
    }
    // Endpoint paths are appended with a leading slash.
    Ok(url.trim_end_matches('/').to_owned())
}

fn api_key(
    config: &ProviderConfig,
    env: &impl Fn(&str) -> Option<String>,
) -> Result<Option<Secret>, ProviderError> {
    let Some(variable) = config
        .api_key_env
        .as_deref()
        .or(config.kind.default_key_env())
    else {
        return Ok(None);
    };
    match env(variable) {
        Some(value) if !value.trim().is_empty() => Ok(Some(Secret::new(value.trim()))),
        _ => Err(ProviderError::Config(format!(
            "{variable} is not set: export {variable}=<your {} API key>, or keep it once with \
             `viga key set {variable}` (the Blender add-on's preferences do this); keys are never \
             read from config files or flags, and `api_key_env` names another variable",
            config.kind.name()
        ))),
    }
}

/// Durations as (fractional) seconds in config files: `30`, `0.25`.
pub(crate) mod secs {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(
        duration: &Duration,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.serialize_f64(duration.as_secs_f64())
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Duration, D::Error> {
        let secs = f64::deserialize(deserializer)?;
        Duration::try_from_secs_f64(secs).map_err(|_| {
            serde::de::Error::custom(format!(
                "{secs} is not a duration: use a non-negative number of seconds"
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_adapter_shows_its_key_in_debug_output() {
        let key = "sk-do-not-print-me";
        let endpoint = |kind: ProviderKind| Endpoint {
            origin: Origin {
                provider: kind.name(),
                model: "m".to_owned(),
                base_url: "https://example.invalid/v1".to_owned(),
                key_env: "K".to_owned(),
            },
            key: Some(Secret::new(key)),
        };
        let config = ProviderConfig::new(ProviderKind::OpenAi, "m");
        let shown = [
            format!(
                "{:?}",
                OpenAiProvider::new(endpoint(ProviderKind::OpenAi), &config, Flavour::OpenAi)
                    .unwrap()
            ),
            format!(
                "{:?}",
                AnthropicProvider::new(endpoint(ProviderKind::Anthropic), &config).unwrap()
            ),
            format!(
                "{:?}",
                GeminiProvider::new(endpoint(ProviderKind::Gemini), &config).unwrap()
            ),
        ];
        for debug in shown {
            assert!(debug.contains("example.invalid"), "{debug}");
            assert!(!debug.contains(key), "{debug}");
        }
    }
}
