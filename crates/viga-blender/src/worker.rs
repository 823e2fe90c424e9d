//! A warm Blender worker: one long-lived Blender process running the bridge, with a
//! per-call timeout. A worker that hangs or dies is killed and restarted, and its scene is
//! restored from the last checkpoint (failure class E0); the caller is told what happened.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex as SyncMutex};
use std::time::Duration;

use async_trait::async_trait;
use rand::RngCore as _;
use serde::Deserialize;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt as _, AsyncRead, BufReader};
use tokio::process::{Child, ChildStdout, Command};
use tokio::sync::Mutex;
use viga_protocol::bridge::{
    BridgeCommand, HelloInfo, PARENT_PID_ENV, PROGRAM_LOG_ENV, READY_MARKER, TOKEN_ENV,
};

use crate::bridge::{BridgeMode, write_bridge_script};
use crate::client::{CallError, FramedClient, transport_error};
use crate::locate::BlenderLauncher;
use crate::transport::{BlenderTransport, LostReason, Recovery, TransportError};
use viga_process::ScratchFolder;
use viga_sandbox::{Access, CONTAINED_MARKER, Containment, ContainmentStatus};

/// The bridge's socket in a contained worker's scratch folder.
const SOCKET_NAME: &str = "bridge.sock";
/// Where the bridge keeps the end of the running program's output (`VIGA_PROGRAM_LOG`), in
/// the worker's scratch folder; the file before it is this name with `.1` added.
const PROGRAM_LOG: &str = "program-output.log";
/// The most of a program's last output viga reads back.
const PROGRAM_LOG_TAIL_BYTES: u64 = 64 * 1024;
/// Lines of Blender's error output kept for crash reports.
const STDERR_TAIL_LINES: usize = 40;
/// The longest line of Blender's output viga keeps. A program can write to the process's
/// own stdout without a newline for as long as it likes; the rest of such a line is skipped
/// as it arrives instead of piling up in viga's memory.
const MAX_OUTPUT_LINE_BYTES: usize = 8 * 1024;

#[derive(Debug, Clone)]
pub struct WorkerConfig {
    pub launcher: BlenderLauncher,
    /// Default limit for one call; a call may pass its own.
    pub call_timeout: Duration,
    /// Limit for Blender to start and announce its port.
    pub startup_timeout: Duration,
    pub mode: BridgeMode,
    /// Name used in logs.
    pub name: String,
    /// Start Blender contained (no network, reads and writes only in named folders, no
    /// session socket, its processes ending with it): for workers that run model-written
    /// programs. The worker adds its own scratch folder, Blender's install and the bridge.
    pub containment: Option<Containment>,
    /// Variables the programs see besides the allowlisted environment: where things are
    /// (`VIGA_ASSETS_DIR`), never a secret.
    pub program_env: Vec<(String, PathBuf)>,
}

impl WorkerConfig {
    pub fn new(launcher: BlenderLauncher) -> Self {
        Self {
            launcher,
            call_timeout: Duration::from_secs(300),
            startup_timeout: Duration::from_secs(120),
            mode: BridgeMode::Serve,
            name: "blender".to_owned(),
            containment: None,
            program_env: Vec::new(),
        }
    }
}

#[derive(Debug)]
struct Running {
    child: Child,
    client: FramedClient,
    stderr_tail: Arc<SyncMutex<VecDeque<String>>>,
    containment: ContainmentStatus,
    /// A contained Blender's launcher leads a session and process group of its own, which
    /// is killed whole with it.
    own_group: OwnGroup,
    /// A contained Blender's own process id (as this process sees it, from its hello, said
    /// before any program ran). Blender may leave its launcher's group, so it is killed by
    /// id too; in a PID namespace of its own that ends every process it started.
    program: Option<u32>,
}

