use serde_json::json;
use viga_provider::{ErrorKind, FinishReason, ProviderKind, ResponseFormat, StreamEvent};

use super::support::{
    KEY, build, config, conversation, drain, fixture, hello, redact_images, text_of,
};
use viga_testkit::http::{Reply, TestServer};

#[tokio::test]
async fn the_request_with_images_and_tools_is_sent_as_chat_completions() {
    let server =
        TestServer::scripted(vec![Reply::json(200, fixture("openai/complete_text.json"))]).unwrap();
    let provider = build(&config(ProviderKind::OpenAi, server.base()));
    let original = conversation();
    let request = original.clone();
    provider.complete(&request).await.unwrap();

    assert_eq!(request, original, "the caller's request is untouched");
    let sent = server.only_request();
    assert_eq!(
        (sent.method.as_str(), sent.target.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(
        sent.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    let mut body = sent.json();
    // 1024x512 and 300x300 shrink to fit 256 pixels.
    assert_eq!(redact_images(&mut body), [(256, 128), (256, 256)]);
    insta::assert_json_snapshot!("openai_request_with_images_and_tools", body);
}

#[tokio::test]
async fn a_text_answer_carries_usage_finish_reason_and_request_id() {
    let server = TestServer::scripted(vec![
        Reply::json(200, fixture("openai/complete_text.json"))
            .with_header("x-request-id", "req_abc123"),
    ])
    .unwrap();
    let provider = build(&config(ProviderKind::OpenAi, server.base()));
    let response = provider.complete(&hello()).await.unwrap();
    assert!(
        response.text.starts_with("```python\nimport bpy"),
        "{}",
        response.text
    );
    assert_eq!(response.finish_reason, FinishReason::Stop);
    assert_eq!(
        (response.usage.input_tokens, response.usage.output_tokens),
        (1017, 23)
    );
    assert_eq!(response.request_id.as_deref(), Some("req_abc123"));
    assert!(response.tool_calls.is_empty());
    let body = server.only_request().json();
    assert_eq!(body["max_completion_tokens"], 4096);
    assert!(body.get("stream").is_none() && body.get("tools").is_none());
}

#[tokio::test]
async fn tool_calls_in_a_whole_answer_are_parsed() {
    let server = TestServer::scripted(vec![Reply::json(
        200,
        fixture("openai/complete_tool_call.json"),
    )])
    .unwrap();
    let provider = build(&config(ProviderKind::OpenAi, server.base()));
    let response = provider.complete(&hello()).await.unwrap();
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(response.text, "");
    let calls: Vec<_> = response
        .tool_calls
        .iter()
        .map(|call| (call.id.as_str(), call.name.as_str(), call.arguments.clone()))
        .collect();
    assert_eq!(
        calls,
        [
            (
                "call_Xy12",
                "run_script",
                json!({"code": "import bpy\nbpy.ops.mesh.primitive_uv_sphere_add()"})
            ),
            ("call_Xy13", "render_view", json!({"view": "front"})),
        ]
    );
    // Without a request-id header, the completion id identifies the call.
    assert_eq!(response.request_id.as_deref(), Some("chatcmpl-ToolA1"));
}

#[tokio::test]
async fn a_streamed_tool_call_split_across_many_chunks_is_assembled() {
    // 7-byte chunks: events, lines and JSON strings all straddle chunk boundaries.
    let server =
        TestServer::scripted(vec![Reply::sse(&fixture("openai/stream_tool_call.sse"), 7)]).unwrap();
    let provider = build(&config(ProviderKind::OpenAi, server.base()));
    let (events, error) = drain(provider.as_ref(), &hello()).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(text_of(&events), "Adding the cube and rendering.");
    let calls: Vec<_> = events
        .iter()
        .filter_map(|event| match event {
            StreamEvent::ToolCall(call) => Some(call.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(
        (calls[0].id.as_str(), calls[0].name.as_str()),
        ("call_abc", "run_script")
    );
    assert_eq!(
        calls[0].arguments,
        json!({"code": "import bpy\nbpy.ops.mesh.primitive_cube_add(size=2)"})
    );
    assert_eq!(calls[1].arguments, json!({"view": "front"}));
    let Some(StreamEvent::Completed(response)) = events.last() else {
        panic!("the stream must end with Completed: {events:?}");
    };
    assert_eq!(response.tool_calls, calls);
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(
        (response.usage.input_tokens, response.usage.output_tokens),
        (812, 47)
    );
    let body = server.only_request().json();
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
}

#[tokio::test]
async fn streamed_text_arrives_as_deltas_then_completes() {
    let server = TestServer::scripted(vec![
        Reply::sse(&fixture("openai/stream_text.sse"), 4096)
            .with_header("x-request-id", "req_stream_1"),
    ])
    .unwrap();
    let provider = build(&config(ProviderKind::OpenAi, server.base()));
    let (events, error) = drain(provider.as_ref(), &hello()).await;
    assert!(error.is_none(), "{error:?}");
    let deltas = events
        .iter()
        .filter(|event| matches!(event, StreamEvent::TextDelta(_)))
        .count();
    assert_eq!(deltas, 5);
    let Some(StreamEvent::Completed(response)) = events.last() else {
        panic!("no Completed: {events:?}");
    };
    assert_eq!(response.text, "The render shows a red cube.");
    assert_eq!(response.finish_reason, FinishReason::Stop);
    assert_eq!(response.usage.output_tokens, 7);
    assert_eq!(response.request_id.as_deref(), Some("req_stream_1"));
}

#[tokio::test]
async fn a_compatible_server_gets_max_tokens_and_no_key_unless_one_is_named() {
    let server =
        TestServer::scripted(vec![Reply::json(200, fixture("openai/complete_text.json"))]).unwrap();
    let mut keyless = config(ProviderKind::OpenAiCompatible, server.base());
    keyless.api_key_env = None;
    let provider = build(&keyless);
    assert_eq!(
        (provider.name(), provider.model()),
        ("openai_compatible", "qwen2.5vl:7b")
    );
    provider.complete(&hello()).await.unwrap();
    let sent = server.only_request();
    assert_eq!(sent.target, "/v1/chat/completions");
    assert_eq!(sent.header("authorization"), None);
    let body = sent.json();
    assert_eq!(body["max_tokens"], 4096);
    assert!(body.get("max_completion_tokens").is_none());

    let keyed =
        TestServer::scripted(vec![Reply::json(200, fixture("openai/complete_text.json"))]).unwrap();
    build(&config(ProviderKind::OpenAiCompatible, keyed.base()))
        .complete(&hello())
        .await
        .unwrap();
    assert_eq!(
        keyed.only_request().header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
}

#[tokio::test]
async fn a_response_format_is_sent_as_a_json_schema() {
    let server =
        TestServer::scripted(vec![Reply::json(200, fixture("openai/complete_text.json"))]).unwrap();
    let provider = build(&config(ProviderKind::OpenAi, server.base()));
    let mut request = hello();
    request.response_format = Some(ResponseFormat {
        name: "verdict".to_owned(),
        schema: json!({"type": "object", "properties": {"ok": {"type": "boolean"}}}),
    });
    provider.complete(&request).await.unwrap();
    assert_eq!(
        server.only_request().json()["response_format"],
        json!({"type": "json_schema", "json_schema": {
            "name": "verdict",
            "schema": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
        }})
    );
}

#[tokio::test]
async fn context_length_exceeded_is_reported_as_such_and_not_retried() {
    let server = TestServer::scripted(vec![Reply::json(
        400,
        fixture("openai/error_context_length.json"),
    )])
    .unwrap();
    let provider = build(&config(ProviderKind::OpenAi, server.base()));
    let err = provider.complete(&hello()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ContextTooLong);
    assert!(
        err.to_string().contains("maximum context length is 128000"),
        "{err}"
    );
    assert!(err.to_string().contains("lower the memory window"), "{err}");
    assert_eq!(server.count(), 1);
}
