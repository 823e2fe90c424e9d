//! The desktop session a contained program must not reach: the variables that name its
//! display, bus and agents, and the folders where their sockets live.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

/// Variables that name a way into the session: a display, a message bus, an agent holding
/// keys, a container daemon, a terminal multiplexer. A contained program never gets them.
const SESSION_VARIABLES: [&str; 18] = [
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "WAYLAND_SOCKET",
    "XAUTHORITY",
    "DBUS_SESSION_BUS_ADDRESS",
    "DBUS_SYSTEM_BUS_ADDRESS",
    "XDG_RUNTIME_DIR",
    "SSH_AUTH_SOCK",
    "SSH_AGENT_PID",
    "GPG_AGENT_INFO",
    "DOCKER_HOST",
    "CONTAINER_HOST",
    "PULSE_SERVER",
    "PIPEWIRE_REMOTE",
    "TMUX",
    "TMUX_PANE",
    "STY",
    "KRB5CCNAME",
];

/// Any variable whose name ends so names a socket (`FOO_SOCK`, `BAR_SOCKET`).
const SOCKET_SUFFIXES: [&str; 2] = ["_SOCK", "_SOCKET"];

/// Whether a variable of this name is kept from contained programs.
pub fn is_session_variable(name: &OsStr) -> bool {
    name.to_str().is_some_and(|name| {
        SESSION_VARIABLES.contains(&name)
            || SOCKET_SUFFIXES.iter().any(|suffix| name.ends_with(suffix))
    })
}

/// The names of `environment` a contained program does not get.
pub fn session_variables_in(environment: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut names: Vec<OsString> = environment
        .into_iter()
        .filter(|name| is_session_variable(name))
        .collect();
    names.sort();
    names
}

/// Folders of this session that hold sockets and lie outside the folders the launcher
/// always hides (`/tmp`, `/run`, ...): the runtime folder, the home folder (where
/// `~/.ssh`, `~/.gnupg` and `~/.docker` keep agent and control sockets), and the folders
/// of the agent and bus sockets the environment names. Read from `lookup` (this process's
/// environment in [`crate::Containment::new`]); only absolute paths are taken.
pub fn session_socket_folders(lookup: impl Fn(&str) -> Option<OsString>) -> Vec<PathBuf> {
    let absolute = |value: OsString| Some(PathBuf::from(value)).filter(|path| path.is_absolute());
    let mut folders = Vec::new();
    for name in ["XDG_RUNTIME_DIR", "HOME", "GNUPGHOME"] {
        folders.extend(lookup(name).and_then(absolute));
    }
    if let Some(agent) = lookup("SSH_AUTH_SOCK").and_then(absolute) {
        folders.extend(agent.parent().map(Path::to_path_buf));
    }
    if let Some(bus) = lookup("DBUS_SESSION_BUS_ADDRESS").and_then(bus_socket) {
        folders.extend(bus.parent().map(Path::to_path_buf));
    }
    // `/` names everything: hiding it would leave nothing to run.
    folders.retain(|folder| folder.parent().is_some());
    folders.sort();
    folders.dedup();
    folders
}

/// The socket file a D-Bus address names (`unix:path=/run/user/1000/bus,guid=...`).
fn bus_socket(address: OsString) -> Option<PathBuf> {
    let address = address.into_string().ok()?;
    address
        .split(';')
        .filter_map(|entry| entry.strip_prefix("unix:"))
        .flat_map(|options| options.split(','))
        .find_map(|option| option.strip_prefix("path="))
        .map(PathBuf::from)
        .filter(|path| path.is_absolute())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_bus_and_agent_variables_are_session_variables() {
        for name in [
            "DISPLAY",
            "XDG_RUNTIME_DIR",
            "SSH_AUTH_SOCK",
            "DBUS_SESSION_BUS_ADDRESS",
            "WAYLAND_DISPLAY",
            "MY_DAEMON_SOCKET",
        ] {
            assert!(is_session_variable(OsStr::new(name)), "{name}");
        }
        for name in ["PATH", "HOME", "LANG", "TMPDIR", "SOCKS_VERSION"] {
            assert!(!is_session_variable(OsStr::new(name)), "{name}");
        }
    }

    #[test]
    fn the_sessions_socket_folders_come_from_its_variables() {
        let lookup = |name: &str| {
            let value = match name {
                "XDG_RUNTIME_DIR" => "/run/user/1000",
                "HOME" => "/home/ada",
                "SSH_AUTH_SOCK" => "/tmp/ssh-XYZ/agent.42",
                "DBUS_SESSION_BUS_ADDRESS" => "unix:path=/var/bus/ada/bus,guid=1",
                "GNUPGHOME" => "relative/gnupg",
                _ => return None,
            };
            Some(OsString::from(value))
        };
        assert_eq!(
            session_socket_folders(lookup),
            [
                "/home/ada",
                "/run/user/1000",
                "/tmp/ssh-XYZ",
                "/var/bus/ada"
            ]
            .map(PathBuf::from)
            .to_vec()
        );
        assert!(session_socket_folders(|name| (name == "HOME").then(|| "/".into())).is_empty());
    }
}
