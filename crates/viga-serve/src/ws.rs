//! The viga server: a WebSocket gateway with three doors on one port, and the chat page.
//!
//! - `/` ([`viga_protocol::gateway::GatewayIn`], [`viga_protocol::gateway::GatewayOut`]; seed
//!   004's message flow, for programs): a client says who it is with `hello` (its user and
//!   that user's own token), then sends `addon_command`s; each user gets a Blender of their
//!   own on the server, so one user's scene never sees another's commands.
//! - `/blender` ([`viga_protocol::server::FromBlender`], [`viga_protocol::server::ToBlender`]):
//!   a person's own Blender dials in through the viga add-on and serves that person's
//!   requests ([`dialed`]).
//! - `/chat` ([`viga_protocol::server::ChatIn`], [`viga_protocol::server::ChatOut`]): the chat
//!   page (served at `/` to a browser) sends a user's requests to the add-on agent, which
//!   works on that user's Blender, and watches them being carried out ([`chat`]).
//!
//! The gateway's own messages (JSON text frames, every one with a fresh `message_id`):
//! `{"type": "hello", "message_id", "user" (or seed 004's "username"), "token"}`,
//! `{"type": "list_tools", "message_id"}`,
//! `{"type": "addon_command", "message_id", "addon_id", "command", "params", "username"?}`
//! (seed 004's message; `username`, when given, must be the user of the hello).
//! Gateway → client: `{"type": "response", "message_id", "ok": true, "result"}` or
//! `{"type": "response", "message_id", "ok": false, "error"}`; an add-on command's `result`
//! is `{"result": <what the command returned>, "scene": <the scene summary, as objects>}`.
//!
//! Under abuse it holds: sessions are capped and reaped when idle ([`GatewayLimits`]),
//! message ids are remembered in a bounded window ([`REPLAY_WINDOW`]), connections are
//! capped and time out, accept errors are survived, path parameters are confined to the
//! user's folder under [`GatewayConfig::files_root`], and plain WebSocket is refused on
//! addresses other machines can reach unless asked for ([`ListenSecurity`]).

mod admission;
mod chat;
mod connection;
mod credentials;
mod dialed;
mod files;
mod http;
mod messages;
mod recovery;
mod replay;
mod retention;
mod sessions;
mod tls;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::timeout;

pub use chat::{ChatSettings, MAX_QUERY_CHARS};
pub use credentials::{
    Credentials, CredentialsError, GATEWAY_TOKEN_ENV, MIN_TOKEN_CHARS, USERS_ENV, UserName,
};
pub use dialed::DialLimits;
pub use files::DEFAULT_FILES_ROOT;
pub use replay::{MAX_MESSAGE_ID_BYTES, REPLAY_WINDOW};
pub use sessions::{
    BlenderSessions, SessionBlender, SessionFactory, SessionStartError, StartedSession,
};
pub use tls::{ListenSecurity, Listener, TlsFiles};

/// How long the listener waits after a failed accept before the next: out of file
/// descriptors (EMFILE), accept fails at once until one is freed, and retrying without a
/// pause would spin a core.
const ACCEPT_RETRY_PAUSE: Duration = Duration::from_millis(100);

/// How much the gateway holds, and for how long.
#[derive(Debug, Clone)]
pub struct GatewayLimits {
    /// Users served at once, each with a Blender of their own; a new user beyond it is
    /// refused until a session is reaped.
    pub max_sessions: usize,
    /// A session whose user has had no connection open for this long is stopped.
    pub session_idle: Duration,
    /// Connections whose hello was accepted, open at once; a hello beyond it is refused
    /// ("try again later") and its connection closed.
    pub max_connections: usize,
    /// Connections that have not said hello yet, open at once (a budget apart from
    /// `max_connections`, so they can never take a user's slot); when it is spent, the
    /// oldest of them is closed to make room for the newest.
    pub max_waiting: usize,
    /// Of `max_waiting`, how many one address may hold; past it, that address's oldest is
    /// closed first.
    pub waiting_per_address: usize,
    /// Time for the WebSocket handshake after the TCP connection is accepted.
    pub handshake_timeout: Duration,
    /// Time for an accepted hello after the handshake.
    pub hello_timeout: Duration,
    /// A connection that sends no message for this long is closed (pings do not count).
    pub connection_idle: Duration,
}

