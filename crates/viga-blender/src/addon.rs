//! The viga Blender extension (Blender 4.2 and newer): the package in `addon/` (manifest,
//! panel, operators, the runner of viga processes) plus this crate's bridge as its
//! subpackage `viga_bridge/`, zipped so that Preferences > Get Extensions > Install from Disk and
//! `blender --command extension install-file` accept it.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use zip::write::SimpleFileOptions;

use crate::bridge::{BRIDGE_FILES, write_embedded_script};
use crate::locate::BlenderLauncher;

include!(concat!(env!("OUT_DIR"), "/addon_files.rs"));

/// The extension's id: Blender imports it as `bl_ext.<repository>.viga_blender`.
pub const EXTENSION_ID: &str = "viga_blender";

/// The headless host (see [`host_command`]).
pub const HOST_SOURCE: &str = include_str!("../python/addon_host.py");
/// The line the host prints once the add-on serves: the marker, then JSON
/// `{"connection", "pid", "module"}`.
pub const HOST_READY_MARKER: &str = "VIGA_ADDON_HOST_READY ";

#[derive(Debug, thiserror::Error)]
pub enum AddonError {
    #[error("cannot write {}: {message}", path.display())]
    Write { path: PathBuf, message: String },
    #[error("the headless host did not start: {0}")]
    HostStart(String),
}

/// A headless host that said it serves: its process (yours to stop) and the connection file
/// its add-on wrote.
#[derive(Debug)]
pub struct RunningHost {
    pub child: std::process::Child,
    pub connection: PathBuf,
}

/// Starts the headless host ([`host_command`]) and waits at most `ready_within` for its
/// ready line. A host that never says it serves is killed (it may be hung), not left behind.
/// Its stderr goes to this process's.
pub fn start_host(
    launcher: &BlenderLauncher,
    zip: &Path,
    options: &HostOptions,
    ready_within: std::time::Duration,
) -> Result<RunningHost, AddonError> {
    use std::io::BufRead as _;
    let mut child = host_command(launcher, zip, options)?
        .into_std()
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .map_err(|err| AddonError::HostStart(err.to_string()))?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| AddonError::HostStart("its output could not be read".to_owned()))?;
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    // The reader keeps draining the host's output after the ready line, so it never blocks
    // on a full pipe.
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if let Some(json) = line.strip_prefix(HOST_READY_MARKER) {
                let _ = ready_tx.send(json.to_owned());
            }
        }
    });
    let connection = ready_rx
        .recv_timeout(ready_within)
        .map_err(|_| format!("it did not say it serves within {ready_within:?}"))
        .and_then(|json| {
            serde_json::from_str::<serde_json::Value>(&json)
                .ok()
                .and_then(|ready| ready["connection"].as_str().map(PathBuf::from))
                .ok_or_else(|| format!("its ready line is unreadable: {json}"))
        });
    match connection {
        Ok(connection) => Ok(RunningHost { child, connection }),
        Err(message) => {
            let _ = child.kill();
            let _ = child.wait();
            Err(AddonError::HostStart(message))
        }
    }
}

/// How to run the headless host.
#[derive(Debug, Clone)]
pub struct HostOptions {
    /// Blender's user folder for the host (`BLENDER_USER_RESOURCES`): the extension is
    /// installed there, so a host never touches the user's own Blender settings.
    pub user_dir: PathBuf,
    /// A .blend to open before the add-on is enabled, as a person would have.
    pub blend: Option<PathBuf>,
    /// Where to write how long each timer callback held the main thread, on exit.
    pub stats: Option<PathBuf>,
    /// Overrides the folder of connection files (`VIGA_CONNECTION_DIR`).
    pub connection_dir: Option<PathBuf>,
    /// Add-on packages the host's Blender loads as if its person had enabled them.
    pub addons: Option<PathBuf>,
    /// A viga server the host's add-on dials out to, as its person would connect it.
    pub server: Option<ServerLogin>,
}

/// What a person fills in to connect their Blender to a viga server.
#[derive(Clone)]
pub struct ServerLogin {
    /// `ws://` or `wss://` and the server's address.
    pub url: String,
    pub username: String,
    /// Handed to the host in [`SERVER_TOKEN_ENV`], which it removes from its environment at
    /// once and keeps where the add-on keeps tokens (in `config_dir`).
    pub token: String,
    /// The add-on's private folder of settings and tokens (`VIGA_CONFIG_DIR`).
    pub config_dir: PathBuf,
    /// The only folder the server's add-on commands may name.
    pub files: PathBuf,
}

impl std::fmt::Debug for ServerLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerLogin")
            .field("url", &self.url)
            .field("username", &self.username)
            .field("token", &"<redacted>")
            .finish_non_exhaustive()
    }
}

/// How the host is handed its server token.
pub const SERVER_TOKEN_ENV: &str = "VIGA_SERVER_TOKEN";

/// The command that starts the headless host: Blender in background mode, the extension
/// installed from `zip` through Blender's own machinery and enabled, its timers run by a
/// loop (they never fire in background mode). It prints [`HOST_READY_MARKER`] once serving
/// Asks the headless host `pid` to stop as SIGTERM does: it disables the add-on (which
/// removes its connection file) and quits. Already gone is fine.
#[cfg(unix)]
pub fn ask_host_to_stop(pid: u32) {
    if let Ok(pid) = i32::try_from(pid) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGTERM,
        );
    }
}

