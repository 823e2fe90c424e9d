//! The bridge under abuse, against real Blender: before authentication (odd tokens, nested
//! and oversized hellos, a client that sends one byte at a time, a second client), and odd
//! program output that must still come back as a readable reply.

use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use viga_blender::client::FramedClient;
use viga_blender::{BlenderCommands, BlenderTransport as _, TransportError};
use viga_protocol::bridge::{FaultKind, RenderEngine, RenderRequest, RenderSpec, SceneReset};
use viga_testkit::{BLENDER_TEST_LIMIT, within};

use super::bridge_wire::{
    TOKEN, assert_bridge_serves, greeted_stream, raw_bridge, read_reply, send_raw,
};

/// Reads until the bridge closes the connection (a reset counts as closed), within `limit`.
async fn closed_within(stream: &mut TcpStream, limit: Duration) -> Vec<u8> {
    let mut received = Vec::new();
    let read = tokio::time::timeout(limit, stream.read_to_end(&mut received)).await;
    assert!(
        read.is_ok(),
        "the bridge kept the connection open past {limit:?}"
    );
    received
}

#[tokio::test]
async fn a_token_utf8_cannot_carry_is_refused_and_the_bridge_stays_up() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let bridge = raw_bridge().await;
        let mut stream = TcpStream::connect(bridge.address).await.unwrap();
        // A lone surrogate: valid JSON, but no UTF-8 encoding exists for it.
        let hello = br#"{"id": 0, "command": "hello", "token": "\ud800", "protocol_version": 1}"#;
        send_raw(&mut stream, hello).await;
        let reply = read_reply(&mut stream).await;
        assert_eq!(
            (
                reply["error"]["kind"].clone(),
                reply["error"]["message"].clone()
            ),
            (json!("auth"), json!("wrong token")),
            "{reply}"
        );
        assert_bridge_serves(bridge.address).await;
    })
    .await;
}

#[tokio::test]
async fn nested_bodies_are_refused_before_and_after_the_hello() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let bridge = raw_bridge().await;
        let mut stranger = TcpStream::connect(bridge.address).await.unwrap();
        send_raw(&mut stranger, &[b'['; 4000]).await;
        let reply = read_reply(&mut stranger).await;
        assert_eq!(reply["error"]["kind"], "auth", "{reply}");
        assert_bridge_serves(bridge.address).await;

        // After the hello, a nested frame is garbage like any other: the connection goes on.
        let mut stream = greeted_stream(bridge.address).await;
        send_raw(&mut stream, &[b'['; 200_000]).await;
        let reply = read_reply(&mut stream).await;
        assert_eq!(reply["error"]["kind"], "bad_frame", "{reply}");
        assert!(
            reply["error"]["message"]
                .as_str()
                .unwrap()
                .contains("RecursionError"),
            "{reply}"
        );
        send_raw(&mut stream, br#"{"id": 7, "command": "ping"}"#).await;
        assert_eq!(read_reply(&mut stream).await["result"]["pong"], true);
    })
    .await;
}

#[tokio::test]
async fn a_hello_larger_than_the_hello_limit_is_refused_unread() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let bridge = raw_bridge().await;
        let mut stream = TcpStream::connect(bridge.address).await.unwrap();
        stream.write_all(&100_000u32.to_be_bytes()).await.unwrap();
        let reply = read_reply(&mut stream).await;
        assert_eq!(reply["error"]["kind"], "bad_frame", "{reply}");
        assert!(
            reply["error"]["message"]
                .as_str()
                .unwrap()
                .contains("limit of 4096 bytes"),
            "{reply}"
        );
        assert_bridge_serves(bridge.address).await;
    })
    .await;
}

#[tokio::test]
async fn a_client_sending_one_byte_at_a_time_is_dropped_by_the_handshake_deadline() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let bridge = raw_bridge().await;
        let stream = TcpStream::connect(bridge.address).await.unwrap();
        let started = Instant::now();
        let (mut reading, mut writing) = stream.into_split();
        // Every byte arrives well within any per-read timeout; the hello never completes.
        let trickle = tokio::spawn(async move {
            let hello = json!({"id": 0, "command": "hello", "token": TOKEN, "protocol_version": 1})
                .to_string();
            let mut frame = (hello.len() as u32).to_be_bytes().to_vec();
            frame.extend_from_slice(hello.as_bytes());
            for byte in frame {
                if writing.write_all(&[byte]).await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(700)).await;
            }
        });
        // Meanwhile the bridge serves everyone else.
        assert_bridge_serves(bridge.address).await;
        let mut received = Vec::new();
        let read =
            tokio::time::timeout(Duration::from_secs(20), reading.read_to_end(&mut received)).await;
        let elapsed = started.elapsed();
        trickle.abort();
        let received = String::from_utf8_lossy(&received);
        assert!(read.is_ok(), "the bridge held the trickling client past 20 s");
        assert!(
            elapsed >= Duration::from_secs(9) && elapsed < Duration::from_secs(15),
            "dropped after {elapsed:?} ({read:?}, {received:?}); the deadline is 10 s for the whole hello"
        );
        assert!(
            received.contains("no complete hello within 10 s"),
            "{read:?}: {received:?}"
        );
    })
    .await;
}

