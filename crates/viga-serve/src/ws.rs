//! A WebSocket gateway for add-on commands (seed 004's message flow). A client says who it is
//! with `hello`, then sends `addon_command`s; each user gets a Blender of their own, so one
//! user's scene never sees another's commands.
//!
//! Client → gateway (JSON text frames, every one with a fresh `message_id`):
//! `{"type": "hello", "message_id", "user" (or seed 004's "username"), "token"}`,
//! `{"type": "list_tools", "message_id"}`,
//! `{"type": "addon_command", "message_id", "addon_id", "command", "params", "username"?}`
//! (seed 004's message; `username`, when given, must be the user of the hello).
//! Gateway → client: `{"type": "response", "message_id", "ok": true, "result"}` or
//! `{"type": "response", "message_id", "ok": false, "error"}`; an add-on command's `result`
//! is `{"result": <what the command returned>, "scene": <the scene summary, as objects>}`.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use futures_util::{SinkExt as _, StreamExt as _};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Mutex;
use tokio_tungstenite::tungstenite::Message;
use viga_blender::{BlenderCommands as _, BlenderLauncher, Worker, WorkerConfig};
use viga_protocol::bridge::SceneReset;
use viga_skills::addons::{AddonRegistry, discover};
use viga_skills::{RenderSettings, ToolContext, ToolError};

/// Objects of the scene summary a command's reply carries.
const SCENE_OBJECTS: u32 = 200;

/// Largest message the gateway reads; add-on commands are small.
const MAX_MESSAGE_BYTES: usize = 1 << 20;

/// The environment variable holding the gateway's shared token.
pub const GATEWAY_TOKEN_ENV: &str = "VIGA_GATEWAY_TOKEN";
/// The shortest token the gateway accepts: anything shorter is guessable.
pub const MIN_TOKEN_CHARS: usize = 16;

/// Reads the shared token from [`GATEWAY_TOKEN_ENV`], refusing a missing or short one.
pub fn token_from_env() -> Result<String, String> {
    let token = std::env::var(GATEWAY_TOKEN_ENV).unwrap_or_default();
    if token.chars().count() < MIN_TOKEN_CHARS {
        return Err(format!(
            "{GATEWAY_TOKEN_ENV} must hold a shared secret of at least {MIN_TOKEN_CHARS} characters; clients send it in their hello"
        ));
    }
    Ok(token)
}

