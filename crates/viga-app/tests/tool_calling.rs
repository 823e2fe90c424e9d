//! `--generator-tools auto` with an OpenAI-compatible server (issue 38): whether its model
//! calls tools is asked once, with the tool choice the runs use, and remembered per base URL
//! and model. Against a local server replaying OpenAI's wire format.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic: that is how tests fail

use std::sync::Mutex;

use serde_json::json;
use viga_app::Tell;
use viga_app::tool_calling::find_out_in;
use viga_provider::{ProviderConfig, ProviderKind};
use viga_testkit::http::{Reply, TestServer};
use viga_testkit::openai::replay_server;

#[derive(Default)]
struct Heard(Mutex<Vec<String>>);

impl Tell for Heard {
    fn say(&self, line: &str) {
        self.0.lock().unwrap().push(line.to_owned());
    }
    fn warn(&self, line: &str) {
        self.0.lock().unwrap().push(format!("warning: {line}"));
    }
}

fn compatible(base: &str) -> ProviderConfig {
    let mut settings = ProviderConfig::new(ProviderKind::OpenAiCompatible, "qwen2.5-coder-0.5b");
    settings.base_url = Some(format!("{base}/v1"));
    settings
}

#[tokio::test]
async fn a_server_whose_model_calls_the_tool_has_tool_calling_on_and_is_not_asked_again() {
    let server = replay_server(vec![
        json!({"tool_calls": [{"name": "report_ready", "arguments": {"ready": true}}]}),
    ])
    .unwrap();
    let memory = tempfile::tempdir().unwrap();
    let memory = memory.path().join("viga").join("tool-calling.json");
    let heard = Heard::default();
    let mut settings = compatible(server.base());
    let said = find_out_in(&mut settings, Some(&memory), &heard)
        .await
        .unwrap();
    assert_eq!(settings.tool_calling, Some(true));
    assert!(
        said.starts_with("tool calling on: found by asking"),
        "{said}"
    );
    let body = server.requests()[0].json();
    assert_eq!(body["tool_choice"], "auto", "{body}");
    assert_eq!(
        body["tools"][0]["function"]["name"], "report_ready",
        "{body}"
    );
    assert!(memory.is_file());

    let mut again = compatible(server.base());
    let said = find_out_in(&mut again, Some(&memory), &heard)
        .await
        .unwrap();
    assert_eq!(again.tool_calling, Some(true));
    assert!(said.contains("remembered from asking"), "{said}");
    assert_eq!(server.count(), 1, "asked again");
    // Another model on the same server is its own question.
    let mut other = compatible(server.base());
    other.model = "another".to_owned();
    find_out_in(&mut other, Some(&memory), &heard).await;
    assert_eq!(server.count(), 2);
}

#[tokio::test]
async fn a_server_that_refuses_tools_or_a_model_that_answers_in_prose_has_it_off() {
    // vLLM started without --enable-auto-tool-choice.
    let refusing = TestServer::scripted(vec![Reply::json(
        400,
        json!({"object": "error", "message": "\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set", "type": "BadRequestError", "code": 400}).to_string(),
    )])
    .unwrap();
    let heard = Heard::default();
    let mut settings = compatible(refusing.base());
    let said = find_out_in(&mut settings, None, &heard).await.unwrap();
    assert_eq!(settings.tool_calling, Some(false));
    assert!(said.contains("enable-auto-tool-choice"), "{said}");
    assert_eq!(refusing.count(), 1, "a refusal is an answer, not retried");

    let prose = replay_server(vec![json!({"text": "I am ready."})]).unwrap();
    let mut settings = compatible(prose.base());
    let said = find_out_in(&mut settings, None, &heard).await.unwrap();
    assert_eq!(settings.tool_calling, Some(false));
    assert!(said.contains("answered without calling the tool"), "{said}");
}

#[tokio::test]
async fn a_server_that_cannot_be_reached_decides_nothing_and_says_so() {
    let gone = {
        let server = TestServer::scripted(vec![Reply::not_found()]).unwrap();
        server.base().to_owned()
    };
    let memory = tempfile::tempdir().unwrap();
    let memory = memory.path().join("tool-calling.json");
    let heard = Heard::default();
    let mut settings = compatible(&gone);
    assert_eq!(
        find_out_in(&mut settings, Some(&memory), &heard).await,
        None
    );
    assert_eq!(settings.tool_calling, None);
    assert!(!memory.exists(), "nothing remembered");
    let heard = heard.0.lock().unwrap();
    assert!(
        heard
            .iter()
            .any(|line| line.starts_with("warning: could not ask")),
        "{heard:?}"
    );
}

#[tokio::test]
async fn a_config_that_says_or_another_kind_is_not_asked() {
    let heard = Heard::default();
    let mut said_off = compatible("http://127.0.0.1:9");
    said_off.tool_calling = Some(false);
    assert_eq!(find_out_in(&mut said_off, None, &heard).await, None);
    assert_eq!(said_off.tool_calling, Some(false));
    let mut openai = ProviderConfig::new(ProviderKind::OpenAi, "gpt-4o");
    assert_eq!(find_out_in(&mut openai, None, &heard).await, None);
    assert!(heard.0.lock().unwrap().is_empty());
}
