//! A model server for tests: OpenAI's chat completions API on a loopback [`TestServer`],
//! answering each request with the next of a list of replies, streamed as server-sent events
//! in small pieces when the request asks for a stream. What each request carried (its key in
//! `Authorization`, its messages) stays in the server's records for the test to check.

use std::sync::Mutex;

use serde_json::{Value, json};

use crate::http::{Reply, Request, TestServer};

/// A reply: `{"text": "...", "tool_calls": [{"name": "...", "arguments": {...}}]}`, both
/// fields optional.
pub type Answer = Value;

/// The characters of a streamed reply's text per event.
const PIECE_CHARS: usize = 8;

/// Starts a server that answers `POST …/chat/completions` with `answers`, in order; a request
/// past the last answer gets HTTP 500 saying so.
pub fn replay_server(answers: Vec<Answer>) -> std::io::Result<TestServer> {
    let next = Mutex::new(0_usize);
    TestServer::start(move |request: &Request| {
        if !request.path().ends_with("/chat/completions") {
            return Reply::not_found();
        }
        let index = match next.lock() {
            Ok(mut next) => {
                *next += 1;
                *next - 1
            }
            Err(_) => return Reply::json(500, r#"{"error": {"message": "poisoned"}}"#),
        };
        let Some(answer) = answers.get(index) else {
            return Reply::json(
                500,
                json!({"error": {"message": format!("the replay has {} answers and all were used", answers.len())}}).to_string(),
            );
        };
        let streamed = serde_json::from_slice::<Value>(&request.body)
            .ok()
            .and_then(|body| body.get("stream").and_then(Value::as_bool))
            .unwrap_or(false);
        if streamed {
            Reply::bytes(200, sse(answer)).with_header("Content-Type", "text/event-stream")
        } else {
            Reply::json(200, whole(answer).to_string())
        }
    })
}

fn text_of(answer: &Answer) -> &str {
    answer
        .get("text")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn calls_of(answer: &Answer) -> Vec<Value> {
    answer
        .get("tool_calls")
        .and_then(Value::as_array)
        .map(|calls| {
            calls
                .iter()
                .enumerate()
                .map(|(index, call)| {
                    json!({
                        "index": index,
                        "id": format!("call_{index}"),
                        "type": "function",
                        "function": {
                            "name": call.get("name").cloned().unwrap_or(Value::Null),
                            "arguments": call.get("arguments").map(Value::to_string).unwrap_or_default(),
                        }
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

fn finish_reason(answer: &Answer) -> &'static str {
    if calls_of(answer).is_empty() {
        "stop"
    } else {
        "tool_calls"
    }
}

const USAGE: &str = r#"{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}"#;

fn whole(answer: &Answer) -> Value {
    let calls = calls_of(answer);
    let mut message = json!({"role": "assistant", "content": text_of(answer)});
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    json!({
        "id": "replay",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason(answer)}],
        "usage": serde_json::from_str::<Value>(USAGE).unwrap_or(Value::Null),
    })
}

fn sse(answer: &Answer) -> String {
    let chunk = |delta: Value, finish: Option<&str>| {
        let body = json!({
            "id": "replay",
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        });
        format!("data: {body}\n\n")
    };
    let mut events = String::new();
    let chars: Vec<char> = text_of(answer).chars().collect();
    for piece in chars.chunks(PIECE_CHARS) {
        let piece: String = piece.iter().collect();
        events.push_str(&chunk(json!({"content": piece}), None));
    }
    let calls = calls_of(answer);
    if !calls.is_empty() {
        events.push_str(&chunk(json!({"tool_calls": calls}), None));
    }
    events.push_str(&chunk(json!({}), Some(finish_reason(answer))));
    events.push_str(&format!(
        "data: {{\"id\": \"replay\", \"object\": \"chat.completion.chunk\", \"choices\": [], \"usage\": {USAGE}}}\n\n"
    ));
    events.push_str("data: [DONE]\n\n");
    events
}
