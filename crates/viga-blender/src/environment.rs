//! The environment a Blender that runs model-written programs starts with: this process's
//! variables on an allowlist, nothing else. A program can print `os.environ`, and whatever it
//! prints goes into the run folder and the next prompt, so API keys, gateway tokens and every
//! other secret of the user's shell stay out of Blender. Nor does it get a way into the
//! desktop session: no display, bus or agent variable is passed, even when named in
//! [`EXTRA_ENV`] (the containment launcher removes them again, for any program).

use std::ffi::OsString;

/// Names a worker keeps: what a process needs to find its programs, home, locale, temporary
/// folder and GPU. A Blender in the background draws nothing, so no display is kept.
const KEPT: [&str; 19] = [
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TMPDIR",
    "TEMP",
    "TMP",
    "XDG_CACHE_HOME",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "LD_LIBRARY_PATH",
    "CUDA_VISIBLE_DEVICES",
    "OCIO",
    "SYSTEMROOT",
    "WINDIR",
    "PATHEXT",
];

/// Prefixes a worker keeps: the locale's categories and Blender's own settings
/// (`BLENDER_USER_RESOURCES`, `BLENDER_SYSTEM_SCRIPTS`, ...).
const KEPT_PREFIXES: [&str; 2] = ["LC_", "BLENDER_"];

/// Names more variables to pass to workers, comma-separated (a render farm's license server,
/// say). Its own value is not passed, nor is a display, bus or agent variable it names.
pub const EXTRA_ENV: &str = "VIGA_WORKER_ENV";

/// The variables of this process a worker keeps.
pub fn worker_environment() -> Vec<(OsString, OsString)> {
    let extra: Vec<String> = std::env::var(EXTRA_ENV)
        .unwrap_or_default()
        .split(',')
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .collect();
    std::env::vars_os()
        .filter(|(name, _)| !viga_sandbox::is_session_variable(name))
        .filter(|(name, _)| {
            name.to_str().is_some_and(|name| {
                KEPT.contains(&name)
                    || KEPT_PREFIXES.iter().any(|prefix| name.starts_with(prefix))
                    || extra.iter().any(|wanted| wanted == name)
            })
        })
        .collect()
}

/// Starts `command` with [`worker_environment`] only.
pub fn restrict(command: &mut tokio::process::Command) -> &mut tokio::process::Command {
    command.env_clear().envs(worker_environment())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_tokens_are_not_kept_and_the_basics_are() {
        let kept = |name: &str| {
            KEPT.contains(&name) || KEPT_PREFIXES.iter().any(|prefix| name.starts_with(prefix))
        };
        for secret in [
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "GEMINI_API_KEY",
            "VIGA_GATEWAY_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "GITHUB_TOKEN",
            "PYTHONSTARTUP",
        ] {
            assert!(!kept(secret), "{secret} would reach Blender");
        }
        for basic in ["PATH", "HOME", "LC_ALL", "BLENDER_USER_RESOURCES", "TMPDIR"] {
            assert!(kept(basic), "{basic} is needed");
        }
        for session in [
            "DISPLAY",
            "WAYLAND_DISPLAY",
            "XDG_RUNTIME_DIR",
            "SSH_AUTH_SOCK",
        ] {
            assert!(!kept(session), "{session} would open the desktop session");
        }
    }
}
