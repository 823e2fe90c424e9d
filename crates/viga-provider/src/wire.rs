//! Helpers the three wire formats share.

use serde::de::DeserializeOwned;
use serde_json::Value;
use viga_protocol::message::ImageData;

use crate::images::{ImageLimits, WireImage, for_wire};
use crate::{FinishReason, ProviderError};

/// Builds a request body on the blocking pool: downscaling images takes tens of milliseconds
/// of CPU each, which must not stall the runtime's other tasks (the streams being read).
pub(crate) async fn body_off_thread(
    provider: &'static str,
    build: impl FnOnce() -> Result<Value, ProviderError> + Send + 'static,
) -> Result<Vec<u8>, ProviderError> {
    let invalid = |message: String| ProviderError::InvalidRequest {
        provider: provider.to_owned(),
        message,
    };
    let body = tokio::task::spawn_blocking(build)
        .await
        .map_err(|err| invalid(format!("building the request body failed: {err}")))??;
    serde_json::to_vec(&body).map_err(|err| invalid(format!("cannot serialise the request: {err}")))
}

/// An image prepared for the wire; `which` says where it sits, for the error.
pub(crate) fn image(
    provider: &str,
    image: &ImageData,
    limits: &ImageLimits,
    which: &str,
) -> Result<WireImage, ProviderError> {
    for_wire(image, limits).map_err(|message| ProviderError::InvalidRequest {
        provider: provider.to_owned(),
        message: format!("{which}: {message}"),
    })
}

/// A successful response body, parsed.
pub(crate) fn parse<T: DeserializeOwned>(provider: &str, body: &[u8]) -> Result<T, ProviderError> {
    serde_json::from_slice(body).map_err(|err| {
        let text = String::from_utf8_lossy(body);
        ProviderError::MalformedResponse {
            provider: provider.to_owned(),
            message: format!(
                "the response is not the expected JSON ({err}); is base_url the right kind of \
                 server? It begins: {}",
                text.chars().take(200).collect::<String>()
            ),
        }
    })
}

/// Some servers say `stop` when the model called tools; the calls are what matters.
pub(crate) fn settle(reason: FinishReason, has_tool_calls: bool) -> FinishReason {
    if has_tool_calls && reason == FinishReason::Stop {
        FinishReason::ToolCalls
    } else {
        reason
    }
}

/// A temperature as written: `0.2_f32` widened to f64 directly would go out as
/// 0.20000000298023224.
pub(crate) fn temperature(value: f32) -> Value {
    value
        .to_string()
        .parse::<f64>()
        .ok()
        .and_then(serde_json::Number::from_f64)
        .map_or(Value::Null, Value::Number)
}

/// Text for a tool result that failed, for wire formats without an error flag.
pub(crate) fn error_text(text: &str, is_error: bool) -> String {
    if is_error {
        format!("Error: {text}")
    } else {
        text.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temperatures_go_out_as_written() {
        assert_eq!(temperature(0.2).to_string(), "0.2");
        assert_eq!(temperature(1.0).to_string(), "1.0");
        assert_eq!(temperature(f32::NAN), Value::Null);
    }

    #[test]
    fn tool_calls_override_a_plain_stop() {
        assert_eq!(settle(FinishReason::Stop, true), FinishReason::ToolCalls);
        assert_eq!(settle(FinishReason::Length, true), FinishReason::Length);
        assert_eq!(settle(FinishReason::Stop, false), FinishReason::Stop);
    }
}
