//! Structured output with the Geometry Nodes step protocol's schema: the request bodies each
//! adapter sends, a server that refuses boolean sub-schemas as llama.cpp does, and the
//! JSON-in-text fallback for servers that refuse the response format altogether.

use serde_json::{Value, json};
use viga_protocol::gn::GnResponse;
use viga_protocol::message::ChatMessage;
use viga_protocol::{parse_json, schema_of};
use viga_provider::{ErrorKind, ModelRequest, ProviderKind, ResponseFormat};

use super::support::{build, config, fixture};
use viga_testkit::http::{Reply, Request, TestServer};

const SYSTEM: &str = "You build Geometry Nodes.";

/// What viga-gn asks for each round.
fn gn_request() -> ModelRequest {
    let mut request = ModelRequest::new(
        SYSTEM,
        vec![ChatMessage::user_text("scatter cubes on the plane")],
    );
    request.response_format = Some(ResponseFormat {
        name: "GnResponse".to_owned(),
        schema: schema_of::<GnResponse>(),
    });
    request
}

/// Whether `schema` has a boolean where llama.cpp's grammar converter visits a schema: it
/// reads a boolean only as `additionalProperties`, and fails on any other with
/// "Unrecognized schema: true".
fn has_boolean_schema(schema: &Value) -> bool {
    match schema {
        Value::Bool(_) => true,
        Value::Object(node) => node.iter().any(|(keyword, value)| match keyword.as_str() {
            "properties" | "$defs" | "definitions" => value
                .as_object()
                .is_some_and(|map| map.values().any(has_boolean_schema)),
            "anyOf" | "oneOf" | "allOf" | "prefixItems" => value
                .as_array()
                .is_some_and(|list| list.iter().any(has_boolean_schema)),
            "items" => has_boolean_schema(value),
            "additionalProperties" => value.is_object() && has_boolean_schema(value),
            _ => false,
        }),
        _ => false,
    }
}

/// llama.cpp's `llama-server`: refuses a response schema with a boolean sub-schema, answers
/// the rest with a step-protocol reply.
fn llama_server(request: &Request) -> Reply {
    let schema = &request.json()["response_format"]["json_schema"]["schema"];
    if has_boolean_schema(schema) {
        Reply::json(400, fixture("openai/error_unrecognized_schema.json"))
    } else {
        Reply::json(200, fixture("openai/complete_gn_reply.json"))
    }
}

/// A server with no structured output at all (here worded as vLLM words it).
fn refusing_any_response_format(request: &Request) -> Reply {
    let body = request.json();
    if body.get("response_format").is_some() {
        Reply::json(400, fixture("openai/error_schema_unsupported.json"))
    } else if body["stream"] == true {
        Reply::sse(&fixture("openai/stream_text.sse"), 4096)
    } else {
        Reply::json(200, fixture("openai/complete_gn_reply.json"))
    }
}

fn system_message(body: &Value) -> &str {
    body["messages"][0]["content"].as_str().unwrap()
}

#[tokio::test]
async fn the_gn_schema_passes_a_server_that_refuses_boolean_schemas() {
    assert!(
        has_boolean_schema(&schema_of::<GnResponse>()),
        "the GN schema as derived is what llama.cpp refuses"
    );
    let server = TestServer::start(llama_server).unwrap();
    let provider = build(&config(ProviderKind::OpenAiCompatible, server.base()));
    let response = provider.complete(&gn_request()).await.unwrap();

    assert!(!response.structured_output_fallback);
    parse_json::<GnResponse>(&response.text).unwrap();
    let body = server.only_request().json();
    assert!(!has_boolean_schema(
        &body["response_format"]["json_schema"]["schema"]
    ));
    insta::assert_json_snapshot!("compatible_request_with_the_gn_schema", body);
}

#[tokio::test]
async fn a_server_that_refuses_any_response_format_gets_the_schema_in_the_system_prompt() {
    let server = TestServer::start(refusing_any_response_format).unwrap();
    let provider = build(&config(ProviderKind::OpenAiCompatible, server.base()));
    let response = provider.complete(&gn_request()).await.unwrap();

    assert!(response.structured_output_fallback);
    let reply = parse_json::<GnResponse>(&response.text).unwrap();
    assert!(reply.done);
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "one refused request, one retry");
    let (refused, retried) = (requests[0].json(), requests[1].json());
    assert!(refused.get("response_format").is_some());
    assert!(retried.get("response_format").is_none());
    let system = system_message(&retried);
    assert!(system.starts_with(SYSTEM), "{system}");
    assert!(
        system.contains("Answer with one JSON object and nothing else")
            && system.ends_with(&schema_of::<GnResponse>().to_string()),
        "{system}"
    );
    assert_eq!(retried["messages"][1], refused["messages"][1]);
    insta::assert_json_snapshot!("fallback_refused_request", refused);
    insta::assert_json_snapshot!("fallback_retry_with_the_schema_in_the_prompt", retried);

    // Remembered: the next call goes in the prompt form at once.
    let again = provider.complete(&gn_request()).await.unwrap();
    assert!(again.structured_output_fallback);
    assert_eq!(server.count(), 3);
    assert_eq!(server.requests()[2].json(), retried);
}

