//! The server's Blender and chat doors without Blender: a fake desktop Blender dials in over
//! WebSocket and answers the agent's messages as the add-on does (or drops the connection in
//! the middle of a command), a chat client sends requests, and a scripted model answers. What
//! is checked is the server's part: a command whose answer was lost is sent again, with the
//! same id, to the same Blender when it dials back in, and failed when another Blender comes;
//! a second Blender of a user replaces the first; a wrong token is refused for good; chat
//! messages are checked (hello first, one user per page, one request at a time, ids used once,
//! cancel).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic: that is how tests fail

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures_util::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use viga_protocol::bridge::{RenderEngine, RenderSpec};
use viga_provider::ScriptedProvider;
use viga_provider::scripted::Script;
use viga_serve::ws::{
    ChatSettings, Credentials, DialLimits, Gateway, GatewayConfig, GatewayLimits, ListenSecurity,
    SessionFactory, SessionStartError, StartedSession, UserName,
};
use viga_testkit::websocket::{Socket, connect};
use viga_testkit::within;

const TEST_LIMIT: Duration = Duration::from_secs(60);
const ALICE: &str = "alice-token-0123456789";
const GRACE: Duration = Duration::from_secs(2);

/// No server Blenders here: a user without a dialled-in Blender is told to connect theirs.
struct NoSessions;

#[async_trait]
impl SessionFactory for NoSessions {
    async fn start(
        &self,
        _user: &UserName,
        _folder: &Path,
    ) -> Result<StartedSession, SessionStartError> {
        Err(SessionStartError::Setup(
            "this test starts no Blender".to_owned(),
        ))
    }
}

fn object_placer() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/addons/object_placer/addon_ai.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The bridge's `list_addons` answer for a Blender with the Object Placer enabled.
fn listing() -> Value {
    json!({"addons": [{"path": "/desk/object_placer/addon_ai.json", "manifest": object_placer(),
                       "has_handlers": true, "missing_dependencies": []}],
           "problems": [], "blender_version": "5.0.1", "fingerprint": "desk-1"})
}

fn scene() -> Value {
    let object = |name: &str, x: f64| {
        json!({"name": name, "type": "MESH", "location": [x, 0.0, 0.0], "rotation_euler": [0.0, 0.0, 0.0],
               "scale": [1.0, 1.0, 1.0], "dimensions": [1.0, 1.0, 1.0], "bbox_min": [x - 0.5, -0.5, -0.5],
               "bbox_max": [x + 0.5, 0.5, 0.5], "visible": true})
    };
    json!({"blender_version": "5.0.1", "scene": "Scene", "unit_system": "METRIC", "frame_current": 1,
           "frame_start": 1, "frame_end": 250, "active_camera": null, "render_engine": "BLENDER_WORKBENCH",
           "total_objects": 2, "offset": 0, "next_offset": null,
           "objects": [object("Lamp", 3.0), object("Table", 0.0)], "materials": []})
}

fn place_lamp() -> Value {
    json!({"response": {"text": "", "finish_reason": "tool_calls", "tool_calls": [
        {"id": "c1", "name": "place_object_relative",
         "arguments": {"object1_name": "Lamp", "object2_name": "Table", "side": "left"}}]}})
}

fn answer(text: &str) -> Value {
    json!({"response": {"text": text, "finish_reason": "stop"}})
}

async fn start(turns: Vec<Value>) -> (SocketAddr, tempfile::TempDir) {
    let files = tempfile::tempdir().unwrap();
    let script: Script = serde_json::from_value(json!({"turns": turns})).unwrap();
    let config = GatewayConfig {
        credentials: Credentials::from_pairs([("alice", ALICE)], "test").unwrap(),
        limits: GatewayLimits::default(),
        files_root: files.path().join("files"),
        dial: DialLimits {
            reconnect_grace: GRACE,
            ..DialLimits::default()
        },
        chat: Some(ChatSettings {
            provider: Arc::new(ScriptedProvider::new("scripted:dialled", script)),
            max_steps: 4,
            render: RenderSpec {
                engine: RenderEngine::Workbench,
                width: 64,
                height: 64,
                samples: None,
            },
            model_sees: false,
            max_tokens: 1000,
            remembered_turns: 3,
            server_blenders: false,
            server_addons: None,
        }),
        keep_requests: None,
    };
    let gateway = Gateway::new(config, Arc::new(NoSessions)).unwrap();
    let listener = Gateway::bind("127.0.0.1:0".parse().unwrap(), &ListenSecurity::default())
        .await
        .unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(gateway.serve(listener));
    (address, files)
}

async fn send(socket: &mut Socket, message: Value) {
    socket
        .send(Message::text(message.to_string()))
        .await
        .unwrap();
}

