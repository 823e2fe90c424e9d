//! mcp-for-blender (the most used Blender MCP server, from PyPI) for tests and benchmarks:
//! its own add-on running in a headless Blender ([`PeerBlender`], `python/mcp_for_blender_host.py`)
//! and the command line of its own MCP server pointed at it ([`PeerBlender::server_command`]).
//! The package is installed into the project's venv by `cargo xtask test`'s set-up (and by
//! `cargo xtask setup --test-peers`); telemetry is off in every process started here.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The host script, run by the venv's Python.
const HOST_SOURCE: &str = include_str!("../python/mcp_for_blender_host.py");
const READY_MARKER: &str = "MCP_FOR_BLENDER_READY ";
/// mcp-for-blender reads each of these; any one turns its telemetry off.
pub const TELEMETRY_OFF: [(&str, &str); 2] = [
    ("DISABLE_TELEMETRY", "true"),
    ("BLENDER_MCP_DISABLE_TELEMETRY", "true"),
];

/// A headless Blender running mcp-for-blender's add-on; killed when dropped.
#[derive(Debug)]
pub struct PeerBlender {
    child: Child,
    port: u16,
    python: PathBuf,
    _script: tempfile::TempDir,
}

impl PeerBlender {
    /// Starts the host, with `blend` open when given; `interval` fixes the add-on's
    /// command-queue cadence (its own 50 ms when `None`). An error says what to do when the
    /// venv lacks the package.
    pub fn start(
        interval: Option<Duration>,
        blend: Option<&std::path::Path>,
    ) -> std::io::Result<Self> {
        let python = venv_python()?;
        let script = tempfile::tempdir()?;
        let host = script.path().join("mcp_for_blender_host.py");
        std::fs::write(&host, HOST_SOURCE)?;
        // Its timer loop is viga's add-on host's, imported from beside it.
        std::fs::write(
            script.path().join("addon_host.py"),
            viga_blender::addon::HOST_SOURCE,
        )?;
        let mut command = Command::new(&python);
        command
            .arg(&host)
            .arg("--")
            .envs(TELEMETRY_OFF)
            .env("VIGA_PARENT_PID", std::process::id().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if let Some(interval) = interval {
            command.args(["--interval", &interval.as_secs_f64().to_string()]);
        }
        if let Some(blend) = blend {
            command.arg("--blend").arg(blend);
        }
        let mut child = command.spawn()?;
        let port = match ready_port(&mut child) {
            Ok(port) => port,
            Err(err) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(err);
            }
        };
        Ok(Self {
            child,
            port,
            python,
            _script: script,
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    fn server_program(&self) -> PathBuf {
        self.python.with_file_name("mcp-for-blender")
    }

    /// The command line of mcp-for-blender's own MCP server (stdio) for this Blender, as a
    /// person's MCP client starts it.
    pub fn server_command(&self) -> String {
        format!("{} --port {}", self.server_program().display(), self.port)
    }

    /// [`Self::server_command`] as a process to spawn, telemetry off.
    pub fn server_process(&self) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(self.server_program());
        command
            .args(["--port", &self.port.to_string()])
            .envs(TELEMETRY_OFF)
            .kill_on_drop(true);
        command
    }

    /// Runs `code` through the add-on's own socket protocol and returns what it printed.
    pub fn execute(&self, code: &str) -> std::io::Result<String> {
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", self.port))?;
        stream.set_read_timeout(Some(Duration::from_secs(60)))?;
        let request = serde_json::json!({"type": "execute_code", "params": {"code": code}});
        stream.write_all(request.to_string().as_bytes())?;
        let mut received = Vec::new();
        let mut buffer = [0_u8; 65536];
        loop {
            let read = stream.read(&mut buffer)?;
            if read == 0 {
                return Err(std::io::Error::other(
                    "the add-on closed the connection without an answer",
                ));
            }
            received.extend_from_slice(&buffer[..read]);
            if let Ok(reply) = serde_json::from_slice::<serde_json::Value>(&received) {
                return match reply["result"]["result"].as_str() {
                    Some(printed) if reply["status"] == "success" => Ok(printed.to_owned()),
                    _ => Err(std::io::Error::other(format!(
                        "the add-on answered {reply}"
                    ))),
                };
            }
        }
    }
}

impl Drop for PeerBlender {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The venv's Python, which has bpy and mcp-for-blender.
fn venv_python() -> std::io::Result<PathBuf> {
    match viga_blender::locate() {
        Ok(viga_blender::BlenderLauncher::PythonModule { python }) => Ok(python),
        other => Err(std::io::Error::other(format!(
            "mcp-for-blender's tests need the bpy module venv with mcp-for-blender in it (cargo xtask test installs both); found {other:?}"
        ))),
    }
}

fn ready_port(child: &mut Child) -> std::io::Result<u16> {
    let Some(stdout) = child.stdout.take() else {
        return Err(std::io::Error::other("the host's stdout is not piped"));
    };
    let started = Instant::now();
    let mut lines = BufReader::new(stdout).lines();
    while let Some(line) = lines.next() {
        let line = line?;
        // The add-on's threads print too, so the marker may follow their words on a line.
        if let Some((_, ready)) = line.split_once(READY_MARKER) {
            let ready: serde_json::Value = serde_json::from_str(ready)?;
            // The add-on prints as it works: its stdout is read to the end, or a full pipe
            // (or a closed one) would stop it.
            std::thread::spawn(move || lines.for_each(drop));
            return ready["port"]
                .as_u64()
                .and_then(|port| u16::try_from(port).ok())
                .ok_or_else(|| std::io::Error::other(format!("no port in {ready}")));
        }
        if started.elapsed() > crate::BLENDER_TEST_LIMIT {
            break;
        }
    }
    Err(std::io::Error::other(
        "the mcp-for-blender host ended before it was ready: is mcp-for-blender installed in the venv (cargo xtask setup --test-peers)?",
    ))
}
