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
use viga_protocol::message::{ToolCall, ToolSpec};
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

/// What a role is told about an answer without a call that is no answer: cut off at its
/// output limit of `limit` tokens (asked for `shorter`), or a call written so that nobody
/// could read it; `None` for a real answer. Every role that calls tools asks this.
pub fn not_an_answer(
    response: &ModelResponse,
    limit: u32,
    shorter: &str,
    tools: &[ToolSpec],
) -> Option<String> {
    if response.finish_reason == viga_provider::FinishReason::Length {
        return Some(crate::cut_off::told(limit, &response.text, shorter));
    }
    unreadable_call(&response.text, tools)
}

/// The first sentence of what the model is told, for a warning.
pub fn first_sentence(told: &str) -> &str {
    told.split_inclusive(". ").next().unwrap_or_default().trim()
}

/// What is wrong with a tool call `text` tries to write and nobody could read (see
/// [`with_tool_call_from_text`]), said so that the model can write it again: the problem,
/// the shape a written call takes, and the tools `tools` with their parameters. `None` when
/// the text holds no attempt at a call.
pub fn unreadable_call(text: &str, tools: &[ToolSpec]) -> Option<String> {
    let problem = call_spots(text)
        .into_iter()
        .find_map(|spot| spot_problem(spot, tools))?;
    Some(format!(
        "{problem} Nothing ran. Call a tool through the tool-calling interface, or write the call as one JSON object, {{\"name\": \"<tool>\", \"arguments\": {{...}}}}, with the strings in it escaped as JSON strings are (\\n for a new line, \\\" for a quote). The tools and their parameters (? = optional): {}.",
        tools_line(tools)
    ))
}

/// The first attempt at a call in `spot` that cannot be read, in words.
fn spot_problem(spot: &str, tools: &[ToolSpec]) -> Option<String> {
    let mut from = 0;
    while let Some(start) = spot[from..].find('{').map(|at| from + at) {
        let mut stream = serde_json::Deserializer::from_str(&spot[start..]).into_iter::<Value>();
        match stream.next() {
            Some(Ok(value)) => {
                if let Some(problem) = object_problem(&value, tools) {
                    return Some(problem);
                }
                from = start + stream.byte_offset();
            }
            Some(Err(err)) if names_a_tool(&spot[start..]) => {
                return Some(format!("Your tool call is not valid JSON ({err})."));
            }
            _ => from = start + 1,
        }
    }
    None
}

/// Whether a JSON text that does not parse starts like a call: a `name` key near its start.
fn names_a_tool(text: &str) -> bool {
    let start: String = text.chars().take(80).collect();
    start.contains("\"name\"") || start.contains("\"function\"")
}

/// What is wrong with a JSON object written as a call that was not read as one. An object
/// whose `name` is no tool's is a call only when the name resembles a tool's (`execute` for
/// `execute_code`): an answer may list objects of the scene with their names.
fn object_problem(value: &Value, tools: &[ToolSpec]) -> Option<String> {
    let object = value.as_object()?;
    if let Some(function) = object.get("function") {
        return object_problem(function, tools);
    }
    let name = object.get("name")?.as_str()?;
    let arguments = object.get("arguments").or_else(|| object.get("parameters"));
    let offered = tools.iter().any(|tool| tool.name == name);
    match arguments {
        None if !offered => resembled(name, tools)
            .map(|tool| format!("There is no tool named {name:?} (did you mean {tool:?}?).")),
        Some(Value::String(text))
            if !serde_json::from_str::<Value>(text).is_ok_and(|v| v.is_object()) =>
        {
            Some(format!(
                "The arguments of your call of {name:?} are a string that is not a JSON object."
            ))
        }
        Some(arguments) if !arguments.is_object() && !arguments.is_string() => Some(format!(
            "The arguments of your call of {name:?} must be a JSON object of its parameters."
        )),
        _ => None,
    }
}

/// The tool whose name `name` resembles: one holds the other, or they share their first word.
fn resembled<'a>(name: &str, tools: &'a [ToolSpec]) -> Option<&'a str> {
    let name = name.to_ascii_lowercase();
    let first_word = |text: &str| text.split(['_', '-', '.']).next().unwrap_or("").to_owned();
    tools.iter().map(|tool| tool.name.as_str()).find(|tool| {
        let tool = tool.to_ascii_lowercase();
        name.len() >= 3
            && (tool.contains(&name)
                || name.contains(&tool)
                || first_word(&tool) == first_word(&name))
    })
}

/// `execute_code(code), end_process(reason?)`: each tool with its parameters.
fn tools_line(tools: &[ToolSpec]) -> String {
    tools
        .iter()
        .map(|tool| {
            let required: Vec<&str> = tool.parameters["required"]
                .as_array()
                .map(|names| names.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let parameters: Vec<String> = tool.parameters["properties"]
                .as_object()
                .map(|properties| {
                    properties
                        .keys()
                        .map(|key| {
                            if required.contains(&key.as_str()) {
                                key.clone()
                            } else {
                                format!("{key}?")
                            }
                        })
                        .collect()
                })
                .unwrap_or_default();
            format!("{}({})", tool.name, parameters.join(", "))
        })
        .collect::<Vec<_>>()
        .join(", ")
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

    fn tools() -> Vec<ToolSpec> {
        let tool = |name: &str, parameters: Value| ToolSpec {
            name: name.to_owned(),
            description: String::new(),
            parameters,
        };
        vec![
            tool(
                "execute_code",
                json!({"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}),
            ),
            tool(
                "end_process",
                json!({"type": "object", "properties": {"reason": {"type": "string"}}}),
            ),
        ]
    }

    #[test]
    fn a_call_that_cannot_be_read_is_said_with_the_shape_and_the_tools() {
        let raw_newline = "{\"name\": \"execute_code\", \"arguments\": {\"code\": \"import bpy\nbpy.ops.mesh.primitive_cube_add()\"}}";
        let said = unreadable_call(raw_newline, &tools()).unwrap();
        assert!(
            said.starts_with("Your tool call is not valid JSON ("),
            "{said}"
        );
        assert!(
            said.contains("{\"name\": \"<tool>\", \"arguments\": {...}}"),
            "{said}"
        );
        assert!(said.contains("\\n for a new line"), "{said}");
        assert!(
            said.contains("execute_code(code), end_process(reason?)"),
            "{said}"
        );

        let misnamed = "```json\n{\"name\": \"execute\", \"code\": \"x = 1\"}\n```";
        let said = unreadable_call(misnamed, &tools()).unwrap();
        assert!(
            said.starts_with(
                "There is no tool named \"execute\" (did you mean \"execute_code\"?)."
            ),
            "{said}"
        );

        let string_arguments =
            "<tool_call>{\"name\": \"end_process\", \"arguments\": \"done\"}</tool_call>";
        let said = unreadable_call(string_arguments, &tools()).unwrap();
        assert!(
            said.contains("are a string that is not a JSON object"),
            "{said}"
        );
    }

    #[test]
    fn answers_that_attempt_no_call_have_nothing_unreadable() {
        for text in [
            "The scene has a cube and a lamp.",
            "{\"name\": \"Cube\", \"location\": [0, 0, 0]}",
            "{\"visual_differences\": [], \"accepted\": true}",
            "```python\nitems = {\"name\": \"execute\"\n```",
        ] {
            assert_eq!(unreadable_call(text, &tools()), None, "{text}");
        }
    }
}
