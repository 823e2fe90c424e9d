//! The first bytes of every connection: an HTTP/1.1 request head, read whole within the
//! handshake time and at most [`MAX_HEAD_BYTES`]. A WebSocket upgrade on one of the server's
//! doors becomes a WebSocket (`/` the gateway's clients, `/blender` a person's Blender,
//! `/chat` the chat page); a GET of the chat page or its script or style sheet is answered
//! with it, from the binary; anything else gets a status line and the connection closes.

use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use viga_protocol::server::{BLENDER_PATH, CHAT_PATH};

/// A request head longer than this is refused (431): doors need a few short headers.
pub(super) const MAX_HEAD_BYTES: usize = 8 << 10;
const MAX_HEADERS: usize = 32;

/// Any stream a connection runs over: TCP, or TLS over TCP.
pub(crate) trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// A WebSocket over whatever the connection runs over.
pub(crate) type Socket = WebSocketStream<Box<dyn Io>>;

/// Which door a WebSocket came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Door {
    /// `/`: programs sending the gateway's own messages.
    Gateway,
    /// `/blender`: a person's Blender dialling in.
    Blender,
    /// `/chat`: the chat page.
    Chat,
}

/// What became of a connection's first request.
pub(super) enum Opened {
    WebSocket(Door, Box<Socket>),
    /// A page was served or the request refused; the connection is done.
    Answered,
}

/// The chat page's files, shipped inside the binary.
const PAGE: &str = include_str!("../../page/index.html");
const SCRIPT: &str = include_str!("../../page/viga-chat.js");
const STYLE: &str = include_str!("../../page/viga-chat.css");

/// The page may load its own script and style, show images it was sent as data, and talk to
/// its own server; nothing else (no inline script, no other site, no frames).
const PAGE_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

#[derive(Debug, thiserror::Error)]
pub(super) enum HeadError {
    #[error("the connection closed before a whole request head")]
    Closed,
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Reads the request head and answers it: a WebSocket for `door_config(door)`, a page, or a
/// refusal.
pub(super) async fn open(
    mut stream: Box<dyn Io>,
    door_config: impl Fn(Door) -> WebSocketConfig,
) -> Result<Opened, HeadError> {
    let mut buffer = Vec::with_capacity(1024);
    let head_end = loop {
        if let Some(end) = find_head_end(&buffer) {
            break end;
        }
        if buffer.len() >= MAX_HEAD_BYTES {
            respond(&mut stream, "431 Request Header Fields Too Large", "").await?;
            return Ok(Opened::Answered);
        }
        let mut chunk = [0_u8; 2048];
        let read = stream.read(&mut chunk).await?;
        if read == 0 {
            return Err(HeadError::Closed);
        }
        buffer.extend_from_slice(&chunk[..read]);
    };
    let leftover = buffer.split_off(head_end);
    let request = match Request::parse(&buffer) {
        Ok(request) => request,
        Err(status) => {
            respond(&mut stream, status, "").await?;
            return Ok(Opened::Answered);
        }
    };
    match route(&request) {
        Route::Upgrade(door) => {
            let Some(key) = request.header("sec-websocket-key") else {
                respond(&mut stream, "400 Bad Request", "").await?;
                return Ok(Opened::Answered);
            };
            let accept = derive_accept_key(key.as_bytes());
            let answer = format!(
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
            );
            stream.write_all(answer.as_bytes()).await?;
            stream.flush().await?;
            let socket = WebSocketStream::from_partially_read(
                stream,
                leftover,
                Role::Server,
                Some(door_config(door)),
            )
            .await;
            Ok(Opened::WebSocket(door, Box::new(socket)))
        }
        Route::File(content_type, body) => {
            let headers = format!(
                "Content-Type: {content_type}\r\nContent-Security-Policy: {PAGE_POLICY}\r\nX-Content-Type-Options: nosniff\r\nReferrer-Policy: no-referrer\r\nCache-Control: no-store\r\n"
            );
            respond_with(&mut stream, "200 OK", &headers, body).await?;
            Ok(Opened::Answered)
        }
        Route::Refused(status) => {
            respond(&mut stream, status, "").await?;
            Ok(Opened::Answered)
        }
    }
}

fn find_head_end(buffer: &[u8]) -> Option<usize> {
    buffer
        .windows(4)
        .position(|window| window == b"\r\n\r\n")
        .map(|at| at + 4)
}

/// The parts of a request head the doors look at.
struct Request {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
}

impl Request {
    /// The head, or the status line to refuse it with.
    fn parse(head: &[u8]) -> Result<Self, &'static str> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut parsed = httparse::Request::new(&mut headers);
        match parsed.parse(head) {
            Ok(httparse::Status::Complete(_)) => {}
            Err(httparse::Error::TooManyHeaders) => {
                return Err("431 Request Header Fields Too Large");
            }
            Ok(httparse::Status::Partial) | Err(_) => return Err("400 Bad Request"),
        }
        if parsed.version != Some(1) {
            return Err("505 HTTP Version Not Supported");
        }
        let headers = parsed
            .headers
            .iter()
            .map(|header| {
                (
                    header.name.to_ascii_lowercase(),
                    String::from_utf8_lossy(header.value).trim().to_owned(),
                )
            })
            .collect();
        Ok(Self {
            method: parsed.method.unwrap_or_default().to_owned(),
            path: parsed.path.unwrap_or_default().to_owned(),
            headers,
        })
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    /// Whether a comma-separated header holds `token` (case-insensitive).
    fn header_has(&self, name: &str, token: &str) -> bool {
        self.headers
            .iter()
            .filter(|(key, _)| key == name)
            .flat_map(|(_, value)| value.split(','))
            .any(|part| part.trim().eq_ignore_ascii_case(token))
    }

