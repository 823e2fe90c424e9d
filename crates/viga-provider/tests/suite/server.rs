//! A tiny HTTP/1.1 server on 127.0.0.1 that answers each request with the next scripted
//! reply (the last one repeats), or with what a function decides from the request, and
//! records what it was sent. Written here rather than taken from a mock crate because the
//! fault tests need control below the HTTP message: a body cut off mid-stream, a stream that
//! stops sending but stays open.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One piece of a chunked body.
#[derive(Debug, Clone)]
pub enum Step {
    Send(Vec<u8>),
    Pause(Duration),
    /// Stop sending but keep the connection open until the client gives up.
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

#[derive(Debug, Clone)]
enum Body {
    Full(Vec<u8>),
    Chunked(Vec<Step>),
}

#[derive(Debug, Clone)]
pub struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Body,
}

impl Reply {
    pub fn json(status: u16, body: impl Into<Vec<u8>>) -> Self {
        Self {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: Body::Full(body.into()),
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

    pub fn sse_steps(steps: Vec<Step>) -> Self {
        Self {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            body: Body::Chunked(steps),
        }
    }

    /// A JSON body sent in chunks (a body without a length, which may never end).
    pub fn json_steps(status: u16, steps: Vec<Step>) -> Self {
        Self {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: Body::Chunked(steps),
        }
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
}

#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

/// How the server picks its replies.
#[derive(Clone)]
enum Replies {
    /// In order; the last one repeats.
    Scripted(Vec<Reply>),
    /// Decided from each request, as a real server would.
    Decided(Arc<dyn Fn(&Recorded) -> Reply + Send + Sync>),
}

impl Replies {
    /// The reply to the `number`th request (from 0).
    fn to(&self, request: &Recorded, number: usize) -> Reply {
        match self {
            Self::Scripted(replies) => replies[number.min(replies.len() - 1)].clone(),
            Self::Decided(respond) => respond(request),
        }
    }
}

pub struct TestServer {
    pub url: String,
    requests: Arc<Mutex<Vec<Recorded>>>,
}

impl TestServer {
    pub async fn start(replies: Vec<Reply>) -> Self {
        assert!(
            !replies.is_empty(),
            "a test server needs at least one reply"
        );
        Self::serve(Replies::Scripted(replies)).await
    }

    /// A server that answers each request with `respond(request)`.
    pub async fn answering(respond: impl Fn(&Recorded) -> Reply + Send + Sync + 'static) -> Self {
        Self::serve(Replies::Decided(Arc::new(respond))).await
    }

    async fn serve(replies: Replies) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let recorded = requests.clone();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let (recorded, replies) = (recorded.clone(), replies.clone());
                tokio::spawn(async move {
                    let mut socket = socket;
                    let Some(request) = read_request(&mut socket).await else {
                        return;
                    };
                    let reply = {
                        let mut recorded = recorded.lock().unwrap();
                        let reply = replies.to(&request, recorded.len());
                        recorded.push(request);
                        reply
                    };
                    write_reply(&mut socket, reply).await;
                });
            }
        });
        Self { url, requests }
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }

    pub fn count(&self) -> usize {
        self.requests.lock().unwrap().len()
    }

    /// The one request the server got.
    pub fn only_request(&self) -> Recorded {
        let requests = self.requests();
        assert_eq!(requests.len(), 1, "expected exactly one request");
        requests.into_iter().next().unwrap()
    }
}

async fn read_request(socket: &mut TcpStream) -> Option<Recorded> {
    let request = viga_testkit::http::read_request(socket, "").await?;
    Some(Recorded {
        method: request.method,
        path: request.target,
        headers: request.headers,
        body: request.body,
    })
}

/// Writes the reply; `Connection: close` keeps the client from reusing a connection that
/// the next scripted reply may treat differently.
async fn write_reply(socket: &mut TcpStream, reply: Reply) {
    let mut head = format!(
        "HTTP/1.1 {} Scripted\r\nconnection: close\r\n",
        reply.status
    );
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    match reply.body {
        Body::Full(body) => {
            head.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
            let _ = socket.write_all(head.as_bytes()).await;
            let _ = socket.write_all(&body).await;
        }
        Body::Chunked(steps) => {
            head.push_str("transfer-encoding: chunked\r\n\r\n");
            if socket.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            for step in steps {
                match step {
                    Step::Send(bytes) => {
                        if send_chunk(socket, &bytes).await.is_err() {
                            return;
                        }
                    }
                    Step::Repeat { bytes, pause } => {
                        let until = tokio::time::Instant::now() + Duration::from_secs(60);
                        while tokio::time::Instant::now() < until {
                            if send_chunk(socket, &bytes).await.is_err() {
                                return;
                            }
                            tokio::time::sleep(pause).await;
                        }
                        return;
                    }
                    Step::Pause(duration) => tokio::time::sleep(duration).await,
                    Step::Hang => {
                        // Bounded, so a client that never gives up cannot keep the task alive.
                        let mut sink = [0u8; 64];
                        let _ =
                            tokio::time::timeout(Duration::from_secs(30), socket.read(&mut sink))
                                .await;
                        return;
                    }
                    Step::Cut => return,
                }
            }
            let _ = socket.write_all(b"0\r\n\r\n").await;
        }
    }
    let _ = socket.shutdown().await;
}

async fn send_chunk(socket: &mut TcpStream, bytes: &[u8]) -> std::io::Result<()> {
    let mut frame = format!("{:x}\r\n", bytes.len()).into_bytes();
    frame.extend_from_slice(bytes);
    frame.extend_from_slice(b"\r\n");
    socket.write_all(&frame).await?;
    socket.flush().await
}
