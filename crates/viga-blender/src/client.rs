//! The framed client: one connection to one bridge (loopback TCP, or a Unix socket for a
//! contained worker), requests answered in order.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::Mutex;
use viga_protocol::bridge::{
    BridgeCommand, BridgeFault, BridgeReply, BridgeRequest, HelloInfo, MAX_REPLY_BYTES,
    MAX_REQUEST_BYTES,
};
use viga_protocol::{PROTOCOL_VERSION, Secret};

use crate::frame::{FrameError, read_frame, write_frame};
use crate::transport::{BlenderTransport, LostReason, Recovery, TransportError};

/// How a call failed, before anyone decides what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("no reply within {0:?}")]
    Timeout(Duration),
    #[error("{0}")]
    Frame(#[from] FrameError),
    #[error("{}", .0.message)]
    Fault(BridgeFault),
    /// A whole reply arrived but cannot be read (not UTF-8, not JSON, not a reply's shape).
    /// The stream is still in step: the next request gets the next reply.
    #[error("{0}")]
    Malformed(String),
    /// A reply answered another request: the stream is out of step.
    #[error("{0}")]
    OutOfStep(String),
    #[error("the connection is unusable after an earlier failure ({0})")]
    Poisoned(String),
}

impl CallError {
    /// Whether the connection can carry the next request: the bridge answered this one,
    /// with a refusal or with a reply that could not be read. Anything else (a timeout, a
    /// broken or out-of-step stream) leaves a reply that may still arrive, or none at all.
    pub fn leaves_connection_usable(&self) -> bool {
        matches!(self, Self::Fault(_) | Self::Malformed(_))
    }
}

/// A byte stream to a bridge, whichever kind of socket carries it.
trait BridgeStream: AsyncRead + AsyncWrite + Unpin + Send + std::fmt::Debug {}

impl<S: AsyncRead + AsyncWrite + Unpin + Send + std::fmt::Debug> BridgeStream for S {}

#[derive(Debug)]
struct Connection {
    stream: Box<dyn BridgeStream>,
    next_id: u64,
    /// Set once a call failed midway: its reply may still arrive, so the stream is out of
    /// step and must not be used again.
    poisoned: Option<String>,
}

/// A connection to a bridge, after a successful handshake.
#[derive(Debug)]
pub struct FramedClient {
    connection: Mutex<Connection>,
    hello: HelloInfo,
    /// Where the bridge listens, for messages.
    endpoint: String,
    default_timeout: Duration,
    /// Microseconds Blender reported spending on this client's requests.
    busy_us: Arc<AtomicU64>,
}

impl FramedClient {
    /// Connects and performs the hello handshake with `token`.
    pub async fn connect(
        address: SocketAddr,
        token: &str,
        default_timeout: Duration,
    ) -> Result<Self, TransportError> {
        let handshake_timeout = Duration::from_secs(30);
        let stream = tokio::time::timeout(handshake_timeout, TcpStream::connect(address))
            .await
            .map_err(|_| TransportError::Start(format!("connecting to {address} timed out")))?
            .map_err(|err| {
                TransportError::Start(format!(
                    "could not connect to the bridge at {address}: {err}"
                ))
            })?;
        Self::handshake(stream, address, token, default_timeout, handshake_timeout).await
    }

    /// Connects to a bridge listening on the Unix socket at `path` (a contained worker's)
    /// and performs the hello handshake with `token`.
    #[cfg(unix)]
    pub async fn connect_unix(
        path: &std::path::Path,
        token: &str,
        default_timeout: Duration,
    ) -> Result<Self, TransportError> {
        let handshake_timeout = Duration::from_secs(30);
        let endpoint = path.display().to_string();
        let stream = tokio::time::timeout(handshake_timeout, tokio::net::UnixStream::connect(path))
            .await
            .map_err(|_| TransportError::Start(format!("connecting to {endpoint} timed out")))?
            .map_err(|err| {
                TransportError::Start(format!(
                    "could not connect to the bridge at {endpoint}: {err}"
                ))
            })?;
        // The listening process's id as the kernel gives it, in this process's terms: a
        // contained Blender's own /proc knows only its id inside its PID namespace.
        let listener = stream
            .peer_cred()
            .ok()
            .and_then(|cred| cred.pid())
            .and_then(|pid| u32::try_from(pid).ok())
            .filter(|pid| *pid > 0);
        let mut client = Self::handshake_over(
            Box::new(stream),
            endpoint,
            token,
            default_timeout,
            handshake_timeout,
        )
        .await?;
        if let Some(pid) = listener {
            client.hello.pid = pid;
        }
        Ok(client)
    }

