//! Blenders that dial in (`/blender`): a person's own Blender, connected through the viga add-on,
//! serving that person's requests. One per user: a second Blender of the same user replaces
//! the first (which is told so and stops dialling).
//!
//! The agent reaches it through [`DialedTransport`], a `BlenderTransport` whose calls become
//! messages: the seed's `addon_command` for add-on commands, `request` for the bridge's
//! reading and looking commands. Each call waits for its answer by message id. When the
//! connection drops, calls wait for the same Blender (the same add-on `instance`) to dial
//! back in for [`DialLimits::reconnect_grace`], and their messages are sent again: the add-on
//! answers a message it already ran from what it kept, so a command runs once however often
//! it is sent. A different Blender, or none within the grace, fails the calls.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use futures_util::{SinkExt as _, StreamExt as _};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::{Instant, timeout, timeout_at};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use viga_blender::{BlenderTransport, LostReason, Recovery, TransportError};
use viga_protocol::bridge::{BridgeCommand, BridgeReply};
use viga_protocol::server::{CLOSE_REFUSED, CLOSE_REPLACED, FromBlender, ToBlender};
use viga_skills::addons::{AddonRegistry, AddonScan};

use super::Gateway;
use super::connection::ConnectionEnd;
use super::credentials::UserName;
use super::http::Socket;
use super::messages::check_message_id;

/// How the server waits on dialled-in Blenders.
#[derive(Debug, Clone)]
pub struct DialLimits {
    /// How long calls wait for a Blender that dropped its connection to dial back in.
    pub reconnect_grace: Duration,
    /// How long a call waits for its answer, unless it names its own limit.
    pub call_timeout: Duration,
    /// The largest message a Blender may send (renders come back inline).
    pub max_message_bytes: usize,
    /// The server pings a Blender that has been silent this long.
    pub ping_interval: Duration,
}

impl Default for DialLimits {
    fn default() -> Self {
        Self {
            reconnect_grace: Duration::from_secs(30),
            call_timeout: Duration::from_secs(120),
            max_message_bytes: 64 << 20,
            ping_interval: Duration::from_secs(20),
        }
    }
}

/// What goes out to one connection.
enum Outgoing {
    Text(String),
    Close(u16, String),
}

struct Link {
    id: u64,
    instance: String,
    outbox: mpsc::UnboundedSender<Outgoing>,
}

/// A call waiting for its answer.
struct Pending {
    message_id: String,
    text: String,
    answer: oneshot::Sender<Result<BridgeReply, String>>,
}

#[derive(Default)]
struct Dialed {
    link: Option<Link>,
    /// The Blender calls are for: the connected one, or the one that left less than the
    /// grace ago. Calls made while it is `None` fail at once.
    instance: Option<String>,
    blender_version: Option<String>,
    /// Its last `list_addons`, from its registry messages.
    listing: Option<Value>,
    /// In the order they were made, so they are sent again in that order.
    pending: Vec<Pending>,
    /// A Blender of the user's has connected since the server started.
    ever_connected: bool,
}

impl Dialed {
    fn fail_pending(&mut self, why: &str) {
        for pending in self.pending.drain(..) {
            let _ = pending.answer.send(Err(why.to_owned()));
        }
    }
}

/// One user's dialled-in Blender, connected or not.
pub(crate) struct DialedUser {
    user: UserName,
    state: Mutex<Dialed>,
    /// Bumped when the Blender connects, leaves or lists other add-ons, so chat pages show
    /// what is there now.
    changes: watch::Sender<u64>,
    limits: DialLimits,
}

/// What the page is told about a dialled-in Blender.
pub(crate) struct DialedView {
    pub connected: bool,
    /// Not connected now, but it was since the server started: the person's Blender is gone.
    pub gone: bool,
    pub blender_version: Option<String>,
    pub registry: Option<AddonRegistry>,
}

