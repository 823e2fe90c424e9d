//! Tool calls a model wrote as text instead of through the tool-calling interface (small
//! local models do, even with tool calling on), in the shapes they write them: `{"name":
//! "end_process", "arguments": {...}}`, fenced or bare, in `<tool_call>` tags, several in
//! one reply (one per line, side by side or as an array), `parameters` for `arguments`, the
//! arguments as an object or as a JSON string, OpenAI's `{"type": "function", "function":
//! {...}}`, and for a tool the role offers the arguments beside the name (`{"name":
//! "execute_code", "code": "..."}`). Text around the calls and a copy of a tool's result
//! (an object with no `name`) are passed over. Every role that calls tools reads its answers
//! through [`with_tool_call_from_text`], so an answer made of tool calls is never taken for a
//! final answer (a verdict, a program, the agent's reply):
//!
//! - a call to an offered tool is that call;
//! - a call to a tool nobody offers is read as a call too, so the role's tool runner answers
//!   it with "there is no tool named …" and the names that exist, instead of a reminder that
//!   does not say what was wrong. Only a call written where a call would be (a JSON or
//!   unlabelled fence, `<tool_call>` tags, or the whole answer without fences) counts: a
//!   dict literal with a `name` inside a program is not a call.

use serde_json::{Map, Value};
use viga_protocol::message::ToolCall;
use viga_provider::ModelResponse;

/// `response` with the tool calls its text holds, in the order written, when it has no call
/// of its own (see the module's notes). `offered` says which tool names the role has.
pub fn with_tool_call_from_text(
    mut response: ModelResponse,
    offered: impl Fn(&str) -> bool,
    index: u32,
    turn: u32,
) -> ModelResponse {
    if !response.tool_calls.is_empty() {
        return response;
    }
    let written: Vec<(String, Value)> = call_spots(&response.text)
        .into_iter()
        .flat_map(json_values)
        .flat_map(|value| match value {
            Value::Array(items) => items,
            other => vec![other],
        })
        .filter_map(|value| written_call(value, &offered))
        .collect();
    let count = written.len();
    for (number, (name, arguments)) in written.into_iter().enumerate() {
        // One call keeps the id it always had; several are numbered.
        let id = if count == 1 {
            format!("text-{index}-{turn}")
        } else {
            format!("text-{index}-{turn}-{}", number + 1)
        };
        response.tool_calls.push(ToolCall {
            id,
            name,
            arguments,
        });
    }
    if count > 0 {
        // The calls are the text: the conversation keeps them once, as calls.
        response.text.clear();
    }
    response
}

/// A JSON object written as a call: a string `name` with its arguments as an object (or an
/// object written as a JSON string) under `arguments` or `parameters`; OpenAI's own shape
/// (`{"type": "function", "function": {...}}`); or, for a tool the role offers, the
/// arguments beside the name (`{"name": "execute_code", "code": "..."}`).
fn written_call(value: Value, offered: &impl Fn(&str) -> bool) -> Option<(String, Value)> {
    let Value::Object(mut object) = value else {
        return None;
    };
    if let Some(function @ Value::Object(_)) = object.remove("function") {
        return written_call(function, offered);
    }
    let name = object.remove("name")?.as_str()?.to_owned();
    let arguments = match object
        .remove("arguments")
        .or_else(|| object.remove("parameters"))
    {
        Some(Value::String(text)) => serde_json::from_str::<Value>(&text).ok()?,
        Some(arguments) => arguments,
        None if offered(&name) => Value::Object(beside_the_name(object)),
        None => return None,
    };
    arguments.is_object().then_some((name, arguments))
}

/// The keys written beside a call's name, as its arguments (a `type` that only says it is a
/// function call is not one of them).
fn beside_the_name(mut object: Map<String, Value>) -> Map<String, Value> {
    if object.get("type").and_then(Value::as_str) == Some("function") {
        object.remove("type");
    }
    object
}

/// Every JSON object or array that stands in `spot`, in order, however many: one per line,
/// side by side, or among prose and echoed results; what does not parse is passed over.
fn json_values(spot: &str) -> Vec<Value> {
    let mut values = Vec::new();
    let mut from = 0;
    while let Some(start) = spot[from..].find(['{', '[']).map(|at| from + at) {
        let mut stream = serde_json::Deserializer::from_str(&spot[start..]).into_iter::<Value>();
        match stream.next() {
            Some(Ok(value)) => {
                values.push(value);
                from = start + stream.byte_offset();
            }
            _ => from = start + 1,
        }
    }
    values
}

