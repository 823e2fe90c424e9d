//! One client connection of the gateway's own door (`/`): messages in and replies out, each
//! step with a deadline so a silent or slow client cannot hold a connection slot forever.

use std::time::Duration;

use futures_util::{SinkExt as _, StreamExt as _};
use tokio::time::{Instant, timeout, timeout_at};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::protocol::frame::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{self, Message};

use super::Gateway;
use super::http::Socket;
use super::messages::respond;
use super::sessions::Lease;

/// Largest message the gateway's door and the chat door read; add-on commands and requests
/// are small. Frames are held to the same size, so no single frame buffers more than one
/// message may.
const MAX_MESSAGE_BYTES: usize = 1 << 20;

/// The read buffer each connection allocates up front (tungstenite's default is 128 KiB):
/// idle connections stay cheap, and a larger message is read in several chunks.
const READ_BUFFER_BYTES: usize = 16 << 10;

/// How long a closing connection waits for the client to take its close frame.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

#[derive(Debug, thiserror::Error)]
pub(super) enum ConnectionEnd {
    #[error("no WebSocket handshake within {0:?}")]
    HandshakeTimeout(Duration),
    #[error("the TLS handshake failed: {0}")]
    Tls(std::io::Error),
    #[error(transparent)]
    Head(#[from] super::http::HeadError),
    #[error(transparent)]
    WebSocket(#[from] tungstenite::Error),
    #[error("the client took no reply within {0:?}")]
    SendTimeout(Duration),
}

/// A door's WebSocket limits: messages and frames of at most `max_message_bytes`.
pub(super) fn websocket_config(max_message_bytes: usize) -> WebSocketConfig {
    WebSocketConfig::default()
        .max_message_size(Some(max_message_bytes))
        .max_frame_size(Some(max_message_bytes))
        .read_buffer_size(READ_BUFFER_BYTES)
}

/// The limits of the gateway's door and the chat door.
pub(super) fn small_messages() -> WebSocketConfig {
    websocket_config(MAX_MESSAGE_BYTES)
}

/// Serves one connection until the client closes it or a deadline passes: the hello (a
/// connection that has not said hello in time is closed), and then the time since the
/// client's last message.
pub(super) async fn serve_connection(
    gateway: &Gateway,
    mut socket: Socket,
    ticket: &super::admission::Ticket,
) -> Result<(), ConnectionEnd> {
    let limits = &gateway.limits;
    let hello_deadline = Instant::now() + limits.hello_timeout;
    let mut idle_deadline = Instant::now() + limits.connection_idle;
    let mut greeted: Option<Lease> = None;
    loop {
        let deadline = match greeted {
            Some(_) => idle_deadline,
            None => hello_deadline.min(idle_deadline),
        };
        let frame = match timeout_at(deadline, socket.next()).await {
            Ok(Some(frame)) => frame?,
            Ok(None) => return Ok(()),
            Err(_) => {
                let reason = match greeted {
                    Some(_) => format!("no message for {:?}", limits.connection_idle),
                    None => format!("no hello within {:?}", limits.hello_timeout),
                };
                close(&mut socket, reason).await;
                return Ok(());
            }
        };
        let reply = match frame {
            Message::Text(text) => gateway.reply_to(text.as_str(), &mut greeted, ticket).await,
            Message::Binary(_) => respond(
                None,
                Err("binary frames are not accepted; send JSON text".to_owned()),
            ),
            Message::Close(_) => return Ok(()),
            // Pings are answered by tungstenite; they keep no connection open by themselves.
            Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => continue,
        };
        timeout(limits.connection_idle, socket.send(reply))
            .await
            .map_err(|_| ConnectionEnd::SendTimeout(limits.connection_idle))??;
        if ticket.turned_away() {
            tracing::warn!(
                "a client's hello was refused: every connection slot is taken (--max-connections)"
            );
            close(&mut socket, FULL.to_owned()).await;
            return Ok(());
        }
        // Idle time counts from the reply, so a long command does not use it up.
        idle_deadline = Instant::now() + limits.connection_idle;
    }
}

/// Why a hello with a valid token is refused when every slot of the greeted is taken.
pub(super) const FULL: &str = "the server holds as many connections as it may; try again later";

/// Tells the client why the connection ends, if it is still reading.
async fn close(socket: &mut Socket, reason: String) {
    let frame = CloseFrame {
        code: CloseCode::Policy,
        reason: reason.into(),
    };
    // The connection is being dropped anyway: a client that does not take the close frame
    // in time, or has gone, changes nothing.
    let _ = timeout(CLOSE_GRACE, socket.close(Some(frame))).await;
}
