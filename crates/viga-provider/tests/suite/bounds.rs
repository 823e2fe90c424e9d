//! Servers that ask for too much: absurd waits, redirects elsewhere, bodies and events that
//! never end, streams that never finish. Each call ends with an error that says which bound
//! it hit, and no key leaves for another host.

use std::time::{Duration, Instant};

use viga_provider::{ErrorKind, ProviderError, ProviderKind};

use super::support::{KEY, build, config, drain, fixture, hello};
use viga_testkit::http::{Reply, Step, TestServer};

#[tokio::test]
async fn an_absurd_retry_after_ends_the_retries_without_overflowing() {
    let rate_limited = || {
        Reply::json(
            429,
            r#"{"error":{"message":"slow down","type":"requests"}}"#,
        )
    };
    let server = TestServer::scripted(vec![
        // A short first wait, so the second is added to a wait already made.
        rate_limited().with_header("retry-after-ms", "5"),
        rate_limited().with_header("retry-after", "18446744073709551615"),
    ])
    .unwrap();
    let err = build(&config(ProviderKind::OpenAi, server.base()))
        .complete(&hello())
        .await
        .unwrap_err();
    match &err {
        ProviderError::RateLimited { retry_after, .. } => {
            assert_eq!(
                *retry_after,
                Some(Duration::from_secs(86_400)),
                "a day at most"
            );
        }
        other => panic!("expected a rate limit, got {other:?}"),
    }
    assert!(
        err.to_string().contains("gave up after 2 attempts"),
        "{err}"
    );
    assert_eq!(server.count(), 2);
}

#[tokio::test]
async fn a_redirect_to_another_host_is_refused_and_no_key_goes_there() {
    for kind in [
        ProviderKind::OpenAi,
        ProviderKind::Anthropic,
        ProviderKind::Gemini,
    ] {
        let elsewhere = TestServer::scripted(vec![Reply::json(200, "{}")]).unwrap();
        let moved_to = elsewhere.base().replace("127.0.0.1", "localhost") + "/v1/elsewhere";
        let server = TestServer::scripted(vec![
            Reply::json(307, "").with_header("location", &moved_to),
        ])
        .unwrap();
        let err = build(&config(kind, server.base()))
            .complete(&hello())
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Config, "{kind:?}: {err}");
        let message = err.to_string();
        assert!(
            message.contains("redirect (HTTP 307) to http://localhost:")
                && message.contains("set base_url"),
            "{kind:?}: {message}"
        );
        assert_eq!(server.count(), 1, "{kind:?}: a redirect is not retried");
        assert_eq!(elsewhere.count(), 0, "{kind:?}: the redirect was followed");
        let sent = server.only_request();
        assert!(
            sent.headers.iter().any(|(_, value)| value.contains(KEY)),
            "{kind:?}: the key went to the configured server only"
        );
    }
}

#[tokio::test]
async fn a_body_that_never_ends_is_cut_off() {
    let server = TestServer::scripted(vec![Reply::json_steps(
        200,
        vec![
            Step::Send(b"{\"id\": \"chatcmpl-1\", \"choices\": [".to_vec()),
            Step::Repeat {
                bytes: vec![b' '; 256 * 1024],
                pause: Duration::ZERO,
            },
        ],
    )])
    .unwrap();
    let err = build(&config(ProviderKind::OpenAi, server.base()))
        .complete(&hello())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::MalformedResponse, "{err}");
    assert!(
        err.to_string()
            .contains("larger than 64 MiB; viga stopped reading it"),
        "{err}"
    );
    assert_eq!(server.count(), 1, "an oversized answer is not asked again");
}

#[tokio::test]
async fn an_event_that_never_ends_is_cut_off() {
    let first_event: String = fixture("openai/stream_text.sse")
        .split_inclusive("\n\n")
        .take(2)
        .collect();
    let server = TestServer::scripted(vec![Reply::sse_steps(vec![
        Step::Send(first_event.into_bytes()),
        Step::Send(b"data: {\"choices\": [{\"delta\": {\"content\": \"".to_vec()),
        Step::Repeat {
            bytes: vec![b'x'; 256 * 1024],
            pause: Duration::ZERO,
        },
    ])])
    .unwrap();
    let provider = build(&config(ProviderKind::OpenAi, server.base()));
    let (events, error) = drain(provider.as_ref(), &hello()).await;
    assert!(!events.is_empty(), "the events before it still arrive");
    let error = error.unwrap();
    assert_eq!(error.kind(), ErrorKind::MalformedResponse, "{error}");
    assert!(
        error.to_string().contains("an event is larger than 16 MiB"),
        "{error}"
    );
}

#[tokio::test]
async fn a_stream_that_trickles_forever_meets_its_overall_deadline() {
    let server = TestServer::scripted(vec![Reply::sse_steps(vec![Step::Repeat {
        bytes: b": still thinking\n\n".to_vec(),
        pause: Duration::from_millis(50),
    }])])
    .unwrap();
    let mut config = config(ProviderKind::Gemini, server.base());
    config.timeouts.stream_total = Duration::from_millis(600);
    let provider = build(&config);
    let started = Instant::now();
    let (_, error) = drain(provider.as_ref(), &hello()).await;
    let error = error.unwrap();
    assert_eq!(error.kind(), ErrorKind::Timeout, "{error}");
    assert!(
        error.to_string().contains("went on past its overall limit"),
        "{error}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}
