//! Sessions: one Blender per user, started on the user's first hello, capped in number, and
//! stopped once the user has been away (no connection open) for the idle limit.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use viga_blender::StartBlender as _;

use async_trait::async_trait;
use serde_json::Value;
use tokio::sync::OnceCell;
use viga_blender::{
    Access, BlenderCommands as _, BlenderLauncher, BlenderTransport, ContainedWorkers, StartError,
    TransportError, Worker, WorkerRequest,
};
use viga_protocol::bridge::{BridgeCommand, SceneReset};
use viga_skills::ToolError;
use viga_skills::addons::{AddonRegistry, discover};

use super::credentials::UserName;
use super::files::UserFolder;
use super::replay::{REPLAY_WINDOW, ReplayWindow};

/// A user's Blender as the gateway holds it.
#[async_trait]
pub trait SessionBlender: Send + Sync {
    fn transport(&self) -> &dyn BlenderTransport;
    /// Stops Blender; called once, when the session is reaped or the gateway stops.
    async fn stop(self: Box<Self>);
}

#[async_trait]
impl SessionBlender for Worker {
    fn transport(&self) -> &dyn BlenderTransport {
        self
    }

    async fn stop(self: Box<Self>) {
        self.shutdown().await;
    }
}

/// What a [`SessionFactory`] starts for a user.
pub struct StartedSession {
    pub blender: Box<dyn SessionBlender>,
    /// The add-ons whose commands the user may run (their path parameters are confined to
    /// the user's folder).
    pub addons: AddonRegistry,
}

