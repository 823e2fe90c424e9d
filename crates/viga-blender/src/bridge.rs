//! The Python bridge, embedded in the binary and written out when a worker starts.

use std::path::{Path, PathBuf};

// `BRIDGE_FILES`: the bridge's Python package (`python/viga_bridge/`), which runs inside
// Blender as `bpy`, under `blender -b -P`, or as a package of the extension.
include!(concat!(env!("OUT_DIR"), "/bridge_files.rs"));

/// The script a headless Blender runs: it loads the package beside it and serves.
const BRIDGE_LAUNCHER: (&str, &str) = (
    "run_viga_bridge.py",
    include_str!("../python/run_viga_bridge.py"),
);

/// How the bridge serves inside Blender.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BridgeMode {
    /// The main thread serves the socket directly (headless Blender).
    #[default]
    Serve,
    /// A network thread queues requests and the main thread drains them: the path an
    /// interactive Blender's `bpy.app.timers` poller takes, run headless.
    Queue,
}

impl BridgeMode {
    pub fn as_arg(self) -> &'static str {
        match self {
            Self::Serve => "serve",
            Self::Queue => "queue",
        }
    }
}

/// Writes the bridge package and its launcher to a temporary folder named after their
/// content (so different viga builds never share a stale copy) and returns the launcher's
/// path.
pub fn write_bridge_script() -> std::io::Result<PathBuf> {
    // The launcher last: a worker starts only after its own call has checked every file.
    let files: Vec<(&str, &str)> = BRIDGE_FILES
        .iter()
        .copied()
        .chain([BRIDGE_LAUNCHER])
        .collect();
    Ok(write_embedded_files("viga-bridge", &files)?.join(BRIDGE_LAUNCHER.0))
}

/// The bridge package as files (path inside the folder that holds the package, contents),
/// with a hash of them all: for a Blender viga reaches only through another program (an MCP
/// server's code tool), which is sent the package itself and keeps it under a name the hash
/// makes its own, so a Blender never runs another viga build's copy.
pub fn bridge_package() -> (&'static [(&'static str, &'static str)], u64) {
    (BRIDGE_FILES, files_hash(BRIDGE_FILES))
}

/// Writes `source` as `file_name` into a folder named `prefix` plus a hash of the content,
/// inside this user's private temporary folder, unless an identical copy is there already,
/// and returns its path.
pub fn write_embedded_script(
    prefix: &str,
    file_name: &str,
    source: &str,
) -> std::io::Result<PathBuf> {
    Ok(write_embedded_files(prefix, &[(file_name, source)])?.join(file_name))
}

/// Writes `files` (path inside the folder, contents) into a folder named `prefix` plus a hash
/// of their names and contents, inside this user's private temporary folder, each unless an
/// identical copy is there already, and returns the folder.
fn write_embedded_files(prefix: &str, files: &[(&str, &str)]) -> std::io::Result<PathBuf> {
    let hash = files_hash(files);
    let dir = crate::private_dir::private_temp_dir()?.join(format!("{prefix}-{hash:016x}"));
    for (name, source) in files {
        write_unless_there(&dir.join(name), source)?;
    }
    Ok(dir)
}

fn files_hash(files: &[(&str, &str)]) -> u64 {
    files.iter().fold(FNV_OFFSET, |hash, (name, source)| {
        // A NUL after each name: no name and contents run into another pair's.
        let named = fnv1a(fnv1a(hash, name.as_bytes()), b"\0");
        fnv1a(named, source.as_bytes())
    })
}

fn write_unless_there(path: &Path, source: &str) -> std::io::Result<()> {
    if std::fs::read(path).is_ok_and(|existing| existing == source.as_bytes()) {
        return Ok(());
    }
    // Published whole under a temporary name of this call's own: workers starting at once,
    // in one process or several, never read a half-written file.
    viga_io::files::write_atomic(path, source.as_bytes())
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

fn fnv1a(hash: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(hash, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}
