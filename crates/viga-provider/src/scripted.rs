//! A provider that replays a file of responses: for tests and the offline demo. It is
//! labelled as scripted wherever it shows, and fails clearly when the script runs out or a
//! request does not look like what the script expects.
//!
//! Script file (JSON):
//!
//! ```json
//! {
//!   "description": "what this session shows",
//!   "turns": [
//!     {"expect": {"system_contains": "generator", "last_message_contains": "target"},
//!      "response": {"text": "```python\nimport bpy\n```", "finish_reason": "stop"}}
//!   ]
//! }
//! ```

use std::path::Path;
use std::sync::Mutex;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use viga_protocol::message::{ChatMessage, ContentPart};

use crate::{ModelRequest, ModelResponse, Provider, ProviderError};

/// What a turn requires of the request it answers. Every field is optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expectation {
    #[serde(default)]
    pub system_contains: Option<String>,
    /// Text the last message must contain.
    #[serde(default)]
    pub last_message_contains: Option<String>,
    /// Text some message (any of them) must contain.
    #[serde(default)]
    pub any_message_contains: Option<String>,
    /// Tools that must be offered.
    #[serde(default)]
    pub tools_include: Vec<String>,
    /// The least number of images the request must carry.
    #[serde(default)]
    pub min_images: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    #[serde(default)]
    pub expect: Expectation,
    pub response: ModelResponse,
    /// How long the answer takes, in milliseconds: a model's latency, so front ends can be
    /// tested while a call is in flight (cancel, progress).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub delay_ms: u64,
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    #[serde(default)]
    pub description: String,
    pub turns: Vec<Turn>,
}

#[derive(Debug)]
pub struct ScriptedProvider {
    label: String,
    turns: Vec<Turn>,
    next: Mutex<usize>,
}

impl ScriptedProvider {
    pub fn new(label: impl Into<String>, script: Script) -> Self {
        Self {
            label: label.into(),
            turns: script.turns,
            next: Mutex::new(0),
        }
    }

    /// Loads a script file; the file name becomes the model label.
    pub fn from_file(path: &Path) -> Result<Self, ProviderError> {
        let text = std::fs::read_to_string(path).map_err(|err| {
            ProviderError::Script(format!("cannot read {}: {err}", path.display()))
        })?;
        let script: Script = serde_json::from_str(&text).map_err(|err| {
            ProviderError::Script(format!(
                "{} is not a valid script (line {}, column {}): {err}",
                path.display(),
                err.line(),
                err.column()
            ))
        })?;
        let label = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        Ok(Self::new(format!("scripted:{label}"), script))
    }

    /// Checks the request against the next turn and moves past it: its answer and delay.
    fn take_turn(&self, request: &ModelRequest) -> Result<(ModelResponse, u64), ProviderError> {
        let mut next = self
            .next
            .lock()
            .map_err(|_| ProviderError::Script("the script cursor is poisoned".to_owned()))?;
        let index = *next;
        let turn = self.turns.get(index).ok_or_else(|| {
            ProviderError::Script(format!(
                "the script {} has {} turns and all were used; add turns or lower --max-iterations",
                self.label,
                self.turns.len()
            ))
        })?;
        check(index + 1, &turn.expect, request)?;
        *next += 1;
        Ok((turn.response.clone(), turn.delay_ms))
    }

    /// How many turns have been answered.
    pub fn turns_used(&self) -> usize {
        self.next.lock().map(|next| *next).unwrap_or_default()
    }
}

fn message_text(message: &ChatMessage) -> String {
    let mut text = String::new();
    for part in &message.content {
        match part {
            ContentPart::Text { text: t } => text.push_str(t),
            ContentPart::ToolResult(result) => text.push_str(&result.text),
            ContentPart::Image { .. } | ContentPart::ToolCall(_) => {}
        }
    }
    text
}

fn mismatch(turn: usize, what: String) -> ProviderError {
    ProviderError::Script(format!("turn {turn} does not match the request: {what}"))
}

fn check(turn: usize, expect: &Expectation, request: &ModelRequest) -> Result<(), ProviderError> {
    if let Some(needle) = &expect.system_contains
        && !request.system.contains(needle.as_str())
    {
        return Err(mismatch(
            turn,
            format!("the system prompt does not contain {needle:?}"),
        ));
    }
    if let Some(needle) = &expect.last_message_contains {
        let last = request
            .messages
            .last()
            .map(message_text)
            .unwrap_or_default();
        if !last.contains(needle.as_str()) {
            let shown: String = last.chars().take(200).collect();
            return Err(mismatch(
                turn,
                format!("the last message does not contain {needle:?} (it begins {shown:?})"),
            ));
        }
    }
    if let Some(needle) = &expect.any_message_contains
        && !request
            .messages
            .iter()
            .any(|message| message_text(message).contains(needle.as_str()))
    {
        return Err(mismatch(turn, format!("no message contains {needle:?}")));
    }
    for tool in &expect.tools_include {
        if !request.tools.iter().any(|offered| &offered.name == tool) {
            return Err(mismatch(turn, format!("tool {tool:?} is not offered")));
        }
    }
    if let Some(least) = expect.min_images {
        let found = request.image_count();
        if found < least {
            return Err(mismatch(
                turn,
                format!("expected at least {least} images, found {found}"),
            ));
        }
    }
    Ok(())
}

#[async_trait]
impl Provider for ScriptedProvider {
    fn name(&self) -> &str {
        "scripted"
    }

    fn model(&self) -> &str {
        &self.label
    }

    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        let (response, delay) = self.take_turn(request)?;
        if delay > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
        }
        Ok(response)
    }
}
