//! A WebSocket client for the gateway's tests: connect, and ask (send a JSON message, wait
//! for the JSON reply).

use futures_util::{SinkExt as _, StreamExt as _};
use serde_json::Value;
use tokio_tungstenite::tungstenite::Message;

/// A client connection to the gateway.
pub type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Connects to `ws://{address}`; panics when the gateway refuses.
pub async fn connect(address: impl std::fmt::Display) -> Socket {
    match tokio_tungstenite::connect_async(format!("ws://{address}")).await {
        Ok((socket, _)) => socket,
        Err(err) => panic!("cannot connect to the gateway at {address}: {err}"),
    }
}

/// Sends `message` and returns the next text message, read as JSON; panics when the
/// connection ends first or the reply is not JSON.
pub async fn ask(socket: &mut Socket, message: Value) -> Value {
    if let Err(err) = socket.send(Message::text(message.to_string())).await {
        panic!("cannot send {message}: {err}");
    }
    loop {
        match socket.next().await {
            Some(Ok(Message::Text(text))) => match serde_json::from_str(text.as_str()) {
                Ok(reply) => return reply,
                Err(err) => panic!("the reply to {message} is not JSON ({err}): {text}"),
            },
            Some(Ok(_)) => {}
            Some(Err(err)) => panic!("the connection failed while waiting for a reply: {err}"),
            None => panic!("the connection closed before the reply to {message}"),
        }
    }
}