    fn wants_websocket(&self) -> bool {
        self.header_has("upgrade", "websocket") && self.header_has("connection", "upgrade")
    }

    /// A page's WebSocket must come from a page of this server: a browser names the page's
    /// origin, and another site's page is refused (programs, and Blender, send none).
    fn comes_from_another_site(&self) -> bool {
        let Some(origin) = self.header("origin") else {
            return false;
        };
        let origin_host = origin
            .split_once("://")
            .map_or(origin, |(_, rest)| rest)
            .trim_end_matches('/');
        self.header("host") != Some(origin_host)
    }
}

enum Route {
    Upgrade(Door),
    File(&'static str, &'static str),
    Refused(&'static str),
}

fn route(request: &Request) -> Route {
    if request.method != "GET" {
        return Route::Refused("405 Method Not Allowed");
    }
    let path = request.path.split('?').next().unwrap_or_default();
    let door = match path {
        "/" => Some(Door::Gateway),
        BLENDER_PATH => Some(Door::Blender),
        CHAT_PATH => Some(Door::Chat),
        _ => None,
    };
    if request.wants_websocket() {
        let Some(door) = door else {
            return Route::Refused("404 Not Found");
        };
        if request.header("sec-websocket-version") != Some("13") {
            return Route::Refused("426 Upgrade Required");
        }
        if request.comes_from_another_site() {
            return Route::Refused("403 Forbidden");
        }
        return Route::Upgrade(door);
    }
    match path {
        "/" | "/index.html" => Route::File("text/html; charset=utf-8", PAGE),
        "/viga-chat.js" => Route::File("text/javascript; charset=utf-8", SCRIPT),
        "/viga-chat.css" => Route::File("text/css; charset=utf-8", STYLE),
        BLENDER_PATH | CHAT_PATH => Route::Refused("426 Upgrade Required"),
        _ => Route::Refused("404 Not Found"),
    }
}

async fn respond(stream: &mut Box<dyn Io>, status: &str, body: &str) -> std::io::Result<()> {
    respond_with(
        stream,
        status,
        "Content-Type: text/plain; charset=utf-8\r\n",
        body,
    )
    .await
}

async fn respond_with(
    stream: &mut Box<dyn Io>,
    status: &str,
    headers: &str,
    body: &str,
) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.flush().await?;
    let _ = stream.shutdown().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn request(head: &str) -> Request {
        Request::parse(head.as_bytes()).unwrap()
    }

    #[test]
    fn doors_pages_and_refusals() {
        let upgrade = |path: &str, extra: &str| {
            format!(
                "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:9\r\nUpgrade: websocket\r\nConnection: keep-alive, Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n{extra}\r\n"
            )
        };
        for (path, door) in [
            ("/", Door::Gateway),
            ("/blender", Door::Blender),
            ("/chat?x=1", Door::Chat),
        ] {
            assert!(
                matches!(route(&request(&upgrade(path, ""))), Route::Upgrade(d) if d == door),
                "{path}"
            );
        }
        let same_site = upgrade("/chat", "Origin: http://127.0.0.1:9\r\n");
        assert!(matches!(
            route(&request(&same_site)),
            Route::Upgrade(Door::Chat)
        ));
        let other_site = upgrade("/chat", "Origin: https://evil.example\r\n");
        assert!(matches!(
            route(&request(&other_site)),
            Route::Refused("403 Forbidden")
        ));
        assert!(matches!(
            route(&request(&upgrade("/nowhere", ""))),
            Route::Refused("404 Not Found")
        ));
        let page = request("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(matches!(route(&page), Route::File(kind, _) if kind.starts_with("text/html")));
        let plain_blender = request("GET /blender HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(matches!(
            route(&plain_blender),
            Route::Refused("426 Upgrade Required")
        ));
        let post = request("POST / HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(matches!(
            route(&post),
            Route::Refused("405 Method Not Allowed")
        ));
        assert_eq!(
            Request::parse(b"GET / HTTP/1.0\r\n\r\n").err(),
            Some("505 HTTP Version Not Supported")
        );
        assert_eq!(
            Request::parse(b"\x00garbage\r\n\r\n").err(),
            Some("400 Bad Request")
        );
    }
}