#[tokio::test]
async fn a_second_client_is_told_the_bridge_is_busy() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let bridge = raw_bridge().await;
        let first = FramedClient::connect(bridge.address, TOKEN, Duration::from_secs(30))
            .await
            .unwrap();

        let mut second = TcpStream::connect(bridge.address).await.unwrap();
        let hello = json!({"id": 5, "command": "hello", "token": TOKEN, "protocol_version": 1});
        send_raw(&mut second, hello.to_string().as_bytes()).await;
        let reply = read_reply(&mut second).await;
        assert_eq!(
            (reply["id"].clone(), reply["error"]["kind"].clone()),
            (json!(5), json!("busy")),
            "{reply}"
        );
        closed_within(&mut second, Duration::from_secs(5)).await;

        let err = FramedClient::connect(bridge.address, TOKEN, Duration::from_secs(30))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, TransportError::HandshakeRefused { kind: FaultKind::Busy, message } if message.contains("another viga client")),
            "{err}"
        );

        first.ping().await.unwrap();
        drop(first);
        // Once the first client has left, the next one is served.
        assert_bridge_serves(bridge.address).await;
    })
    .await;
}

/// Output no strict JSON reader accepts as Python's json writes it: lone surrogates in
/// stdout, stderr and the error, and a NaN location in the scene.
const ODD_OUTPUT: &str = r#"
import bpy, sys
bpy.ops.mesh.primitive_cube_add()
bpy.context.object.location.x = float("nan")
print("lone \udc80 surrogate", float("nan"), float("inf"))
print("\ud800", file=sys.stderr)
raise ValueError("bad \udfff value")
"#;

#[tokio::test]
async fn odd_program_output_comes_back_readable_and_the_worker_is_kept() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let worker = super::worker().await;
        let result = worker
            .execute(ODD_OUTPUT, Some(SceneReset::Factory), None)
            .await
            .unwrap();
        assert_eq!(result.stdout, "lone \u{fffd} surrogate nan inf\n");
        assert_eq!(result.stderr, "\u{fffd}\n");
        let error = result.error.unwrap();
        assert_eq!(
            (error.error_type.as_str(), error.message.as_str()),
            ("ValueError", "bad \u{fffd} value")
        );
        // The NaN location travels as null, which a location cannot be: the reply is
        // refused as malformed, and the worker is not restarted for it.
        match worker.scene_info(0, 10).await {
            Err(TransportError::MalformedReply { command, .. }) => {
                assert_eq!(command, "scene_info")
            }
            other => panic!("expected a malformed reply, got {other:?}"),
        }
        worker.ping().await.unwrap();
        assert_eq!(
            worker.restarts(),
            0,
            "an unreadable reply is not a lost worker"
        );
    })
    .await;
}

#[tokio::test]
async fn output_captured_from_a_chatty_program_is_bounded() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let worker = super::worker().await;
        let program = "for _ in range(200000):\n    print('0123456789')\n";
        let result = worker.execute(program, None, None).await.unwrap();
        assert!(result.stdout.len() < 300 * 1024, "{}", result.stdout.len());
        assert!(
            result
                .stdout
                .contains("output truncated after 262144 characters; 1937856 more were not kept"),
            "{}",
            &result.stdout[result.stdout.len() - 200..]
        );
    })
    .await;
}

#[tokio::test]
async fn a_render_path_blender_would_read_as_a_template_is_written_as_given() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let worker = super::worker().await;
        let scene = "import bpy\nbpy.ops.object.camera_add(location=(0, -5, 0), rotation=(1.57, 0, 0))\nbpy.context.scene.camera = bpy.context.object\n";
        assert!(
            worker
                .execute(scene, Some(SceneReset::Factory), None)
                .await
                .unwrap()
                .succeeded()
        );
        let folder = tempfile::tempdir().unwrap();
        let wanted = folder.path().join("view {blend_name} #1.png");
        let request = RenderRequest {
            camera: None,
            pose: None,
            spec: RenderSpec {
                engine: RenderEngine::Workbench,
                width: 16,
                height: 8,
                samples: None,
            },
            output_path: Some(wanted.to_string_lossy().into_owned()),
        };
        // The bridge's own handling of a client's path: the typed command names its own file.
        let reply = worker
            .call(viga_protocol::bridge::BridgeCommand::Render(request), None)
            .await
            .unwrap();
        assert_eq!(reply["path"], wanted.to_string_lossy().as_ref());
        assert_eq!(super::png_size(&std::fs::read(&wanted).unwrap()), (16, 8));
        let files: Vec<_> = std::fs::read_dir(folder.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(files, vec![wanted.file_name().unwrap().to_owned()]);
    })
    .await;
}

#[tokio::test]
async fn a_blend_is_opened_with_its_scripts_disabled() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let worker = super::worker().await;
        let folder = tempfile::tempdir().unwrap();
        let marker = folder.path().join("the script ran");
        let blend = folder.path().join("scripted.blend");
        // A .blend with a text block registered to run when the file opens, and a Blender
        // whose preferences allow that: loading it must still not run it.
        let program = format!(
            "import bpy\n\
             text = bpy.data.texts.new('auto.py')\n\
             text.write('open({marker:?}, \"w\").write(\"ran\")\\n')\n\
             text.use_module = True\n\
             bpy.ops.wm.save_as_mainfile(filepath={blend:?}, copy=True)\n\
             bpy.context.preferences.filepaths.use_scripts_auto_execute = True\n"
        );
        let result = worker
            .execute(&program, Some(SceneReset::Factory), None)
            .await
            .unwrap();
        assert!(result.succeeded(), "{result:?}");
        worker.load_blend(&blend.to_string_lossy()).await.unwrap();
        assert!(!marker.exists(), "the .blend's script ran on load");
        let reset = SceneReset::Blend {
            path: blend.to_string_lossy().into_owned(),
        };
        let result = worker.execute("pass", Some(reset), None).await.unwrap();
        assert!(result.succeeded(), "{result:?}");
        assert!(!marker.exists(), "the .blend's script ran on reset");
    })
    .await;
}
