//! The environment a renderer's process starts with. A python-pptx program is model-written
//! and can print `os.environ`; LibreOffice and Chromium read hostile documents. None of them
//! gets a secret of the user's shell (API keys, tokens), nor a way to the user's session (a
//! display, a session bus, an SSH agent): only what finds programs and sets the language,
//! and a home and temporary folder inside the worker's scratch folder.

use std::path::Path;

/// Variables kept from this process, when set.
const KEPT: [&str; 4] = ["PATH", "LANG", "LANGUAGE", "TZ"];

/// Names more variables to pass on, comma-separated: the same variable as the Blender
/// workers' (`VIGA_WORKER_ENV`).
const EXTRA_ENV: &str = "VIGA_WORKER_ENV";

/// Clears `command`'s environment, keeps `PATH`, `LANG`, `LANGUAGE`, `TZ`, the locale
/// (`LC_*`) and the names in `VIGA_WORKER_ENV`, and points `HOME`, the XDG folders and `TMPDIR` into `scratch`, so that
/// nothing the process writes for itself (profiles, caches, crash reports) lands outside it.
pub fn clean_environment<'a>(
    command: &'a mut tokio::process::Command,
    scratch: &Path,
) -> &'a mut tokio::process::Command {
    let extra: Vec<String> = std::env::var(EXTRA_ENV)
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .collect();
    let kept = std::env::vars_os().filter(|(name, _)| {
        name.to_str().is_some_and(|name| {
            KEPT.contains(&name) || name.starts_with("LC_") || extra.iter().any(|x| x == name)
        })
    });
    command
        .env_clear()
        .envs(kept)
        .env("HOME", scratch)
        .env("TMPDIR", scratch)
        .env("XDG_CONFIG_HOME", scratch.join(".config"))
        .env("XDG_CACHE_HOME", scratch.join(".cache"))
        .env("XDG_DATA_HOME", scratch.join(".local"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_and_the_session_stay_out() {
        let mut command = tokio::process::Command::new("/usr/bin/env");
        clean_environment(&mut command, Path::new("/scratch"));
        let set: Vec<(String, Option<String>)> = command
            .as_std()
            .get_envs()
            .map(|(name, value)| {
                (
                    name.to_string_lossy().into_owned(),
                    value.map(|v| v.to_string_lossy().into_owned()),
                )
            })
            .collect();
        let names: Vec<&str> = set.iter().map(|(name, _)| name.as_str()).collect();
        for absent in [
            "OPENAI_API_KEY",
            "DISPLAY",
            "DBUS_SESSION_BUS_ADDRESS",
            "XDG_RUNTIME_DIR",
            "SSH_AUTH_SOCK",
        ] {
            assert!(!names.contains(&absent), "{absent} is passed on");
        }
        assert!(
            set.contains(&("HOME".to_owned(), Some("/scratch".to_owned()))),
            "{set:?}"
        );
        assert!(
            set.contains(&("TMPDIR".to_owned(), Some("/scratch".to_owned()))),
            "{set:?}"
        );
    }
}
