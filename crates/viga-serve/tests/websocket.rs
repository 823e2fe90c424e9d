//! The WebSocket gateway with a real client and real Blender: per-user isolation, replayed
//! ids refused, commands only for registered add-ons, hello required.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic: that is how tests fail

use std::net::SocketAddr;
use std::path::Path;

use futures_util::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use viga_blender::locate;
use viga_serve::ws::{Gateway, GatewayConfig};
use viga_testkit::{BLENDER_TEST_LIMIT, within};

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn start() -> SocketAddr {
    let config = GatewayConfig {
        token: "secret".into(),
        launcher: locate().unwrap(),
        addons_folder: Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/addons")),
        setup_code: Some(
            "import bpy\nbpy.ops.mesh.primitive_cube_add(size=2)\nbpy.context.object.name = 'Table'\nbpy.ops.mesh.primitive_cube_add(size=1, location=(5, 5, 5))\nbpy.context.object.name = 'Chair'\n".into(),
        ),
    };
    let listener = Gateway::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(Gateway::new(config).serve(listener));
    address
}

async fn connect(address: SocketAddr) -> Socket {
    tokio_tungstenite::connect_async(format!("ws://{address}"))
        .await
        .unwrap()
        .0
}

async fn ask(socket: &mut Socket, message: Value) -> Value {
    socket
        .send(Message::text(message.to_string()))
        .await
        .unwrap();
    loop {
        if let Message::Text(text) = socket.next().await.unwrap().unwrap() {
            return serde_json::from_str(text.as_str()).unwrap();
        }
    }
}

fn hello(id: &str, user: &str) -> Value {
    json!({"type": "hello", "message_id": id, "user": user, "token": "secret"})
}

/// Seed 004's own message: `type`, `addon_id`, `command`, `params`, `username`, `message_id`.
fn place(id: &str) -> Value {
    json!({"type": "addon_command", "addon_id": "object_placer", "command": "place_object_relative",
           "params": {"object1_name": "Chair", "object2_name": "Table", "side": "left"},
           "username": "alice", "message_id": id})
}

/// Where the reply's scene (objects, as data) has the chair.
fn chair_location(reply: &Value) -> Value {
    let objects = reply["result"]["scene"]["objects"]
        .as_array()
        .unwrap_or_else(|| panic!("{reply}"));
    objects
        .iter()
        .find(|object| object["name"] == "Chair")
        .map(|chair| chair["location"].clone())
        .unwrap_or_else(|| panic!("no Chair in {reply}"))
}

fn list(id: &str) -> Value {
    json!({"type": "addon_command", "message_id": id, "addon_id": "object_placer", "command": "list_scene_objects", "params": {}})
}

#[tokio::test]
async fn users_are_isolated_and_replays_refused() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let address = start().await;
        let mut alice = connect(address).await;
        assert_eq!(
            ask(&mut alice, list("a0")).await["error"],
            "say hello (with your user and the gateway token) first"
        );
        let wrong = ask(
            &mut alice,
            json!({"type": "hello", "message_id": "a1", "user": "alice", "token": "guess"}),
        )
        .await;
        assert_eq!(
            (wrong["ok"].clone(), wrong["error"].clone()),
            (json!(false), json!("wrong token"))
        );
        assert_eq!(ask(&mut alice, hello("a2", "alice")).await["ok"], true);

        let placed = ask(&mut alice, place("a3")).await;
        assert_eq!(placed["message_id"], "a3");
        assert_eq!(chair_location(&placed), json!([-1.5, 0.0, 0.0]), "{placed}");
        assert!(placed["result"]["result"].is_object() || placed["result"]["result"].is_string(), "{placed}");
        // One connection speaks for one user: a command tagged with another user is refused.
        let mut impostor = place("a3b");
        impostor["username"] = json!("bob");
        let refused = ask(&mut alice, impostor).await;
        assert!(
            refused["error"].as_str().unwrap().contains("is not the user this connection said hello as"),
            "{refused}"
        );
        let replay = ask(&mut alice, place("a3")).await;
        assert!(
            replay["error"].as_str().unwrap().contains("already used"),
            "{replay}"
        );
        let foreign = ask(&mut alice, json!({"type": "addon_command", "message_id": "a4", "addon_id": "object_placer", "command": "paint_object", "params": {}})).await;
        assert!(
            foreign["error"]
                .as_str()
                .unwrap()
                .contains("has no command \"paint_object\""),
            "a command of another add-on: {foreign}"
        );
        let unknown = ask(&mut alice, json!({"type": "addon_command", "message_id": "a5", "addon_id": "rm_rf", "command": "go", "params": {}})).await;
        assert!(
            unknown["error"]
                .as_str()
                .unwrap()
                .contains("not registered"),
            "{unknown}"
        );
        let garbage = ask(
            &mut alice,
            json!({"type": "addon_command", "message_id": "a6"}),
        )
        .await;
        assert!(
            garbage["error"]
                .as_str()
                .unwrap()
                .starts_with("unreadable message"),
            "{garbage}"
        );

        // Bob has his own Blender: alice's move is not in his scene.
        let mut bob = connect(address).await;
        assert_eq!(ask(&mut bob, hello("b1", "bob")).await["ok"], true);
        let bobs = ask(&mut bob, list("b2")).await;
        assert_eq!(chair_location(&bobs), json!([5.0, 5.0, 5.0]), "{bobs}");

        // Alice again, on a new connection: same session, same scene, and her old ids stay spent.
        let mut again = connect(address).await;
        assert_eq!(ask(&mut again, hello("a7", "alice")).await["ok"], true);
        assert!(
            ask(&mut again, place("a3")).await["error"]
                .as_str()
                .unwrap()
                .contains("already used")
        );
        let hers = ask(&mut again, list("a8")).await;
        assert_eq!(chair_location(&hers), json!([-1.5, 0.0, 0.0]), "{hers}");
    })
    .await;
}
