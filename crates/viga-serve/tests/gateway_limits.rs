//! The gateway under load and abuse, loopback only, with a fake Blender per session so
//! hundreds of users cost nothing (behaviour with real Blender is in websocket.rs): idle
//! connections do not keep a client out, a session cap refuses new users clearly, idle
//! sessions are reaped, connections beyond the cap are closed at once, silent clients are
//! cut off, and the listener survives running out of file descriptors.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic: that is how tests fail

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures_util::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio::io::AsyncReadExt as _;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use viga_blender::BlenderTransport;
use viga_serve::ws::{
    Credentials, DialLimits, Gateway, GatewayConfig, GatewayLimits, ListenSecurity, SessionBlender,
    SessionFactory, SessionStartError, StartedSession, UserName,
};
use viga_skills::addons::AddonRegistry;
use viga_testkit::blender::{FakeBlender, Fault};
use viga_testkit::websocket::{Socket, ask, connect};
use viga_testkit::within;

/// Every test here finishes in seconds; this bounds a hung one.
const TEST_LIMIT: Duration = Duration::from_secs(60);

/// A session's Blender that never starts; it counts how often it was stopped.
struct FakeSession {
    blender: FakeBlender,
    stops: Arc<AtomicUsize>,
}

#[async_trait]
impl SessionBlender for FakeSession {
    fn transport(&self) -> &dyn BlenderTransport {
        &self.blender
    }

    async fn stop(self: Box<Self>) {
        self.stops.fetch_add(1, Ordering::SeqCst);
    }
}

/// Starts fake sessions and counts starts and stops.
#[derive(Default)]
struct FakeSessions {
    starts: AtomicUsize,
    stops: Arc<AtomicUsize>,
}

#[async_trait]
impl SessionFactory for FakeSessions {
    async fn start(
        &self,
        _user: &UserName,
        _folder: &std::path::Path,
    ) -> Result<StartedSession, SessionStartError> {
        self.starts.fetch_add(1, Ordering::SeqCst);
        Ok(StartedSession {
            blender: Box::new(FakeSession {
                blender: FakeBlender::new().failing_every_call(Fault::RestartFails),
                stops: Arc::clone(&self.stops),
            }),
            addons: AddonRegistry::new(),
        })
    }
}

fn token(user: &str) -> String {
    format!("token-of-{user}-0123456789")
}

fn user_name(n: usize) -> String {
    format!("user-{n:03}")
}

/// A gateway on loopback serving `users` users with fake sessions.
struct TestGateway {
    address: SocketAddr,
    sessions: Arc<FakeSessions>,
    _files: tempfile::TempDir,
}

async fn start(users: usize, limits: GatewayLimits) -> TestGateway {
    let names: Vec<String> = (0..users).map(user_name).collect();
    let credentials =
        Credentials::from_pairs(names.iter().map(|name| (name, token(name))), "test").unwrap();
    let files = tempfile::tempdir().unwrap();
    let config = GatewayConfig {
        credentials,
        limits,
        files_root: files.path().join("files"),
        dial: DialLimits::default(),
        chat: None,
        keep_requests: None,
    };
    let sessions = Arc::new(FakeSessions::default());
    let gateway = Gateway::new(config, Arc::clone(&sessions) as Arc<dyn SessionFactory>).unwrap();
    let listener = Gateway::bind("127.0.0.1:0".parse().unwrap(), &ListenSecurity::default())
        .await
        .unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(gateway.serve(listener));
    TestGateway {
        address,
        sessions,
        _files: files,
    }
}

fn hello(id: &str, user: &str) -> Value {
    json!({"type": "hello", "message_id": id, "username": user, "token": token(user)})
}

/// The soft limit on open files, from /proc (1024, a common default, when unreadable).
fn open_files_limit() -> usize {
    std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|limits| {
            let line = limits
                .lines()
                .find(|line| line.starts_with("Max open files"))?
                .to_owned();
            line.split_whitespace().nth(3)?.parse().ok()
        })
        .unwrap_or(1024)
}

