//! The chat door (`/chat`): a user's requests in their own words go to the add-on agent
//! (viga-core's `addon_agent`), which carries them out with the add-on tools of that user's
//! Blender, and everything the agent does comes back as it happens.
//!
//! A page says hello with the user and their token, then sends `query` and `cancel`
//! messages. Every message id is remembered per user (a message sent again with the same id
//! is refused, so a request runs once). One request runs at a time per user; each is an agent
//! run with its own folder under the user's folder, told the last turns of the conversation.
//! Its events go to every page of that user as `progress` lines of the run stream, a look at
//! the scene after each step that changed it as a `view`, and a `finished` line with the
//! answer last. Which Blender serves the user, and its tools, is sent after the hello and
//! whenever it changes: their own Blender when it is dialled in, else (when the server is
//! allowed to) a contained Blender of the server's.

use std::collections::{HashMap, VecDeque};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use base64::Engine as _;
use futures_util::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio::time::{Instant, timeout, timeout_at};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use viga_blender::BlenderTransport;
use viga_core::conversation::EarlierTurn;
use viga_core::{Canceller, CoreError};
use viga_domain_scene::addon_agent::{
    AgentConfig, AgentOutcome, PathArguments, read_config, remembered_turn,
};
use viga_protocol::bridge::RenderSpec;
use viga_protocol::event::{RunEvent, StopReason};
use viga_protocol::server::{BlenderKind, BlenderStatus, ChatIn, ChatOut, OfferedTool};
use viga_protocol::stream::{StreamLine, StreamRecord};
use viga_provider::Provider;
use viga_skills::addons::AddonRegistry;

use super::Gateway;
use super::connection::ConnectionEnd;
use super::credentials::UserName;
use super::files::UserFolder;
use super::http::Socket;
use super::messages::{REFUSED_HELLO, check_message_id};
use super::replay::{REPLAY_WINDOW, ReplayWindow};
use super::sessions::LeasedBlender;

/// The longest request accepted, in characters.
pub const MAX_QUERY_CHARS: usize = 4000;
/// Progress messages kept for a page that falls behind; one further behind misses some.
const PROGRESS_BACKLOG: usize = 1024;
/// The largest look at the scene sent to a page.
const MAX_VIEW_BYTES: u64 = 16 << 20;

/// How the server's agent works.
pub struct ChatSettings {
    pub provider: Arc<dyn Provider>,
    /// Model calls one request may take.
    pub max_steps: u32,
    /// Looks at the scene: the agent's own and the one after each step.
    pub render: RenderSpec,
    /// The model reads images: it is shown the look after each step.
    pub model_sees: bool,
    pub max_tokens: u32,
    /// Earlier requests of a user's conversation the agent is told about.
    pub remembered_turns: usize,
    /// Users whose own Blender is not dialled in get a contained Blender of the server's
    /// (the gateway's sessions); without it they are told to connect theirs.
    pub server_blenders: bool,
    /// The add-on packages server-started Blenders load.
    pub server_addons: Option<PathBuf>,
}

impl std::fmt::Debug for ChatSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatSettings")
            .field("provider", &self.provider.name())
            .field("model", &self.provider.model())
            .field("max_steps", &self.max_steps)
            .field("server_blenders", &self.server_blenders)
            .finish_non_exhaustive()
    }
}

/// A request being carried out.
struct Running {
    query_id: String,
    /// Set once the agent has started.
    canceller: Option<Canceller>,
    /// A cancel that came before the agent started.
    cancel_asked: bool,
    /// The run's folder, once the agent has started.
    folder: Option<PathBuf>,
}

impl Running {
    /// Cancels the agent, or has it cancelled as soon as it starts.
    fn cancel(&mut self) {
        self.cancel_asked = true;
        if let Some(canceller) = &self.canceller {
            canceller.cancel();
        }
    }
}

#[derive(Default)]
struct ConversationState {
    earlier: VecDeque<EarlierTurn>,
    running: Option<Running>,
    /// The server is stopping: no request starts, and the one running was cancelled by it.
    server_stopping: bool,
    /// The person chose a server Blender while their own is gone.
    server_blender_chosen: bool,
}

/// One user's conversation, shared by every page they have open.
pub(crate) struct Conversation {
    seen: Mutex<ReplayWindow>,
    state: Mutex<ConversationState>,
    out: broadcast::Sender<ChatOut>,
}

