//! `cargo xtask setup`: a Blender for viga, made the same way on every machine.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

use anyhow::{Context as _, Result, bail};
use viga_locate::BlenderLauncher;
use viga_locate::blender::{BLENDER_ENV, BPY_VERSION, PYTHON_ENV, VENV_DIR, venv_python};
use viga_locate::office::PPTX_REQUIREMENT;

/// What the venv must hold; the stamp records it, so a change here reinstalls. python-pptx
/// is for slides (viga-slides runs its programs with this venv's Python).
const REQUIREMENTS: [&str; 3] = ["bpy==5.0.1", "numpy<2", PPTX_REQUIREMENT];
const STAMP_FILE: &str = "viga-setup.json";
/// Overrides the Python 3.11 interpreter used to create the venv.
const PYTHON311_ENV: &str = "VIGA_PYTHON311";

pub fn workspace_root() -> PathBuf {
    viga_locate::workspace_root()
}

pub fn run() -> Result<BlenderLauncher> {
    let started = Instant::now();
    if let Some(blender) = non_empty_env(BLENDER_ENV) {
        let version = first_line(&checked(
            Command::new(&blender).arg("--version"),
            "blender --version",
        )?);
        println!(
            "setup: using your Blender {} ({version}) from {BLENDER_ENV}",
            blender.display()
        );
        return Ok(BlenderLauncher::Binary { blender });
    }
    if let Some(python) = non_empty_env(PYTHON_ENV) {
        let version = bpy_version(&python)?;
        println!(
            "setup: using bpy {version} from {PYTHON_ENV}={}",
            python.display()
        );
        return Ok(BlenderLauncher::PythonModule { python });
    }
    let venv = workspace_root().join(VENV_DIR);
    let python = venv_python(&venv);
    let stamp = venv.join(STAMP_FILE);
    let wanted = stamp_text(&REQUIREMENTS);
    if python.exists() && std::fs::read_to_string(&stamp).ok().as_deref() == Some(wanted.as_str()) {
        println!(
            "setup: Blender ready (bpy {BPY_VERSION} in {VENV_DIR}), checked in {:.0?}",
            started.elapsed()
        );
        return Ok(BlenderLauncher::PythonModule { python });
    }
    if !python.exists() {
        let base = find_python311()?;
        println!("setup: creating {VENV_DIR} with {}", base.display());
        checked(Command::new(&base).args(["-m", "venv"]).arg(&venv), "python3.11 -m venv").context(
            "could not create the virtual environment; on Debian/Ubuntu install python3.11-venv, then run `cargo xtask setup` again",
        )?;
    }
    println!(
        "setup: installing {} (about 400 MB, once)",
        REQUIREMENTS.join(" ")
    );
    pip_install(&python, &REQUIREMENTS, "cargo xtask setup")?;
    let version = bpy_version(&python)?;
    if version != BPY_VERSION {
        bail!(
            "the virtual environment has bpy {version}, expected {BPY_VERSION}; delete {VENV_DIR} and run setup again"
        );
    }
    // Written last and atomically: an interrupted setup leaves no stamp and simply resumes.
    // xtask reaches no viga crate but viga-locate, so not viga_io's write: this process's id
    // keeps two setups at once out of each other's partial (xtask/tests/atomic_writes.rs).
    write_stamp(&venv, STAMP_FILE, &wanted)?;
    println!(
        "setup: Blender ready (bpy {version} in {VENV_DIR}) in {:.1?}",
        started.elapsed()
    );
    Ok(BlenderLauncher::PythonModule { python })
}

/// The Blender MCP server the tests and the side-by-side benchmark drive viga beside and
/// through (its wheel carries its Blender add-on, which imports requests, a library Blender
/// ships and the bpy module does not). Only `cargo xtask test` and `setup --test-peers`
/// install them; a person's setup does not need them.
const TEST_PEER_REQUIREMENTS: [&str; 2] = ["mcp-for-blender==2.2.4", "requests<3"];
const TEST_PEER_STAMP: &str = "viga-test-peers.json";