#[tokio::test]
async fn a_thousand_idle_connections_do_not_keep_a_client_out() {
    within(TEST_LIMIT, "the idle-connections load test", async {
        // Each idle connection costs two descriptors here (client and server end); stay
        // well under the soft limit rather than raise it.
        let idle = 1_000.min(open_files_limit().saturating_sub(200) / 2);
        if idle < 1_000 {
            eprintln!("open-files soft limit is low: {idle} idle connections instead of 1000");
        }
        let limits = GatewayLimits {
            max_connections: idle + 8,
            ..GatewayLimits::default()
        };
        let gateway = start(1, limits).await;
        // Half never finish the WebSocket handshake, half finish it and never say hello.
        let mut silent_tcp = Vec::new();
        for _ in 0..idle / 2 {
            silent_tcp.push(TcpStream::connect(gateway.address).await.unwrap());
        }
        let mut silent_websockets = Vec::new();
        for _ in idle / 2..idle {
            silent_websockets.push(connect(gateway.address).await);
        }

        let began = Instant::now();
        let mut client = connect(gateway.address).await;
        assert_eq!(ask(&mut client, hello("h", "user-000")).await["ok"], true);
        let tools = ask(
            &mut client,
            json!({"type": "list_tools", "message_id": "t"}),
        )
        .await;
        let took = began.elapsed();
        assert_eq!(tools["result"], json!([]), "{tools}");
        assert!(
            took < Duration::from_secs(1),
            "the client waited {took:?} behind {idle} idle connections"
        );
        drop((silent_tcp, silent_websockets));
    })
    .await;
}

