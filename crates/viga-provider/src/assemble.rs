//! Streamed tool calls arrive in fragments: an id and a name first, then the JSON arguments a
//! few characters at a time. Fragments are keyed by the wire's index (OpenAI's
//! `tool_calls[].index`, Anthropic's content block index), never by id: only the first
//! fragment of a call carries the id.

use std::collections::BTreeMap;

use serde_json::Value;
use viga_protocol::message::ToolCall;

#[derive(Debug, Default)]
struct Partial {
    id: String,
    name: String,
    arguments: String,
}

#[derive(Debug, Default)]
pub(crate) struct ToolCallParts {
    open: BTreeMap<u64, Partial>,
}

impl ToolCallParts {
    /// Records the id and name of the call at `index`, when this fragment carries them.
    pub(crate) fn start(&mut self, index: u64, id: Option<&str>, name: Option<&str>) {
        let partial = self.open.entry(index).or_default();
        if let Some(id) = id.filter(|id| !id.is_empty()) {
            id.clone_into(&mut partial.id);
        }
        if let Some(name) = name.filter(|name| !name.is_empty()) {
            name.clone_into(&mut partial.name);
        }
    }

    pub(crate) fn push_arguments(&mut self, index: u64, fragment: &str) {
        self.open
            .entry(index)
            .or_default()
            .arguments
            .push_str(fragment);
    }

    /// The call at `index`, now complete.
    pub(crate) fn finish(&mut self, index: u64) -> Option<ToolCall> {
        self.open
            .remove(&index)
            .map(|partial| complete(index, partial))
    }

    /// Every open call, in index order.
    pub(crate) fn finish_all(&mut self) -> Vec<ToolCall> {
        std::mem::take(&mut self.open)
            .into_iter()
            .map(|(index, partial)| complete(index, partial))
            .collect()
    }
}

fn complete(index: u64, partial: Partial) -> ToolCall {
    let id = if partial.id.is_empty() {
        // Some compatible servers send no id; the loop still needs one to pair the result.
        format!("call_{index}")
    } else {
        partial.id
    };
    ToolCall {
        id,
        name: partial.name,
        arguments: parse_arguments(&partial.arguments),
    }
}

/// The arguments a model wrote, parsed. No arguments mean `{}`. Arguments that are not JSON
/// are kept as a string: the tool's schema check then rejects them and the model is told to
/// correct itself, which beats failing the whole call.
pub(crate) fn parse_arguments(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return Value::Object(serde_json::Map::new());
    }
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_owned()))
}

/// Tool-call arguments as the wire carries them: a JSON string. A string kept by
/// [`parse_arguments`] goes back as it came.
pub(crate) fn arguments_text(arguments: &Value) -> String {
    match arguments {
        Value::String(raw) => raw.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn fragments_are_joined_per_index_whatever_the_interleaving() {
        let mut parts = ToolCallParts::default();
        parts.start(1, Some("call_b"), Some("render"));
        parts.start(0, Some("call_a"), Some("run_script"));
        for (index, fragment) in [
            (0, "{\"co"),
            (1, "{\"view"),
            (0, "de\": \"import"),
            (1, "\": \"front\"}"),
            (0, " bpy\"}"),
        ] {
            parts.push_arguments(index, fragment);
        }
        let calls = parts.finish_all();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].id, "call_a");
        assert_eq!(calls[0].arguments, json!({"code": "import bpy"}));
        assert_eq!(calls[1].name, "render");
        assert_eq!(calls[1].arguments, json!({"view": "front"}));
        assert!(parts.finish_all().is_empty());
    }

    #[test]
    fn missing_ids_and_empty_or_broken_arguments_are_handled() {
        let mut parts = ToolCallParts::default();
        parts.start(3, None, Some("noop"));
        let call = parts.finish(3).unwrap();
        assert_eq!(call.id, "call_3");
        assert_eq!(call.arguments, json!({}));
        assert_eq!(parse_arguments("{\"a\": "), json!("{\"a\": "));
        assert_eq!(arguments_text(&json!("{\"a\": ")), "{\"a\": ");
        assert_eq!(arguments_text(&json!({"a": 1})), "{\"a\":1}");
    }
}