/// Where written calls may stand: fenced blocks labelled `json` or not labelled at all,
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
                "" | "json" | "jsonc" | "jsonl" | "tool_call"
            )
            .then_some(body.trim())
        })
        .collect();
    let mut tagged = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("<tool_call>") {
        let after = &rest[start + "<tool_call>".len()..];
        let end = after.find("</tool_call>").unwrap_or(after.len());
        tagged.push(after[..end].trim());
        rest = &after[end..];
    }
    if !tagged.is_empty() {
        // The tags hold the calls; the same calls are not read again outside them.
        return tagged;
    }
    if !text.contains("```") {
        spots.push(text);
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

    fn names(response: &ModelResponse) -> Vec<&str> {
        response
            .tool_calls
            .iter()
            .map(|call| call.name.as_str())
            .collect()
    }

    #[test]
    fn every_call_written_is_read_in_order_with_its_own_id() {
        let text = "```json\n{\"name\": \"nope\", \"arguments\": {}}\n```\n```json\n{\"name\": \"end_process\", \"arguments\": {\"accepted\": true}}\n```";
        let response = read(text, &["end_process"]);
        assert_eq!(names(&response), ["nope", "end_process"]);
        let ids: Vec<&str> = response.tool_calls.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["text-1-0-1", "text-1-0-2"]);
    }

    /// What a small local model wrote (llama.cpp, Qwen2.5-Coder-0.5B): a call and a copy of
    /// a tool's result, one JSON object per line with no fence; then two calls, one per line.
    #[test]
    fn calls_one_per_line_are_read_and_an_echoed_result_is_not_a_call() {
        let echoed = concat!(
            "{\"name\": \"place_object_relative\", \"arguments\": {\"distance\": 0.05, \"object1_name\": \"Table\", \"object2_name\": \"Light\", \"side\": \"left\"}}\n",
            "{\"scene\":[\"Camera [CAMERA] at (7.359, -6.926, 4.958)\", \"Lamp [MESH] at (3.000, 0.000, 0.200)\"]}"
        );
        let response = read(echoed, &["place_object_relative"]);
        assert_eq!(names(&response), ["place_object_relative"]);
        assert_eq!(response.tool_calls[0].arguments["side"], "left");
        assert!(
            response.text.is_empty(),
            "a reply of calls is no final answer"
        );
        let two = "{\"name\": \"paint_object\", \"arguments\": {\"object_name\": \"Lamp\"}}\n{\"name\": \"list_objects\", \"arguments\": {}}";
        assert_eq!(
            names(&read(two, &["paint_object", "list_objects"])),
            ["paint_object", "list_objects"]
        );
    }

    #[test]
    fn arguments_beside_the_name_of_an_offered_tool_are_its_arguments() {
        let flat = "```json\n{\"name\": \"execute_code\", \"code\": \"import bpy\"}\n```";
        assert_eq!(
            call(&read(flat, &["execute_code", "make_plan"])),
            Some(("execute_code", &json!({"code": "import bpy"})))
        );
        let plan = "{\"name\": \"make_plan\", \"plan\": \"1. a cube\", \"type\": \"function\"}";
        assert_eq!(
            call(&read(plan, &["execute_code", "make_plan"])),
            Some(("make_plan", &json!({"plan": "1. a cube"})))
        );
        // Beside the name of a tool nobody offers, keys are just an object's keys.
        let lamp = "{\"name\": \"lamp\", \"energy\": 10}";
        assert!(read(lamp, &["execute_code"]).tool_calls.is_empty());
        // A tool's own parameter called `name` stays inside `arguments`.
        let rename = "{\"name\": \"rename_object\", \"arguments\": {\"name\": \"Lamp\"}}";
        assert_eq!(
            call(&read(rename, &["rename_object"])),
            Some(("rename_object", &json!({"name": "Lamp"})))
        );
    }

    #[test]
    fn an_array_of_calls_and_the_function_shape_are_read() {
        let array = "```json\n[{\"name\": \"set_camera\", \"arguments\": {\"view\": \"front\"}}, {\"name\": \"end_process\", \"arguments\": {\"accepted\": false}}]\n```";
        assert_eq!(
            names(&read(array, &["set_camera", "end_process"])),
            ["set_camera", "end_process"]
        );
        let function = json!({"type": "function", "function": {"name": "end_process", "arguments": "{\"accepted\": true}"}}).to_string();
        assert_eq!(
            call(&read(&function, &["end_process"])),
            Some(("end_process", &json!({"accepted": true})))
        );
    }

    #[test]
    fn tagged_calls_are_read_once_and_text_around_them_is_passed_over() {
        let text = "I will look first.\n<tool_call>\n{\"name\": \"set_camera\", \"arguments\": {\"view\": \"top\"}}\n</tool_call>\n<tool_call>{\"name\": \"end_process\", \"arguments\": {\"accepted\": true}}</tool_call>\nDone.";
        assert_eq!(
            names(&read(text, &["set_camera", "end_process"])),
            ["set_camera", "end_process"]
        );
    }
}
