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
use tokio::io::{AsyncBufReadExt as _, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};
use tokio::sync::Mutex;
use viga_protocol::bridge::{BridgeCommand, HelloInfo, PARENT_PID_ENV, READY_MARKER, TOKEN_ENV};

use crate::bridge::{BridgeMode, write_bridge_script};
use crate::client::{CallError, FramedClient, transport_error};
use crate::locate::BlenderLauncher;
use crate::transport::{BlenderTransport, LostReason, Recovery, TransportError};

/// Lines of Blender's error output kept for crash reports.
const STDERR_TAIL_LINES: usize = 40;

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
}

impl WorkerConfig {
    pub fn new(launcher: BlenderLauncher) -> Self {
        Self {
            launcher,
            call_timeout: Duration::from_secs(300),
            startup_timeout: Duration::from_secs(120),
            mode: BridgeMode::Serve,
            name: "blender".to_owned(),
        }
    }
}

#[derive(Debug)]
struct Running {
    child: Child,
    client: FramedClient,
    stderr_tail: Arc<SyncMutex<VecDeque<String>>>,
}

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
    /// Holds the worker's checkpoints; removed with the worker.
    state_dir: tempfile::TempDir,
    restarts: AtomicU32,
    hello: HelloInfo,
    /// Microseconds Blender reported busy, over every process this worker ran.
    busy_us: Arc<AtomicU64>,
}

impl Worker {
    /// Starts Blender and completes the handshake.
    pub async fn start(config: WorkerConfig) -> Result<Self, TransportError> {
        let state_dir = tempfile::Builder::new()
            .prefix("viga-worker-")
            .tempdir()
            .map_err(|err| {
                TransportError::Start(format!("could not create the worker's state folder: {err}"))
            })?;
        let busy_us = Arc::new(AtomicU64::new(0));
        let running = spawn(&config, &busy_us).await?;
        let hello = running.client.hello().clone();
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
            state_dir,
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

    /// How many times the process was restarted.
    pub fn restarts(&self) -> u32 {
        self.restarts.load(Ordering::Relaxed)
    }

    /// Saves the scene to the worker's checkpoint file; a restart restores it.
    pub async fn checkpoint(&self) -> Result<PathBuf, TransportError> {
        let path = self.state_dir.path().join("checkpoint.blend");
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
        let running = match spawn(&self.config, &self.busy_us).await {
            Ok(running) => running,
            Err(err) => {
                state.running = None;
                return Recovery::RestartFailed(err.to_string());
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
            Err(err @ CallError::Fault(_)) => Err(transport_error(name, err, Recovery::None)),
            Err(err) => {
                let reason = lost_reason(running, &err).await;
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

    fn shared_folder(&self) -> Option<&std::path::Path> {
        Some(self.state_dir.path())
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
    port: u16,
}

/// Starts Blender running the bridge, waits for it to announce its port, and connects.
async fn spawn(config: &WorkerConfig, busy_us: &Arc<AtomicU64>) -> Result<Running, TransportError> {
    let script = write_bridge_script().map_err(|err| {
        TransportError::Start(format!("could not write the bridge script: {err}"))
    })?;
    let token = random_token();
    let mut child = start_blender(config, &script, &token)?;
    let stderr_tail = keep_stderr_tail(&mut child, &config.name);
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| TransportError::Start("Blender's output could not be read".to_owned()))?;
    let mut lines = BufReader::new(stdout).lines();
    let ready = wait_for_port(config, &mut child, &mut lines, &stderr_tail).await?;
    log_stdout(lines, config.name.clone());
    let address = SocketAddr::from((Ipv4Addr::LOCALHOST, ready.port));
    let client = FramedClient::connect(address, &token, config.call_timeout)
        .await?
        .sharing_busy_counter(Arc::clone(busy_us));
    Ok(Running {
        child,
        client,
        stderr_tail,
    })
}

/// The Blender process, with the bridge's token and this process's id in its environment
/// and its output piped; it is killed when dropped.
fn start_blender(
    config: &WorkerConfig,
    script: &Path,
    token: &str,
) -> Result<Child, TransportError> {
    let args: Vec<OsString> = vec!["--mode".into(), config.mode.as_arg().into()];
    let (program, args) = config.launcher.command_line(script, &args);
    let mut command = Command::new(&program);
    // Model-written programs run in this Blender: it gets no secret of this process.
    crate::environment::restrict(&mut command)
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
/// crash reports.
fn keep_stderr_tail(child: &mut Child, name: &str) -> Arc<SyncMutex<VecDeque<String>>> {
    let stderr_tail = Arc::new(SyncMutex::new(VecDeque::new()));
    if let Some(stderr) = child.stderr.take() {
        let tail = Arc::clone(&stderr_tail);
        let name = name.to_owned();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::debug!(target: "viga_blender::stderr", worker = %name, "{line}");
                if let Ok(mut tail) = tail.lock() {
                    if tail.len() == STDERR_TAIL_LINES {
                        tail.pop_front();
                    }
                    tail.push_back(line);
                }
            }
        });
    }
    stderr_tail
}

/// The bridge's ready announcement, within the startup limit. When Blender exits first the
/// error carries its exit status and last error output; when it takes too long it is killed.
async fn wait_for_port(
    config: &WorkerConfig,
    child: &mut Child,
    lines: &mut Lines<BufReader<ChildStdout>>,
    stderr_tail: &SyncMutex<VecDeque<String>>,
) -> Result<Ready, TransportError> {
    match tokio::time::timeout(config.startup_timeout, wait_for_ready(lines)).await {
        Ok(Some(ready)) => Ok(ready),
        Ok(None) => {
            let status = child
                .wait()
                .await
                .map(|s| s.to_string())
                .unwrap_or_default();
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
fn log_stdout(mut lines: Lines<BufReader<ChildStdout>>, name: String) {
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            tracing::debug!(target: "viga_blender::stdout", worker = %name, "{line}");
        }
    });
}

async fn wait_for_ready(lines: &mut Lines<BufReader<ChildStdout>>) -> Option<Ready> {
    while let Ok(Some(line)) = lines.next_line().await {
        match line.strip_prefix(READY_MARKER) {
            Some(json) => return serde_json::from_str(json).ok(),
            None => tracing::debug!(target: "viga_blender::stdout", "{line}"),
        }
    }
    None
}

fn random_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}
