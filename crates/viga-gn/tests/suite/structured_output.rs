//! A Geometry Nodes run through a real `openai_compatible` provider whose server refuses
//! structured output: the provider falls back to asking for the JSON in the text, the run
//! validates the reply as always, and it ends `Done`.

use std::path::PathBuf;

use serde_json::Value;
use viga_gn::{ExecutorRegistry, GnRun, GnRunConfig, PythonPolicy, RunState};
use viga_provider::{ProviderConfig, ProviderKind, build_provider};
use viga_testkit::http::{Reply, Request, TestServer};

use super::{PLANE, fresh, on_blender};

fn provider_fixture(path: &str) -> String {
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/providers")
        .join(path);
    std::fs::read_to_string(&file).unwrap_or_else(|err| panic!("{}: {err}", file.display()))
}

/// A Chat Completions server without structured output: a request with `response_format` gets
/// HTTP 400 (worded as vLLM words it), any other the step-protocol reply of
/// `openai/complete_gn_reply.json` (the target modifier on the Plane, done).
fn refusing_server() -> TestServer {
    TestServer::start(|request: &Request| {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or_default();
        if body.get("response_format").is_some() {
            Reply::json(
                400,
                provider_fixture("openai/error_schema_unsupported.json"),
            )
        } else {
            Reply::json(200, provider_fixture("openai/complete_gn_reply.json"))
        }
    })
    .unwrap()
}

/// The JSON bodies of the requests `server` was sent, in order.
fn bodies(server: &TestServer) -> Vec<Value> {
    server
        .requests()
        .iter()
        .map(|request| serde_json::from_slice(&request.body).unwrap())
        .collect()
}

#[test]
fn a_run_ends_done_through_the_json_in_text_fallback() {
    on_blender(|blender| async move {
        fresh(&blender, PLANE).await;
        let server = refusing_server();
        let mut provider_config =
            ProviderConfig::new(ProviderKind::OpenAiCompatible, "qwen2.5vl:7b");
        provider_config.base_url = Some(format!("{}/v1", server.base()));
        let provider = build_provider(&provider_config).unwrap();
        let mut config = GnRunConfig::new("scatter cubes on the plane");
        config.object = Some("Plane".into());

        let mut run = GnRun::new(
            config,
            provider,
            blender.clone(),
            ExecutorRegistry::with_defaults(PythonPolicy::safe()),
        )
        .start();
        let mut warnings = Vec::new();
        while let Some(event) = run.next_event().await {
            if let viga_protocol::event::RunEvent::Warning { message } = event.event {
                warnings.push(message);
            }
        }
        let outcome = run.wait().await.unwrap();
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("refused structured output")),
            "the run says the server refused structured output: {warnings:?}"
        );

        assert_eq!(outcome.state, RunState::Done, "{:?}", outcome.problem());
        assert_eq!(outcome.final_message, "finished");
        assert!(outcome.targets.iter().any(|target| target.modifier == "GN"));
        let bodies = bodies(&server);
        assert_eq!(bodies.len(), 2, "the refused request and its retry");
        let schema = &bodies[0]["response_format"]["json_schema"];
        assert_eq!(schema["name"], "GnResponse");
        let retry = &bodies[1];
        assert!(retry.get("response_format").is_none(), "{retry}");
        let system = retry["messages"][0]["content"].as_str().unwrap();
        assert!(
            system.contains("Answer with one JSON object") && system.contains("\"GnResponse\""),
            "{system}"
        );
    });
}