impl DialedUser {
    fn state(&self) -> MutexGuard<'_, Dialed> {
        // Held only for a few field changes, never across an await.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn bump(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    pub(crate) fn watch(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    pub(crate) fn is_connected(&self) -> bool {
        self.state().link.is_some()
    }

    /// Whether the user's Blender was connected since the server started and is not now.
    pub(crate) fn is_gone(&self) -> bool {
        let state = self.state();
        state.link.is_none() && state.ever_connected
    }

    /// Whether the Blender is connected, its version, and its add-ons as a registry.
    pub(crate) fn view(&self) -> DialedView {
        let state = self.state();
        let registry = state.listing.clone().and_then(|listing| {
            let scan: AddonScan = serde_json::from_value(listing).ok()?;
            let mut registry = AddonRegistry::new();
            registry.apply_scan(scan);
            Some(registry)
        });
        DialedView {
            connected: state.link.is_some(),
            gone: state.link.is_none() && state.ever_connected,
            blender_version: state.blender_version.clone(),
            registry,
        }
    }

    /// The transport the agent drives this Blender through.
    pub(crate) fn transport(self: &Arc<Self>) -> Arc<dyn BlenderTransport> {
        Arc::new(DialedTransport {
            user: Arc::clone(self),
        })
    }

    /// A Blender said hello: it replaces any other connection of this user; calls waiting
    /// for the same instance are sent again, calls for another are failed.
    fn attach(&self, link: Link, blender_version: String) -> Vec<String> {
        let mut state = self.state();
        if let Some(old) = state.link.take() {
            let (code, reason) = if old.instance == link.instance {
                (1000, "the same Blender connected again".to_owned())
            } else {
                (
                    CLOSE_REPLACED,
                    "another Blender of yours connected to the server; this one is no longer used"
                        .to_owned(),
                )
            };
            let _ = old.outbox.send(Outgoing::Close(code, reason));
        }
        let resend = if state.instance.as_deref() == Some(link.instance.as_str()) {
            state.pending.iter().map(|p| p.text.clone()).collect()
        } else {
            state.fail_pending(
                "your Blender changed (it was closed, or another one connected) while this waited; it may not have run there",
            );
            state.listing = None;
            Vec::new()
        };
        state.instance = Some(link.instance.clone());
        state.blender_version = Some(blender_version);
        state.link = Some(link);
        state.ever_connected = true;
        drop(state);
        self.bump();
        resend
    }

    /// The connection `link_id` ended. Calls wait for the same Blender for the grace; then
    /// they fail and the Blender is forgotten.
    fn detach(self: &Arc<Self>, link_id: u64) {
        let instance = {
            let mut state = self.state();
            if state.link.as_ref().map(|link| link.id) != Some(link_id) {
                return;
            }
            state.link = None;
            state.instance.clone()
        };
        self.bump();
        let user = Arc::clone(self);
        let grace = self.limits.reconnect_grace;
        tokio::spawn(async move {
            tokio::time::sleep(grace).await;
            let mut state = user.state();
            if state.link.is_none() && state.instance == instance {
                state.fail_pending(&format!(
                    "your Blender disconnected from the server and did not come back within {} s; a command it was running may or may not have finished there (each one that did is one undo step)",
                    grace.as_secs()
                ));
                state.instance = None;
                state.listing = None;
                drop(state);
                user.bump();
            }
        });
    }

    fn set_listing(&self, listing: Value) {
        self.state().listing = Some(listing);
        self.bump();
    }

    fn answer(&self, message_id: &str, reply: BridgeReply) {
        let mut state = self.state();
        if let Some(at) = state
            .pending
            .iter()
            .position(|p| p.message_id == message_id)
        {
            let pending = state.pending.remove(at);
            let _ = pending.answer.send(Ok(reply));
        }
    }

    /// Sends `message` (or keeps it until the Blender is back) and returns where its answer
    /// arrives; `Err` when no Blender of the user's is there to wait for.
    fn send(
        &self,
        message_id: String,
        text: String,
    ) -> Result<oneshot::Receiver<Result<BridgeReply, String>>, String> {
        let mut state = self.state();
        if state.instance.is_none() {
            return Err(format!(
                "{}'s Blender is not connected to the server (in Blender: Preferences > Add-ons > viga > viga server > Connect)",
                self.user
            ));
        }
        let (answer, receiver) = oneshot::channel();
        if let Some(link) = &state.link {
            let _ = link.outbox.send(Outgoing::Text(text.clone()));
        }
        state.pending.push(Pending {
            message_id,
            text,
            answer,
        });
        Ok(receiver)
    }

    fn forget(&self, message_id: &str) {
        self.state().pending.retain(|p| p.message_id != message_id);
    }
}

/// Every user's dialled-in Blender.
pub(crate) struct DialedBlenders {
    users: Mutex<HashMap<UserName, Arc<DialedUser>>>,
    limits: DialLimits,
    next_link: AtomicU64,
}

impl DialedBlenders {
    pub(crate) fn new(limits: DialLimits) -> Self {
        Self {
            users: Mutex::new(HashMap::new()),
            limits,
            next_link: AtomicU64::new(1),
        }
    }

    pub(crate) fn limits(&self) -> &DialLimits {
        &self.limits
    }

    /// `user`'s entry, made on first use (it stays: a user's entry is a few fields).
    pub(crate) fn user(&self, user: &UserName) -> Arc<DialedUser> {
        let mut users = self.users.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(users.entry(user.clone()).or_insert_with(|| {
            Arc::new(DialedUser {
                user: user.clone(),
                state: Mutex::new(Dialed::default()),
                changes: watch::Sender::new(0),
                limits: self.limits.clone(),
            })
        }))
    }
}