impl Default for GatewayLimits {
    fn default() -> Self {
        Self {
            max_sessions: 8,
            session_idle: Duration::from_secs(600),
            max_connections: 256,
            max_waiting: 64,
            waiting_per_address: 16,
            handshake_timeout: Duration::from_secs(10),
            hello_timeout: Duration::from_secs(10),
            connection_idle: Duration::from_secs(300),
        }
    }
}

#[derive(Debug)]
pub struct GatewayConfig {
    /// Who may say hello, each with their own token.
    pub credentials: Credentials,
    pub limits: GatewayLimits,
    /// Each user's path parameters are confined to `<files_root>/<user>/`; made (mode 0700)
    /// when missing, refused when other users may enter it. The agent's runs for a user go
    /// in `<files_root>/<user>/agent/`.
    pub files_root: PathBuf,
    /// How the server waits on dialled-in Blenders.
    pub dial: DialLimits,
    /// The agent behind the chat door; `None` refuses requests (the page still shows who is
    /// connected).
    pub chat: Option<ChatSettings>,
    /// How long a chat request's run folder is kept; `None`: for ever.
    pub keep_requests: Option<Duration>,
}

#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error("cannot listen on {address}: {source}")]
    Bind {
        address: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot use {path} as the gateway's files root: {source}")]
    FilesRoot {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "will not serve plain WebSocket on {address}, which other machines can reach: tokens, requests and scenes would cross the network unencrypted. Give a certificate and key (--tls-cert, --tls-key), listen on 127.0.0.1, or, behind a TLS proxy on this machine, pass --insecure-plain-on-public-address"
    )]
    PlainOnPublicAddress { address: SocketAddr },
    #[error("TLS: {path}: {problem}")]
    Tls { path: PathBuf, problem: String },
}

