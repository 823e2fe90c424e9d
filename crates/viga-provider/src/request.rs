use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use viga_protocol::event::ModelRole;
use viga_protocol::message::{
    ChatMessage, ContentPart, TokenUsage, ToolCall, ToolChoice, ToolSpec,
};

/// Ask the model to answer with JSON matching a schema.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResponseFormat {
    /// A short identifier for the schema (providers that need one get it).
    pub name: String,
    /// JSON Schema of the expected answer.
    pub schema: Value,
}

/// Everything a provider needs for one call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelRequest {
    /// Which part of the agent asks (planner, generator, verifier, …); `None` for a request
    /// made outside a run. It is for this side of the wire only: a stand-in model (a
    /// benchmark's, a test's) answers by it instead of matching prompt text. The adapters
    /// never send it, and it is not serialised.
    #[serde(skip)]
    pub role: Option<ModelRole>,
    pub system: String,
    pub messages: Vec<ChatMessage>,
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
    #[serde(default)]
    pub tool_choice: ToolChoice,
    #[serde(default)]
    pub response_format: Option<ResponseFormat>,
    pub max_tokens: u32,
    #[serde(default)]
    pub temperature: Option<f32>,
    #[serde(default)]
    pub stop: Vec<String>,
}

impl ModelRequest {
    /// The images the request carries, in messages and in tool results.
    pub fn image_count(&self) -> usize {
        self.messages
            .iter()
            .flat_map(|m| &m.content)
            .map(|part| match part {
                ContentPart::Image { .. } => 1,
                ContentPart::ToolResult(result) => result.images.len(),
                _ => 0,
            })
            .sum()
    }

    /// A request with no role, no tools, 4096 output tokens and the provider's default
    /// temperature.
    pub fn new(system: impl Into<String>, messages: Vec<ChatMessage>) -> Self {
        Self {
            role: None,
            system: system.into(),
            messages,
            tools: Vec::new(),
            tool_choice: ToolChoice::Auto,
            response_format: None,
            max_tokens: 4096,
            temperature: None,
            stop: Vec::new(),
        }
    }

    /// [`ModelRequest::new`] for one role of the agent: what every call in a run uses.
    pub fn for_role(
        role: ModelRole,
        system: impl Into<String>,
        messages: Vec<ChatMessage>,
    ) -> Self {
        Self {
            role: Some(role),
            ..Self::new(system, messages)
        }
    }
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    Stop,
    /// The output token limit was reached: the answer is cut off.
    Length,
    ToolCalls,
    ContentFilter,
    Other(String),
}

/// What the model answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelResponse {
    pub text: String,
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
    pub finish_reason: FinishReason,
    #[serde(default)]
    pub usage: TokenUsage,
    /// Wall time of the call, including retries.
    #[serde(default, with = "millis")]
    pub latency: Duration,
    /// The provider's id for the request, when it sends one (for support tickets).
    #[serde(default)]
    pub request_id: Option<String>,
    /// The server refused the request's response schema (on this call or an earlier one of
    /// the same provider), so the answer was asked for as one JSON object in the text, with
    /// the schema in the system prompt. Nothing but the model then holds the answer to the
    /// schema; callers validate it as always. Worth logging: structured output is off for
    /// this provider from then on.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub structured_output_fallback: bool,
}

impl ModelResponse {
    pub fn text_only(text: impl Into<String>, finish_reason: FinishReason) -> Self {
        Self {
            text: text.into(),
            tool_calls: Vec::new(),
            finish_reason,
            usage: TokenUsage::default(),
            latency: Duration::ZERO,
            request_id: None,
            structured_output_fallback: false,
        }
    }
}

mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(
        duration: &Duration,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.serialize_f64(duration.as_secs_f64() * 1000.0)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Duration, D::Error> {
        let millis = f64::deserialize(deserializer)?;
        if millis.is_finite() && millis >= 0.0 {
            Ok(Duration::from_secs_f64(millis / 1000.0))
        } else {
            Err(serde::de::Error::custom(
                "latency must be a non-negative number of milliseconds",
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_role_stays_on_this_side_of_the_wire() {
        let request = ModelRequest::for_role(ModelRole::Verifier, "system", Vec::new());
        assert_eq!(request.role, Some(ModelRole::Verifier));
        let json = serde_json::to_value(&request).unwrap_or_default();
        assert!(json.get("role").is_none(), "{json}");
        assert!(json.get("system").is_some(), "{json}");
    }
}
