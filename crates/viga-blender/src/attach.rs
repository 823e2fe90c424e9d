//! Attaching to a person's running Blender: the viga add-on serves its bridge there and
//! writes a connection file (`blender-<pid>.json`: port, token, pid, protocol version) into a
//! folder only its user can read. `viga ... --attach` finds that file, checks it, and
//! connects, or says in one line what to do instead, within [`ATTACH_TIMEOUT`].

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tokio::net::TcpStream;
use viga_protocol::PROTOCOL_VERSION;
use viga_protocol::bridge::{ConnectionInfo, FaultKind};

use crate::client::FramedClient;
use crate::transport::TransportError;

/// Overrides the folder of connection files (tests, several sessions side by side).
pub const CONNECTION_DIR_ENV: &str = "VIGA_CONNECTION_DIR";
/// How long attaching may take in all before it gives up with a message.
pub const ATTACH_TIMEOUT: Duration = Duration::from_secs(5);
const FILE_PREFIX: &str = "blender-";

/// Why viga could not attach; each message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    #[error(
        "no Blender with the viga add-on is running (no connection file in {}): start Blender and enable the viga add-on (Edit > Preferences > Add-ons), or run without --attach",
        dir.display()
    )]
    NoneRunning { dir: PathBuf },
    #[error(
        "the Blender that wrote {} (pid {pid}) is no longer running: start Blender with the viga add-on enabled, or run without --attach",
        file.display()
    )]
    Stale { file: PathBuf, pid: u32 },
    #[error(
        "{} Blenders with the viga add-on are running; pick one with --connection FILE: {}",
        files.len(),
        files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(", ")
    )]
    Several { files: Vec<PathBuf> },
    #[error(
        "cannot use the connection file {}: {message}; disable and enable the viga add-on in Blender to write it again",
        file.display()
    )]
    Unreadable { file: PathBuf, message: String },
    #[error(
        "the viga add-on in Blender (pid {pid}) speaks protocol {theirs}, this viga speaks {ours}: install the add-on this viga builds (`viga addon build`, then Install from Disk) and restart Blender",
        ours = PROTOCOL_VERSION
    )]
    Version { pid: u32, theirs: u32 },
    #[error(
        "Blender (pid {pid}) refused the token in {}: the add-on was restarted since the file was written; disable and enable the viga add-on, then try again",
        file.display()
    )]
    TokenRefused { file: PathBuf, pid: u32 },
    #[error(
        "Blender (pid {pid}) is serving another viga client (a `viga mcp --attach`, a run or the panel's): it serves one at a time; close that one, or wait until it is done"
    )]
    Busy { pid: u32 },
    #[error(
        "Blender (pid {pid}) did not answer on port {port} within {limit:?} ({message}): it may be frozen by a long operation; wait for it, or restart it with the viga add-on enabled",
        limit = ATTACH_TIMEOUT
    )]
    Unreachable {
        pid: u32,
        port: u16,
        message: String,
    },
}

impl AttachError {
    /// What kind of failure this is: a Blender that does not answer is unavailable (a frozen
    /// Blender); everything else is a setting or a file to fix.
    pub fn kind(&self) -> viga_protocol::event::FailureKind {
        use viga_protocol::event::FailureKind;
        match self {
            // Held by another client: available again once that one is done.
            Self::Unreachable { .. } | Self::Busy { .. } => FailureKind::WorkerUnavailable,
            Self::NoneRunning { .. }
            | Self::Stale { .. }
            | Self::Several { .. }
            | Self::Unreadable { .. }
            | Self::Version { .. }
            | Self::TokenRefused { .. } => FailureKind::Config,
        }
    }
}

/// The folder connection files are in: `$VIGA_CONNECTION_DIR`, else `$XDG_RUNTIME_DIR/viga`,
/// else `~/.viga/connections` (the add-on's bridge uses the same rules).
pub fn connection_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os(CONNECTION_DIR_ENV).filter(|v| !v.is_empty()) {
        return PathBuf::from(dir);
    }
    if let Some(runtime) = std::env::var_os("XDG_RUNTIME_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .filter(|dir| dir.is_dir())
    {
        return runtime.join("viga");
    }
    std::env::home_dir()
        .unwrap_or_default()
        .join(".viga")
        .join("connections")
}

/// A connection file and what it says.
#[derive(Debug, Clone)]
pub struct Connection {
    pub file: PathBuf,
    pub info: ConnectionInfo,
}

impl Connection {
    /// Reads and validates a connection file.
    pub fn read(file: &Path) -> Result<Self, AttachError> {
        let unreadable = |message: String| AttachError::Unreadable {
            file: file.to_path_buf(),
            message,
        };
        check_private(file).map_err(unreadable)?;
        let text = std::fs::read_to_string(file).map_err(|err| unreadable(err.to_string()))?;
        let info: ConnectionInfo =
            viga_protocol::parse_json(&text).map_err(|err| unreadable(err.to_string()))?;
        Ok(Self {
            file: file.to_path_buf(),
            info,
        })
    }