impl Running {
    /// SIGKILLs a contained Blender and its launcher's process group, once. Blender is
    /// killed by id only while its launcher runs: the launcher is its parent, so until then
    /// the id cannot have been given to another process.
    fn kill_own_group(&mut self) {
        if let Some(program) = self.program.take()
            && matches!(self.child.try_wait(), Ok(None))
        {
            kill_process(program);
        }
        self.own_group.kill();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.kill_own_group();
    }
}

/// The process group a contained Blender's launcher leads (its id), killed whole when
/// dropped: a program's leftover processes do not outlive their Blender, and a Blender that
/// failed to start is not left behind either.
#[derive(Debug)]
struct OwnGroup(Option<u32>);

impl OwnGroup {
    /// SIGKILLs the group, once. Called while the leader is not yet reaped where possible,
    /// so the group id cannot have been reused.
    fn kill(&mut self) {
        if let Some(group) = self.0.take() {
            kill_group(group);
        }
    }
}

impl Drop for OwnGroup {
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(target_os = "linux")]
fn kill_group(group: u32) {
    if let Ok(group) = i32::try_from(group) {
        // Already gone is fine: the group died with its Blender.
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(group),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

#[cfg(target_os = "linux")]
fn kill_process(pid: u32) {
    if let Ok(pid) = i32::try_from(pid) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

#[cfg(not(target_os = "linux"))]
fn kill_group(_group: u32) {}

#[cfg(not(target_os = "linux"))]
fn kill_process(_pid: u32) {}

#[derive(Debug)]
struct State {
    running: Option<Running>,
    /// The last checkpoint written through this worker; restored after a restart.
    checkpoint: Option<PathBuf>,
}

/// A supervised Blender process. Calls are answered one at a time, in order.
#[derive(Debug)]
pub struct Worker {
    config: WorkerConfig,
    state: Mutex<State>,
    /// Holds the worker's checkpoints, and is a contained Blender's temporary folder and
    /// the place of its bridge's socket; kept only so it is removed with the worker.
    _state_dir: viga_process::PrivateFolder,
    /// The same folder by its real path, as it is named to Blender and read: only files viga
    /// named, no link followed.
    scratch: ScratchFolder,
    /// What containment Blender runs under, as the launcher of the running process reported
    /// it.
    containment: SyncMutex<ContainmentStatus>,
    restarts: AtomicU32,
    hello: HelloInfo,
    /// Microseconds Blender reported busy, over every process this worker ran.
    busy_us: Arc<AtomicU64>,
}

impl Worker {
    /// Starts Blender and completes the handshake.
    pub async fn start(config: WorkerConfig) -> Result<Self, TransportError> {
        let state_dir = viga_process::private_folder("viga-worker-").map_err(|err| {
            TransportError::Start(format!("could not create the worker's state folder: {err}"))
        })?;
        // By its real path, the one the launcher grants: the worker is told this one, and a
        // checkpoint path that comes back resolved is recognised as the folder's own.
        let scratch = ScratchFolder::new(viga_io::files::real_path(state_dir.path()));
        let busy_us = Arc::new(AtomicU64::new(0));
        let running = spawn(&config, scratch.path(), &busy_us).await?;
        let hello = running.client.hello().clone();
        let containment = running.containment.clone();
        tracing::info!(
            worker = %config.name,
            blender = %hello.blender_version,
            pid = hello.pid,
            "Blender worker ready"
        );
        Ok(Self {
            config,
            state: Mutex::new(State {
                running: Some(running),
                checkpoint: None,
            }),
            scratch,
            _state_dir: state_dir,
            containment: SyncMutex::new(containment),
            restarts: AtomicU32::new(0),
            hello,
            busy_us,
        })
    }

    /// Total time Blender reported spending on this worker's requests (its own work, without
    /// transport and process overhead).
    pub fn blender_busy(&self) -> Duration {
        Duration::from_micros(self.busy_us.load(Ordering::Relaxed))
    }

    /// The handshake of the first process (Blender version, capabilities).
    pub fn hello(&self) -> &HelloInfo {
        &self.hello
    }

    /// What containment Blender runs under.
    pub fn containment(&self) -> ContainmentStatus {
        self.containment
            .lock()
            .map(|status| status.clone())
            .unwrap_or_else(|poisoned| poisoned.into_inner().clone())
    }

    /// How many times the process was restarted.
    pub fn restarts(&self) -> u32 {
        self.restarts.load(Ordering::Relaxed)
    }

    /// Saves the scene to the worker's checkpoint file; a restart restores it.
    pub async fn checkpoint(&self) -> Result<PathBuf, TransportError> {
        let path = self.scratch.full_path(Path::new("checkpoint.blend"));
        let command = BridgeCommand::Checkpoint {
            path: path.to_string_lossy().into_owned(),
        };
        self.call(command, None).await?;
        Ok(path)
    }

    /// Asks Blender to exit, and kills it if it does not within a few seconds.
    pub async fn shutdown(self) {
        let mut state = self.state.lock().await;
        if let Some(mut running) = state.running.take() {
            // A contained Blender's scene is thrown away with it: its group is killed at
            // once, before anything reaps the leader.
            running.kill_own_group();
            let _ = running
                .client
                .request(BridgeCommand::Shutdown, Some(Duration::from_secs(5)))
                .await;
            if tokio::time::timeout(Duration::from_secs(5), running.child.wait())
                .await
                .is_err()
            {
                let _ = running.child.kill().await;
            }
        }
    }

    async fn restart(&self, state: &mut State) -> Recovery {
        self.restarts.fetch_add(1, Ordering::Relaxed);
        // Room for the next program: the lost one may have filled the folder to its limit.
        let rotated = PathBuf::from(PROGRAM_LOG).with_extension("log.1");
        let checkpoint = state
            .checkpoint
            .as_ref()
            .filter(|path| path.parent() == Some(self.scratch.path()))
            .and_then(|path| path.file_name())
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        self.scratch.empty_except(&[
            &checkpoint,
            PROGRAM_LOG,
            &rotated.to_string_lossy(),
            viga_process::OWNER_FILE,
        ]);
        let running = match spawn(&self.config, self.scratch.path(), &self.busy_us).await {
            Ok(running) => {
                if let Ok(mut status) = self.containment.lock() {
                    status.clone_from(&running.containment);
                }
                running
            }
            Err(err) => {
                state.running = None;
                // The reason alone: it is said again as a start failure, with that prefix.
                let why = match err {
                    TransportError::Start(why) => why,
                    other => other.to_string(),
                };
                return Recovery::RestartFailed(why);
            }
        };
        let mut restored_checkpoint = None;
        if let Some(path) = &state.checkpoint {
            let command = BridgeCommand::LoadBlend {
                path: path.to_string_lossy().into_owned(),
            };
            match running
                .client
                .request(command, Some(self.config.call_timeout))
                .await
            {
                Ok(_) => restored_checkpoint = Some(path.clone()),
                Err(err) => {
                    tracing::warn!(worker = %self.config.name, "checkpoint not restored: {err}")
                }
            }
        }
        state.running = Some(running);
        Recovery::Restarted {
            restored_checkpoint,
        }
    }
}

#[async_trait]
impl BlenderTransport for Worker {
    async fn call(
        &self,
        command: BridgeCommand,
        timeout: Option<Duration>,
    ) -> Result<Value, TransportError> {
        // A contained Blender reaches its inputs only by the real paths they were granted by.
        let command = crate::real_paths::with_real_paths(command);
        let name = command.name();
        let checkpoint_path = match &command {
            BridgeCommand::Checkpoint { path } => Some(PathBuf::from(path)),
            _ => None,
        };
        let mut state = self.state.lock().await;
        if state.running.is_none() {
            // An earlier restart failed; try again before giving up on this call.
            if let Recovery::RestartFailed(why) = self.restart(&mut state).await {
                return Err(TransportError::Start(why));
            }
        }
        let Some(running) = state.running.as_mut() else {
            return Err(TransportError::Start(
                "the worker is not running".to_owned(),
            ));
        };
        match running.client.request(command, timeout).await {
            Ok(value) => {
                if checkpoint_path.is_some() {
                    state.checkpoint = checkpoint_path;
                }
                Ok(value)
            }
            // The bridge answered (a refusal, or a reply viga cannot read): Blender is fine.
            Err(err) if err.leaves_connection_usable() => {
                Err(transport_error(name, err, Recovery::None))
            }
            Err(err) => {
                let reason = lost_reason(running, &err).await;
                // Before the restart: a process the program left must not outlive it.
                running.kill_own_group();
                let _ = running.child.kill().await;
                let recovery = self.restart(&mut state).await;
                tracing::warn!(worker = %self.config.name, command = name, %reason, %recovery, "Blender worker lost (E0)");
                Err(TransportError::Lost {
                    command: name,
                    reason,
                    recovery,
                })
            }
        }
    }

    fn shared_folder(&self) -> Option<&ScratchFolder> {
        Some(&self.scratch)
    }

    async fn distrust(&self, why: &str) -> Recovery {
        let mut state = self.state.lock().await;
        if let Some(mut running) = state.running.take() {
            running.kill_own_group();
            let _ = running.child.kill().await;
        }
        let recovery = self.restart(&mut state).await;
        tracing::warn!(worker = %self.config.name, %why, %recovery, "a reply of Blender was refused; Blender replaced");
        recovery
    }

    fn containment(&self) -> Option<ContainmentStatus> {
        Some(Worker::containment(self))
    }

    fn last_program_output(&self) -> Option<String> {
        let log = Path::new(PROGRAM_LOG);
        // Written by the program's Blender: read as untrusted (no links, bounded).
        let mut bytes = (self.scratch)
            .read_tail(&log.with_extension("log.1"), PROGRAM_LOG_TAIL_BYTES)
            .unwrap_or_default();
        bytes.extend(self.scratch.read_tail(log, PROGRAM_LOG_TAIL_BYTES).ok()?);
        let start = bytes.len().saturating_sub(PROGRAM_LOG_TAIL_BYTES as usize);
        Some(String::from_utf8_lossy(&bytes[start..]).into_owned())
    }

    fn describe(&self) -> String {
        format!(
            "{} ({}, Blender {})",
            self.config.name,
            self.config.launcher.describe(),
            self.hello.blender_version
        )
    }
}

/// Tells a hang from a crash: after a broken connection, give the process a moment to exit.
async fn lost_reason(running: &mut Running, err: &CallError) -> LostReason {
    if let CallError::Timeout(limit) = err {
        return LostReason::Timeout(*limit);
    }
    match tokio::time::timeout(Duration::from_secs(3), running.child.wait()).await {
        Ok(Ok(status)) => {
            // The launcher's last line (a limit it stopped the program for) may still be
            // on its way from the pipe.
            tokio::time::sleep(Duration::from_millis(100)).await;
            let tail = running
                .stderr_tail
                .lock()
                .map(|lines| lines.iter().cloned().collect::<Vec<_>>().join("\n"))
                .unwrap_or_default();
            if tail.is_empty() {
                LostReason::Exited(status.to_string())
            } else {
                LostReason::Exited(format!("{status}; last error output:\n{tail}"))
            }
        }
        _ => LostReason::Disconnected(err.to_string()),
    }
}

#[derive(Debug, Deserialize)]
struct Ready {
    /// 0 from a contained bridge, which listens on the Unix socket viga named instead.
    #[serde(default)]
    port: u16,
}

/// Starts Blender running the bridge, waits for it to announce its port, and connects.
/// `scratch` is the worker's own private folder.
async fn spawn(
    config: &WorkerConfig,
    scratch: &Path,
    busy_us: &Arc<AtomicU64>,
) -> Result<Running, TransportError> {
    let script = write_bridge_script().map_err(|err| {
        TransportError::Start(format!("could not write the bridge script: {err}"))
    })?;
    let token = random_token();
    let mut child = start_blender(config, &script, scratch, &token)?;
    // Killed whole if Blender does not get as far as the handshake.
    let own_group = OwnGroup(config.containment.as_ref().and_then(|_| child.id()));
    let (stderr_tail, mut stderr_reader) = keep_stderr_tail(&mut child, &config.name);
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| TransportError::Start("Blender's output could not be read".to_owned()))?;
    let mut lines = OutputLines::new(stdout);
    let (ready, reported) = wait_for_port(
        config,
        &mut child,
        &mut lines,
        (&stderr_tail, stderr_reader.as_mut()),
    )
    .await?;
    log_stdout(lines, config.name.clone());
    let (client, containment) = match &config.containment {
        // The socket viga named, whatever else the process printed.
        Some(_) => {
            let Some(status) = reported else {
                let _ = child.kill().await;
                return Err(TransportError::Start(
                    "the containment launcher did not say what containment Blender runs under"
                        .to_owned(),
                ));
            };
            let socket = scratch.join(SOCKET_NAME);
            (
                connect_unix(&socket, &token, config.call_timeout).await?,
                status,
            )
        }
        None => {
            let address = SocketAddr::from((Ipv4Addr::LOCALHOST, ready.port));
            let client = FramedClient::connect(address, &token, config.call_timeout).await?;
            (client, ContainmentStatus::off())
        }
    };
    let program = config.containment.as_ref().map(|_| client.hello().pid);
    Ok(Running {
        child,
        client: client.sharing_busy_counter(Arc::clone(busy_us)),
        stderr_tail,
        containment,
        own_group,
        program,
    })
}

#[cfg(unix)]
async fn connect_unix(
    socket: &Path,
    token: &str,
    call_timeout: Duration,
) -> Result<FramedClient, TransportError> {
    FramedClient::connect_unix(socket, token, call_timeout).await
}

#[cfg(not(unix))]
async fn connect_unix(
    socket: &Path,
    _token: &str,
    _call_timeout: Duration,
) -> Result<FramedClient, TransportError> {
    Err(TransportError::Start(format!(
        "the bridge announced a Unix socket ({}), which this system cannot connect to",
        socket.display()
    )))
}

/// A folder for the GPU driver's compiled kernels where an NVIDIA GPU is present
/// (`$XDG_CACHE_HOME/viga/gpu-kernels`, else `~/.cache/viga/gpu-kernels`); `None` without
/// one, or when it cannot be made.
fn gpu_kernel_cache() -> Option<PathBuf> {
    if !Path::new("/dev/nvidiactl").exists() {
        return None;
    }
    let cache = viga_io::files::user_cache_dir("gpu-kernels")?;
    std::fs::create_dir_all(&cache).ok()?;
    Some(cache)
}

/// The bridge's socket in a contained worker's scratch folder. A socket left by a Blender
/// that died is removed first, or the new bridge could not bind it.
fn contained_socket(scratch: &Path) -> Result<PathBuf, TransportError> {
    let socket = scratch.join(SOCKET_NAME);
    match std::fs::remove_file(&socket) {
        Ok(()) => {}
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
        Err(err) => {
            return Err(TransportError::Start(format!(
                "could not remove the old bridge socket {}: {err}",
                socket.display()
            )));
        }
    }
    Ok(socket)
}

/// The Blender process, with the bridge's token and this process's id in its environment
/// and its output piped; it is killed when dropped.
fn start_blender(
    config: &WorkerConfig,
    script: &Path,
    scratch: &Path,
    token: &str,
) -> Result<Child, TransportError> {
    let mut args: Vec<OsString> = vec!["--mode".into(), config.mode.as_arg().into()];
    if config.containment.is_some() {
        args.push("--unix".into());
        args.push(contained_socket(scratch)?.into());
    }
    let (program, args) = config.launcher.command_line(script, &args);
    let gpu_cache = config.containment.as_ref().and_then(|_| gpu_kernel_cache());
    let (program, args) = match &config.containment {
        Some(containment) => {
            let mut access = Access {
                readable: config.launcher.install_folders(),
                writable: vec![scratch.to_path_buf()],
            };
            access
                .readable
                .extend(script.parent().map(Path::to_path_buf));
            access.writable.extend(gpu_cache.clone());
            containment
                .command_line(&access, program, args)
                .map_err(|err| TransportError::Start(err.to_string()))?
        }
        None => (program, args),
    };
    let mut command = Command::new(&program);
    // Model-written programs run in this Blender: it gets no secret of this process.
    crate::environment::restrict(&mut command);
    if config.containment.is_some() {
        // Its temporary files go where it may write.
        command.env("TMPDIR", scratch);
    }
    if let Some(cache) = &gpu_cache {
        // OptiX and CUDA keep compiled kernels where a contained Blender may write, shared by
        // every worker, instead of compiling them again at each start.
        command
            .env("OPTIX_CACHE_PATH", cache.join("optix"))
            .env("CUDA_CACHE_PATH", cache.join("cuda"));
    }
    command.env(PROGRAM_LOG_ENV, scratch.join(PROGRAM_LOG));
    command.envs(config.program_env.iter().map(|(name, path)| (name, path)));
    command
        .args(&args)
        .env(TOKEN_ENV, token)
        .env(PARENT_PID_ENV, std::process::id().to_string())
        .env("PYTHONUNBUFFERED", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|err| TransportError::Start(format!("could not run {}: {err}", program.display())))
}

/// Logs Blender's error output as it comes and keeps its last [`STDERR_TAIL_LINES`] lines for
/// crash reports; the task that reads it ends with the output.
fn keep_stderr_tail(
    child: &mut Child,
    name: &str,
) -> (
    Arc<SyncMutex<VecDeque<String>>>,
    Option<tokio::task::JoinHandle<()>>,
) {
    let stderr_tail = Arc::new(SyncMutex::new(VecDeque::new()));
    let mut reader = None;
    if let Some(stderr) = child.stderr.take() {
        let tail = Arc::clone(&stderr_tail);
        let name = name.to_owned();
        reader = Some(tokio::spawn(async move {
            let mut lines = OutputLines::new(stderr);
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::debug!(target: "viga_blender::stderr", worker = %name, "{line}");
                if let Ok(mut tail) = tail.lock() {
                    if tail.len() == STDERR_TAIL_LINES {
                        tail.pop_front();
                    }
                    tail.push_back(line);
                }
            }
        }));
    }
    (stderr_tail, reader)
}

/// The bridge's ready announcement, within the startup limit. When Blender exits first the
/// error carries its exit status and last error output; when it takes too long it is killed.
async fn wait_for_port(
    config: &WorkerConfig,
    child: &mut Child,
    lines: &mut OutputLines<ChildStdout>,
    (stderr_tail, stderr_reader): (
        &SyncMutex<VecDeque<String>>,
        Option<&mut tokio::task::JoinHandle<()>>,
    ),
) -> Result<(Ready, Option<ContainmentStatus>), TransportError> {
    match tokio::time::timeout(config.startup_timeout, wait_for_ready(lines)).await {
        Ok((Some(ready), containment)) => Ok((ready, containment)),
        Ok((None, _)) => {
            let status = child
                .wait()
                .await
                .map(|s| s.to_string())
                .unwrap_or_default();
            // Its last words (a launcher's refusal) may still be on their way.
            if let Some(reader) = stderr_reader {
                let _ = tokio::time::timeout(Duration::from_secs(1), reader).await;
            }
            let tail = stderr_tail
                .lock()
                .map(|lines| lines.iter().cloned().collect::<Vec<_>>().join("\n"))
                .unwrap_or_default();
            Err(TransportError::Start(format!(
                "Blender exited before the bridge was ready ({status}):\n{tail}"
            )))
        }
        Err(_) => {
            let _ = child.kill().await;
            Err(TransportError::Start(format!(
                "the bridge did not announce its port within {:?}",
                config.startup_timeout
            )))
        }
    }
}

/// Logs the rest of Blender's standard output, so the pipe never fills up and blocks it.
fn log_stdout(mut lines: OutputLines<ChildStdout>, name: String) {
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            tracing::debug!(target: "viga_blender::stdout", worker = %name, "{line}");
        }
    });
}

