//! Chat messages, images, tool specs, tool calls and tool results: the vocabulary shared by
//! every model provider adapter.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who wrote a message. The system prompt is not a message: it travels beside them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Assistant,
}

/// An encoded image (PNG, JPEG, ...). `data` is base64 on the wire.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ImageData {
    /// IANA media type, for example `image/png`.
    pub media_type: String,
    /// The encoded bytes (base64 in JSON).
    #[serde(with = "crate::bytes")]
    #[schemars(with = "String")]
    pub data: Vec<u8>,
}

impl ImageData {
    pub fn png(data: Vec<u8>) -> Self {
        Self {
            media_type: "image/png".to_owned(),
            data,
        }
    }
}

// Image bytes are large and unreadable; Debug shows their size instead.
impl std::fmt::Debug for ImageData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImageData")
            .field("media_type", &self.media_type)
            .field("bytes", &self.data.len())
            .finish()
    }
}

/// One part of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ContentPart {
    Text {
        text: String,
    },
    Image {
        image: ImageData,
        /// A short label shown to the model beside the image ("front view", "target").
        #[serde(default, skip_serializing_if = "Option::is_none")]
        label: Option<String>,
    },
    /// A tool call made by the assistant.
    ToolCall(ToolCall),
    /// The answer to a tool call, sent back by the user side.
    ToolResult(ToolResult),
}

impl ContentPart {
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text { text: text.into() }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChatMessage {
    pub role: Role,
    pub content: Vec<ContentPart>,
}

impl ChatMessage {
    pub fn user(content: Vec<ContentPart>) -> Self {
        Self {
            role: Role::User,
            content,
        }
    }

    pub fn user_text(text: impl Into<String>) -> Self {
        Self::user(vec![ContentPart::text(text)])
    }

    pub fn assistant(content: Vec<ContentPart>) -> Self {
        Self {
            role: Role::Assistant,
            content,
        }
    }

    /// The concatenated text parts of the message.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for part in &self.content {
            if let ContentPart::Text { text } = part {
                out.push_str(text);
            }
        }
        out
    }
}

/// A tool the model may call. `parameters` is a JSON Schema (draft 2020-12) object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

/// A call the model made; `arguments` is the parsed JSON object it produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: Value,
}

/// What a tool answered. `is_error` marks an answer the model should correct itself from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolResult {
    pub call_id: String,
    pub text: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<ImageData>,
    #[serde(default)]
    pub is_error: bool,
}

/// How the model may use the tools it is offered.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "mode", rename_all = "snake_case", deny_unknown_fields)]
pub enum ToolChoice {
    #[default]
    Auto,
    None,
    Required,
    Tool {
        name: String,
    },
}

/// Tokens a model call consumed, as the provider reported them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

impl std::ops::AddAssign for TokenUsage {
    fn add_assign(&mut self, other: Self) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
    }
}

crate::validate::plain_protocol_types!(ChatMessage, ToolSpec, ToolCall, ToolResult, ToolChoice);
