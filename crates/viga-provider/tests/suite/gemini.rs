use serde_json::json;
use viga_protocol::message::{ChatMessage, ContentPart, ToolResult};
use viga_provider::{ErrorKind, FinishReason, ProviderKind, ResponseFormat, StreamEvent};

use super::support::{
    KEY, KEY_ENV, build, config, conversation, drain, fixture, hello, redact_images, text_of,
};
use viga_testkit::http::{Reply, TestServer};

#[tokio::test]
async fn the_request_with_images_and_tools_is_sent_as_generate_content() {
    let server = TestServer::scripted(vec![Reply::json(
        200,
        fixture("gemini/complete_function_call.json"),
    )])
    .unwrap();
    let provider = build(&config(ProviderKind::Gemini, server.base()));
    provider.complete(&conversation()).await.unwrap();

    let sent = server.only_request();
    assert_eq!(
        sent.target,
        "/v1beta/models/gemini-2.5-flash:generateContent"
    );
    assert_eq!(sent.header("x-goog-api-key"), Some(KEY));
    assert!(!sent.target.contains(KEY), "the key never goes in the URL");
    let mut body = sent.json();
    assert_eq!(redact_images(&mut body), [(256, 128), (256, 256)]);
    insta::assert_json_snapshot!("gemini_request_with_images_and_tools", body);
}

#[tokio::test]
async fn a_function_call_keeps_its_thought_signature_for_the_next_request() {
    let server = TestServer::scripted(vec![
        Reply::json(200, fixture("gemini/complete_function_call.json")),
        Reply::json(200, fixture("gemini/complete_function_call.json")),
    ])
    .unwrap();
    let provider = build(&config(ProviderKind::Gemini, server.base()));
    let response = provider.complete(&hello()).await.unwrap();
    assert_eq!(response.text, "I'll add the cube first.");
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(
        (response.usage.input_tokens, response.usage.output_tokens),
        (2001, 99)
    );
    assert_eq!(response.request_id.as_deref(), Some("Yb4naJ7bK-resp"));
    let call = response.tool_calls[0].clone();
    assert_eq!(call.name, "run_script");
    assert_eq!(
        call.arguments,
        json!({"code": "import bpy\nbpy.ops.mesh.primitive_cube_add()"})
    );

    // The loop sends the call back with its result; Gemini gets the signature and the name.
    let mut follow_up = hello();
    follow_up
        .messages
        .push(ChatMessage::assistant(vec![ContentPart::ToolCall(
            call.clone(),
        )]));
    follow_up
        .messages
        .push(ChatMessage::user(vec![ContentPart::ToolResult(
            ToolResult {
                call_id: call.id.clone(),
                text: "Traceback: NameError".to_owned(),
                images: vec![],
                is_error: true,
            },
        )]));
    provider.complete(&follow_up).await.unwrap();
    let contents = server.requests()[1].json()["contents"].clone();
    assert_eq!(
        contents[1],
        json!({"role": "model", "parts": [{
            "functionCall": {"name": "run_script", "args": call.arguments},
            "thoughtSignature": "CiQBcsjafBmYmxDIBGvC0Ws8Hn0jN8mKz1TFD9xzQY2s4Hc=",
        }]})
    );
    assert_eq!(
        contents[2],
        json!({"role": "user", "parts": [{"functionResponse": {
            "name": "run_script",
            "response": {"error": "Traceback: NameError"},
        }}]})
    );
}

#[tokio::test]
async fn a_stream_of_crlf_separated_chunks_gives_text_calls_and_usage() {
    let server = TestServer::scripted(vec![Reply::sse(
        &fixture("gemini/stream_text_and_call.sse"),
        13,
    )])
    .unwrap();
    let provider = build(&config(ProviderKind::Gemini, server.base()));
    let (events, error) = drain(provider.as_ref(), &hello()).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(text_of(&events), "The render matches the target.");
    assert!(events.iter().any(|event| matches!(
        event,
        StreamEvent::ToolCall(call) if call.name == "finish" && call.arguments == json!({"verdict": "match"})
    )));
    let Some(StreamEvent::Completed(response)) = events.last() else {
        panic!("no Completed: {events:?}");
    };
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(
        (response.usage.input_tokens, response.usage.output_tokens),
        (1290, 20)
    );
    assert_eq!(response.request_id.as_deref(), Some("strm-gem-1"));
    assert_eq!(
        server.only_request().target,
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    );
}

#[tokio::test]
async fn an_invalid_key_is_an_auth_error_naming_the_variable() {
    let server = TestServer::scripted(vec![Reply::json(
        400,
        fixture("gemini/error_invalid_key.json"),
    )])
    .unwrap();
    let provider = build(&config(ProviderKind::Gemini, server.base()));
    let err = provider.complete(&hello()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Auth);
    let message = err.to_string();
    assert!(
        message.contains(&format!("${KEY_ENV}")) && message.contains("API key not valid"),
        "{message}"
    );
    assert!(!message.contains(KEY), "{message}");
    assert_eq!(server.count(), 1);
}

#[tokio::test]
async fn a_tool_result_without_its_call_is_refused_before_sending() {
    let server = TestServer::scripted(vec![Reply::json(
        200,
        fixture("gemini/complete_function_call.json"),
    )])
    .unwrap();
    let provider = build(&config(ProviderKind::Gemini, server.base()));
    let mut request = hello();
    request
        .messages
        .push(ChatMessage::user(vec![ContentPart::ToolResult(
            ToolResult {
                call_id: "call_unknown".to_owned(),
                text: "ok".to_owned(),
                images: vec![],
                is_error: false,
            },
        )]));
    let err = provider.complete(&request).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadRequest);
    assert!(err.to_string().contains("call_unknown"), "{err}");
    assert_eq!(server.count(), 0);
}

#[tokio::test]
async fn a_response_format_asks_for_json_with_the_schema() {
    let server = TestServer::scripted(vec![Reply::json(
        200,
        fixture("gemini/complete_function_call.json"),
    )])
    .unwrap();
    let provider = build(&config(ProviderKind::Gemini, server.base()));
    let mut request = hello();
    request.response_format = Some(ResponseFormat {
        name: "verdict".to_owned(),
        schema: json!({"type": "object"}),
    });
    provider.complete(&request).await.unwrap();
    let generation = server.only_request().json()["generationConfig"].clone();
    assert_eq!(
        generation,
        json!({
            "maxOutputTokens": 4096,
            "responseMimeType": "application/json",
            "responseJsonSchema": {"type": "object"},
        })
    );
}