/// A message id the Blender has not seen: random, so ids stay unique across restarts of the
/// server (the add-on answers a repeated id from what it kept).
fn fresh_message_id() -> String {
    format!("{:032x}", rand::random::<u128>())
}

/// The agent's way to a dialled-in Blender.
pub(crate) struct DialedTransport {
    user: Arc<DialedUser>,
}

#[async_trait]
impl BlenderTransport for DialedTransport {
    async fn call(
        &self,
        command: BridgeCommand,
        timeout_override: Option<Duration>,
    ) -> Result<Value, TransportError> {
        let name = command.name();
        let message_id = fresh_message_id();
        let message = match command {
            BridgeCommand::AddonCommand {
                addon_id,
                tool,
                params,
                undo_step,
            } => ToBlender::AddonCommand {
                message_id: message_id.clone(),
                addon_id,
                command: tool,
                params,
                username: self.user.user.as_str().to_owned(),
                undo_step,
            },
            request => ToBlender::Request {
                message_id: message_id.clone(),
                request,
            },
        };
        let lost = |why: String| TransportError::Lost {
            command: name,
            reason: LostReason::Disconnected(why),
            recovery: Recovery::None,
        };
        let text = serde_json::to_string(&message).map_err(|err| lost(err.to_string()))?;
        let receiver = self.user.send(message_id.clone(), text).map_err(lost)?;
        let limit = timeout_override.unwrap_or(self.user.limits.call_timeout);
        let reply = match timeout(limit, receiver).await {
            Ok(Ok(Ok(reply))) => reply,
            Ok(Ok(Err(why))) => return Err(lost(why)),
            Ok(Err(_)) => return Err(lost("the server dropped the call".to_owned())),
            Err(_) => {
                self.user.forget(&message_id);
                return Err(TransportError::Lost {
                    command: name,
                    reason: LostReason::Timeout(limit),
                    recovery: Recovery::None,
                });
            }
        };
        if let Some(fault) = reply.error {
            return Err(TransportError::Refused {
                command: name,
                kind: fault.kind,
                message: fault.message,
                traceback: fault.traceback,
            });
        }
        match (reply.ok, reply.result) {
            (true, Some(result)) => Ok(result),
            _ => Err(TransportError::MalformedReply {
                command: name,
                message: "the reply has neither a result nor an error".to_owned(),
            }),
        }
    }

    fn describe(&self) -> String {
        format!("{}'s Blender (dialled in)", self.user.user)
    }
}

/// Serves one dialled-in Blender: its hello (a user and that user's token), then the agent's
/// messages out and the Blender's answers and add-on listings in, until either side leaves.
pub(super) async fn serve_blender(
    gateway: &Gateway,
    mut socket: Socket,
    ticket: &super::admission::Ticket,
) -> Result<(), ConnectionEnd> {
    let limits = &gateway.limits;
    let hello = match timeout(limits.hello_timeout, next_text(&mut socket)).await {
        Ok(Some(text)) => text,
        Ok(None) => return Ok(()),
        Err(_) => {
            close(
                &mut socket,
                CloseCode::Policy,
                "no hello in time".to_owned(),
            )
            .await;
            return Ok(());
        }
    };
    let greeted = read_hello(gateway, &hello).and_then(|greeted| {
        // A valid hello when every slot is taken: refused, and the add-on tries again.
        if ticket.admit() {
            Ok(greeted)
        } else {
            tracing::warn!(
                "a Blender's hello was refused: every connection slot is taken (--max-connections)"
            );
            Err((greeted.0, super::connection::FULL.to_owned()))
        }
    });
    let (message_id, user, instance, version) = match greeted {
        Ok(greeted) => greeted,
        Err((message_id, message)) => {
            let retry = message == super::connection::FULL;
            let refused = ToBlender::Refused {
                message_id,
                message: message.clone(),
                retry,
            };
            let _ = send(&mut socket, &refused).await;
            // Refused for good (the add-on stops dialling), or only for now.
            let code = if retry {
                CloseCode::Again
            } else {
                CloseCode::from(CLOSE_REFUSED)
            };
            close(&mut socket, code, message).await;
            return Ok(());
        }
    };
    let dialed = gateway.dialed.user(&user);
    let (outbox, mut outgoing) = mpsc::unbounded_channel();
    let link_id = gateway.dialed.next_link.fetch_add(1, Ordering::Relaxed);
    let resend = dialed.attach(
        Link {
            id: link_id,
            instance,
            outbox,
        },
        version,
    );
    tracing::info!(%user, "a Blender dialled in");
    let served = async {
        send(
            &mut socket,
            &ToBlender::Welcome {
                message_id,
                user: user.as_str().to_owned(),
            },
        )
        .await?;
        for text in resend {
            socket.send(Message::text(text)).await?;
        }
        converse(gateway, &dialed, &mut socket, &mut outgoing).await
    }
    .await;
    dialed.detach(link_id);
    tracing::info!(%user, "a Blender left");
    served
}