#[derive(Debug, Clone)]
pub struct GatewayConfig {
    /// Every client must present this in its hello.
    pub token: String,
    pub launcher: BlenderLauncher,
    /// Add-on packages to load in each user's Blender.
    pub addons_folder: Option<PathBuf>,
    /// A program run on a fresh factory scene when a user's Blender starts.
    pub setup_code: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error("cannot listen on {address}: {source}")]
    Bind {
        address: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// One user's Blender, add-ons and the message ids it has seen.
struct Session {
    /// The user this session belongs to.
    user: String,
    context: ToolContext,
    addons: AddonRegistry,
    seen: Mutex<HashSet<String>>,
}

/// The gateway's state: sessions by user.
pub struct Gateway {
    config: GatewayConfig,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway").finish_non_exhaustive()
    }
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
enum Incoming {
    Hello {
        message_id: String,
        /// Seed 004's clients call it `username`.
        #[serde(alias = "username")]
        user: String,
        token: String,
    },
    ListTools {
        message_id: String,
    },
    AddonCommand {
        message_id: String,
        addon_id: String,
        command: String,
        params: Value,
        /// Seed 004 tags every command with its user; when given, it must be the user this
        /// connection said hello as.
        #[serde(default)]
        username: Option<String>,
    },
}

impl Incoming {
    fn message_id(&self) -> &str {
        match self {
            Self::Hello { message_id, .. }
            | Self::ListTools { message_id }
            | Self::AddonCommand { message_id, .. } => message_id,
        }
    }
}

fn respond(message_id: Option<&str>, outcome: Result<Value, String>) -> Message {
    let body = match outcome {
        Ok(result) => {
            json!({"type": "response", "message_id": message_id, "ok": true, "result": result})
        }
        Err(error) => {
            json!({"type": "response", "message_id": message_id, "ok": false, "error": error})
        }
    };
    Message::text(body.to_string())
}

impl Gateway {
    pub fn new(config: GatewayConfig) -> Arc<Self> {
        Arc::new(Self {
            config,
            sessions: Mutex::new(HashMap::new()),
        })
    }

    /// Binds the listening socket. Keep `address` on loopback: the gateway speaks plain
    /// WebSocket, so anything wider needs a TLS-terminating proxy in front.
    pub async fn bind(address: SocketAddr) -> Result<TcpListener, GatewayError> {
        TcpListener::bind(address)
            .await
            .map_err(|source| GatewayError::Bind { address, source })
    }

    /// Accepts connections until the listener fails or the task is dropped.
    pub async fn serve(self: Arc<Self>, listener: TcpListener) {
        while let Ok((stream, peer)) = listener.accept().await {
            let gateway = Arc::clone(&self);
            tokio::spawn(async move {
                if let Err(err) = gateway.connection(stream).await {
                    tracing::debug!(%peer, "websocket connection ended: {err}");
                }
            });
        }
    }

    async fn connection(
        &self,
        stream: TcpStream,
    ) -> Result<(), tokio_tungstenite::tungstenite::Error> {
        let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
            .max_message_size(Some(MAX_MESSAGE_BYTES));
        let mut socket = tokio_tungstenite::accept_async_with_config(stream, Some(config)).await?;
        let mut session: Option<Arc<Session>> = None;
        while let Some(frame) = socket.next().await {
            let text = match frame? {
                Message::Text(text) => text,
                Message::Close(_) => break,
                Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => continue,
                Message::Binary(_) => {
                    socket
                        .send(respond(
                            None,
                            Err("binary frames are not accepted; send JSON text".to_owned()),
                        ))
                        .await?;
                    continue;
                }
            };
            let incoming: Incoming = match serde_json::from_str(text.as_str()) {
                Ok(incoming) => incoming,
                Err(err) => {
                    socket
                        .send(respond(None, Err(format!("unreadable message: {err}"))))
                        .await?;
                    continue;
                }
            };
            let message_id = incoming.message_id().to_owned();
            let outcome = self.handle(incoming, &mut session).await;
            socket.send(respond(Some(&message_id), outcome)).await?;
        }
        Ok(())
    }

    async fn handle(
        &self,
        incoming: Incoming,
        session: &mut Option<Arc<Session>>,
    ) -> Result<Value, String> {
        if incoming.message_id().trim().is_empty() {
            return Err("every message needs a non-empty message_id".to_owned());
        }
        if let Incoming::Hello { user, token, .. } = &incoming {
            if token.as_bytes() != self.config.token.as_bytes() {
                return Err("wrong token".to_owned());
            }
            if user.trim().is_empty() {
                return Err("hello needs a user".to_owned());
            }
            let opened = self.session_for(user).await?;
            check_fresh(&opened, incoming.message_id()).await?;
            *session = Some(opened);
            return Ok(json!({"user": user}));
        }
        let Some(current) = session.as_ref() else {
            return Err("say hello (with your user and the gateway token) first".to_owned());
        };
        if let Incoming::AddonCommand {
            username: Some(claimed),
            ..
        } = &incoming
            && *claimed != current.user
        {
            return Err(format!(
                "username {claimed:?} is not the user this connection said hello as ({:?}); one connection speaks for one user",
                current.user
            ));
        }
        check_fresh(current, incoming.message_id()).await?;
        match incoming {
            Incoming::Hello { .. } => Err("already greeted".to_owned()),
            Incoming::ListTools { .. } => {
                let tools = current.addons.tools().map_err(|err| err.to_string())?;
                Ok(json!(tools.iter().map(|t| t.spec()).collect::<Vec<_>>()))
            }
            Incoming::AddonCommand {
                addon_id,
                command,
                params,
                ..
            } => {
                let Some(tool) = current.addons.tool(&addon_id, &command) else {
                    return Err(format!(
                        "add-on {addon_id:?} is not registered or has no command {command:?} (registered add-ons: {})",
                        current.addons.ids().join(", ")
                    ));
                };
                let blender = current.context.blender.as_ref();
                let answer = tool.run(blender, params).await.map_err(|err| match err {
                    ToolError::Recoverable(message) | ToolError::Fatal(message) => message,
                })?;
                // The scene as objects (names, types, transforms, sizes), not the lines a
                // model reads: a client acts on it.
                let scene = blender
                    .scene_info(0, SCENE_OBJECTS)
                    .await
                    .map_err(|err| err.to_string())?;
                Ok(json!({"result": answer.result, "scene": scene}))
            }
        }
    }

    /// The user's session, starting their Blender on first use.
    async fn session_for(&self, user: &str) -> Result<Arc<Session>, String> {
        let mut sessions = self.sessions.lock().await;
        if let Some(existing) = sessions.get(user) {
            return Ok(Arc::clone(existing));
        }
        let mut worker_config = WorkerConfig::new(self.config.launcher.clone());
        worker_config.name = format!("user-{user}");
        let worker = Worker::start(worker_config)
            .await
            .map_err(|err| err.to_string())?;
        let setup = self.config.setup_code.clone().unwrap_or_default();
        let result = worker
            .execute(&setup, Some(SceneReset::Factory), None)
            .await
            .map_err(|err| err.to_string())?;
        if let Some(error) = result.error {
            return Err(format!("the gateway's setup program failed: {error}"));
        }
        let mut addons = AddonRegistry::new();
        let problems = discover(&worker, self.config.addons_folder.as_deref(), &mut addons)
            .await
            .map_err(|err| err.to_string())?;
        for problem in problems {
            tracing::warn!(user, "add-on skipped: {problem}");
        }
        let context = ToolContext::new(
            Arc::new(worker),
            RenderSettings::default(),
            SceneReset::Factory,
        );
        let session = Arc::new(Session {
            user: user.to_owned(),
            context,
            addons,
            seen: Mutex::new(HashSet::new()),
        });
        sessions.insert(user.to_owned(), Arc::clone(&session));
        Ok(session)
    }
}

/// Refuses a message id this session has already seen (a replay).
async fn check_fresh(session: &Session, message_id: &str) -> Result<(), String> {
    if session.seen.lock().await.insert(message_id.to_owned()) {
        Ok(())
    } else {
        Err(format!(
            "message id {message_id:?} was already used; replayed messages are refused"
        ))
    }
}