/// The next JSON message, or the close frame's code and reason as `{"closed": code}`.
async fn next(socket: &mut Socket) -> Value {
    loop {
        let frame = tokio::time::timeout(Duration::from_secs(20), socket.next())
            .await
            .expect("a message in time");
        match frame {
            Some(Ok(Message::Text(text))) => return serde_json::from_str(text.as_str()).unwrap(),
            Some(Ok(Message::Close(frame))) => {
                return json!({"closed": frame.map(|f| u16::from(f.code)), });
            }
            Some(Ok(_)) => {}
            None | Some(Err(_)) => return json!({"closed": null}),
        }
    }
}

/// A fake desktop Blender: dials in and answers the agent's reading requests as the add-on
/// does; add-on commands are handed to the test.
struct Desk {
    socket: Socket,
}

impl Desk {
    async fn dial(address: SocketAddr, token: &str, instance: &str) -> (Self, Value) {
        let mut socket = connect(format!("{address}/blender")).await;
        send(
            &mut socket,
            json!({"type": "hello", "message_id": format!("hello-{instance}"), "username": "alice",
                   "token": token, "instance": instance, "blender_version": "5.0.1"}),
        )
        .await;
        let welcome = next(&mut socket).await;
        if welcome["type"] == "welcome" {
            send(
                &mut socket,
                json!({"type": "registry", "message_id": format!("registry-{instance}"), "listing": listing()}),
            )
            .await;
        }
        (Self { socket }, welcome)
    }

    async fn reply(&mut self, message_id: &Value, reply: Value) {
        send(
            &mut self.socket,
            json!({"type": "response", "message_id": message_id, "reply": reply}),
        )
        .await;
    }

    /// Answers requests until an add-on command (or a close) comes, which it returns.
    async fn until_command(&mut self) -> Value {
        loop {
            let message = next(&mut self.socket).await;
            if message["type"] != "request" {
                return message;
            }
            let request = &message["request"];
            let reply = match request["command"].as_str().unwrap() {
                "list_addons" => json!({"id": null, "ok": true, "result": listing()}),
                "scene_info" => json!({"id": null, "ok": true, "result": scene()}),
                "undo_push" => json!({"id": null, "ok": true, "result": {"pushed": true}}),
                "undo" => json!({"id": null, "ok": true, "result": {"undone": true}}),
                other => json!({"id": null, "ok": false,
                                "error": {"kind": "blender_error", "message": format!("the desk does not {other}")}}),
            };
            self.reply(&message["message_id"], reply).await;
        }
    }
}

async fn chat(address: SocketAddr) -> Socket {
    let mut socket = connect(format!("{address}/chat")).await;
    send(
        &mut socket,
        json!({"type": "hello", "message_id": "h", "username": "alice", "token": ALICE}),
    )
    .await;
    assert_eq!(next(&mut socket).await["ok"], true);
    socket
}

/// The chat's next message of `kind` (progress lines only when finished).
async fn next_of(socket: &mut Socket, wanted: impl Fn(&Value) -> bool) -> Value {
    loop {
        let message = next(socket).await;
        assert!(message.get("closed").is_none(), "the chat closed");
        if wanted(&message) {
            return message;
        }
    }
}

fn finished(query: &str) -> impl Fn(&Value) -> bool + '_ {
    move |m: &Value| {
        m["type"] == "progress" && m["query_id"] == query && m["record"]["kind"] == "finished"
    }
}

#[tokio::test]
async fn a_command_whose_answer_was_lost_is_sent_again_to_the_same_blender_only() {
    within(TEST_LIMIT, "the test", async {
        let (address, _files) = start(vec![place_lamp(), answer("moved"), place_lamp()]).await;
        let (mut desk, welcome) = Desk::dial(address, ALICE, "instance-1").await;
        assert_eq!(welcome["type"], "welcome", "{welcome}");
        let mut page = chat(address).await;
        send(
            &mut page,
            json!({"type": "query", "message_id": "q1", "text": "put the lamp left"}),
        )
        .await;
        let command = desk.until_command().await;
        assert_eq!(command["type"], "addon_command", "{command}");
        assert_eq!(command["username"], "alice");
        assert_eq!(command["undo_step"], "viga: place_object_relative");
        // The connection drops before the answer: the same Blender dials back in, is sent the
        // same message again, and answers it (from what it kept, in the add-on).
        drop(desk);
        let (mut desk, _) = Desk::dial(address, ALICE, "instance-1").await;
        let again = desk.until_command().await;
        assert_eq!(again, command, "the same message, the same id");
        desk.reply(
            &again["message_id"],
            json!({"id": null, "ok": true, "result": {"result": {"object": "Lamp"}, "scene": ["Lamp [MESH] at (-0.7, 0, 0)"]}}),
        )
        .await;
        let reader = tokio::spawn(async move {
            let _ = desk.until_command().await;
            desk
        });
        let done = next_of(&mut page, finished("q1")).await;
        assert_eq!(done["record"]["stop"]["reason"], "accepted", "{done}");
        assert_eq!(done["record"]["message"], "moved");
        reader.abort();

        // This time another Blender comes instead: the waiting command fails at once.
        let (mut desk, _) = Desk::dial(address, ALICE, "instance-2").await;
        send(
            &mut page,
            json!({"type": "query", "message_id": "q2", "text": "again"}),
        )
        .await;
        assert_eq!(desk.until_command().await["type"], "addon_command");
        drop(desk);
        let (_other, _) = Desk::dial(address, ALICE, "instance-3").await;
        let done = next_of(&mut page, finished("q2")).await;
        assert_eq!(done["record"]["stop"]["reason"], "failed");
        assert!(
            done["record"]["message"]
                .as_str()
                .unwrap()
                .contains("your Blender changed"),
            "{done}"
        );
    })
    .await;
}