impl Conversation {
    fn state(&self) -> MutexGuard<'_, ConversationState> {
        // Held for a few field changes only, never across an await.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn admit(&self, message_id: &str) -> Result<(), String> {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        if seen.admit(message_id) {
            Ok(())
        } else {
            Err(format!(
                "message id {message_id:?} was already used; a message sent again is not run again"
            ))
        }
    }

    fn publish(&self, message: ChatOut) {
        // No page listening is not an error: the run goes on, its folder keeps everything.
        let _ = self.out.send(message);
    }

    fn progress(&self, query_id: &str, line: StreamLine) {
        self.publish(ChatOut::Progress {
            query_id: query_id.to_owned(),
            record: StreamRecord::new(line),
        });
    }

    /// The agent of `query_id` started in `folder`: a cancel asked for meanwhile is passed on.
    fn started(&self, query_id: &str, canceller: Canceller, folder: PathBuf) {
        let mut state = self.state();
        if let Some(running) = state.running.as_mut()
            && running.query_id == query_id
        {
            if running.cancel_asked {
                canceller.cancel();
            }
            running.canceller = Some(canceller);
            running.folder = Some(folder);
        }
    }

    /// The server stops without waiting any longer for the request running (a command of
    /// its still in the user's Blender): its pages get its `finished` line, and its folder
    /// says how it ended.
    fn abandon(&self) {
        let Some(running) = self.state().running.take() else {
            return;
        };
        let stop = StopReason::Cancelled;
        if let Some(folder) = &running.folder
            && let Err(err) =
                viga_core::RunFolder::open(folder).and_then(|run| run.finish_left_run(stop.clone()))
        {
            tracing::warn!("a request the server left did not get its end recorded: {err}");
        }
        let exit_code = stop.exit_code();
        self.progress(
            &running.query_id,
            StreamLine::Finished {
                stop,
                message: super::recovery::LEFT_BY_SERVER.to_owned(),
                final_program: None,
                exit_code,
            },
        );
    }

    /// Whether `query_id` is being carried out on this server.
    fn is_running(&self, query_id: &str) -> bool {
        self.state()
            .running
            .as_ref()
            .is_some_and(|running| running.query_id == query_id)
    }

    /// The server is stopping: the request running is cancelled, and none starts.
    fn stop(&self) {
        let mut state = self.state();
        state.server_stopping = true;
        if let Some(running) = state.running.as_mut() {
            running.cancel();
        }
    }

    fn cancel(&self, query_id: &str) -> bool {
        let mut state = self.state();
        let Some(running) = state.running.as_mut() else {
            return false;
        };
        if running.query_id != query_id {
            return false;
        }
        running.cancel();
        true
    }

    fn finish(&self, turn: Option<EarlierTurn>, remembered: usize) {
        let mut state = self.state();
        state.running = None;
        if let Some(turn) = turn {
            state.earlier.push_back(turn);
            while state.earlier.len() > remembered {
                state.earlier.pop_front();
            }
        }
    }
}

/// Every user's conversation.
#[derive(Default)]
pub(crate) struct Conversations {
    users: Mutex<HashMap<UserName, Arc<Conversation>>>,
}

impl Conversations {
    fn all(&self) -> Vec<Arc<Conversation>> {
        let users = self.users.lock().unwrap_or_else(PoisonError::into_inner);
        users.values().cloned().collect()
    }

    /// The server is stopping: every request running is cancelled, and none starts.
    pub(crate) fn stop_all(&self) {
        for conversation in self.all() {
            conversation.stop();
        }
    }

    /// Ends every request still running without waiting for it (see [`Conversation::abandon`]).
    pub(crate) fn abandon_all(&self) {
        for conversation in self.all() {
            conversation.abandon();
        }
    }

    /// Whether any request is still being carried out.
    pub(crate) fn any_running(&self) -> bool {
        self.running_count() > 0
    }

    /// How many requests are being carried out.
    pub(crate) fn running_count(&self) -> usize {
        self.all()
            .iter()
            .filter(|conversation| conversation.state().running.is_some())
            .count()
    }

