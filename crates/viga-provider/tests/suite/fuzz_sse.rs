//! The streaming decoders over arbitrary server-sent events: whatever a server streams (well
//! formed or not, split anywhere), each provider ends with a response or an error, never a
//! panic or a hang. Bounded case counts keep the suite's time fixed.

use proptest::prelude::*;
use viga_provider::config::ProviderKind;

use super::support::{build, config, drain, hello};
use viga_testkit::http::{Reply, TestServer};

/// A `data:` payload: JSON shaped like each provider's events, broken JSON, or noise.
fn payload() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(r#"{"choices":[{"index":0,"delta":{"content":"hi"}}]}"#.to_owned()),
        Just(r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{\"a\":"}}]}}]}"#.to_owned()),
        Just(r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":2}}"#.to_owned()),
        Just(r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}"#.to_owned()),
        Just(r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"f","input":{}}}"#.to_owned()),
        Just(r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}"#.to_owned()),
        Just(r#"{"type":"message_stop"}"#.to_owned()),
        Just(r#"{"candidates":[{"content":{"parts":[{"text":"hi"}]},"finishReason":"STOP"}]}"#.to_owned()),
        Just("[DONE]".to_owned()),
        Just("{".to_owned()),
        Just(r#"{"choices":[{"index":4294967296,"delta":{"tool_calls":[{"index":-1}]}}]}"#.to_owned()),
        "[ -~]{0,40}",
    ]
}

fn sse_body() -> impl Strategy<Value = String> {
    let event = (
        prop::option::of(prop_oneof![
            Just("message_start"),
            Just("content_block_delta"),
            Just("error"),
            Just("ping")
        ]),
        payload(),
    )
        .prop_map(|(name, data)| match name {
            Some(name) => format!("event: {name}\ndata: {data}\n\n"),
            None => format!("data: {data}\n\n"),
        });
    prop::collection::vec(event, 0..12).prop_map(|events| events.concat())
}

fn kind() -> impl Strategy<Value = ProviderKind> {
    prop_oneof![
        Just(ProviderKind::OpenAi),
        Just(ProviderKind::Anthropic),
        Just(ProviderKind::Gemini),
        Just(ProviderKind::OpenAiCompatible),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn any_stream_ends_in_a_response_or_an_error(kind in kind(), body in sse_body(), chunk in 1usize..64) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let server = TestServer::scripted(vec![Reply::sse(&body, chunk)]).unwrap();
            let provider = build(&config(kind, server.base()));
            let drained = tokio::time::timeout(
                std::time::Duration::from_secs(20),
                drain(provider.as_ref(), &hello()),
            )
            .await;
            assert!(drained.is_ok(), "the stream did not end: {kind:?} {body:?}");
        });
    }
}
