//! A loopback HTTP/1.1 server for tests that stand in for a web service (a model API, Meshy,
//! a reconstruction service): every request is recorded and answered by the test's handler
//! or with the next of a list of replies. An answer can be delayed, redirect, or come as a
//! chunked body the test writes step by step, below the HTTP message: an event stream in
//! pieces that straddle lines, a pause, a body cut off mid-stream, a stream that stops
//! sending but stays open, or one that never ends. It runs on a thread of its own with its
//! own runtime, so a test may block on a `viga` process meanwhile, and it stops when
//! dropped. Tests never reach a live service.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

/// A request as the server read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    /// The request target: path and query.
    pub target: String,
    /// Header names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The server's own address (`http://127.0.0.1:PORT`), for URLs in answers.
    pub base: String,
}

impl Request {
    /// The first header called `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value.as_str())
    }

    /// The target without its query.
    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or_default()
    }

    /// The body as JSON; panics, failing the test, when it is not.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|err| {
            panic!(
                "the body of {} {} is not JSON ({err}): {}",
                self.method,
                self.target,
                String::from_utf8_lossy(&self.body)
            )
        })
    }
}

/// One piece of a chunked body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Send(Vec<u8>),
    Pause(Duration),
    /// Stop sending but keep the connection open until the client gives up (30 s at most).
    Hang,
    /// Close the connection without finishing the body.
    Cut,
    /// Send these bytes again and again, `pause` apart, until the client stops reading (or
    /// a minute has passed, so that no test leaves a task sending forever).
    Repeat {
        bytes: Vec<u8>,
        pause: Duration,
    },
}

/// What the server sends back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    Bytes(Vec<u8>),
    /// Zeros until the client hangs up, under a `Content-Length` of a terabyte.
    Endless,
    /// `Transfer-Encoding: chunked`, written step by step.
    Chunked(Vec<Step>),
}

/// An answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Body,
    /// How long the server waits before it answers.
    pub delay: Duration,
}