    fn of(&self, user: &UserName) -> Arc<Conversation> {
        let mut users = self.users.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(users.entry(user.clone()).or_insert_with(|| {
            Arc::new(Conversation {
                seen: Mutex::new(ReplayWindow::new(REPLAY_WINDOW)),
                state: Mutex::new(ConversationState::default()),
                out: broadcast::Sender::new(PROGRESS_BACKLOG),
            })
        }))
    }
}

fn respond(message_id: Option<String>, outcome: Result<Value, String>) -> ChatOut {
    match outcome {
        Ok(result) => ChatOut::Response {
            message_id,
            ok: true,
            result: Some(result),
            error: None,
        },
        Err(error) => ChatOut::Response {
            message_id,
            ok: false,
            result: None,
            error: Some(error),
        },
    }
}

/// Serves one page: its hello, then its messages, the user's progress and Blender changes,
/// until the page leaves or goes silent (browsers answer the server's pings, so an open page
/// is never silent).
pub(super) async fn serve_chat(
    gateway: &Arc<Gateway>,
    mut socket: Socket,
    ticket: &super::admission::Ticket,
) -> Result<(), ConnectionEnd> {
    let limits = &gateway.limits;
    let Some(user) = greet(gateway, &mut socket, ticket).await? else {
        return Ok(());
    };
    let conversation = gateway.conversations.of(&user);
    let mut changes = gateway.dialed.user(&user).watch();
    let mut progress = conversation.out.subscribe();
    send(
        &mut socket,
        &ChatOut::Blender {
            status: status(gateway, &user),
        },
    )
    .await?;
    let mut stopping = gateway.stopping.subscribe();
    let ping_every = gateway.dialed.limits().ping_interval;
    let mut heard = Instant::now();
    let mut ping_at = heard + ping_every;
    loop {
        tokio::select! {
            frame = timeout_at(ping_at, socket.next()) => match frame {
                Err(_) => {
                    if heard.elapsed() >= limits.connection_idle {
                        close(&mut socket, "silent for too long").await;
                        return Ok(());
                    }
                    socket.send(Message::Ping(Vec::new().into())).await?;
                    ping_at = Instant::now() + ping_every;
                }
                Ok(None) => return Ok(()),
                Ok(Some(frame)) => {
                    heard = Instant::now();
                    ping_at = heard + ping_every;
                    match frame? {
                        Message::Text(text) => {
                            for reply in handle(gateway, &conversation, &user, text.as_str()) {
                                send(&mut socket, &reply).await?;
                            }
                        }
                        Message::Close(_) => return Ok(()),
                        _ => {}
                    }
                }
            },
            changed = changes.changed() => {
                if changed.is_ok() {
                    send(&mut socket, &ChatOut::Blender { status: status(gateway, &user) }).await?;
                }
            }
            () = server_stops(&mut stopping) => {
                // What was published before the stop (the requests' finished lines) first.
                while let Ok(message) = progress.try_recv() {
                    send(&mut socket, &message).await?;
                }
                going_away(&mut socket).await;
                return Ok(());
            }
            message = progress.recv() => match message {
                Ok(message) => send(&mut socket, &message).await?,
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    tracing::warn!(%user, missed, "a chat page fell behind; it missed some progress");
                }
                Err(broadcast::error::RecvError::Closed) => return Ok(()),
            },
        }
    }
}

/// The page's hello, answered, within the hello time: the user it speaks for, or `None` when
/// it left, said nothing in time, or found every connection slot taken.
async fn greet(
    gateway: &Gateway,
    socket: &mut Socket,
    ticket: &super::admission::Ticket,
) -> Result<Option<UserName>, ConnectionEnd> {
    let hello_deadline = Instant::now() + gateway.limits.hello_timeout;
    loop {
        let frame = match timeout_at(hello_deadline, socket.next()).await {
            Err(_) => {
                close(socket, "no hello in time").await;
                return Ok(None);
            }
            Ok(None) => return Ok(None),
            Ok(Some(frame)) => frame?,
        };
        let text = match frame {
            Message::Text(text) => text,
            Message::Close(_) => return Ok(None),
            _ => continue,
        };
        let (reply, user) = hello(gateway, text.as_str());
        if user.is_some() && !ticket.admit() {
            tracing::warn!(
                "a chat page's hello was refused: every connection slot is taken (--max-connections)"
            );
            close(socket, super::connection::FULL).await;
            return Ok(None);
        }
        send(socket, &reply).await?;
        if user.is_some() {
            return Ok(user);
        }
    }
}