#[tokio::test]
async fn two_hundred_users_against_a_cap_of_eight_are_refused_then_admitted_after_reaping() {
    within(TEST_LIMIT, "the session-cap load test", async {
        let limits = GatewayLimits {
            max_sessions: 8,
            session_idle: Duration::from_millis(300),
            hello_timeout: Duration::from_secs(50),
            ..GatewayLimits::default()
        };
        let gateway = start(200, limits).await;
        let mut connections = Vec::new();
        for n in 0..200 {
            let mut socket = connect(gateway.address).await;
            let reply = ask(&mut socket, hello(&format!("h{n}"), &user_name(n))).await;
            if n < 8 {
                assert_eq!(reply["ok"], true, "{reply}");
            } else {
                assert_eq!(
                    reply["error"], "the gateway serves at most 8 users at once; try again later",
                    "{reply}"
                );
            }
            connections.push(socket);
        }
        assert_eq!(
            gateway.sessions.starts.load(Ordering::SeqCst),
            8,
            "a refused user got a Blender"
        );

        // The first user leaves: once idle for 300 ms, their session is stopped and the
        // next user who asks gets its place.
        connections.swap_remove(0).close(None).await.unwrap();
        let waited = Instant::now();
        while gateway.sessions.stops.load(Ordering::SeqCst) == 0 {
            assert!(
                waited.elapsed() < Duration::from_secs(10),
                "the idle session was never reaped"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let reply = ask(&mut connections[150], hello("again", &user_name(150))).await;
        assert_eq!(reply["ok"], true, "{reply}");
        assert_eq!(gateway.sessions.starts.load(Ordering::SeqCst), 9);
        // Users with a session open never count against the cap twice.
        let mut second = connect(gateway.address).await;
        assert_eq!(
            ask(&mut second, hello("h1b", &user_name(1))).await["ok"],
            true
        );
        assert_eq!(gateway.sessions.starts.load(Ordering::SeqCst), 9);
    })
    .await;
}

#[tokio::test]
async fn hellos_beyond_the_cap_are_refused_at_once_and_a_freed_slot_comes_back() {
    within(TEST_LIMIT, "the connection-cap test", async {
        let limits = GatewayLimits {
            max_connections: 3,
            ..GatewayLimits::default()
        };
        let gateway = start(1, limits).await;
        let mut held = Vec::new();
        for n in 0..3 {
            let mut socket = connect(gateway.address).await;
            assert_eq!(
                ask(&mut socket, hello(&format!("h{n}"), "user-000")).await["ok"],
                true
            );
            held.push(socket);
        }
        let began = Instant::now();
        let mut fourth = connect(gateway.address).await;
        let refused = ask(&mut fourth, hello("h3", "user-000")).await;
        assert!(
            refused["error"]
                .as_str()
                .unwrap_or_default()
                .contains("try again later"),
            "{refused}"
        );
        let reason = closed_because(&mut fourth).await;
        assert!(reason.contains("try again later"), "{reason}");
        assert!(
            began.elapsed() < Duration::from_secs(1),
            "the fourth hello was left hanging"
        );

        held.pop().unwrap().close(None).await.unwrap();
        // The freed slot is back as soon as the gateway has seen the close.
        let waited = Instant::now();
        loop {
            let mut client = connect(gateway.address).await;
            client
                .send(Message::text(hello("again", "user-000").to_string()))
                .await
                .unwrap();
            match client.next().await {
                Some(Ok(Message::Text(text))) => {
                    let reply: Value = serde_json::from_str(text.as_str()).unwrap();
                    assert_eq!(reply["ok"], true, "{reply}");
                    break;
                }
                other => assert!(
                    waited.elapsed() < Duration::from_secs(5),
                    "the slot was never freed: {other:?}"
                ),
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
}

#[tokio::test]
async fn three_hundred_silent_connections_opened_first_leave_a_user_with_a_token_served() {
    within(TEST_LIMIT, "the silent-connections test", async {
        let gateway = start(1, GatewayLimits::default()).await;
        // More silent connections than both budgets together (the waiting one and the
        // users'), all from this address, half in the WebSocket handshake and half past it.
        let mut silent_tcp = Vec::new();
        for _ in 0..150 {
            silent_tcp.push(TcpStream::connect(gateway.address).await.unwrap());
        }
        let mut silent_websockets = Vec::new();
        for _ in 0..150 {
            if let Ok((socket, _)) =
                tokio_tungstenite::connect_async(format!("ws://{}", gateway.address)).await
            {
                silent_websockets.push(socket);
            }
        }
        let mut client = connect(gateway.address).await;
        assert_eq!(ask(&mut client, hello("h", "user-000")).await["ok"], true);
        let tools = ask(
            &mut client,
            json!({"type": "list_tools", "message_id": "t"}),
        )
        .await;
        assert_eq!(tools["result"], json!([]), "{tools}");
        drop((silent_tcp, silent_websockets));
    })
    .await;
}

/// The close frame's reason, or what ended the connection instead.
async fn closed_because(socket: &mut Socket) -> String {
    match socket.next().await {
        Some(Ok(Message::Close(Some(frame)))) => frame.reason.to_string(),
        other => format!("no close frame: {other:?}"),
    }
}

#[tokio::test]
async fn silent_clients_are_cut_off_and_oversized_messages_refused() {
    within(TEST_LIMIT, "the timeouts test", async {
        let limits = GatewayLimits {
            handshake_timeout: Duration::from_millis(300),
            hello_timeout: Duration::from_millis(300),
            connection_idle: Duration::from_millis(600),
            ..GatewayLimits::default()
        };
        let gateway = start(1, limits).await;

        // No handshake: the gateway hangs up.
        let mut raw = TcpStream::connect(gateway.address).await.unwrap();
        let mut buffer = [0u8; 16];
        let read = tokio::time::timeout(Duration::from_secs(2), raw.read(&mut buffer)).await;
        assert!(
            matches!(read, Ok(Ok(0) | Err(_))),
            "still open without a handshake: {read:?}"
        );

        // No hello: closed with a reason.
        let mut quiet = connect(gateway.address).await;
        assert_eq!(closed_because(&mut quiet).await, "no hello within 300ms");

        // Greeted, then silent: closed once idle. Pings do not keep it open.
        let mut idle = connect(gateway.address).await;
        assert_eq!(ask(&mut idle, hello("h", "user-000")).await["ok"], true);
        idle.send(Message::Ping(Vec::new().into())).await.unwrap();
        let began = Instant::now();
        loop {
            match idle.next().await {
                Some(Ok(Message::Pong(_))) => continue,
                Some(Ok(Message::Close(Some(frame)))) => {
                    assert_eq!(frame.reason.as_str(), "no message for 600ms");
                    break;
                }
                other => panic!("expected the idle connection closed, got {other:?}"),
            }
        }
        assert!(began.elapsed() < Duration::from_secs(2));

        // A message id longer than the window keeps, and a frame over the message limit.
        let mut client = connect(gateway.address).await;
        let long_id = "x".repeat(200);
        let refused = ask(
            &mut client,
            json!({"type": "list_tools", "message_id": long_id}),
        )
        .await;
        assert_eq!(
            refused["error"], "a message_id has at most 128 bytes",
            "{refused}"
        );
        let huge = Message::text("x".repeat((1 << 20) + 1));
        let outcome = match client.send(huge).await {
            Err(err) => format!("{err}"),
            Ok(()) => format!("{:?}", client.next().await),
        };
        assert!(
            outcome.contains("Close") || outcome.contains("reset") || outcome.contains("closed"),
            "an oversized frame was not refused: {outcome}"
        );
    })
    .await;
}

/// Set in the child process of `the_listener_survives_running_out_of_file_descriptors`.
const FEW_DESCRIPTORS_CHILD: &str = "VIGA_TEST_GATEWAY_FEW_DESCRIPTORS";

/// The child's half: a gateway in a process allowed 64 open files, run by the test below
/// (by itself it returns at once).
#[tokio::test]
async fn gateway_with_few_file_descriptors() {
    if std::env::var_os(FEW_DESCRIPTORS_CHILD).is_none() {
        return;
    }
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    // Room for every connection of the flood to wait for its hello: the files run out
    // before any is closed to make room (which would keep the count under the limit).
    let limits = GatewayLimits {
        max_waiting: 1000,
        waiting_per_address: 1000,
        ..GatewayLimits::default()
    };
    let gateway = start(1, limits).await;
    println!("listening on {}", gateway.address);
    // The parent kills this process when it is done; this bounds an orphaned one.
    tokio::time::sleep(TEST_LIMIT).await;
}

#[tokio::test]
async fn the_listener_survives_running_out_of_file_descriptors() {
    use tokio::io::AsyncBufReadExt as _;
    within(TEST_LIMIT, "the EMFILE test", async {
        let mut child = tokio::process::Command::new("sh")
            .arg("-c")
            .arg(r#"ulimit -n 64 && exec "$0" "$@""#)
            .arg(std::env::current_exe().unwrap())
            .args([
                "gateway_with_few_file_descriptors",
                "--exact",
                "--nocapture",
            ])
            .env(FEW_DESCRIPTORS_CHILD, "1")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let address: SocketAddr = loop {
            let line = lines
                .next_line()
                .await
                .unwrap()
                .expect("the child gateway exited");
            if let Some(address) = line.strip_prefix("listening on ") {
                break address.parse().unwrap();
            }
        };
        // More connections than the child may hold files: accept fails with EMFILE.
        let mut flood = Vec::new();
        for _ in 0..100 {
            flood.push(TcpStream::connect(address).await.unwrap());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        drop(flood);

        // Once the flood's connections are gone, a client is served again.
        let waited = Instant::now();
        let reply = loop {
            let attempt = async {
                let (mut socket, _) = tokio_tungstenite::connect_async(format!("ws://{address}"))
                    .await
                    .ok()?;
                Some(ask(&mut socket, hello("h", "user-000")).await)
            };
            if let Ok(Some(reply)) = tokio::time::timeout(Duration::from_secs(2), attempt).await {
                break reply;
            }
            assert!(
                waited.elapsed() < Duration::from_secs(20),
                "the gateway stopped serving"
            );
        };
        assert_eq!(reply["ok"], true, "{reply}");

        child.kill().await.unwrap();
        let mut errors = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut errors)
            .await
            .unwrap();
        assert!(
            errors.contains("accepting a connection failed")
                && errors.contains("Too many open files"),
            "the accept errors were not logged: {errors}"
        );
    })
    .await;
}