impl Reply {
    pub fn bytes(status: u16, body: impl Into<Vec<u8>>) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: Body::Bytes(body.into()),
            delay: Duration::ZERO,
        }
    }

    pub fn json(status: u16, body: impl Into<String>) -> Self {
        Self::bytes(status, body.into()).with_header("Content-Type", "application/json")
    }

    pub fn not_found() -> Self {
        Self::json(404, r#"{"message": "not found"}"#)
    }

    /// HTTP 302 to `location`.
    pub fn redirect(location: &str) -> Self {
        Self::bytes(302, Vec::new()).with_header("Location", location)
    }

    /// A body that never ends.
    pub fn endless() -> Self {
        Self {
            body: Body::Endless,
            ..Self::bytes(200, Vec::new())
        }
    }

    /// An event stream sent in chunks of `chunk` bytes, so that events and even lines
    /// straddle chunk boundaries.
    pub fn sse(text: &str, chunk: usize) -> Self {
        let steps = text
            .as_bytes()
            .chunks(chunk.max(1))
            .map(|piece| Step::Send(piece.to_vec()))
            .collect();
        Self::sse_steps(steps)
    }

    /// An event stream written as `steps`.
    pub fn sse_steps(steps: Vec<Step>) -> Self {
        Self::chunked(200, steps).with_header("Content-Type", "text/event-stream")
    }

    /// A JSON body without a length, written as `steps` (it may never end).
    pub fn json_steps(status: u16, steps: Vec<Step>) -> Self {
        Self::chunked(status, steps).with_header("Content-Type", "application/json")
    }

    fn chunked(status: u16, steps: Vec<Step>) -> Self {
        Self {
            body: Body::Chunked(steps),
            ..Self::bytes(status, Vec::new())
        }
    }

    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// The same answer, sent only after `delay`.
    pub fn after(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

type Handler = Arc<dyn Fn(&Request) -> Reply + Send + Sync>;

/// The server; it stops when dropped.
#[derive(Debug)]
pub struct TestServer {
    base: String,
    requests: Arc<Mutex<Vec<Request>>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// The largest request head and body the server reads.
const MAX_HEAD: usize = 64 << 10;
const MAX_BODY: usize = 64 << 20;

impl TestServer {
    /// Starts a server on a free loopback port that answers every request with `handler`.
    pub fn start(
        handler: impl Fn(&Request) -> Reply + Send + Sync + 'static,
    ) -> std::io::Result<Self> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let base = format!("http://{}", listener.local_addr()?);
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let handler: Handler = Arc::new(handler);
        let served = (base.clone(), Arc::clone(&requests));
        let thread = std::thread::Builder::new()
            .name("test-http-server".to_owned())
            .spawn(move || {
                runtime.block_on(async move {
                    let Ok(listener) = TcpListener::from_std(listener) else {
                        return;
                    };
                    tokio::select! {
                        () = accept(listener, handler, served.0, served.1) => {}
                        _ = stopped => {}
                    }
                });
            })?;
        Ok(Self {
            base,
            requests,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Starts a server that answers the requests with `replies`, in order; the last one
    /// answers every request after it. Panics, failing the test, without a reply.
    pub fn scripted(replies: Vec<Reply>) -> std::io::Result<Self> {
        assert!(
            !replies.is_empty(),
            "a scripted test server needs at least one reply"
        );
        let answered = AtomicUsize::new(0);
        Self::start(move |_: &Request| {
            let number = answered.fetch_add(1, Ordering::SeqCst);
            replies[number.min(replies.len() - 1)].clone()
        })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// How many requests there were so far.
    pub fn count(&self) -> usize {
        self.requests.lock().map(|r| r.len()).unwrap_or_default()
    }

    /// The one request the server got; panics, failing the test, when it got another number.
    pub fn only_request(&self) -> Request {
        let mut requests = self.requests();
        assert_eq!(
            requests.len(),
            1,
            "expected exactly one request, got {:?}",
            self.lines()
        );
        requests.remove(0)
    }

    /// `METHOD target` of every request so far.
    pub fn lines(&self) -> Vec<String> {
        self.requests()
            .iter()
            .map(|r| format!("{} {}", r.method, r.target))
            .collect()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// An address nobody listens on: a port that was free a moment ago.
pub fn closed_address() -> std::io::Result<String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let address = listener.local_addr()?;
    drop(listener);
    Ok(format!("http://{address}"))
}

async fn accept(
    listener: TcpListener,
    handler: Handler,
    base: String,
    requests: Arc<Mutex<Vec<Request>>>,
) {
    while let Ok((stream, _)) = listener.accept().await {
        let handler = Arc::clone(&handler);
        let base = base.clone();
        let requests = Arc::clone(&requests);
        tokio::spawn(async move {
            let mut stream = stream;
            let Some(request) = read_request(&mut stream, &base).await else {
                return;
            };
            if let Ok(mut kept) = requests.lock() {
                kept.push(request.clone());
            }
            let reply = handler(&request);
            let _ = answer(stream, reply).await;
        });
    }
}

/// Reads one HTTP/1.1 request (its head up to 64 KiB, its `Content-Length` body up to
/// 64 MiB) from `stream`; `None` when the client hangs up first or sends no request.
/// `base` goes into the request as the server's address.
async fn read_request(stream: &mut TcpStream, base: &str) -> Option<Request> {
    let mut bytes = Vec::new();
    let mut buffer = [0u8; 8192];
    let head_end = loop {
        if let Some(at) = bytes.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        if bytes.len() > MAX_HEAD {
            return None;
        }
        let read = stream.read(&mut buffer).await.ok()?;
        if read == 0 {
            return None;
        }
        bytes.extend_from_slice(&buffer[..read]);
    };
    let head = String::from_utf8_lossy(&bytes[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let method = first.next()?.to_owned();
    let target = first.next()?.to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(name, _)| name == "content-length")
        .and_then(|(_, value)| value.parse().ok())
        .unwrap_or(0)
        .min(MAX_BODY);
    let mut body = bytes[head_end + 4..].to_vec();
    while body.len() < length {
        let read = stream.read(&mut buffer).await.ok()?;
        if read == 0 {
            return None;
        }
        body.extend_from_slice(&buffer[..read]);
    }
    Some(Request {
        method,
        target,
        headers,
        body,
        base: base.to_owned(),
    })
}

/// Writes `reply`; `Connection: close` keeps the client from reusing a connection that the
/// next reply may treat differently.
async fn answer(mut stream: TcpStream, reply: Reply) -> std::io::Result<()> {
    tokio::time::sleep(reply.delay).await;
    let mut head = format!("HTTP/1.1 {} Test\r\nConnection: close\r\n", reply.status);
    match &reply.body {
        Body::Bytes(bytes) => head.push_str(&format!("Content-Length: {}\r\n", bytes.len())),
        Body::Endless => head.push_str(&format!("Content-Length: {}\r\n", 1_u64 << 40)),
        Body::Chunked(_) => head.push_str("Transfer-Encoding: chunked\r\n"),
    }
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await?;
    match reply.body {
        Body::Bytes(bytes) => stream.write_all(&bytes).await?,
        Body::Endless => {
            let zeros = vec![0u8; 64 << 10];
            loop {
                stream.write_all(&zeros).await?;
            }
        }
        Body::Chunked(steps) => {
            if !write_steps(&mut stream, steps).await? {
                // Cut off or given up on: no last chunk, no orderly close.
                return Ok(());
            }
            stream.write_all(b"0\r\n\r\n").await?;
        }
    }
    stream.shutdown().await
}

/// Writes `steps` as chunks; false when a step ended the body unfinished.
async fn write_steps(stream: &mut TcpStream, steps: Vec<Step>) -> std::io::Result<bool> {
    for step in steps {
        match step {
            Step::Send(bytes) => send_chunk(stream, &bytes).await?,
            Step::Pause(duration) => tokio::time::sleep(duration).await,
            Step::Repeat { bytes, pause } => {
                let until = tokio::time::Instant::now() + Duration::from_secs(60);
                while tokio::time::Instant::now() < until {
                    send_chunk(stream, &bytes).await?;
                    tokio::time::sleep(pause).await;
                }
                return Ok(false);
            }
            Step::Hang => {
                // Bounded, so a client that never gives up cannot keep the task alive.
                let mut sink = [0u8; 64];
                let _ = tokio::time::timeout(Duration::from_secs(30), stream.read(&mut sink)).await;
                return Ok(false);
            }
            Step::Cut => return Ok(false),
        }
    }
    Ok(true)
}

async fn send_chunk(stream: &mut TcpStream, bytes: &[u8]) -> std::io::Result<()> {
    let mut frame = format!("{:x}\r\n", bytes.len()).into_bytes();
    frame.extend_from_slice(bytes);
    frame.extend_from_slice(b"\r\n");
    stream.write_all(&frame).await?;
    stream.flush().await
}