/// The answer to a message before the hello, and the user once it is accepted.
fn hello(gateway: &Gateway, text: &str) -> (ChatOut, Option<UserName>) {
    let incoming = match viga_protocol::parse_json::<ChatIn>(text) {
        Ok(incoming) => incoming,
        Err(err) => {
            return (
                respond(None, Err(format!("unreadable message: {err}"))),
                None,
            );
        }
    };
    let ChatIn::Hello {
        message_id,
        username,
        token,
    } = incoming
    else {
        let id = message_id_of(&incoming);
        return (
            respond(
                Some(id),
                Err("say hello (with your user name and your token) first".to_owned()),
            ),
            None,
        );
    };
    if let Err(why) = check_message_id(&message_id) {
        return (respond(None, Err(why)), None);
    }
    match gateway.credentials.authenticate(&username, &token) {
        Some(user) => (
            respond(Some(message_id), Ok(json!({"user": user.as_str()}))),
            Some(user),
        ),
        None => (
            respond(Some(message_id), Err(REFUSED_HELLO.to_owned())),
            None,
        ),
    }
}

fn message_id_of(incoming: &ChatIn) -> String {
    match incoming {
        ChatIn::Hello { message_id, .. }
        | ChatIn::Query { message_id, .. }
        | ChatIn::Cancel { message_id, .. }
        | ChatIn::Recover { message_id, .. }
        | ChatIn::UseServerBlender { message_id } => message_id.clone(),
    }
}

/// The answer to one message after the hello, and what follows it for this page alone (a
/// recovered request's recorded lines).
fn handle(
    gateway: &Arc<Gateway>,
    conversation: &Arc<Conversation>,
    user: &UserName,
    text: &str,
) -> Vec<ChatOut> {
    let incoming = match viga_protocol::parse_json::<ChatIn>(text) {
        Ok(incoming) => incoming,
        Err(err) => return vec![respond(None, Err(format!("unreadable message: {err}")))],
    };
    let message_id = message_id_of(&incoming);
    let mut following = Vec::new();
    let outcome = check_message_id(&message_id).and_then(|()| match incoming {
        ChatIn::Hello { .. } => Err(format!(
            "already greeted as {user}; one connection speaks for one user"
        )),
        ChatIn::Query {
            message_id,
            text,
            username,
        } => {
            if let Some(claimed) = username
                && claimed != user.as_str()
            {
                return Err(format!(
                    "username {claimed:?} is not the user this page said hello as ({user})"
                ));
            }
            conversation.admit(&message_id)?;
            start_query(gateway, conversation, user, message_id, text)
        }
        ChatIn::Cancel {
            message_id,
            query_id,
        } => {
            conversation.admit(&message_id)?;
            Ok(json!({"cancelled": conversation.cancel(&query_id)}))
        }
        ChatIn::UseServerBlender { message_id } => {
            conversation.admit(&message_id)?;
            if !gateway
                .chat
                .as_ref()
                .is_some_and(|settings| settings.server_blenders)
            {
                return Err("this server runs no Blenders for its users (--no-server-blenders); connect yours".to_owned());
            }
            conversation.state().server_blender_chosen = true;
            conversation.publish(ChatOut::Blender {
                status: status(gateway, user),
            });
            Ok(json!({"chosen": "server"}))
        }
        ChatIn::Recover { query_id, .. } => {
            let (state, lines) = super::recovery::recover(
                gateway.sessions.files_root(),
                user,
                &query_id,
                conversation.is_running(&query_id),
            );
            following = lines;
            Ok(json!({"state": state}))
        }
    });
    let mut replies = vec![respond(Some(message_id), outcome)];
    replies.append(&mut following);
    replies
}

/// Which Blender a request goes to.
struct Chosen {
    blender: Arc<dyn BlenderTransport>,
    kind: BlenderKind,
}