/// The gateway's state: who may connect, the sessions, the dialled-in Blenders, the
/// conversations, and the connection slots.
pub struct Gateway {
    credentials: Credentials,
    limits: GatewayLimits,
    sessions: Arc<sessions::Sessions>,
    dialed: dialed::DialedBlenders,
    conversations: chat::Conversations,
    chat: Option<ChatSettings>,
    admission: Arc<admission::Admission>,
    /// Set when the server stops: every chat page is closed, saying so.
    stopping: tokio::sync::watch::Sender<bool>,
    keep_requests: Option<Duration>,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("credentials", &self.credentials)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl Gateway {
    /// A gateway whose sessions `factory` starts (a [`BlenderSessions`] for real Blender).
    pub fn new(
        config: GatewayConfig,
        factory: Arc<dyn SessionFactory>,
    ) -> Result<Arc<Self>, GatewayError> {
        let files_root = files::prepare_files_root(&config.files_root).map_err(|source| {
            GatewayError::FilesRoot {
                path: config.files_root.clone(),
                source,
            }
        })?;
        let limits = config.limits;
        Ok(Arc::new(Self {
            credentials: config.credentials,
            sessions: sessions::Sessions::new(
                factory,
                files_root,
                limits.max_sessions,
                limits.session_idle,
            ),
            admission: admission::Admission::new(
                limits.max_connections,
                limits.max_waiting,
                limits.waiting_per_address,
            ),
            dialed: dialed::DialedBlenders::new(config.dial),
            conversations: chat::Conversations::default(),
            chat: config.chat,
            limits,
            stopping: tokio::sync::watch::Sender::new(false),
            keep_requests: config.keep_requests,
        }))
    }

    /// Binds the listening socket: TLS with `security`'s files, or plain WebSocket, which is
    /// refused on an address other machines can reach unless `security` allows it.
    pub async fn bind(
        address: SocketAddr,
        security: &ListenSecurity,
    ) -> Result<Listener, GatewayError> {
        Listener::bind(address, security).await
    }

    /// Accepts connections, reaps idle sessions and removes request folders past their
    /// keeping until the future is dropped.
    pub async fn serve(self: Arc<Self>, listener: Listener) {
        let pruned = async {
            match self.keep_requests {
                Some(keep) => {
                    retention::prune_forever(self.sessions.files_root().to_path_buf(), keep).await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = self.sessions.reap_forever() => {}
            () = self.accept_forever(listener) => {}
            () = pruned => {}
        }
    }

    /// Stops serving requests, as on SIGINT or SIGTERM: every request in flight is cancelled
    /// and given up to `grace` to end (its folder then says how it ended, and every page of
    /// its user gets its `finished` line saying the server stopped), no new one starts, and
    /// every chat page is then closed with "going away", to reconnect when the server is
    /// back. Returns how many requests were still running at the end of the grace.
    pub async fn shut_down(&self, grace: Duration) -> usize {
        self.conversations.stop_all();
        let deadline = tokio::time::Instant::now() + grace;
        while self.conversations.any_running() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let left = self.conversations.running_count();
        self.conversations.abandon_all();
        self.stopping.send_replace(true);
        // The pages' connections send what is queued for them, then their close frame.
        tokio::time::sleep(Duration::from_millis(500)).await;
        left
    }

    /// Stops every user's Blender (on shutdown).
    pub async fn stop_sessions(&self) {
        self.sessions.stop_all().await;
    }

    async fn accept_forever(self: &Arc<Self>, listener: Listener) {
        loop {
            let (stream, peer) = match listener.tcp.accept().await {
                Ok(accepted) => accepted,
                Err(err) => {
                    tracing::warn!("accepting a connection failed: {err}; still listening");
                    tokio::time::sleep(ACCEPT_RETRY_PAUSE).await;
                    continue;
                }
            };
            let ticket = self.admission.arrive(peer.ip());
            let gateway = Arc::clone(self);
            let tls = listener.tls.clone();
            tokio::spawn(async move {
                tokio::select! {
                    served = gateway.serve_stream(stream, tls, &ticket) => {
                        if let Err(err) = served {
                            tracing::debug!(%peer, "connection ended: {err}");
                        }
                    }
                    () = ticket.evicted() => {
                        tracing::debug!(%peer, "closed before its hello, to make room for a newer connection");
                    }
                }
            });
        }
    }

    /// One connection: TLS when the server speaks it, the request head, then the door it
    /// asked for, all of the opening within the handshake time.
    async fn serve_stream(
        self: &Arc<Self>,
        stream: tokio::net::TcpStream,
        tls: Option<tokio_rustls::TlsAcceptor>,
        ticket: &admission::Ticket,
    ) -> Result<(), connection::ConnectionEnd> {
        let limit = self.limits.handshake_timeout;
        let max_blender_message = self.dialed.limits().max_message_bytes;
        let opening = async {
            let stream: Box<dyn http::Io> = match tls {
                Some(acceptor) => Box::new(
                    acceptor
                        .accept(stream)
                        .await
                        .map_err(connection::ConnectionEnd::Tls)?,
                ),
                None => Box::new(stream),
            };
            let opened = http::open(stream, |door| match door {
                http::Door::Blender => connection::websocket_config(max_blender_message),
                http::Door::Gateway | http::Door::Chat => connection::small_messages(),
            })
            .await?;
            Ok::<_, connection::ConnectionEnd>(opened)
        };
        let opened = timeout(limit, opening)
            .await
            .map_err(|_| connection::ConnectionEnd::HandshakeTimeout(limit))??;
        match opened {
            http::Opened::Answered => Ok(()),
            http::Opened::WebSocket(http::Door::Gateway, socket) => {
                connection::serve_connection(self, *socket, ticket).await
            }
            http::Opened::WebSocket(http::Door::Blender, socket) => {
                dialed::serve_blender(self, *socket, ticket).await
            }
            http::Opened::WebSocket(http::Door::Chat, socket) => {
                chat::serve_chat(self, *socket, ticket).await
            }
        }
    }
}
