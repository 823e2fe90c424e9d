//! The WebSocket gateway with a real client and real Blender: per-user isolation, each
//! token admitting its own user only, replayed ids refused, commands only for registered
//! add-ons, hello required, path parameters confined to the user's folder, and an idle
//! session's Blender stopped to make room under the session cap.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic: that is how tests fail

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use viga_blender::{ContainedWorkers, ContainmentPolicy, locate};
use viga_serve::ws::{
    BlenderSessions, Credentials, DialLimits, Gateway, GatewayConfig, GatewayLimits, ListenSecurity,
};
use viga_testkit::websocket::{Socket, ask, connect};
use viga_testkit::{BLENDER_TEST_LIMIT, within};

const ALICE_TOKEN: &str = "alice-token-0123456789";
const BOB_TOKEN: &str = "bob-token-abcdefghijkl";

const SETUP: &str = "import bpy\nbpy.ops.mesh.primitive_cube_add(size=2)\nbpy.context.object.name = 'Table'\nbpy.ops.mesh.primitive_cube_add(size=1, location=(5, 5, 5))\nbpy.context.object.name = 'Chair'\n";

fn fixture_addons() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/addons")
}

/// The test add-on whose commands take file paths (tests/addons/scene_files).
fn file_addons() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/addons")
}

/// A gateway on loopback for alice and bob, with real Blender sessions; the files root is
/// `<returned folder>/files`.
async fn start(addons: PathBuf, limits: GatewayLimits) -> (SocketAddr, tempfile::TempDir) {
    let files = tempfile::tempdir().unwrap();
    let config = GatewayConfig {
        credentials: Credentials::from_pairs([("alice", ALICE_TOKEN), ("bob", BOB_TOKEN)], "test")
            .unwrap(),
        limits,
        files_root: files.path().join("files"),
        dial: DialLimits::default(),
        chat: None,
        keep_requests: None,
    };
    let sessions = BlenderSessions {
        launcher: locate().unwrap(),
        addons_folder: Some(addons),
        setup_code: Some(SETUP.to_owned()),
        // The launcher is the viga binary, which this crate's tests do not build; the
        // gateway's contained sessions are tested through it (bins/viga/tests/suite/gateway.rs).
        contained: ContainedWorkers::new(ContainmentPolicy::Off, Vec::new()),
    };
    let gateway = Gateway::new(config, Arc::new(sessions)).unwrap();
    let listener = Gateway::bind("127.0.0.1:0".parse().unwrap(), &ListenSecurity::default())
        .await
        .unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(gateway.serve(listener));
    (address, files)
}