/// Installs [`TEST_PEER_REQUIREMENTS`] into the venv of `launcher`, once (a stamp records
/// them). A Blender of the person's own has no venv: the tests that need one say so.
pub fn test_peers(launcher: &BlenderLauncher) -> Result<()> {
    let BlenderLauncher::PythonModule { python } = launcher else {
        println!(
            "setup: mcp-for-blender is installed into bpy's venv only; with VIGA_BLENDER its tests cannot run"
        );
        return Ok(());
    };
    let Some(venv) = python.parent().and_then(Path::parent) else {
        bail!("{} is not inside a virtual environment", python.display());
    };
    let stamp = venv.join(TEST_PEER_STAMP);
    let wanted = stamp_text(&TEST_PEER_REQUIREMENTS);
    if std::fs::read_to_string(&stamp).ok().as_deref() == Some(wanted.as_str()) {
        return Ok(());
    }
    println!(
        "setup: installing {} for the tests",
        TEST_PEER_REQUIREMENTS.join(" ")
    );
    pip_install(
        python,
        &TEST_PEER_REQUIREMENTS,
        "cargo xtask setup --test-peers",
    )?;
    write_stamp(venv, TEST_PEER_STAMP, &wanted)
}

/// Installs `requirements` with the venv's pip; a failure says to run `again` when the
/// network to PyPI is back.
fn pip_install(python: &Path, requirements: &[&str], again: &str) -> Result<()> {
    let status = Command::new(python)
        .args([
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--no-input",
            "--quiet",
        ])
        .args(requirements)
        .status()
        .context("could not run pip in the virtual environment")?;
    if !status.success() {
        bail!(
            "pip could not install {} ({status}); check the network to PyPI, then run `{again}` again",
            requirements.join(" ")
        );
    }
    Ok(())
}

/// Writes the stamp `name` in `venv` atomically: an interrupted install leaves none and
/// simply resumes. This process's id keeps two setups at once out of each other's partial.
fn write_stamp(venv: &Path, name: &str, text: &str) -> Result<()> {
    let partial = venv.join(format!("{name}.partial-{}", std::process::id()));
    std::fs::write(&partial, text).with_context(|| format!("could not write the stamp {name}"))?;
    std::fs::rename(&partial, venv.join(name))
        .with_context(|| format!("could not write the stamp {name}"))
}

/// What a stamp holds once `requirements` are installed: them as JSON, the format every
/// earlier setup wrote, so a venv made before stays valid.
fn stamp_text(requirements: &[&str]) -> String {
    let quoted: Vec<String> = requirements
        .iter()
        .map(|requirement| format!("\"{requirement}\""))
        .collect();
    format!("{{\"requirements\":[{}]}}", quoted.join(","))
}

fn non_empty_env(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|value| !value.is_empty())
        .map(PathBuf::from)
}

fn bpy_version(python: &Path) -> Result<String> {
    let output = checked(
        Command::new(python).args(["-c", "import bpy; print(bpy.app.version_string)"]),
        "import bpy",
    )?;
    Ok(first_line(&output))
}

/// Python 3.11 is the only version bpy 5.0.1 is built for.
fn find_python311() -> Result<PathBuf> {
    let candidates: Vec<PathBuf> = match non_empty_env(PYTHON311_ENV) {
        Some(explicit) => vec![explicit],
        None => vec!["python3.11".into(), "python3".into(), "python".into()],
    };
    for candidate in &candidates {
        let probe = Command::new(candidate)
            .args(["-c", "import sys; print('%d.%d' % sys.version_info[:2])"])
            .output();
        if let Ok(output) = probe
            && output.status.success()
            && first_line(&output) == "3.11"
        {
            return Ok(candidate.clone());
        }
    }
    bail!(
        "viga's Blender (bpy {BPY_VERSION}) needs Python 3.11, and none was found (tried {}).\n\
         Install it: Debian/Ubuntu `apt-get install python3.11 python3.11-venv`, macOS `brew install python@3.11`, \
         or `pyenv install 3.11`; or point {PYTHON311_ENV} at a Python 3.11; \
         or set {BLENDER_ENV}=/path/to/blender to use your own Blender instead.",
        candidates
            .iter()
            .map(|c| c.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

fn checked(command: &mut Command, what: &str) -> Result<Output> {
    let output = command
        .output()
        .with_context(|| format!("could not run `{what}`"))?;
    if !output.status.success() {
        bail!(
            "`{what}` failed ({}):\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(output)
}

fn first_line(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .next()
        .unwrap_or_default()
        .trim()
        .to_owned()
}
