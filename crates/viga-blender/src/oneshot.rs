//! Running one script in a fresh Blender process: the cold path. The reference systems do
//! this for every operation; viga uses it for one-off jobs and as the baseline that warm
//! workers are measured against.

use std::ffi::OsString;
use std::io::Write as _;
use std::time::Duration;

use serde_json::Value;
use tokio::process::Command;

use crate::locate::BlenderLauncher;

/// The line prefix a one-shot script prints its JSON result after.
pub const RESULT_MARKER: &str = "VIGA_RESULT:";

#[derive(Debug, thiserror::Error)]
pub enum OneshotError {
    #[error("could not write the script to a temporary file: {0}")]
    Script(#[source] std::io::Error),
    #[error("could not start {launcher}: {source}")]
    Spawn {
        launcher: String,
        #[source]
        source: std::io::Error,
    },
    #[error("Blender did not finish within {0:?}; the process was killed")]
    Timeout(Duration),
    #[error("Blender exited with {status}; last lines of its error output:\n{stderr_tail}")]
    Failed { status: String, stderr_tail: String },
    #[error(
        "Blender finished but printed no `{RESULT_MARKER}` line; last lines of its output:\n{stdout_tail}"
    )]
    NoResult { stdout_tail: String },
    #[error("the `{RESULT_MARKER}` line is not JSON: {0}")]
    BadResult(#[source] serde_json::Error),
}

/// Runs `script` (Python source) in a new Blender process, with `args` after `--` in
/// `sys.argv`, and returns the JSON value it printed after [`RESULT_MARKER`]. The script
/// reports its result with `print("VIGA_RESULT:" + json.dumps(value))`.
pub async fn run_script(
    launcher: &BlenderLauncher,
    script: &str,
    args: &[OsString],
    timeout: Duration,
) -> Result<Value, OneshotError> {
    let private = crate::private_dir::private_temp_dir().map_err(OneshotError::Script)?;
    let mut file = tempfile::Builder::new()
        .prefix("viga-oneshot-")
        .suffix(".py")
        .tempfile_in(private)
        .map_err(OneshotError::Script)?;
    file.write_all(script.as_bytes())
        .map_err(OneshotError::Script)?;
    let (program, args) = launcher.command_line(file.path(), args);
    let mut command = Command::new(program);
    let child = crate::environment::restrict(&mut command)
        .args(args)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = match tokio::time::timeout(timeout, child).await {
        Err(_) => return Err(OneshotError::Timeout(timeout)),
        Ok(Err(source)) => {
            return Err(OneshotError::Spawn {
                launcher: launcher.describe(),
                source,
            });
        }
        Ok(Ok(output)) => output,
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(OneshotError::Failed {
            status: output.status.to_string(),
            stderr_tail: tail(&String::from_utf8_lossy(&output.stderr), 20),
        });
    }
    let line = stdout
        .lines()
        .rev()
        .find_map(|line| line.strip_prefix(RESULT_MARKER))
        .ok_or_else(|| OneshotError::NoResult {
            stdout_tail: tail(&stdout, 20),
        })?;
    serde_json::from_str(line).map_err(OneshotError::BadResult)
}

/// The last `lines` lines of `text`.
pub(crate) fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