    /// Performs the hello handshake with `token` over an open connection, waiting at most
    /// `handshake_timeout` for the reply.
    pub async fn handshake(
        stream: TcpStream,
        address: SocketAddr,
        token: &str,
        default_timeout: Duration,
        handshake_timeout: Duration,
    ) -> Result<Self, TransportError> {
        stream.set_nodelay(true).map_err(|err| {
            TransportError::Start(format!("could not configure the socket: {err}"))
        })?;
        Self::handshake_over(
            Box::new(stream),
            address.to_string(),
            token,
            default_timeout,
            handshake_timeout,
        )
        .await
    }

    async fn handshake_over(
        stream: Box<dyn BridgeStream>,
        endpoint: String,
        token: &str,
        default_timeout: Duration,
        handshake_timeout: Duration,
    ) -> Result<Self, TransportError> {
        let mut connection = Connection {
            stream,
            next_id: 0,
            poisoned: None,
        };
        let hello = BridgeCommand::Hello {
            token: Secret::new(token),
            protocol_version: PROTOCOL_VERSION,
        };
        let result = exchange(
            &mut connection,
            hello,
            handshake_timeout,
            &AtomicU64::new(0),
        )
        .await
        .map_err(|err| match err {
            CallError::Fault(fault) => TransportError::HandshakeRefused {
                kind: fault.kind,
                message: fault.message,
            },
            other => TransportError::Handshake(other.to_string()),
        })?;
        let hello: HelloInfo = serde_json::from_value(result)
            .map_err(|err| TransportError::Handshake(format!("unreadable hello reply: {err}")))?;
        if hello.protocol_version != PROTOCOL_VERSION {
            return Err(TransportError::Handshake(format!(
                "the bridge speaks protocol {}, viga speaks {PROTOCOL_VERSION}",
                hello.protocol_version
            )));
        }
        Ok(Self {
            connection: Mutex::new(connection),
            hello,
            endpoint,
            default_timeout,
            busy_us: Arc::new(AtomicU64::new(0)),
        })
    }

    /// Adds Blender's reported busy time to `counter` (shared across a worker's restarts)
    /// instead of this client's own.
    pub fn sharing_busy_counter(mut self, counter: Arc<AtomicU64>) -> Self {
        self.busy_us = counter;
        self
    }

    /// Total time Blender reported spending on requests.
    pub fn blender_busy(&self) -> Duration {
        Duration::from_micros(self.busy_us.load(Ordering::Relaxed))
    }

    pub fn hello(&self) -> &HelloInfo {
        &self.hello
    }

    /// Sends one command and waits for its reply.
    pub async fn request(
        &self,
        command: BridgeCommand,
        timeout: Option<Duration>,
    ) -> Result<Value, CallError> {
        let mut connection = self.connection.lock().await;
        exchange(
            &mut connection,
            command,
            timeout.unwrap_or(self.default_timeout),
            &self.busy_us,
        )
        .await
    }
}

async fn exchange(
    connection: &mut Connection,
    command: BridgeCommand,
    timeout: Duration,
    busy_us: &AtomicU64,
) -> Result<Value, CallError> {
    if let Some(why) = &connection.poisoned {
        return Err(CallError::Poisoned(why.clone()));
    }
    let id = connection.next_id;
    connection.next_id += 1;
    let request = BridgeRequest { id, command };
    let round_trip = async {
        write_frame(&mut connection.stream, &request, MAX_REQUEST_BYTES).await?;
        read_frame(&mut connection.stream, MAX_REPLY_BYTES).await
    };
    let outcome = match tokio::time::timeout(timeout, round_trip).await {
        Err(_) => Err(CallError::Timeout(timeout)),
        Ok(Err(err)) => Err(CallError::Frame(err)),
        Ok(Ok(bytes)) => decode_reply(id, &bytes, busy_us),
    };
    if let Err(err) = &outcome
        && !err.leaves_connection_usable()
    {
        connection.poisoned = Some(err.to_string());
    }
    outcome
}

fn decode_reply(id: u64, bytes: &[u8], busy_us: &AtomicU64) -> Result<Value, CallError> {
    let text = std::str::from_utf8(bytes)
        .map_err(|err| CallError::Malformed(format!("reply is not UTF-8: {err}")))?;
    let reply: BridgeReply =
        viga_protocol::parse_json(text).map_err(|err| CallError::Malformed(err.to_string()))?;
    if let Some(elapsed_ms) = reply.elapsed_ms.filter(|ms| ms.is_finite() && *ms >= 0.0) {
        busy_us.fetch_add((elapsed_ms * 1000.0) as u64, Ordering::Relaxed);
    }
    if let Some(fault) = reply.error {
        return Err(CallError::Fault(fault));
    }
    if reply.id != Some(id) {
        return Err(CallError::OutOfStep(format!(
            "reply id {:?} does not match request id {id}",
            reply.id
        )));
    }
    match (reply.ok, reply.result) {
        (true, Some(result)) => Ok(result),
        _ => Err(CallError::Malformed(
            "reply has neither a result nor an error".to_owned(),
        )),
    }
}

