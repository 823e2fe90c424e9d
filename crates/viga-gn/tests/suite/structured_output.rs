//! A Geometry Nodes run through a real `openai_compatible` provider whose server refuses
//! structured output: the provider falls back to asking for the JSON in the text, the run
//! validates the reply as always, and it ends `Done`.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use viga_gn::{ExecutorRegistry, GnRun, GnRunConfig, PythonPolicy, RunState};
use viga_provider::{ProviderConfig, ProviderKind, build_provider};

use super::{PLANE, fresh, on_blender};

fn provider_fixture(path: &str) -> String {
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/providers")
        .join(path);
    std::fs::read_to_string(&file).unwrap_or_else(|err| panic!("{}: {err}", file.display()))
}

/// A Chat Completions server without structured output: a request with `response_format` gets
/// HTTP 400 (worded as vLLM words it), any other the step-protocol reply of
/// `openai/complete_gn_reply.json` (the target modifier on the Plane, done). It records the
/// request bodies.
struct RefusingServer {
    base_url: String,
    bodies: Arc<Mutex<Vec<Value>>>,
}

impl RefusingServer {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let recorded = bodies.clone();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(answer(socket, recorded.clone()));
            }
        });
        Self { base_url, bodies }
    }

    fn bodies(&self) -> Vec<Value> {
        self.bodies.lock().unwrap().clone()
    }
}

async fn answer(mut socket: TcpStream, bodies: Arc<Mutex<Vec<Value>>>) {
    let Some(body) = read_body(&mut socket).await else {
        return;
    };
    let (status, reply) = if body.get("response_format").is_some() {
        (
            400,
            provider_fixture("openai/error_schema_unsupported.json"),
        )
    } else {
        (200, provider_fixture("openai/complete_gn_reply.json"))
    };
    bodies.lock().unwrap().push(body);
    let head = format!(
        "HTTP/1.1 {status} Scripted\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        reply.len()
    );
    let _ = socket.write_all(head.as_bytes()).await;
    let _ = socket.write_all(reply.as_bytes()).await;
    let _ = socket.shutdown().await;
}

/// The JSON body of one HTTP/1.1 request with a `content-length`.
async fn read_body(socket: &mut TcpStream) -> Option<Value> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        let read = socket.read(&mut chunk).await.ok()?;
        if read == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..read]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .and_then(|value| value.trim().parse().ok())?;
    let mut body = buffer[head_end + 4..].to_vec();
    while body.len() < length {
        let read = socket.read(&mut chunk).await.ok()?;
        if read == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..read]);
    }
    serde_json::from_slice(&body).ok()
}

#[test]
fn a_run_ends_done_through_the_json_in_text_fallback() {
    on_blender(|blender| async move {
        fresh(&blender, PLANE).await;
        let server = RefusingServer::start().await;
        let mut provider_config =
            ProviderConfig::new(ProviderKind::OpenAiCompatible, "qwen2.5vl:7b");
        provider_config.base_url = Some(server.base_url.clone());
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
        let bodies = server.bodies();
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
