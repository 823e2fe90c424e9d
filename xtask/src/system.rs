//! The Debian packages the tests need (LibreOffice and Chromium for slides and pages, a font,
//! ffmpeg for video targets): found, or installed when CI runs as root, or named with the
//! command that installs them. The tests never skip: without these they fail, so this says
//! what to do first.

use std::process::Command;

use anyhow::{Context as _, Result, bail};

/// Installed with `--no-install-recommends`: Impress with LibreOfficeKit, Chromium, the font
/// the tests' pages and decks name, and ffmpeg.
const PACKAGES: [&str; 4] = [
    "libreoffice-impress",
    "chromium",
    "fonts-dejavu-core",
    "ffmpeg",
];

/// What is missing, each with why.
fn missing_programs() -> Vec<String> {
    let mut missing = Vec::new();
    if let Err(err) = viga_locate::office::find_office() {
        missing.push(err.to_string());
    }
    if let Err(err) = viga_locate::chromium::find_chromium() {
        missing.push(err.to_string());
    }
    let ffmpeg = Command::new("ffmpeg")
        .arg("-version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
    if !ffmpeg.is_ok_and(|status| status.success()) {
        missing.push("ffmpeg (video targets) is not on PATH".to_owned());
    }
    missing
}

pub fn ensure_packages() -> Result<()> {
    let missing = missing_programs();
    if missing.is_empty() {
        return Ok(());
    }
    let install = format!(
        "apt-get install -y --no-install-recommends {}",
        PACKAGES.join(" ")
    );
    let in_ci = std::env::var("CI").is_ok_and(|value| value == "true");
    if !(in_ci && running_as_root()) {
        bail!(
            "the tests need LibreOffice, Chromium and ffmpeg:\n  {}\ninstall them (Debian/Ubuntu): sudo apt-get update && sudo {install}",
            missing.join("\n  ")
        );
    }
    println!("test: installing {} (CI, as root)", PACKAGES.join(" "));
    run(
        Command::new("apt-get").args(["update", "-q"]),
        "apt-get update",
    )?;
    run(
        Command::new("apt-get")
            .args(["install", "-y", "-q", "--no-install-recommends"])
            .args(PACKAGES)
            .env("DEBIAN_FRONTEND", "noninteractive"),
        &install,
    )?;
    let still = missing_programs();
    if !still.is_empty() {
        bail!(
            "after `{install}`, still missing:\n  {}",
            still.join("\n  ")
        );
    }
    Ok(())
}

fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|output| String::from_utf8_lossy(&output.stdout).trim() == "0")
}

fn run(command: &mut Command, what: &str) -> Result<()> {
    let status = command
        .status()
        .with_context(|| format!("could not run `{what}`"))?;
    if !status.success() {
        bail!("`{what}` failed ({status})");
    }
    Ok(())
}