    /// False when the Blender that wrote the file is known to be gone. Where the system
    /// cannot tell (no /proc), the file is taken as live and a refused connection says it.
    pub fn is_live(&self) -> bool {
        process_alive(self.info.pid).unwrap_or(true)
    }
}

/// Every connection file in [`connection_dir`], with the ones that could not be read.
pub fn discover() -> (Vec<Connection>, Vec<AttachError>) {
    let dir = connection_dir();
    let mut found = Vec::new();
    let mut problems = Vec::new();
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return (found, problems);
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| {
            path.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(FILE_PREFIX) && n.ends_with(".json"))
        })
        .collect();
    files.sort();
    for file in files {
        match Connection::read(&file) {
            Ok(connection) => found.push(connection),
            Err(err) => problems.push(err),
        }
    }
    (found, problems)
}

/// Chooses the connection to use: `explicit` when given, else the one live Blender.
pub fn choose(explicit: Option<&Path>) -> Result<Connection, AttachError> {
    if let Some(file) = explicit {
        let connection = Connection::read(file)?;
        if !connection.is_live() {
            return Err(AttachError::Stale {
                file: connection.file,
                pid: connection.info.pid,
            });
        }
        return Ok(connection);
    }
    let (found, mut problems) = discover();
    let (live, stale): (Vec<_>, Vec<_>) = found.into_iter().partition(Connection::is_live);
    match live.len() {
        1 => Ok(live.into_iter().next().ok_or(AttachError::NoneRunning {
            dir: connection_dir(),
        })?),
        0 => {
            if let Some(newest) = stale.into_iter().next_back() {
                return Err(AttachError::Stale {
                    file: newest.file,
                    pid: newest.info.pid,
                });
            }
            Err(problems.pop().unwrap_or(AttachError::NoneRunning {
                dir: connection_dir(),
            }))
        }
        _ => Err(AttachError::Several {
            files: live.into_iter().map(|c| c.file).collect(),
        }),
    }
}

/// Connects to the chosen Blender and completes the handshake, within [`ATTACH_TIMEOUT`].
/// `call_timeout` is the default limit for each later call.
pub async fn attach(
    connection: &Connection,
    call_timeout: Duration,
) -> Result<FramedClient, AttachError> {
    let info = &connection.info;
    if info.protocol_version != PROTOCOL_VERSION {
        return Err(AttachError::Version {
            pid: info.pid,
            theirs: info.protocol_version,
        });
    }
    let address = SocketAddr::from((Ipv4Addr::LOCALHOST, info.port));
    let started = Instant::now();
    // Connecting gets half the budget; the hello reply whatever is left.
    let step_limit = ATTACH_TIMEOUT / 2;
    let unreachable = |message: String| AttachError::Unreachable {
        pid: info.pid,
        port: info.port,
        message,
    };
    let stream = match tokio::time::timeout(step_limit, TcpStream::connect(address)).await {
        Err(_) => return Err(unreachable("connecting timed out".to_owned())),
        // Nothing listens on the port: the Blender that wrote the file is gone, even if its
        // pid was reused by another process.
        Ok(Err(err)) if err.kind() == std::io::ErrorKind::ConnectionRefused => {
            return Err(AttachError::Stale {
                file: connection.file.clone(),
                pid: info.pid,
            });
        }
        Ok(Err(err)) => return Err(unreachable(err.to_string())),
        Ok(Ok(stream)) => stream,
    };
    let remaining = ATTACH_TIMEOUT.saturating_sub(started.elapsed());
    match FramedClient::handshake(
        stream,
        address,
        info.token.expose(),
        call_timeout,
        remaining,
    )
    .await
    {
        Ok(client) => Ok(client),
        Err(TransportError::HandshakeRefused {
            kind: FaultKind::Auth,
            ..
        }) => Err(AttachError::TokenRefused {
            file: connection.file.clone(),
            pid: info.pid,
        }),
        Err(TransportError::HandshakeRefused {
            kind: FaultKind::Busy,
            ..
        }) => Err(AttachError::Busy { pid: info.pid }),
        Err(TransportError::HandshakeRefused {
            kind: FaultKind::Version,
            ..
        }) => Err(AttachError::Version {
            pid: info.pid,
            theirs: info.protocol_version,
        }),
        Err(other) => Err(unreachable(other.to_string())),
    }
}

/// Refuses a connection file that others could have written or read: the token in it
/// grants running code in the user's Blender.
fn check_private(file: &Path) -> Result<(), String> {
    let metadata = std::fs::symlink_metadata(file).map_err(|err| err.to_string())?;
    if !metadata.file_type().is_file() {
        return Err("it is not a plain file (a link?)".to_owned());
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = metadata.permissions().mode();
        if mode & 0o077 != 0 {
            return Err(format!(
                "its mode is {:o}, readable or writable by other users",
                mode & 0o777
            ));
        }
    }
    Ok(())
}

/// Whether process `pid` exists, where the system can tell.
fn process_alive(pid: u32) -> Option<bool> {
    let proc_root = Path::new("/proc");
    if !proc_root.join("self").exists() {
        return None;
    }
    Some(proc_root.join(pid.to_string()).exists())
}