/// Starts the agent on `text` for `user`; the answer names the request (`query_id`) and the
/// Blender it goes to. Refused when the server runs no agent, the request is empty or too
/// long, another request of the user's runs, or no Blender can serve it.
fn start_query(
    gateway: &Arc<Gateway>,
    conversation: &Arc<Conversation>,
    user: &UserName,
    query_id: String,
    text: String,
) -> Result<Value, String> {
    let Some(settings) = &gateway.chat else {
        return Err(
            "this server runs no agent (it was started without a model); ask whoever runs it"
                .to_owned(),
        );
    };
    let text = text.trim().to_owned();
    if text.is_empty() {
        return Err("the request is empty: say what to do with your Blender".to_owned());
    }
    if text.chars().count() > MAX_QUERY_CHARS {
        return Err(format!(
            "a request has at most {MAX_QUERY_CHARS} characters"
        ));
    }
    let earlier: Vec<EarlierTurn> = {
        let mut state = conversation.state();
        if state.server_stopping {
            return Err(
                "the server is stopping: send the request again once it is back".to_owned(),
            );
        }
        if state.running.is_some() {
            return Err(
                "a request of yours is still running: wait for it, or cancel it".to_owned(),
            );
        }
        state.running = Some(Running {
            query_id: query_id.clone(),
            canceller: None,
            cancel_asked: false,
            folder: None,
        });
        state.earlier.iter().cloned().collect()
    };
    let chosen = match choose_blender(gateway, settings, user) {
        Ok(chosen) => chosen,
        Err(why) => {
            conversation.finish(None, settings.remembered_turns);
            return Err(why);
        }
    };
    let kind = chosen.kind;
    conversation.publish(ChatOut::Request {
        query_id: query_id.clone(),
        text: text.clone(),
    });
    let request = Request {
        gateway: Arc::clone(gateway),
        conversation: Arc::clone(conversation),
        user: user.clone(),
        query_id: query_id.clone(),
        text,
        earlier,
        chosen,
    };
    tokio::spawn(request.run());
    Ok(json!({"query_id": query_id, "blender": kind}))
}

fn choose_blender(
    gateway: &Gateway,
    settings: &ChatSettings,
    user: &UserName,
) -> Result<Chosen, String> {
    let dialed = gateway.dialed.user(user);
    if dialed.is_connected() {
        return Ok(Chosen {
            blender: dialed.transport(),
            kind: BlenderKind::Desktop,
        });
    }
    if !settings.server_blenders {
        return Err(not_connected_note());
    }
    // A person whose own Blender went away is not moved to another without a word.
    let chosen = gateway.conversations.of(user).state().server_blender_chosen;
    if dialed.is_gone() && !chosen {
        return Err(gone_note(true));
    }
    let lease = gateway
        .sessions
        .lease(user)
        .map_err(|err| err.to_string())?;
    Ok(Chosen {
        blender: Arc::new(LeasedBlender::new(lease)),
        kind: BlenderKind::Server,
    })
}

/// What a person whose own Blender went away is told.
fn gone_note(server_blenders: bool) -> String {
    let choice = if server_blenders {
        "; or choose \"Use a server Blender\" to work in a Blender this server runs for you (an empty scene, the server's add-ons)"
    } else {
        ""
    };
    format!(
        "your Blender disconnected (it was closed, or its connection dropped): requests wait for it to connect again (in Blender: Preferences > Add-ons > viga > Connect){choice}"
    )
}

fn not_connected_note() -> String {
    "your Blender is not connected to this server: in Blender, open Preferences > Add-ons > viga, fill in the viga server box and press Connect".to_owned()
}

/// One request, carried out on its own task.
struct Request {
    gateway: Arc<Gateway>,
    conversation: Arc<Conversation>,
    user: UserName,
    query_id: String,
    text: String,
    earlier: Vec<EarlierTurn>,
    chosen: Chosen,
}

