//! The wire itself: tokens, garbage, truncated and oversized frames, against a real bridge.

use std::ffi::OsString;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};
use viga_blender::bridge::write_bridge_script;
use viga_blender::client::FramedClient;
use viga_blender::{BlenderCommands, TransportError};
use viga_protocol::bridge::{FaultKind, READY_MARKER, TOKEN_ENV};
use viga_testkit::{BLENDER_TEST_LIMIT, within};

pub(super) const TOKEN: &str = "test-token-0123456789";

/// A bridge started by hand, so the test can speak raw bytes to it.
pub(super) struct RawBridge {
    _child: Child,
    pub(super) address: SocketAddr,
}

pub(super) async fn raw_bridge() -> RawBridge {
    let script = write_bridge_script().unwrap();
    let (program, args) =
        super::blender().command_line(&script, &[OsString::from("--mode"), "serve".into()]);
    let mut child = Command::new(program)
        .args(args)
        .env(TOKEN_ENV, TOKEN)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let port = loop {
        let line = lines
            .next_line()
            .await
            .unwrap()
            .expect("bridge announced its port");
        if let Some(json) = line.strip_prefix(READY_MARKER) {
            break serde_json::from_str::<Value>(json).unwrap()["port"]
                .as_u64()
                .unwrap() as u16;
        }
    };
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    RawBridge {
        _child: child,
        address: SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
    }
}

pub(super) async fn send_raw(stream: &mut TcpStream, bytes: &[u8]) {
    stream
        .write_all(&(bytes.len() as u32).to_be_bytes())
        .await
        .unwrap();
    stream.write_all(bytes).await.unwrap();
}

pub(super) async fn read_reply(stream: &mut TcpStream) -> Value {
    let mut header = [0u8; 4];
    stream.read_exact(&mut header).await.unwrap();
    let mut body = vec![0u8; u32::from_be_bytes(header) as usize];
    stream.read_exact(&mut body).await.unwrap();
    serde_json::from_slice(&body).unwrap()
}

pub(super) async fn greeted_stream(address: SocketAddr) -> TcpStream {
    let mut stream = TcpStream::connect(address).await.unwrap();
    let hello = json!({"id": 0, "command": "hello", "token": TOKEN, "protocol_version": 1});
    send_raw(&mut stream, hello.to_string().as_bytes()).await;
    assert_eq!(read_reply(&mut stream).await["ok"], true);
    stream
}

pub(super) async fn assert_bridge_serves(address: SocketAddr) {
    let client = FramedClient::connect(address, TOKEN, Duration::from_secs(30))
        .await
        .unwrap();
    client.ping().await.unwrap();
}

#[tokio::test]
async fn a_wrong_token_is_refused_and_the_bridge_stays_up() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let bridge = raw_bridge().await;
        let err = FramedClient::connect(bridge.address, "not-the-token", Duration::from_secs(30))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, TransportError::HandshakeRefused { kind: FaultKind::Auth, message } if message.contains("wrong token")),
            "{err}"
        );
        let mut stream = TcpStream::connect(bridge.address).await.unwrap();
        send_raw(&mut stream, br#"{"id": 1, "command": "ping"}"#).await;
        let reply = read_reply(&mut stream).await;
        assert_eq!(
            (reply["ok"].clone(), reply["error"]["kind"].clone()),
            (json!(false), json!("auth"))
        );
        assert_bridge_serves(bridge.address).await;
    })
    .await;
}

#[tokio::test]
async fn garbage_json_is_refused_and_the_connection_carries_on() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let bridge = raw_bridge().await;
        let mut stream = greeted_stream(bridge.address).await;
        send_raw(&mut stream, b"{this is not json").await;
        let reply = read_reply(&mut stream).await;
        assert_eq!(reply["error"]["kind"], "bad_frame", "{reply}");
        send_raw(&mut stream, br#"{"id": 2, "command": "teleport"}"#).await;
        let reply = read_reply(&mut stream).await;
        assert_eq!(
            (reply["id"].clone(), reply["error"]["kind"].clone()),
            (json!(2), json!("unknown_command"))
        );
        send_raw(&mut stream, br#"{"id": 3, "command": "ping"}"#).await;
        assert_eq!(read_reply(&mut stream).await["result"]["pong"], true);
    })
    .await;
}

