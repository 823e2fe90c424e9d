use serde_json::json;
use viga_provider::{ErrorKind, FinishReason, ProviderKind, ResponseFormat, StreamEvent};

use super::support::{
    KEY, build, config, conversation, drain, fixture, hello, redact_images, text_of,
};
use viga_testkit::http::{Reply, TestServer};

#[tokio::test]
async fn the_request_with_images_and_tools_is_sent_as_messages() {
    let server = TestServer::scripted(vec![Reply::json(
        200,
        fixture("anthropic/complete_tool_use.json"),
    )])
    .unwrap();
    let provider = build(&config(ProviderKind::Anthropic, server.base()));
    provider.complete(&conversation()).await.unwrap();

    let sent = server.only_request();
    assert_eq!(
        (sent.method.as_str(), sent.target.as_str()),
        ("POST", "/v1/messages")
    );
    assert_eq!(sent.header("x-api-key"), Some(KEY));
    assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(sent.header("authorization"), None);
    let mut body = sent.json();
    assert_eq!(redact_images(&mut body), [(256, 128), (256, 256)]);
    insta::assert_json_snapshot!("anthropic_request_with_images_and_tools", body);
}

#[tokio::test]
async fn a_tool_use_answer_is_parsed_with_cached_tokens_counted_as_input() {
    let server = TestServer::scripted(vec![
        Reply::json(200, fixture("anthropic/complete_tool_use.json"))
            .with_header("request-id", "req_018EeWyXxfu5pfWkrYcMdjWG"),
    ])
    .unwrap();
    let provider = build(&config(ProviderKind::Anthropic, server.base()));
    let response = provider.complete(&hello()).await.unwrap();
    assert_eq!(
        response.text,
        "I'll add a sphere and look at it from the front."
    );
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(response.tool_calls.len(), 1);
    assert_eq!(response.tool_calls[0].id, "toolu_01A09q90qw90lq917835lq9");
    assert_eq!(
        response.tool_calls[0].arguments,
        json!({"code": "import bpy\nbpy.ops.mesh.primitive_uv_sphere_add()"})
    );
    assert_eq!(
        (response.usage.input_tokens, response.usage.output_tokens),
        (1500, 61)
    );
    assert_eq!(
        response.request_id.as_deref(),
        Some("req_018EeWyXxfu5pfWkrYcMdjWG")
    );
}

#[tokio::test]
async fn streamed_input_json_deltas_are_assembled_per_content_block() {
    let server = TestServer::scripted(vec![Reply::sse(
        &fixture("anthropic/stream_tool_use.sse"),
        11,
    )])
    .unwrap();
    let provider = build(&config(ProviderKind::Anthropic, server.base()));
    let (events, error) = drain(provider.as_ref(), &hello()).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(text_of(&events), "I'll add the cube now.");
    let call = events
        .iter()
        .find_map(|event| match event {
            StreamEvent::ToolCall(call) => Some(call.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        (call.id.as_str(), call.name.as_str()),
        ("toolu_01Strm", "run_script")
    );
    assert_eq!(
        call.arguments,
        json!({"code": "import bpy\nbpy.ops.mesh.primitive_cube_add(size=2)"})
    );
    let Some(StreamEvent::Completed(response)) = events.last() else {
        panic!("no Completed: {events:?}");
    };
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(
        (response.usage.input_tokens, response.usage.output_tokens),
        (1723, 89)
    );
    assert_eq!(response.request_id.as_deref(), Some("msg_01Strm"));
    assert_eq!(server.only_request().json()["stream"], true);
}

#[tokio::test]
async fn an_error_event_mid_stream_ends_the_stream_with_that_error() {
    let server = TestServer::scripted(vec![Reply::sse(
        &fixture("anthropic/stream_overloaded.sse"),
        64,
    )])
    .unwrap();
    let provider = build(&config(ProviderKind::Anthropic, server.base()));
    let (events, error) = drain(provider.as_ref(), &hello()).await;
    assert_eq!(text_of(&events), "Looking at");
    let error = error.unwrap();
    assert_eq!(error.kind(), ErrorKind::Server);
    assert!(error.to_string().contains("Overloaded"), "{error}");
}

#[tokio::test]
async fn prompt_is_too_long_is_reported_as_context_too_long() {
    let server = TestServer::scripted(vec![Reply::json(
        400,
        fixture("anthropic/error_prompt_too_long.json"),
    )])
    .unwrap();
    let provider = build(&config(ProviderKind::Anthropic, server.base()));
    let err = provider.complete(&hello()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ContextTooLong);
    assert!(err.to_string().contains("215004 tokens > 200000"), "{err}");
    assert_eq!(server.count(), 1);
}

#[tokio::test]
async fn a_response_format_becomes_a_system_instruction() {
    let server = TestServer::scripted(vec![Reply::json(
        200,
        fixture("anthropic/complete_tool_use.json"),
    )])
    .unwrap();
    let provider = build(&config(ProviderKind::Anthropic, server.base()));
    let mut request = hello();
    request.response_format = Some(ResponseFormat {
        name: "verdict".to_owned(),
        schema: json!({"type": "object"}),
    });
    provider.complete(&request).await.unwrap();
    let system = server.only_request().json()["system"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(system.starts_with("sys\n\n"), "{system}");
    assert!(
        system.contains("JSON Schema, named \"verdict\"")
            && system.ends_with("{\"type\":\"object\"}"),
        "{system}"
    );
}