impl Request {
    async fn run(self) {
        let Some(settings) = &self.gateway.chat else {
            return;
        };
        let (stop, message, turn) = match self.drive(settings).await {
            Ok(outcome) => {
                // A turn whose folder cannot be read is not remembered; the answer stands.
                let turn = read_config(&outcome.folder)
                    .and_then(|config| remembered_turn(&outcome.folder, &config))
                    .ok();
                let message = match &outcome.stop {
                    StopReason::Accepted => outcome.answer.clone().unwrap_or_default(),
                    StopReason::MaxIterations => {
                        format!("stopped after {} steps without an answer", outcome.steps)
                    }
                    StopReason::Cancelled if self.conversation.state().server_stopping => {
                        super::recovery::STOPPED_BY_SERVER.to_owned()
                    }
                    StopReason::Cancelled => "cancelled by the user".to_owned(),
                    // Only a loop run's generator ends a run so; said in words all the same.
                    other @ StopReason::GeneratorEnded { .. } => other.in_words(),
                    StopReason::TimeLimit { seconds } => format!(
                        "stopped at the request's time limit ({}) without an answer",
                        viga_protocol::event::seconds_in_words(*seconds)
                    ),
                    StopReason::Failed { message, .. } => format!("failed: {message}"),
                };
                (outcome.stop, message, turn)
            }
            Err(err) => {
                let message = err.to_string();
                (
                    StopReason::failed(message.clone(), err.kind()),
                    message,
                    None,
                )
            }
        };
        tracing::info!(user = %self.user, query = %self.query_id, ?stop, "request finished");
        self.conversation.finish(turn, settings.remembered_turns);
        let exit_code = stop.exit_code();
        self.conversation.progress(
            &self.query_id,
            StreamLine::Finished {
                stop,
                message,
                final_program: None,
                exit_code,
            },
        );
        // A server Blender started by the request lists its tools only now.
        if self.chosen.kind == BlenderKind::Server {
            self.conversation.publish(ChatOut::Blender {
                status: status(&self.gateway, &self.user),
            });
        }
    }

    async fn drive(&self, settings: &ChatSettings) -> Result<AgentOutcome, CoreError> {
        let folder = UserFolder::create(self.gateway.sessions.files_root(), &self.user).map_err(
            |source| CoreError::Io {
                path: self.gateway.sessions.files_root().join(self.user.as_str()),
                source,
            },
        )?;
        let desktop = self.chosen.kind == BlenderKind::Desktop;
        let mut config = AgentConfig::new(self.text.clone());
        config.max_steps = settings.max_steps;
        config.render = settings.render;
        config.max_tokens = settings.max_tokens;
        config.provider = settings.provider.name().to_owned();
        config.model = settings.provider.model().to_owned();
        config.conversation.clone_from(&self.earlier);
        config.look_after_commands = true;
        config.model_sees = settings.model_sees;
        // A person's Blender works on their open scene and confines paths to the folder they
        // chose; a server Blender works in the user's folder here, with the server's add-ons.
        config.attached = desktop;
        config.paths = if desktop {
            PathArguments::Blender
        } else {
            PathArguments::Results
        };
        if !desktop {
            config.addons_folder.clone_from(&settings.server_addons);
        }
        let prepared = viga_domain_scene::addon_agent::prepare(config, folder.path())?;
        let mut handle = viga_domain_scene::addon_agent::start(
            prepared,
            Arc::clone(&settings.provider),
            Arc::clone(&self.chosen.blender),
        )
        .await?;
        let run_folder = handle.folder().clone();
        self.conversation
            .started(&self.query_id, handle.canceller(), run_folder.clone());
        if let Err(err) = super::recovery::remember(
            self.gateway.sessions.files_root(),
            &self.user,
            &self.query_id,
            &run_folder,
        ) {
            tracing::warn!(user = %self.user, "a request's folder is not remembered, a page that reconnects will not find it: {err}");
        }
        while let Some(timed) = handle.next_event().await {
            if let RunEvent::RenderProduced {
                index,
                render_id,
                width,
                height,
                ..
            } = &timed.event
                && let Some(png) = read_view(&run_folder, render_id)
            {
                self.conversation.publish(ChatOut::View {
                    query_id: self.query_id.clone(),
                    step: *index,
                    width: *width,
                    height: *height,
                    png_base64: base64::engine::general_purpose::STANDARD.encode(png),
                });
            }
            self.conversation
                .progress(&self.query_id, StreamLine::Event { event: timed });
        }
        let outcome = handle.wait().await?;
        if let Err(err) = viga_core::report::write_html(
            &outcome.folder,
            None,
            &viga_core::DomainKinds::new().with(std::sync::Arc::new(viga_domain_scene::SceneKind)),
        ) {
            tracing::warn!(user = %self.user, "the run's report was not written: {err}");
        }
        Ok(outcome)
    }
}

/// A render of the run, read as untrusted: a server Blender may write in the user's folder,
/// so the file must be a regular PNG inside the run folder, not a link, and not too large.
fn read_view(run_folder: &Path, render_id: &str) -> Option<Vec<u8>> {
    let relative = Path::new(render_id);
    if !relative
        .components()
        .all(|part| matches!(part, Component::Normal(_)))
    {
        return None;
    }
    // Beneath the run folder with no link anywhere on the way: a folder on the way that a
    // server Blender swapped for a link is refused too.
    let png = viga_blender::ScratchFolder::new(run_folder.to_path_buf())
        .read(relative, MAX_VIEW_BYTES)
        .ok()?;
    png.starts_with(b"\x89PNG\r\n\x1a\n").then_some(png)
}

