//! The Python bridge, embedded in the binary and written out when a worker starts.

use std::path::PathBuf;

/// The bridge's source: a Python file that runs inside Blender (as `bpy`, as
/// `blender -b -P`, or as an add-on).
pub const BRIDGE_SOURCE: &str = include_str!("../python/viga_bridge.py");

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

/// Writes the bridge to a temporary folder named after its content (so different viga
/// builds never share a stale copy) and returns its path.
pub fn write_bridge_script() -> std::io::Result<PathBuf> {
    write_embedded_script("viga-bridge", "viga_bridge.py", BRIDGE_SOURCE)
}

/// Writes `source` as `file_name` into a folder named `prefix` plus a hash of the content,
/// inside this user's private temporary folder, unless an identical copy is there already,
/// and returns its path.
pub fn write_embedded_script(
    prefix: &str,
    file_name: &str,
    source: &str,
) -> std::io::Result<PathBuf> {
    let dir = crate::private_dir::private_temp_dir()?
        .join(format!("{prefix}-{:016x}", fnv1a(source.as_bytes())));
    let path = dir.join(file_name);
    if std::fs::read(&path).is_ok_and(|existing| existing == source.as_bytes()) {
        return Ok(path);
    }
    std::fs::create_dir_all(&dir)?;
    // Written under a name unique to this call, then renamed: workers starting at once, in
    // one process or several, never read a half-written file (a name unique per process
    // only let two threads write the same file while one renamed it).
    let mut partial = tempfile::Builder::new()
        .prefix(file_name)
        .suffix(".partial")
        .tempfile_in(&dir)?;
    std::io::Write::write_all(&mut partial, source.as_bytes())?;
    partial.persist(&path).map_err(|err| err.error)?;
    Ok(path)
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}