#[tokio::test]
async fn oversized_and_truncated_frames_close_only_that_connection() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let bridge = raw_bridge().await;
        let mut stream = greeted_stream(bridge.address).await;
        stream.write_all(&u32::MAX.to_be_bytes()).await.unwrap();
        let reply = read_reply(&mut stream).await;
        assert_eq!(reply["error"]["kind"], "bad_frame");
        assert!(
            reply["error"]["message"]
                .as_str()
                .unwrap()
                .contains("exceeds the limit"),
            "{reply}"
        );
        let mut rest = Vec::new();
        stream.read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty(), "the bridge closed the connection");

        let mut stream = greeted_stream(bridge.address).await;
        stream.write_all(&100u32.to_be_bytes()).await.unwrap();
        stream.write_all(b"{\"id\": 1,").await.unwrap();
        drop(stream);
        assert_bridge_serves(bridge.address).await;
    })
    .await;
}

#[tokio::test]
async fn a_silent_client_does_not_block_the_bridge_forever() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let bridge = raw_bridge().await;
        let silent = TcpStream::connect(bridge.address).await.unwrap();
        // The bridge gives a connection 10 s to say hello, then serves the next one.
        let started = std::time::Instant::now();
        assert_bridge_serves(bridge.address).await;
        assert!(started.elapsed() < Duration::from_secs(25));
        drop(silent);
    })
    .await;
}

#[tokio::test]
async fn renders_travel_inline_to_a_client_without_a_shared_folder() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        use viga_protocol::bridge::{RenderEngine, RenderRequest, RenderSpec, SceneReset};
        let bridge = raw_bridge().await;
        let client = FramedClient::connect(bridge.address, TOKEN, Duration::from_secs(60))
            .await
            .unwrap();
        let scene = "import bpy\nbpy.ops.mesh.primitive_cube_add()\nbpy.ops.object.camera_add(location=(4, -4, 3), rotation=(1.1, 0, 0.785))\nbpy.context.scene.camera = bpy.context.object\n";
        assert!(
            client
                .execute(scene, Some(SceneReset::Factory), None)
                .await
                .unwrap()
                .succeeded()
        );
        let request = RenderRequest {
            camera: None,
            pose: None,
            spec: RenderSpec {
                engine: RenderEngine::Workbench,
                width: 24,
                height: 16,
                samples: None,
            },
            output_path: None,
        };
        let output = client.render(request, None).await.unwrap();
        assert_eq!(super::png_size(&output.image.data), (24, 16));
    })
    .await;
}

#[tokio::test]
async fn the_bridge_exits_when_its_parent_dies() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let script = write_bridge_script().unwrap();
        let (program, args) =
            super::blender().command_line(&script, &[OsString::from("--mode"), "serve".into()]);
        let mut line = vec![program.to_string_lossy().into_owned()];
        line.extend(args.iter().map(|a| a.to_string_lossy().into_owned()));
        let quoted: Vec<String> = line
            .iter()
            .map(|part| format!("'{}'", part.replace('\'', "'\\''")))
            .collect();
        // A shell starts the bridge in the background, prints its pid and exits at once.
        let output = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "VIGA_PARENT_PID=$$ {} >/dev/null 2>&1 & echo $!",
                quoted.join(" ")
            ))
            .env(TOKEN_ENV, TOKEN)
            .output()
            .await
            .unwrap();
        let pid: u32 = String::from_utf8_lossy(&output.stdout)
            .trim()
            .parse()
            .unwrap();
        let alive = || Path::new(&format!("/proc/{pid}")).exists();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while alive() && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert!(!alive(), "the orphaned bridge {pid} is still running");
    })
    .await;
}