/// Turns a call failure into a transport error, given what recovery (if any) happened.
pub(crate) fn transport_error(
    command: &'static str,
    err: CallError,
    recovery: Recovery,
) -> TransportError {
    match err {
        CallError::Fault(fault) => TransportError::Refused {
            command,
            kind: fault.kind,
            message: fault.message,
            traceback: fault.traceback,
        },
        CallError::Malformed(message) => TransportError::MalformedReply { command, message },
        CallError::Timeout(limit) => TransportError::Lost {
            command,
            reason: LostReason::Timeout(limit),
            recovery,
        },
        other @ (CallError::Frame(_) | CallError::OutOfStep(_) | CallError::Poisoned(_)) => {
            TransportError::Lost {
                command,
                reason: LostReason::Disconnected(other.to_string()),
                recovery,
            }
        }
    }
}

#[async_trait]
impl BlenderTransport for FramedClient {
    async fn call(
        &self,
        command: BridgeCommand,
        timeout: Option<Duration>,
    ) -> Result<Value, TransportError> {
        let name = command.name();
        self.request(command, timeout)
            .await
            .map_err(|err| transport_error(name, err, Recovery::None))
    }

    fn describe(&self) -> String {
        format!(
            "bridge at {} (Blender {}, {} mode)",
            self.endpoint, self.hello.blender_version, self.hello.mode
        )
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use tokio::net::TcpListener;

    use super::*;

    /// A stand-in bridge: answers the hello, then each later request with the next of
    /// `replies` (raw frame bodies).
    async fn fake_bridge(replies: Vec<Vec<u8>>) -> SocketAddr {
        let listener = TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))
            .await
            .unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            read_frame(&mut stream, MAX_REQUEST_BYTES).await.unwrap();
            let hello = json!({"id": 0, "ok": true, "result": {
                "protocol_version": PROTOCOL_VERSION, "blender_version": "5.0.1",
                "capabilities": [], "pid": 1, "mode": "serve"}});
            write_frame(&mut stream, &hello, MAX_REPLY_BYTES)
                .await
                .unwrap();
            for reply in replies {
                read_frame(&mut stream, MAX_REQUEST_BYTES).await.unwrap();
                let mut frame = (reply.len() as u32).to_be_bytes().to_vec();
                frame.extend_from_slice(&reply);
                tokio::io::AsyncWriteExt::write_all(&mut stream, &frame)
                    .await
                    .unwrap();
            }
        });
        address
    }

    #[tokio::test]
    async fn an_unreadable_reply_is_refused_and_the_connection_carries_on() {
        let replies = vec![
            br#"{"id": 1, "ok": true, "result": NaN}"#.to_vec(),
            b"\xff\xfe not utf-8".to_vec(),
            br#"{"id": 3, "ok": true, "result": {"pong": true}}"#.to_vec(),
        ];
        let address = fake_bridge(replies).await;
        let client = FramedClient::connect(address, "token", Duration::from_secs(5))
            .await
            .unwrap();
        for _ in 0..2 {
            let err = client.call(BridgeCommand::Ping, None).await.unwrap_err();
            assert!(
                matches!(
                    err,
                    TransportError::MalformedReply {
                        command: "ping",
                        ..
                    }
                ),
                "{err}"
            );
        }
        let pong = client.call(BridgeCommand::Ping, None).await.unwrap();
        assert_eq!(pong, json!({"pong": true}));
    }

    #[tokio::test]
    async fn a_reply_to_another_request_puts_the_connection_out_of_use() {
        let replies = vec![br#"{"id": 7, "ok": true, "result": {}}"#.to_vec()];
        let address = fake_bridge(replies).await;
        let client = FramedClient::connect(address, "token", Duration::from_secs(5))
            .await
            .unwrap();
        let err = client.call(BridgeCommand::Ping, None).await.unwrap_err();
        assert!(matches!(err, TransportError::Lost { .. }), "{err}");
        let again = client.request(BridgeCommand::Ping, None).await.unwrap_err();
        assert!(matches!(again, CallError::Poisoned(_)), "{again}");
    }
}