#[tokio::test]
async fn a_second_blender_replaces_the_first_and_a_wrong_token_is_refused_for_good() {
    within(TEST_LIMIT, "the test", async {
        let (address, _files) = start(Vec::new()).await;
        let (mut first, _) = Desk::dial(address, ALICE, "first").await;
        let (_second, welcome) = Desk::dial(address, ALICE, "second").await;
        assert_eq!(welcome["type"], "welcome");
        assert_eq!(
            next(&mut first.socket).await,
            json!({"closed": u16::from(CloseCode::from(4001))})
        );
        let (mut wrong, refused) = Desk::dial(address, "not-alices-token-0123", "third").await;
        assert_eq!(refused["type"], "refused", "{refused}");
        assert_eq!(refused["retry"], false);
        assert_eq!(refused["message"], "unknown user or wrong token");
        assert_eq!(
            next(&mut wrong.socket).await,
            json!({"closed": u16::from(CloseCode::from(4003))})
        );
    })
    .await;
}

#[tokio::test]
async fn chat_messages_are_checked_and_a_request_runs_once_and_can_be_cancelled() {
    within(TEST_LIMIT, "the test", async {
        let slow = json!({"delay_ms": 60_000, "response": {"text": "too late", "finish_reason": "stop"}});
        let (address, _files) = start(vec![slow]).await;
        let mut page = connect(format!("{address}/chat")).await;
        send(&mut page, json!({"type": "query", "message_id": "early", "text": "x"})).await;
        let early = next(&mut page).await;
        assert!(early["error"].as_str().unwrap().contains("say hello"), "{early}");
        send(&mut page, json!({"type": "hello", "message_id": "h", "username": "alice", "token": "nope-nope-nope-nope"})).await;
        assert_eq!(next(&mut page).await["error"], "unknown user or wrong token");

        let mut page = chat(address).await;
        let status = next_of(&mut page, |m| m["type"] == "blender").await;
        assert_eq!(status["status"]["kind"], "none", "{status}");
        send(&mut page, json!({"type": "query", "message_id": "q0", "text": "x"})).await;
        let refused = next_of(&mut page, |m| m["message_id"] == "q0").await;
        assert!(refused["error"].as_str().unwrap().contains("not connected"), "{refused}");

        let (mut desk, _) = Desk::dial(address, ALICE, "desk").await;
        next_of(&mut page, |m| m["type"] == "blender" && m["status"]["kind"] == "desktop").await;
        tokio::spawn(async move { desk.until_command().await });
        send(&mut page, json!({"type": "query", "message_id": "q1", "text": "wait", "username": "bob"})).await;
        let bob = next_of(&mut page, |m| m["message_id"] == "q1").await;
        assert!(bob["error"].as_str().unwrap().contains("not the user"), "{bob}");
        send(&mut page, json!({"type": "query", "message_id": "q2", "text": "wait"})).await;
        assert_eq!(next_of(&mut page, |m| m["message_id"] == "q2").await["ok"], true);
        for (id, message) in [
            ("q2", json!({"type": "query", "message_id": "q2", "text": "wait"})),
            ("q3", json!({"type": "query", "message_id": "q3", "text": "meanwhile"})),
        ] {
            send(&mut page, message).await;
            let refused = next_of(&mut page, |m| m["type"] == "response" && m["message_id"] == id).await;
            assert_eq!(refused["ok"], false, "{refused}");
        }
        // The model is taking its time: a cancel ends the request at once.
        tokio::time::sleep(Duration::from_millis(300)).await;
        send(&mut page, json!({"type": "cancel", "message_id": "c1", "query_id": "q2"})).await;
        assert_eq!(next_of(&mut page, |m| m["message_id"] == "c1").await["result"]["cancelled"], true);
        let done = tokio::time::timeout(Duration::from_secs(5), next_of(&mut page, finished("q2")))
            .await
            .expect("cancelled at once");
        assert_eq!(done["record"]["stop"]["reason"], "cancelled");
    })
    .await;
}