/// The bridge's ready announcement and, from a contained worker's launcher before it, the
/// containment it runs under.
async fn wait_for_ready(
    lines: &mut OutputLines<ChildStdout>,
) -> (Option<Ready>, Option<ContainmentStatus>) {
    let mut containment = None;
    while let Ok(Some(line)) = lines.next_line().await {
        if let Some(json) = line.strip_prefix(READY_MARKER) {
            return (serde_json::from_str(json).ok(), containment);
        }
        match line.strip_prefix(CONTAINED_MARKER) {
            Some(json) if containment.is_none() => containment = serde_json::from_str(json).ok(),
            _ => tracing::debug!(target: "viga_blender::stdout", "{line}"),
        }
    }
    (None, containment)
}

/// Blender's output line by line, each line cut at [`MAX_OUTPUT_LINE_BYTES`].
#[derive(Debug)]
struct OutputLines<R> {
    reader: BufReader<R>,
}

impl<R: AsyncRead + Unpin> OutputLines<R> {
    fn new(output: R) -> Self {
        Self {
            reader: BufReader::new(output),
        }
    }

    /// The next line without its line break (lossy UTF-8; a cut line says so), or None at
    /// the end of the output.
    async fn next_line(&mut self) -> std::io::Result<Option<String>> {
        let mut kept = Vec::new();
        let mut cut = false;
        loop {
            let available = self.reader.fill_buf().await?;
            if available.is_empty() {
                let partial_last_line = !kept.is_empty() || cut;
                return Ok(partial_last_line.then(|| line_text(&kept, cut)));
            }
            let newline = available.iter().position(|byte| *byte == b'\n');
            let part = &available[..newline.unwrap_or(available.len())];
            let room = MAX_OUTPUT_LINE_BYTES - kept.len();
            cut |= part.len() > room;
            kept.extend_from_slice(&part[..part.len().min(room)]);
            let used = newline.map_or(available.len(), |at| at + 1);
            self.reader.consume(used);
            if newline.is_some() {
                return Ok(Some(line_text(&kept, cut)));
            }
        }
    }
}

fn line_text(bytes: &[u8], cut: bool) -> String {
    let mut line = String::from_utf8_lossy(bytes).into_owned();
    if line.ends_with('\r') {
        line.pop();
    }
    if cut {
        line.push_str(" [viga: line cut]");
    }
    line
}

fn random_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn output_lines_are_cut_at_the_limit_and_the_rest_skipped() {
        let long = "x".repeat(MAX_OUTPUT_LINE_BYTES * 3);
        let output = format!("first\r\n{long}\nlast");
        let mut lines = OutputLines::new(output.as_bytes());
        assert_eq!(lines.next_line().await.unwrap().as_deref(), Some("first"));
        let cut = lines.next_line().await.unwrap().unwrap();
        assert!(
            cut.ends_with(" [viga: line cut]"),
            "{}",
            &cut[cut.len() - 40..]
        );
        assert_eq!(cut.len(), MAX_OUTPUT_LINE_BYTES + " [viga: line cut]".len());
        assert_eq!(lines.next_line().await.unwrap().as_deref(), Some("last"));
        assert_eq!(lines.next_line().await.unwrap(), None);
    }
}