/// The hello's message id, user, instance and Blender version; or the message id (if it
/// could be read) and why it is refused.
fn read_hello(
    gateway: &Gateway,
    text: &str,
) -> Result<(String, UserName, String, String), (String, String)> {
    let hello = viga_protocol::parse_json::<FromBlender>(text)
        .map_err(|err| (String::new(), format!("unreadable hello: {err}")))?;
    let FromBlender::Hello {
        message_id,
        username,
        token,
        instance,
        blender_version,
    } = hello
    else {
        return Err((String::new(), "say hello first".to_owned()));
    };
    check_message_id(&message_id).map_err(|why| (String::new(), why))?;
    check_message_id(&instance).map_err(|why| (message_id.clone(), format!("instance: {why}")))?;
    match gateway.credentials.authenticate(&username, &token) {
        Some(user) => Ok((message_id, user, instance, blender_version)),
        None => Err((message_id, super::messages::REFUSED_HELLO.to_owned())),
    }
}

async fn converse(
    gateway: &Gateway,
    dialed: &DialedUser,
    socket: &mut Socket,
    outgoing: &mut mpsc::UnboundedReceiver<Outgoing>,
) -> Result<(), ConnectionEnd> {
    let limits = &gateway.dialed.limits;
    let idle_limit = gateway.limits.connection_idle;
    let mut heard = Instant::now();
    let mut ping_at = heard + limits.ping_interval;
    loop {
        tokio::select! {
            out = outgoing.recv() => match out {
                Some(Outgoing::Text(text)) => {
                    timeout(idle_limit, socket.send(Message::text(text)))
                        .await
                        .map_err(|_| ConnectionEnd::SendTimeout(idle_limit))??;
                }
                Some(Outgoing::Close(code, reason)) => {
                    close(socket, CloseCode::from(code), reason).await;
                    return Ok(());
                }
                None => return Ok(()),
            },
            frame = timeout_at(ping_at, socket.next()) => match frame {
                Err(_) => {
                    if heard.elapsed() >= idle_limit {
                        close(socket, CloseCode::Policy, format!("silent for {idle_limit:?}")).await;
                        return Ok(());
                    }
                    socket.send(Message::Ping(Vec::new().into())).await?;
                    ping_at = Instant::now() + limits.ping_interval;
                }
                Ok(None) => return Ok(()),
                Ok(Some(frame)) => {
                    heard = Instant::now();
                    ping_at = heard + limits.ping_interval;
                    match frame? {
                        Message::Text(text) => from_blender(dialed, text.as_str()),
                        Message::Close(_) => return Ok(()),
                        Message::Binary(_) | Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => {}
                    }
                }
            },
        }
    }
}

/// An answer or an add-on listing from the Blender; anything unreadable is logged and left.
fn from_blender(dialed: &DialedUser, text: &str) {
    match viga_protocol::parse_json::<FromBlender>(text) {
        Ok(FromBlender::Response { message_id, reply }) => dialed.answer(&message_id, reply),
        Ok(FromBlender::Registry { listing, .. }) => dialed.set_listing(listing),
        Ok(FromBlender::Hello { .. }) => {
            tracing::debug!(user = %dialed.user, "a second hello on one connection is ignored");
        }
        Err(err) => tracing::debug!(user = %dialed.user, "unreadable message from Blender: {err}"),
    }
}

async fn next_text(socket: &mut Socket) -> Option<String> {
    while let Some(frame) = socket.next().await {
        match frame.ok()? {
            Message::Text(text) => return Some(text.as_str().to_owned()),
            Message::Close(_) => return None,
            _ => {}
        }
    }
    None
}

async fn send(socket: &mut Socket, message: &ToBlender) -> Result<(), ConnectionEnd> {
    let text = serde_json::to_string(message).unwrap_or_default();
    socket.send(Message::text(text)).await?;
    Ok(())
}

async fn close(socket: &mut Socket, code: CloseCode, reason: String) {
    let frame = CloseFrame {
        code,
        reason: reason.chars().take(120).collect::<String>().into(),
    };
    let _ = timeout(Duration::from_secs(1), socket.close(Some(frame))).await;
}