fn hello(id: &str, user: &str) -> Value {
    let token = if user == "alice" {
        ALICE_TOKEN
    } else {
        BOB_TOKEN
    };
    json!({"type": "hello", "message_id": id, "user": user, "token": token})
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
        let (address, _files) = start(fixture_addons(), GatewayLimits::default()).await;
        let mut alice = connect(address).await;
        assert_eq!(
            ask(&mut alice, list("a0")).await["error"],
            "say hello (with your user and your token) first"
        );
        let wrong = ask(
            &mut alice,
            json!({"type": "hello", "message_id": "a1", "user": "alice", "token": "guess"}),
        )
        .await;
        assert_eq!(
            (wrong["ok"].clone(), wrong["error"].clone()),
            (json!(false), json!("unknown user or wrong token"))
        );
        // Bob's token does not make its bearer alice, and an unknown user is told the same.
        let borrowed = json!({"type": "hello", "message_id": "a1b", "username": "alice", "token": BOB_TOKEN});
        assert_eq!(ask(&mut alice, borrowed).await["error"], "unknown user or wrong token");
        let stranger = json!({"type": "hello", "message_id": "a1c", "user": "mallory", "token": ALICE_TOKEN});
        assert_eq!(ask(&mut alice, stranger).await["error"], "unknown user or wrong token");
        assert_eq!(ask(&mut alice, hello("a2", "alice")).await["ok"], true);
        assert_eq!(
            ask(&mut alice, hello("a2b", "bob")).await["error"],
            "already greeted as alice; one connection speaks for one user"
        );

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

fn command(id: &str, name: &str, params: Value) -> Value {
    json!({"type": "addon_command", "message_id": id, "addon_id": "scene_files", "command": name, "params": params})
}

fn error_of(reply: &Value) -> &str {
    reply["error"]
        .as_str()
        .unwrap_or_else(|| panic!("expected a refusal: {reply}"))
}

#[tokio::test]
async fn path_parameters_stay_in_the_users_folder() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let (address, files) = start(file_addons(), GatewayLimits::default()).await;
        let mut alice = connect(address).await;
        assert_eq!(ask(&mut alice, hello("p0", "alice")).await["ok"], true);
        // Made when her session started.
        let alices_folder = files.path().join("files/alice").canonicalize().unwrap();

        // A declared `file_path` parameter and one whose name says path both land in her folder.
        let saved = ask(
            &mut alice,
            command("p1", "save_copy", json!({"target": "copy.blend"})),
        )
        .await;
        let copy = alices_folder.join("copy.blend");
        assert_eq!(
            saved["result"]["result"]["saved"],
            copy.to_str().unwrap(),
            "{saved}"
        );
        assert!(copy.is_file(), "{saved}");
        let noted = ask(
            &mut alice,
            command(
                "p2",
                "write_note",
                json!({"note_path": "note.txt", "text": "hi"}),
            ),
        )
        .await;
        let note = alices_folder.join("note.txt");
        assert_eq!(
            noted["result"]["result"]["written"],
            note.to_str().unwrap(),
            "{noted}"
        );
        assert_eq!(std::fs::read_to_string(&note).unwrap(), "hi");

        // Out of her folder: upwards, absolute elsewhere, through a link.
        let outside = files.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, alices_folder.join("out")).unwrap();
        let escapes = [
            (
                "p3",
                "save_copy",
                json!({"target": "../bob/copy.blend"}),
                "`..` may not appear in a path",
            ),
            (
                "p4",
                "write_note",
                json!({"note_path": outside.join("x.txt"), "text": "x"}),
                "outside your folder",
            ),
            (
                "p5",
                "write_note",
                json!({"note_path": "out/x.txt", "text": "x"}),
                "through a link",
            ),
        ];
        for (id, name, params, why) in escapes {
            let refused = ask(&mut alice, command(id, name, params)).await;
            assert!(error_of(&refused).contains(why), "{refused}");
        }
        assert_eq!(
            std::fs::read_dir(&outside).unwrap().count(),
            0,
            "a file was written outside"
        );

        // Bob cannot reach alice's files by their absolute path either.
        let mut bob = connect(address).await;
        assert_eq!(ask(&mut bob, hello("b0", "bob")).await["ok"], true);
        let overwrite = command(
            "b1",
            "write_note",
            json!({"note_path": note, "text": "bob was here"}),
        );
        assert!(error_of(&ask(&mut bob, overwrite).await).contains("outside your folder"));
        assert_eq!(std::fs::read_to_string(&note).unwrap(), "hi");
    })
    .await;
}

/// Whether the process `pid` is still running (a zombie counts as gone).
fn running(pid: u64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z'))
    })
}

async fn blender_pid(socket: &mut Socket, id: &str) -> u64 {
    let reply = ask(socket, command(id, "process_id", json!({}))).await;
    reply["result"]["result"]
        .as_u64()
        .unwrap_or_else(|| panic!("{reply}"))
}

#[tokio::test]
async fn an_idle_session_is_stopped_and_makes_room_under_the_cap() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let limits = GatewayLimits {
            max_sessions: 1,
            session_idle: Duration::from_secs(1),
            ..GatewayLimits::default()
        };
        let (address, _files) = start(file_addons(), limits).await;
        let mut alice = connect(address).await;
        assert_eq!(ask(&mut alice, hello("a0", "alice")).await["ok"], true);
        let alices_blender = blender_pid(&mut alice, "a1").await;
        assert!(running(alices_blender));

        // The gateway is full: bob is refused, and no Blender is started for him.
        let mut bob = connect(address).await;
        assert_eq!(
            ask(&mut bob, hello("b0", "bob")).await["error"],
            "the gateway serves at most 1 users at once; try again later"
        );

        // Alice leaves; a second after, her Blender is stopped and bob gets the place.
        alice.close(None).await.unwrap();
        let left = Instant::now();
        while running(alices_blender) {
            assert!(
                left.elapsed() < Duration::from_secs(30),
                "alice's idle Blender was never stopped"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(
            left.elapsed() >= Duration::from_millis(900),
            "stopped before the idle limit"
        );
        assert_eq!(ask(&mut bob, hello("b1", "bob")).await["ok"], true);
        let bobs_blender = blender_pid(&mut bob, "b2").await;
        assert_ne!(bobs_blender, alices_blender);
    })
    .await;
}
