//! # viga-provider
//!
//! Vision-language models behind one object-safe trait.
//!
//! **Owns:** the [`Provider`] trait and its request/response model ([`ModelRequest`],
//! [`ModelResponse`], [`StreamEvent`]); error classification with advice for the user
//! ([`ProviderError`]); the HTTP adapters for OpenAI Chat Completions, Anthropic Messages,
//! Gemini and OpenAI-compatible servers, with retries, streaming and image downscaling; the
//! adaptation of response schemas to what each backend accepts, with a JSON-in-text fallback
//! for servers that refuse them ([`ModelResponse::structured_output_fallback`]); the
//! adapters' configuration ([`ProviderConfig`], [`build_provider`]); the
//! [`ScriptedProvider`] that replays a file of responses for tests and the offline demo.
//!
//! **Must not:** touch Blender, the loop or the run folder. It knows messages, not scenes.
//! API keys come from environment variables only and are never logged.
//!
//! ## Choosing a provider
//!
//! ```
//! use viga_provider::{ProviderConfig, ProviderKind, build_provider_with_env};
//!
//! let config: ProviderConfig = serde_json::from_value(serde_json::json!({
//!     "kind": "openai_compatible",
//!     "model": "qwen2.5vl:7b",
//!     "base_url": "http://localhost:11434/v1",
//! })).unwrap();
//! assert_eq!(config.kind, ProviderKind::OpenAiCompatible);
//! assert_eq!(config.images.max_side, 1024);
//! // `build_provider` reads keys from the process environment; this one needs none.
//! let provider = build_provider_with_env(&config, |_| None).unwrap();
//! assert_eq!((provider.name(), provider.model()), ("openai_compatible", "qwen2.5vl:7b"));
//! ```
//!
//! ## Adding a provider downstream
//!
//! Implement [`Provider`] in your own crate and hand an `Arc<dyn Provider>` to the loop; no
//! change to viga is needed:
//!
//! ```
//! use async_trait::async_trait;
//! use viga_provider::{FinishReason, ModelRequest, ModelResponse, Provider, ProviderError};
//!
//! /// Answers every request with the same text.
//! struct Parrot;
//!
//! #[async_trait]
//! impl Provider for Parrot {
//!     fn name(&self) -> &str { "parrot" }
//!     fn model(&self) -> &str { "parrot-1" }
//!     async fn complete(&self, _request: &ModelRequest) -> Result<ModelResponse, ProviderError> {
//!         Ok(ModelResponse::text_only("```python\nimport bpy\n```", FinishReason::Stop))
//!     }
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let provider: std::sync::Arc<dyn Provider> = std::sync::Arc::new(Parrot);
//! let response = provider.complete(&ModelRequest::new("system", vec![])).await.unwrap();
//! assert!(response.text.contains("import bpy"));
//! // Streaming comes for free: the default `stream` replays `complete`.
//! let streamed = provider.stream(&ModelRequest::new("system", vec![])).await.unwrap().collect().await.unwrap();
//! assert_eq!(streamed.text, response.text);
//! # });
//! ```

#![warn(clippy::too_many_lines)] // no library function over 80 lines: clippy.toml sets the threshold

mod anthropic;
mod assemble;
pub mod config;
mod error;
mod gemini;
mod http;
mod images;
mod openai;
mod request;
mod retry;
mod schema_adapt;
mod schema_fallback;
pub mod scripted;
mod sse;
mod stream;
pub mod tool_probe;
mod wire;

pub use config::{
    ProviderConfig, ProviderKind, Secret, Timeouts, build_provider, build_provider_with_env,
};
pub use error::{ErrorKind, ProviderError};
pub use images::{ImageEncoding, ImageLimits};
pub use request::{FinishReason, ModelRequest, ModelResponse, ResponseFormat};
pub use retry::RetryPolicy;
pub use scripted::ScriptedProvider;
pub use stream::{ResponseStream, StreamEvent};

use async_trait::async_trait;

/// A model that answers requests. Object safe: the loop holds an `Arc<dyn Provider>`.
#[async_trait]
pub trait Provider: Send + Sync {
    /// The provider's name, for logs and run folders ("openai", "anthropic", ...).
    fn name(&self) -> &str;

    /// The model's name as sent to the provider.
    fn model(&self) -> &str;

    /// The settings the provider was built from ([`build_provider`]), which name the key's
    /// variable and never the key: a run records them so it can be resumed with the same
    /// provider. `None` for a provider made some other way (a test's, an embedder's).
    fn config(&self) -> Option<&ProviderConfig> {
        None
    }

    /// One request, one complete response.
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ProviderError>;

    /// The response as it arrives: text deltas and finished tool calls, then `Completed`.
    /// The default replays [`Provider::complete`]; adapters with a streaming API override it.
    async fn stream(&self, request: &ModelRequest) -> Result<ResponseStream, ProviderError> {
        let response = self.complete(request).await?;
        Ok(ResponseStream::from_response(response))
    }
}
