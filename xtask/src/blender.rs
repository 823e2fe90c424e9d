//! Running one of the repository's own scripts (the demo's goal scene, the mini-suites) in a
//! fresh Blender. viga's contained, time-limited runner lives in viga-blender; xtask runs only
//! scripts from this checkout, in the foreground, so it needs none of that and stays quick to
//! build on a fresh clone.

use std::ffi::OsString;
use std::process::{Command, Stdio};

use anyhow::{Context as _, Result, bail};
use viga_locate::BlenderLauncher;

/// Writes `script` to `target/xtask/<name>` (kept for a look after a failure) and runs it
/// with `args` after `--`; Blender's output shows as it comes.
pub fn run_script(
    launcher: &BlenderLauncher,
    script: &str,
    name: &str,
    args: &[OsString],
) -> Result<()> {
    let folder = crate::setup::workspace_root().join("target").join("xtask");
    std::fs::create_dir_all(&folder)
        .with_context(|| format!("could not create {}", folder.display()))?;
    let script_file = folder.join(name);
    std::fs::write(&script_file, script)
        .with_context(|| format!("could not write {}", script_file.display()))?;
    let (program, program_args) = launcher.command_line(&script_file, args);
    let status = Command::new(&program)
        .args(program_args)
        .stdin(Stdio::null())
        .status()
        .with_context(|| format!("could not start {}", launcher.describe()))?;
    if !status.success() {
        bail!(
            "{} failed ({status}) running {}; its messages are above",
            launcher.describe(),
            script_file.display()
        );
    }
    Ok(())
}