impl std::fmt::Debug for StartedSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StartedSession")
            .field("blender", &self.blender.transport().describe())
            .field("addons", &self.addons.ids())
            .finish_non_exhaustive()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SessionStartError {
    #[error(transparent)]
    Blender(#[from] TransportError),
    #[error(transparent)]
    Contained(#[from] StartError),
    #[error("the gateway's setup program failed: {0}")]
    Setup(String),
    #[error("the add-ons could not be loaded: {0}")]
    Addons(#[from] ToolError),
    #[error("the user's folder could not be made: {0}")]
    Folder(#[source] std::io::Error),
}

/// Starts the Blender of a new session, whose files are in `folder` (the user's own,
/// absolute and without links). The gateway calls it once per session, never beyond its
/// cap; [`BlenderSessions`] is the real one, and load tests give a cheap one.
#[async_trait]
pub trait SessionFactory: Send + Sync {
    async fn start(
        &self,
        user: &UserName,
        folder: &Path,
    ) -> Result<StartedSession, SessionStartError>;
}

/// A Blender worker per user, with a setup program run on a fresh factory scene and the
/// add-ons of a folder loaded.
#[derive(Debug, Clone)]
pub struct BlenderSessions {
    pub launcher: BlenderLauncher,
    /// Add-on packages to load in each user's Blender.
    pub addons_folder: Option<PathBuf>,
    /// A program run on a fresh factory scene when a user's Blender starts.
    pub setup_code: Option<String>,
    /// How each user's Blender is contained: it reads the add-ons and writes in the user's
    /// own folder and nowhere else (a policy that is off runs it uncontained).
    pub contained: ContainedWorkers,
}

#[async_trait]
impl SessionFactory for BlenderSessions {
    async fn start(
        &self,
        user: &UserName,
        folder: &Path,
    ) -> Result<StartedSession, SessionStartError> {
        let access = Access {
            readable: self.addons_folder.iter().cloned().collect(),
            writable: vec![folder.to_path_buf()],
        };
        let request =
            WorkerRequest::new(self.launcher.clone(), access).named(format!("user-{user}"));
        let worker = self.contained.start(&request).await?;
        let setup = self.setup_code.as_deref().unwrap_or_default();
        let result = worker
            .execute(setup, Some(SceneReset::Factory), None)
            .await?;
        if let Some(error) = result.error {
            return Err(SessionStartError::Setup(error.to_string()));
        }
        let mut addons = AddonRegistry::new();
        for problem in discover(&worker, self.addons_folder.as_deref(), &mut addons).await? {
            tracing::warn!(%user, "add-on skipped: {problem}");
        }
        Ok(StartedSession {
            blender: Box::new(worker),
            addons,
        })
    }
}

/// A user's running session.
pub(crate) struct Session {
    pub(crate) user: UserName,
    blender: Box<dyn SessionBlender>,
    pub(crate) addons: AddonRegistry,
    pub(crate) folder: UserFolder,
    seen: Mutex<ReplayWindow>,
}

impl Session {
    pub(crate) fn blender(&self) -> &dyn BlenderTransport {
        self.blender.transport()
    }

    /// Refuses a message id this session has seen among its last [`REPLAY_WINDOW`].
    pub(crate) fn admit(&self, message_id: &str) -> Result<(), String> {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        if seen.admit(message_id) {
            Ok(())
        } else {
            Err(format!(
                "message id {message_id:?} was already used; replayed messages are refused"
            ))
        }
    }
}

/// A user's place in the session table; the session fills it once its Blender has started.
struct SessionSlot {
    user: UserName,
    session: OnceCell<Session>,
}

/// Who holds a slot: reaping needs the number of open connections and when the last one
/// closed. A command needs an open connection, so that is also when the last command came.
struct Occupancy {
    slot: Arc<SessionSlot>,
    connections: usize,
    last_active: Instant,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum SessionRefused {
    #[error("the gateway serves at most {0} users at once; try again later")]
    Full(usize),
    #[error("your session could not start: {0}")]
    Start(#[from] SessionStartError),
}

/// Every user's session, at most `max_sessions` of them.
pub(crate) struct Sessions {
    factory: Arc<dyn SessionFactory>,
    /// From `files::prepare_files_root`.
    files_root: PathBuf,
    max_sessions: usize,
    idle_limit: Duration,
    table: Mutex<HashMap<UserName, Occupancy>>,
}

impl Sessions {
    pub(crate) fn new(
        factory: Arc<dyn SessionFactory>,
        files_root: PathBuf,
        max_sessions: usize,
        idle_limit: Duration,
    ) -> Arc<Self> {
        Arc::new(Self {
            factory,
            files_root,
            max_sessions,
            idle_limit,
            table: Mutex::new(HashMap::new()),
        })
    }

    /// Where every user's folder is (absolute, without links).
    pub(crate) fn files_root(&self) -> &Path {
        &self.files_root
    }

    /// The add-ons of `user`'s session, once its Blender has started.
    pub(crate) fn started_addons(&self, user: &UserName) -> Option<AddonRegistry> {
        let slot = Arc::clone(&self.table().get(user)?.slot);
        slot.session.get().map(|session| session.addons.clone())
    }

    /// The table is only ever held for a few map operations, never across an await, so a
    /// panic elsewhere cannot leave it half-changed: a poisoned lock is taken over.
    fn table(&self) -> MutexGuard<'_, HashMap<UserName, Occupancy>> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A connection's claim on `user`'s session, refused when the user has none and the
    /// gateway already serves `max_sessions` users. While held, the session is not reaped.
    pub(crate) fn lease(self: &Arc<Self>, user: &UserName) -> Result<Lease, SessionRefused> {
        let mut table = self.table();
        let full = table.len() >= self.max_sessions;
        let occupancy = match table.entry(user.clone()) {
            Entry::Occupied(occupied) => occupied.into_mut(),
            Entry::Vacant(_) if full => return Err(SessionRefused::Full(self.max_sessions)),
            Entry::Vacant(vacant) => vacant.insert(Occupancy {
                slot: Arc::new(SessionSlot {
                    user: user.clone(),
                    session: OnceCell::new(),
                }),
                connections: 0,
                last_active: Instant::now(),
            }),
        };
        occupancy.connections += 1;
        occupancy.last_active = Instant::now();
        Ok(Lease {
            sessions: Arc::clone(self),
            slot: Arc::clone(&occupancy.slot),
        })
    }

    async fn start(&self, user: &UserName) -> Result<Session, SessionStartError> {
        let folder =
            UserFolder::create(&self.files_root, user).map_err(SessionStartError::Folder)?;
        let started = self.factory.start(user, folder.path()).await?;
        tracing::info!(%user, "session started");
        Ok(Session {
            user: user.clone(),
            blender: started.blender,
            addons: started.addons,
            folder,
            seen: Mutex::new(ReplayWindow::new(REPLAY_WINDOW)),
        })
    }

    /// Stops the sessions whose users have had no connection open for the idle limit, and
    /// frees the slots of sessions that failed to start and that nobody waits on.
    pub(crate) async fn reap_idle(&self) {
        let reaped: Vec<Arc<SessionSlot>> = {
            let mut table = self.table();
            let away: Vec<UserName> = table
                .iter()
                .filter(|(_, held)| {
                    held.connections == 0
                        && (held.slot.session.get().is_none()
                            || held.last_active.elapsed() >= self.idle_limit)
                })
                .map(|(user, _)| user.clone())
                .collect();
            away.iter()
                .filter_map(|user| table.remove(user))
                .map(|held| held.slot)
                .collect()
        };
        for slot in reaped {
            stop(slot).await;
        }
    }

    /// Reaps idle sessions until the task is dropped, checking often enough that a
    /// session outlives its idle limit by at most a quarter of it (or 30 s).
    pub(crate) async fn reap_forever(&self) {
        let period =
            (self.idle_limit / 4).clamp(Duration::from_millis(50), Duration::from_secs(30));
        let mut ticker = tokio::time::interval(period);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            self.reap_idle().await;
        }
    }

    /// Stops every session (the gateway is shutting down).
    pub(crate) async fn stop_all(&self) {
        let slots: Vec<Arc<SessionSlot>> =
            self.table().drain().map(|(_, held)| held.slot).collect();
        for slot in slots {
            stop(slot).await;
        }
    }
}

async fn stop(slot: Arc<SessionSlot>) {
    match Arc::try_unwrap(slot) {
        Ok(slot) => {
            if let Some(session) = slot.session.into_inner() {
                tracing::info!(user = %session.user, "session stopped");
                session.blender.stop().await;
            }
        }
        // A connection that has just closed may not have let go of it yet; a worker's
        // Blender is killed when its last holder drops it.
        Err(shared) => {
            tracing::debug!(user = %shared.user, "session still referenced; its Blender stops with the last reference")
        }
    }
}

/// A connection's hold on its user's session (see [`Sessions::lease`]).
pub(crate) struct Lease {
    sessions: Arc<Sessions>,
    slot: Arc<SessionSlot>,
}

impl Lease {
    pub(crate) fn user(&self) -> &UserName {
        &self.slot.user
    }

    /// The session, starting its Blender on the user's first hello; concurrent first
    /// hellos of one user wait for one start, and a failed start is tried again next time.
    pub(crate) async fn session(&self) -> Result<&Session, SessionStartError> {
        self.slot
            .session
            .get_or_try_init(|| self.sessions.start(&self.slot.user))
            .await
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let mut table = self.sessions.table();
        if let Some(held) = table.get_mut(&self.slot.user)
            && Arc::ptr_eq(&held.slot, &self.slot)
        {
            held.connections = held.connections.saturating_sub(1);
            held.last_active = Instant::now();
        }
    }
}

/// A user's server Blender as a transport the agent can hold: it keeps the session leased
/// (so it is not reaped while a request runs) and starts its Blender on the first call.
pub(crate) struct LeasedBlender {
    lease: Lease,
}

impl LeasedBlender {
    pub(crate) fn new(lease: Lease) -> Self {
        Self { lease }
    }
}

#[async_trait]
impl BlenderTransport for LeasedBlender {
    async fn call(
        &self,
        command: BridgeCommand,
        timeout: Option<Duration>,
    ) -> Result<Value, TransportError> {
        let session = self
            .lease
            .session()
            .await
            .map_err(|err| TransportError::Start(err.to_string()))?;
        session.blender().call(command, timeout).await
    }

    async fn distrust(&self, why: &str) -> viga_blender::Recovery {
        match self.lease.session().await {
            Ok(session) => session.blender().distrust(why).await,
            Err(err) => viga_blender::Recovery::RestartFailed(err.to_string()),
        }
    }

    fn describe(&self) -> String {
        format!("{}'s Blender on the server", self.lease.user())
    }
}
