//! Fault injection: what the adapters do when the server or the network misbehaves.

use std::time::{Duration, Instant};

use viga_provider::{ErrorKind, ProviderError, ProviderKind, RetryPolicy, StreamEvent};

use super::support::{KEY, KEY_ENV, build, config, drain, fixture, hello, text_of};
use viga_testkit::http::{Reply, Step, TestServer};

fn rate_limited(retry_after_secs: &str) -> Reply {
    Reply::json(429, r#"{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}"#)
        .with_header("retry-after", retry_after_secs)
}

#[tokio::test]
async fn a_429_then_200_waits_as_long_as_retry_after_says() {
    let server = TestServer::scripted(vec![
        rate_limited("1"),
        Reply::json(200, fixture("openai/complete_text.json")),
    ])
    .unwrap();
    let provider = build(&config(ProviderKind::OpenAi, server.base()));
    let started = Instant::now();
    let response = provider.complete(&hello()).await.unwrap();
    // The policy's own backoff is a few milliseconds; only Retry-After explains a full second.
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert!(
        response.latency >= Duration::from_secs(1),
        "latency includes the retries"
    );
    assert_eq!(server.count(), 2);
}

#[tokio::test]
async fn a_retry_after_beyond_the_wait_budget_fails_at_once() {
    let server = TestServer::scripted(vec![
        rate_limited("30"),
        Reply::json(200, fixture("openai/complete_text.json")),
    ])
    .unwrap();
    let provider = build(&config(ProviderKind::OpenAi, server.base()));
    let err = provider.complete(&hello()).await.unwrap_err();
    match &err {
        ProviderError::RateLimited { retry_after, .. } => {
            assert_eq!(*retry_after, Some(Duration::from_secs(30)));
        }
        other => panic!("expected a rate limit, got {other:?}"),
    }
    assert!(err.to_string().contains("retry after 30s"), "{err}");
    assert_eq!(server.count(), 1, "a 30 s wait does not fit a 5 s budget");
}

#[tokio::test]
async fn server_errors_are_retried_until_the_attempts_run_out() {
    let server = TestServer::scripted(vec![Reply::json(
        500,
        r#"{"error":{"message":"The server had an error","type":"server_error"}}"#,
    )])
    .unwrap();
    let mut config = config(ProviderKind::Anthropic, server.base());
    config.retry = RetryPolicy {
        max_attempts: 4,
        ..config.retry
    };
    let err = build(&config).complete(&hello()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Server);
    assert!(
        err.to_string().contains("gave up after 4 attempts"),
        "{err}"
    );
    assert_eq!(server.count(), 4);
}

#[tokio::test]
async fn a_stream_that_fails_to_start_is_retried() {
    let server = TestServer::scripted(vec![
        Reply::json(503, "upstream connect error"),
        Reply::sse(&fixture("openai/stream_text.sse"), 4096),
    ])
    .unwrap();
    let provider = build(&config(ProviderKind::OpenAi, server.base()));
    let response = provider
        .stream(&hello())
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert_eq!(response.text, "The render shows a red cube.");
    assert_eq!(server.count(), 2);
}

#[tokio::test]
async fn auth_errors_are_not_retried_and_say_which_variable_to_fix() {
    let server = TestServer::scripted(vec![Reply::json(401, r#"{"error":{"message":"Incorrect API key provided: sk-test-***6789.","type":"invalid_request_error","code":"invalid_api_key"}}"#)]).unwrap();
    let err = build(&config(ProviderKind::OpenAi, server.base()))
        .complete(&hello())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Auth);
    let message = err.to_string();
    assert!(
        message.contains(&format!("check the API key in ${KEY_ENV}")),
        "{message}"
    );
    assert!(
        !message.contains(KEY) && !format!("{err:?}").contains(KEY),
        "{message}"
    );
    assert_eq!(server.count(), 1);
}

#[tokio::test]
async fn a_refused_connection_is_a_network_error_after_the_retries() {
    let url = viga_testkit::http::closed_address().unwrap();
    let err = build(&config(ProviderKind::Gemini, &url))
        .complete(&hello())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Network);
    let message = err.to_string();
    assert!(
        message.contains("cannot connect to") && message.contains("gave up after 3 attempts"),
        "{message}"
    );
}

#[tokio::test]
async fn a_stream_cut_off_mid_body_ends_in_a_network_error_after_its_deltas() {
    let mut steps: Vec<Step> = fixture("openai/stream_tool_call.sse")
        .split_inclusive("\n\n")
        .take(3)
        .map(|event| Step::Send(event.as_bytes().to_vec()))
        .collect();
    steps.push(Step::Cut);
    let server = TestServer::scripted(vec![Reply::sse_steps(steps)]).unwrap();
    let provider = build(&config(ProviderKind::OpenAi, server.base()));
    let (events, error) = drain(provider.as_ref(), &hello()).await;
    assert_eq!(text_of(&events), "Adding the cube and rendering.");
    assert!(
        !events
            .iter()
            .any(|event| matches!(event, StreamEvent::Completed(_)))
    );
    let error = error.unwrap();
    assert_eq!(error.kind(), ErrorKind::Network, "{error}");
    assert!(error.to_string().contains("broke off"), "{error}");
}

#[tokio::test]
async fn a_stream_that_ends_cleanly_but_unfinished_is_an_error() {
    for (kind, body) in [
        (ProviderKind::OpenAi, fixture("openai/stream_truncated.sse")),
        (
            ProviderKind::Anthropic,
            fixture("anthropic/stream_tool_use.sse")
                .split_inclusive("\n\n")
                .take(5)
                .collect(),
        ),
        (
            ProviderKind::Gemini,
            fixture("gemini/stream_text_and_call.sse")
                .split_inclusive("\r\n\r\n")
                .take(2)
                .collect(),
        ),
    ] {
        let server = TestServer::scripted(vec![Reply::sse(&body, 4096)]).unwrap();
        let provider = build(&config(kind, server.base()));
        let (events, error) = drain(provider.as_ref(), &hello()).await;
        assert!(
            !text_of(&events).is_empty(),
            "{kind:?}: the deltas before the end still arrive"
        );
        let error = error.unwrap_or_else(|| panic!("{kind:?}: an unfinished stream must fail"));
        assert!(
            error
                .to_string()
                .contains("ended before the model finished"),
            "{kind:?}: {error}"
        );
    }
}

#[tokio::test]
async fn invalid_json_is_a_malformed_response_and_not_retried() {
    let server = TestServer::scripted(vec![Reply::json(
        200,
        "{\"id\": \"chatcmpl-1\", \"choices\": [",
    )])
    .unwrap();
    let err = build(&config(ProviderKind::OpenAi, server.base()))
        .complete(&hello())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::MalformedResponse);
    assert!(err.to_string().contains("not the expected JSON"), "{err}");
    assert_eq!(server.count(), 1);

    let server = TestServer::scripted(vec![Reply::sse(
        &fixture("openai/stream_invalid_json.sse"),
        4096,
    )])
    .unwrap();
    let provider = build(&config(ProviderKind::OpenAi, server.base()));
    let (events, error) = drain(provider.as_ref(), &hello()).await;
    assert_eq!(text_of(&events), "Hel");
    assert_eq!(error.unwrap().kind(), ErrorKind::MalformedResponse);
}

#[tokio::test]
async fn an_html_page_instead_of_json_says_to_check_base_url() {
    let server = TestServer::scripted(vec![Reply::json(
        200,
        "<html><body>Welcome to nginx</body></html>",
    )])
    .unwrap();
    let err = build(&config(ProviderKind::Anthropic, server.base()))
        .complete(&hello())
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("is base_url the right kind of server")
            && message.contains("Welcome to nginx"),
        "{message}"
    );
}