/// and runs until SIGTERM or SIGINT, when it disables the add-on.
pub fn host_command(
    launcher: &BlenderLauncher,
    zip: &Path,
    options: &HostOptions,
) -> Result<tokio::process::Command, AddonError> {
    let script =
        write_embedded_script("viga-addon-host", "addon_host.py", HOST_SOURCE).map_err(|err| {
            AddonError::Write {
                path: std::env::temp_dir(),
                message: err.to_string(),
            }
        })?;
    let mut script_args: Vec<std::ffi::OsString> = vec!["--zip".into(), zip.into()];
    if let Some(blend) = &options.blend {
        script_args.extend(["--blend".into(), blend.into()]);
    }
    if let Some(stats) = &options.stats {
        script_args.extend(["--stats".into(), stats.into()]);
    }
    if let Some(addons) = &options.addons {
        script_args.extend(["--addons".into(), addons.into()]);
    }
    if let Some(server) = &options.server {
        script_args.extend([
            "--server".into(),
            server.url.clone().into(),
            "--username".into(),
            server.username.clone().into(),
            "--server-files".into(),
            server.files.clone().into(),
        ]);
    }
    let (program, args) = launcher.command_line(&script, &script_args);
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .env("BLENDER_USER_RESOURCES", &options.user_dir)
        .env("VIGA_PARENT_PID", std::process::id().to_string());
    if let Some(dir) = &options.connection_dir {
        command.env(crate::attach::CONNECTION_DIR_ENV, dir);
    }
    if let Some(server) = &options.server {
        command
            .env(SERVER_TOKEN_ENV, &server.token)
            .env("VIGA_CONFIG_DIR", &server.config_dir);
    }
    Ok(command)
}

/// The zip's file name for this version.
pub fn zip_name() -> String {
    format!("{EXTENSION_ID}-{}.zip", env!("CARGO_PKG_VERSION"))
}

/// Every file of the package, by path: `addon/` and the bridge package. Nothing of the
/// machine that builds it: the zip is the same wherever it is built, and the add-on finds
/// viga through its preferences or on PATH.
pub fn package_files() -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = ADDON_FILES
        .iter()
        .map(|(name, text)| ((*name).to_owned(), text.as_bytes().to_vec()))
        .collect();
    files.extend(
        BRIDGE_FILES
            .iter()
            .map(|(path, text)| ((*path).to_owned(), text.as_bytes().to_vec())),
    );
    files
}

/// Writes the extension zip into `out_dir` (created if needed) and returns its path. The zip
/// is written under a temporary name and renamed, so an installer never sees half a file.
pub fn build_zip(out_dir: &Path) -> Result<PathBuf, AddonError> {
    let path = out_dir.join(zip_name());
    let failed = |message: String| AddonError::Write {
        path: path.clone(),
        message,
    };
    // Built in memory (the package is small) and written whole, so a killed build never
    // leaves half a zip under the extension's name.
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Stored)
        .unix_permissions(0o644);
    for (name, bytes) in package_files() {
        zip.start_file(name, options)
            .map_err(|err| failed(err.to_string()))?;
        zip.write_all(&bytes)
            .map_err(|err| failed(err.to_string()))?;
    }
    let bytes = zip
        .finish()
        .map_err(|err| failed(err.to_string()))?
        .into_inner();
    viga_io::files::write_atomic(&path, &bytes).map_err(|err| failed(err.to_string()))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_manifest_version_is_the_crate_version() {
        let manifest = ADDON_FILES
            .iter()
            .find(|(name, _)| *name == "blender_manifest.toml")
            .map(|(_, text)| *text)
            .unwrap();
        let wanted = format!("version = \"{}\"", env!("CARGO_PKG_VERSION"));
        assert!(manifest.lines().any(|line| line == wanted), "{wanted}");
        assert!(manifest.contains(&format!("id = \"{EXTENSION_ID}\"")));
    }

    #[test]
    fn the_zip_holds_the_package_and_the_whole_bridge_package_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let path = build_zip(dir.path()).unwrap();
        assert_eq!(path.file_name().unwrap().to_str().unwrap(), zip_name());
        let mut archive = zip::ZipArchive::new(std::fs::File::open(&path).unwrap()).unwrap();
        let names: Vec<String> = archive
            .file_names()
            .map(|name| name.unwrap().into_owned())
            .collect();
        for needed in [
            "__init__.py",
            "blender_manifest.toml",
            "viga_bridge/__init__.py",
            "viga_bridge/serving.py",
        ] {
            assert!(names.iter().any(|n| n == needed), "{needed} in {names:?}");
        }
        assert!(!names.iter().any(|n| n.contains("tests")), "{names:?}");
        assert!(
            BRIDGE_FILES.len() > 10,
            "the whole package: {BRIDGE_FILES:?}"
        );
        for (path, text) in BRIDGE_FILES {
            let mut bridge = String::new();
            std::io::Read::read_to_string(&mut archive.by_name(path).unwrap(), &mut bridge)
                .unwrap();
            assert_eq!(bridge, *text, "{path} as it is");
        }
        assert!(!dir.path().join(format!("{}.partial", zip_name())).exists());
    }
}
