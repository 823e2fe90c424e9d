//! Tool calls a model wrote as text instead of through the tool-calling interface (small
//! local models do, even with tool calling on): `{"name": "end_process", "arguments": {...}}`,
//! fenced or bare, in `<tool_call>` tags, `parameters` for `arguments`, the arguments as an
//! object or as a JSON string. Every role that calls tools reads its answers through
//! [`with_tool_call_from_text`], so an answer that is only a tool call is never taken for a
//! final answer (a verdict, a program, the agent's reply):
//!
//! - a call to an offered tool is that call;
//! - a call to a tool nobody offers is read as a call too, so the role's tool runner answers
//!   it with "there is no tool named …" and the names that exist, instead of a reminder that
//!   does not say what was wrong. Only a call written where a call would be (a JSON or
//!   unlabelled fence, `<tool_call>` tags, or the whole answer without fences) counts: a
//!   dict literal with a `name` inside a program is not a call.

use serde_json::Value;
use viga_protocol::json_candidates;
use viga_protocol::message::ToolCall;
use viga_provider::ModelResponse;

/// `response` with the tool call its text holds, when it has no call of its own (see the
/// module's notes). `offered` says which tool names the role has.
pub fn with_tool_call_from_text(
    mut response: ModelResponse,
    offered: impl Fn(&str) -> bool,
    index: u32,
    turn: u32,
) -> ModelResponse {
    if !response.tool_calls.is_empty() {
        return response;
    }
    let written = json_candidates(&response.text)
        .filter_map(written_call)
        .find(|(name, arguments)| offered(name) && arguments.is_some())
        .or_else(|| {
            call_spots(&response.text)
                .into_iter()
                .filter_map(written_call)
                .find(|(_, arguments)| arguments.is_some())
        });
    if let Some((name, Some(arguments))) = written {
        response.tool_calls.push(ToolCall {
            id: format!("text-{index}-{turn}"),
            name,
            arguments,
        });
        // The call is the text: the conversation keeps it once, as the call.
        response.text.clear();
    }
    response
}

/// A JSON object with a string `name` and its arguments: an object, or an object written
/// as a JSON string (`None` when they are neither).
fn written_call(candidate: &str) -> Option<(String, Option<Value>)> {
    let Value::Object(mut object) = serde_json::from_str::<Value>(candidate).ok()? else {
        return None;
    };
    let name = object.get("name")?.as_str()?.to_owned();
    let arguments = object
        .remove("arguments")
        .or_else(|| object.remove("parameters"))?;
    let arguments = match arguments {
        Value::String(text) => serde_json::from_str::<Value>(&text).ok(),
        arguments => Some(arguments),
    }
    .filter(Value::is_object);
    Some((name, arguments))
}

/// Where a written call may stand: fenced blocks labelled `json` or not labelled at all,
/// `<tool_call>` tags, and the answer itself when it has no fence. Not a program's fence.
fn call_spots(text: &str) -> Vec<&str> {
    let mut spots: Vec<&str> = text
        .split("```")
        .skip(1)
        .step_by(2)
        .filter_map(|block| {
            let label_end = block.find(|c: char| !c.is_ascii_alphanumeric() && c != '_');
            let (label, body) = block.split_at(label_end.unwrap_or(block.len()));
            matches!(
                label.to_ascii_lowercase().as_str(),
                "" | "json" | "jsonc" | "tool_call"
            )
            .then_some(body.trim())
        })
        .collect();
    let mut rest = text;
    while let Some(start) = rest.find("<tool_call>") {
        let after = &rest[start + "<tool_call>".len()..];
        let end = after.find("</tool_call>").unwrap_or(after.len());
        spots.push(after[..end].trim());
        rest = &after[end..];
    }
    if !text.contains("```") {
        let span = text
            .find('{')
            .zip(text.rfind('}'))
            .filter(|(start, end)| start < end)
            .map(|(start, end)| &text[start..=end]);
        spots.extend(span);
    }
    spots
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use viga_provider::FinishReason;

    use super::*;

    fn read(text: &str, offered: &[&str]) -> ModelResponse {
        let response = ModelResponse::text_only(text, FinishReason::Stop);
        with_tool_call_from_text(response, |name| offered.contains(&name), 1, 0)
    }

    fn call(response: &ModelResponse) -> Option<(&str, &Value)> {
        response
            .tool_calls
            .first()
            .map(|call| (call.name.as_str(), &call.arguments))
    }

    #[test]
    fn tool_calls_written_as_json_text_are_read_as_calls() {
        let verdict = json!({"visual_differences": [], "suggestions": [], "accepted": true});
        let bare = format!(r#"{{"name": "end_process", "arguments": {verdict}}}"#);
        let fenced = format!("I am done.\n```json\n{bare}\n```\nThat is all.");
        let qwen = format!("<tool_call>\n{bare}\n</tool_call>");
        let as_string =
            json!({"name": "end_process", "arguments": verdict.to_string()}).to_string();
        for text in [&bare, &fenced, &qwen, &as_string] {
            let response = read(text, &["end_process"]);
            assert_eq!(call(&response), Some(("end_process", &verdict)), "{text}");
            assert!(response.text.is_empty(), "the call is kept once: {text}");
        }
        let parameters =
            json!({"name": "set_camera", "parameters": {"location": [1, 2, 3]}}).to_string();
        assert_eq!(
            call(&read(&parameters, &["set_camera"])),
            Some(("set_camera", &json!({"location": [1, 2, 3]})))
        );
        for not_a_call in [
            "The crate is too small.",
            r#"{"visual_differences": ["red"], "suggestions": [], "accepted": false}"#,
            r#"{"name": "end_process", "arguments": 3}"#,
        ] {
            let response = read(not_a_call, &["end_process"]);
            assert!(response.tool_calls.is_empty(), "{not_a_call}");
            assert_eq!(response.text, not_a_call);
        }
    }

    #[test]
    fn a_call_to_a_tool_nobody_offers_is_a_call_but_a_dict_in_a_program_is_not() {
        // The generator's case: a model that kept calling a tool it was never offered.
        let start = "```json\n{\"name\": \"start_process\", \"arguments\": {}}\n```";
        assert_eq!(
            call(&read(start, &["execute_code", "end_process"])),
            Some(("start_process", &json!({})))
        );
        let tagged =
            "<tool_call>{\"name\": \"render_scene\", \"parameters\": {\"size\": 2}}</tool_call>";
        assert_eq!(
            call(&read(tagged, &["set_camera"])),
            Some(("render_scene", &json!({"size": 2})))
        );
        let program =
            "```python\nlamp = {\"name\": \"lamp\", \"parameters\": {\"energy\": 10}}\n```";
        let untouched = read(program, &["set_camera"]);
        assert!(untouched.tool_calls.is_empty());
        assert_eq!(untouched.text, program);
        // A program's dict is not read as a call even when another fence holds prose.
        let mixed = format!("{program}\n```\nno call here\n```");
        assert!(read(&mixed, &["set_camera"]).tool_calls.is_empty());
    }

    #[test]
    fn an_offered_call_wins_over_an_unknown_one() {
        let text = "```json\n{\"name\": \"nope\", \"arguments\": {}}\n```\n```json\n{\"name\": \"end_process\", \"arguments\": {\"accepted\": true}}\n```";
        assert_eq!(
            call(&read(text, &["end_process"])).map(|(name, _)| name),
            Some("end_process")
        );
    }
}