/// Which Blender serves `user` and what it offers.
pub(super) fn status(gateway: &Gateway, user: &UserName) -> BlenderStatus {
    let view = gateway.dialed.user(user).view();
    let server_blenders = gateway
        .chat
        .as_ref()
        .is_some_and(|settings| settings.server_blenders);
    let chosen = gateway.conversations.of(user).state().server_blender_chosen;
    if view.gone && !chosen {
        return BlenderStatus {
            kind: BlenderKind::None,
            blender_version: None,
            tools: Vec::new(),
            problems: Vec::new(),
            note: gone_note(server_blenders),
            server_blender_offered: server_blenders,
        };
    }
    if view.connected {
        let (tools, problems) = view.registry.as_ref().map(offered).unwrap_or_default();
        return BlenderStatus {
            kind: BlenderKind::Desktop,
            blender_version: view.blender_version,
            tools,
            problems,
            note: "your Blender is connected: requests change the scene open there, each command one undo step".to_owned(),
            server_blender_offered: false,
        };
    }
    if server_blenders {
        let (tools, problems) = gateway
            .sessions
            .started_addons(user)
            .as_ref()
            .map(offered)
            .unwrap_or_default();
        return BlenderStatus {
            kind: BlenderKind::Server,
            blender_version: None,
            tools,
            problems,
            note: "your own Blender is not connected: requests go to a Blender this server runs for you (contained, with the server's add-ons); connect yours to work on your own scene".to_owned(),
            server_blender_offered: false,
        };
    }
    BlenderStatus {
        kind: BlenderKind::None,
        blender_version: None,
        tools: Vec::new(),
        problems: Vec::new(),
        note: not_connected_note(),
        server_blender_offered: false,
    }
}

/// The tools of `registry` as the page lists them, and why other add-ons are not offered.
fn offered(registry: &AddonRegistry) -> (Vec<OfferedTool>, Vec<String>) {
    let tools = registry
        .adapters()
        .iter()
        .map(|adapter| {
            let tool = adapter.manifest_tool();
            OfferedTool {
                addon: adapter.addon_id().to_owned(),
                name: tool.name.clone(),
                description: tool.description.clone(),
                parameters: tool
                    .parameters
                    .iter()
                    .map(|parameter| {
                        let kind = serde_json::to_value(parameter.kind)
                            .ok()
                            .and_then(|kind| kind.as_str().map(str::to_owned))
                            .unwrap_or_default();
                        let optional = if parameter.required { "" } else { "?" };
                        format!("{}{optional}: {kind}", parameter.name)
                    })
                    .collect(),
            }
        })
        .collect();
    let problems = registry
        .problems()
        .iter()
        .map(ToString::to_string)
        .collect();
    (tools, problems)
}

async fn send(socket: &mut Socket, message: &ChatOut) -> Result<(), ConnectionEnd> {
    let text = serde_json::to_string(message).unwrap_or_default();
    timeout(Duration::from_secs(30), socket.send(Message::text(text)))
        .await
        .map_err(|_| ConnectionEnd::SendTimeout(Duration::from_secs(30)))??;
    Ok(())
}

/// Waits until the server stops.
async fn server_stops(stopping: &mut tokio::sync::watch::Receiver<bool>) {
    // The borrow ends before each await: the guard must not live across one.
    while !*stopping.borrow_and_update() {
        if stopping.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// Closes a page's connection as the server stops ("going away"): the page reconnects when
/// the server is back.
async fn going_away(socket: &mut Socket) {
    let frame = CloseFrame {
        code: CloseCode::Away,
        reason: "the server is stopping".into(),
    };
    let _ = timeout(Duration::from_secs(1), socket.close(Some(frame))).await;
}

async fn close(socket: &mut Socket, reason: &str) {
    let frame = CloseFrame {
        code: CloseCode::Policy,
        reason: reason.to_owned().into(),
    };
    let _ = timeout(Duration::from_secs(1), socket.close(Some(frame))).await;
}