#[tokio::test]
async fn a_stream_falls_back_the_same_way() {
    let server = TestServer::start(refusing_any_response_format).unwrap();
    let provider = build(&config(ProviderKind::OpenAiCompatible, server.base()));
    let response = provider
        .stream(&gn_request())
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert!(response.structured_output_fallback);
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let retried = requests[1].json();
    assert_eq!(retried["stream"], true);
    assert!(retried.get("response_format").is_none());
    assert!(system_message(&retried).contains("\"GnResponse\""));
}

#[tokio::test]
async fn a_request_refused_for_another_reason_is_not_sent_again() {
    let server = TestServer::scripted(vec![Reply::json(
        400,
        r#"{"error":{"message":"Invalid value for 'tool_choice'","type":"invalid_request_error"}}"#,
    )])
    .unwrap();
    let provider = build(&config(ProviderKind::OpenAiCompatible, server.base()));
    let err = provider.complete(&gn_request()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadRequest);
    assert_eq!(server.count(), 1);
}

#[tokio::test]
async fn the_fallback_is_not_remembered_when_the_plain_request_fails_too() {
    let server = TestServer::scripted(vec![Reply::json(
        400,
        fixture("openai/error_unrecognized_schema.json"),
    )])
    .unwrap();
    let provider = build(&config(ProviderKind::OpenAiCompatible, server.base()));
    let err = provider.complete(&gn_request()).await.unwrap_err();
    assert!(err.to_string().contains("Unrecognized schema"), "{err}");
    assert_eq!(server.count(), 2);
    // The schema was not the problem after all, so the next call tries the field again.
    provider.complete(&gn_request()).await.unwrap_err();
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    assert!(requests[2].json().get("response_format").is_some());
}

#[tokio::test]
async fn gemini_falls_back_when_it_refuses_the_response_schema() {
    let server = TestServer::start(|request| {
        if request.json()["generationConfig"]
            .get("responseJsonSchema")
            .is_some()
        {
            Reply::json(
                400,
                fixture("gemini/error_unknown_response_json_schema.json"),
            )
        } else {
            Reply::json(200, fixture("gemini/complete_function_call.json"))
        }
    })
    .unwrap();
    let provider = build(&config(ProviderKind::Gemini, server.base()));
    let response = provider.complete(&gn_request()).await.unwrap();
    assert!(response.structured_output_fallback);
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let retried = requests[1].json();
    assert_eq!(
        retried["generationConfig"],
        json!({"maxOutputTokens": 4096})
    );
    let system = retried["systemInstruction"]["parts"][0]["text"]
        .as_str()
        .unwrap();
    assert!(
        system.starts_with(SYSTEM) && system.contains("named \"GnResponse\""),
        "{system}"
    );
}

/// The body each adapter sends for `gn_request()`, to a server that accepts it.
async fn gn_request_body(kind: ProviderKind, reply: &str) -> Value {
    let server = TestServer::scripted(vec![Reply::json(200, fixture(reply))]).unwrap();
    let provider = build(&config(kind, server.base()));
    let response = provider.complete(&gn_request()).await.unwrap();
    assert!(!response.structured_output_fallback);
    server.only_request().json()
}

#[tokio::test]
async fn openai_gets_the_adapted_gn_schema_without_strict() {
    let body = gn_request_body(ProviderKind::OpenAi, "openai/complete_gn_reply.json").await;
    assert!(
        body["response_format"]["json_schema"]
            .get("strict")
            .is_none()
    );
    insta::assert_json_snapshot!("openai_request_with_the_gn_schema", body);
}

#[tokio::test]
async fn openai_gets_strict_mode_when_the_schema_allows_it() {
    let server =
        TestServer::scripted(vec![Reply::json(200, fixture("openai/complete_text.json"))]).unwrap();
    let provider = build(&config(ProviderKind::OpenAi, server.base()));
    let mut request = gn_request();
    request.response_format = Some(ResponseFormat {
        name: "verdict".to_owned(),
        schema: json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {"ok": {"type": "boolean"}, "why": {"type": ["string", "null"]}},
            "required": ["ok"]
        }),
    });
    provider.complete(&request).await.unwrap();
    assert_eq!(
        server.only_request().json()["response_format"],
        json!({"type": "json_schema", "json_schema": {
            "name": "verdict",
            "strict": true,
            "schema": {
                "type": "object",
                "additionalProperties": false,
                "properties": {"ok": {"type": "boolean"}, "why": {"type": ["string", "null"]}},
                "required": ["ok", "why"]
            },
        }})
    );
}

#[tokio::test]
async fn anthropic_gets_the_gn_schema_in_the_system_prompt() {
    let body = gn_request_body(ProviderKind::Anthropic, "anthropic/complete_tool_use.json").await;
    insta::assert_json_snapshot!("anthropic_request_with_the_gn_schema", body);
}

#[tokio::test]
async fn gemini_gets_the_gn_schema_reduced_to_its_subset() {
    let body = gn_request_body(ProviderKind::Gemini, "gemini/complete_function_call.json").await;
    let schema = body["generationConfig"]["responseJsonSchema"].to_string();
    assert!(
        !schema.contains("\"oneOf\"") && !schema.contains("\"const\""),
        "{schema}"
    );
    insta::assert_json_snapshot!("gemini_request_with_the_gn_schema", body);
}