#[tokio::test]
async fn a_stream_that_goes_quiet_times_out() {
    let first_event: String = fixture("anthropic/stream_tool_use.sse")
        .split_inclusive("\n\n")
        .take(3)
        .collect();
    let server = TestServer::scripted(vec![Reply::sse_steps(vec![
        Step::Send(first_event.into_bytes()),
        Step::Hang,
    ])])
    .unwrap();
    let mut config = config(ProviderKind::Anthropic, server.base());
    config.timeouts.stream_idle = Duration::from_millis(300);
    let provider = build(&config);
    let (events, error) = drain(provider.as_ref(), &hello()).await;
    assert!(
        events.is_empty(),
        "the first event holds no text: {events:?}"
    );
    let error = error.unwrap();
    assert_eq!(error.kind(), ErrorKind::Timeout);
    assert!(error.to_string().contains("no data arrived"), "{error}");
}

#[tokio::test]
async fn a_server_that_never_answers_times_out_the_whole_request() {
    let server = TestServer::scripted(vec![Reply::sse_steps(vec![Step::Hang])]).unwrap();
    let mut config = config(ProviderKind::OpenAi, server.base());
    config.timeouts.request = Duration::from_millis(300);
    config.retry.max_attempts = 2;
    let err = build(&config).complete(&hello()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
    assert_eq!(server.count(), 2, "timeouts are retried");
}

#[tokio::test]
async fn a_slow_but_steady_stream_is_not_idle() {
    // Five pauses of 100 ms add up past the 400 ms idle limit; none alone reaches it.
    let mut steps = Vec::new();
    for event in fixture("openai/stream_text.sse").split_inclusive("\n\n") {
        steps.push(Step::Pause(Duration::from_millis(100)));
        steps.push(Step::Send(event.as_bytes().to_vec()));
    }
    let server = TestServer::scripted(vec![Reply::sse_steps(steps)]).unwrap();
    let mut config = config(ProviderKind::OpenAi, server.base());
    config.timeouts.stream_idle = Duration::from_millis(400);
    let response = build(&config)
        .stream(&hello())
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert_eq!(response.text, "The render shows a red cube.");
}
