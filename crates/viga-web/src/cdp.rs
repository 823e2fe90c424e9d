//! The Chrome DevTools Protocol over Chromium's `--remote-debugging-pipe`: JSON messages,
//! each ended by a NUL byte, commands written to Chromium's fd 3 and replies and events read
//! from its fd 4. Replies are matched to commands by id; events go to a handler on the
//! reading task, so a paused request is answered even while no command is waiting.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt as _, BufReader};
use tokio::sync::{mpsc, oneshot};
use viga_process::read_message;

/// The longest message read (a screenshot of the largest allowed size, in base64).
const MAX_MESSAGE_BYTES: usize = 256 * 1024 * 1024;

#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum CdpError {
    /// Chromium answered the command with an error.
    #[error("{method}: {message}")]
    Protocol { method: String, message: String },
    /// The pipe closed or carried something that is not the protocol.
    #[error("the DevTools pipe closed: {0}")]
    Closed(String),
}

/// An event: its method, parameters and the session (tab) it came from.
#[derive(Debug)]
pub(crate) struct Event {
    pub method: String,
    pub params: Value,
    pub session: Option<String>,
}

/// Reacts to events as they are read.
pub(crate) trait EventHandler: Send + Sync {
    fn handle(&self, event: Event, out: &Outgoing);
}

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Result<Value, CdpError>>>>>;

/// Sends commands without waiting for their replies (answers to events).
#[derive(Debug, Clone)]
pub(crate) struct Outgoing {
    writer: mpsc::UnboundedSender<Vec<u8>>,
    next_id: Arc<AtomicU64>,
}

impl Outgoing {
    fn message(&self, method: &str, params: Value, session: Option<&str>) -> (u64, Vec<u8>) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some(session) = session {
            message["sessionId"] = json!(session);
        }
        let mut bytes = message.to_string().into_bytes();
        bytes.push(0);
        (id, bytes)
    }

    /// Sends a command whose reply nobody waits for.
    pub fn send(&self, method: &str, params: Value, session: Option<&str>) {
        let (_, bytes) = self.message(method, params, session);
        let _ = self.writer.send(bytes);
    }
}

/// A DevTools connection.
#[derive(Debug)]
pub(crate) struct Cdp {
    out: Outgoing,
    pending: Pending,
    /// Why the connection ended, once it has.
    closed: Arc<Mutex<Option<String>>>,
}

impl Cdp {
    /// Starts the writing and reading tasks over Chromium's pipes.
    pub fn start<W, R>(to_browser: W, from_browser: R, handler: Arc<dyn EventHandler>) -> Self
    where
        W: AsyncWrite + Unpin + Send + 'static,
        R: AsyncRead + Unpin + Send + 'static,
    {
        let (writer, mut queue) = mpsc::unbounded_channel::<Vec<u8>>();
        let out = Outgoing {
            writer,
            next_id: Arc::new(AtomicU64::new(1)),
        };
        let pending: Pending = Arc::default();
        let closed: Arc<Mutex<Option<String>>> = Arc::default();
        tokio::spawn(async move {
            let mut to_browser = to_browser;
            while let Some(bytes) = queue.recv().await {
                if to_browser.write_all(&bytes).await.is_err() || to_browser.flush().await.is_err()
                {
                    break;
                }
            }
        });
        let reader_out = out.clone();
        let reader_pending = Arc::clone(&pending);
        let reader_closed = Arc::clone(&closed);
        tokio::spawn(async move {
            let mut from_browser = BufReader::new(from_browser);
            let why = loop {
                let message = match read_message(&mut from_browser, 0, MAX_MESSAGE_BYTES).await {
                    Ok(Some(message)) => message,
                    Ok(None) => break "Chromium closed the pipe".to_owned(),
                    Err(err) => break format!("unreadable message: {err}"),
                };
                let Ok(mut message) = serde_json::from_slice::<Value>(&message) else {
                    break "a message that is not JSON".to_owned();
                };
                if let Some(id) = message["id"].as_u64() {
                    let waiting = reader_pending.lock().ok().and_then(|mut p| p.remove(&id));
                    if let Some(waiting) = waiting {
                        let reply = match message.get("error") {
                            Some(error) => Err(CdpError::Protocol {
                                method: String::new(),
                                message: error["message"].as_str().unwrap_or("error").to_owned(),
                            }),
                            None => Ok(message["result"].take()),
                        };
                        let _ = waiting.send(reply);
                    }
                } else if let Some(method) = message["method"].as_str() {
                    let event = Event {
                        method: method.to_owned(),
                        params: message["params"].take(),
                        session: message["sessionId"].as_str().map(str::to_owned),
                    };
                    handler.handle(event, &reader_out);
                }
            };
            if let Ok(mut closed) = reader_closed.lock() {
                *closed = Some(why.clone());
            }
            // Every command still waiting learns why it will not be answered.
            if let Ok(mut pending) = reader_pending.lock() {
                for (_, waiting) in pending.drain() {
                    let _ = waiting.send(Err(CdpError::Closed(why.clone())));
                }
            }
        });
        Self {
            out,
            pending,
            closed,
        }
    }

    /// Sends a command and waits for its reply (the caller bounds the wait).
    pub async fn call(
        &self,
        method: &str,
        params: Value,
        session: Option<&str>,
    ) -> Result<Value, CdpError> {
        let (id, bytes) = self.out.message(method, params, session);
        let (reply_tx, reply) = oneshot::channel();
        if let Ok(mut pending) = self.pending.lock() {
            pending.insert(id, reply_tx);
        }
        // Checked after registering: a connection that closes in between fails the command
        // through `pending` instead.
        if let Some(why) = self.closed.lock().ok().and_then(|closed| closed.clone()) {
            return Err(CdpError::Closed(why));
        }
        if self.out.writer.send(bytes).is_err() {
            return Err(CdpError::Closed("the writer stopped".to_owned()));
        }
        match reply.await {
            Ok(Err(CdpError::Protocol { message, .. })) => Err(CdpError::Protocol {
                method: method.to_owned(),
                message,
            }),
            Ok(reply) => reply,
            Err(_) => Err(CdpError::Closed("the reader stopped".to_owned())),
        }
    }
}
