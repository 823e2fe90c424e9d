//! Containment of the programs viga runs on a model's behalf (Blender, and any other worker
//! that runs model-written code), enforced by the kernel rather than by a lint of the
//! program.
//!
//! How: a worker's program is started through a launcher (`viga contain --write DIR --read
//! PATH … -- PROGRAM …`, whose logic is [`launch`]). The launcher is a fresh,
//! single-threaded process. It leaves the terminal's session, enters a user namespace and
//! in it a network namespace (no interface), a mount namespace (where the folders of the
//! session's sockets are hidden behind empty file systems, with what the program needs put
//! back) and a PID namespace; it restricts itself with Landlock (reads and writes only in
//! named folders besides the system's, no TCP or UDP, signals and abstract Unix sockets
//! scoped); it prints what holds on one line ([`CONTAINED_MARKER`]); then it starts the
//! program without the session's display, bus and agent variables, as the first process of
//! the PID namespace, and stays its parent until it ends. Nothing of this runs in the
//! caller's own process, which keeps its network and files.
//!
//! The halves ([`Half`]) are reported one by one. Where the kernel offers less,
//! [`ContainmentPolicy::Auto`] runs with what there is and says so;
//! [`ContainmentPolicy::Require`] refuses to start the program unless every half holds.
//!
//! [`Limits`] bound what the program uses (memory, processes, one file's size, how much it
//! writes), each by a cgroup v2 leaf where one is delegated, else by a resource limit, and
//! the written size by the launcher, which measures it as it supervises; each is reported
//! like a half ([`LimitsStatus`]), and `require` refuses when one asked for does not hold.

#![warn(clippy::too_many_lines)] // no library function over 80 lines: clippy.toml sets the threshold

#[cfg(target_os = "linux")]
mod cgroup;
#[cfg(target_os = "linux")]
mod enforce;
mod launch;
mod limits;
mod request;
mod session;
mod status;

#[cfg(target_os = "linux")]
#[path = "linux.rs"]
mod platform;
#[cfg(not(target_os = "linux"))]
#[path = "other.rs"]
mod platform;

pub use launch::{Launched, launch};
pub use limits::{
    Enforcement, LIMIT_MARKER, LIMITS_ENV, Limit, LimitGuard, Limits, LimitsStatus,
    describe as describe_limit, show_size,
};
pub use request::{Access, ContainRequest, Containment, USAGE};
pub use session::{is_session_variable, session_socket_folders, session_variables_in};
pub use status::{ContainmentPolicy, ContainmentStatus, Guard, Half};

/// The line the launcher prints before it runs the program: this marker, then the
/// [`ContainmentStatus`] as JSON.
pub const CONTAINED_MARKER: &str = "VIGA_CONTAINED ";

#[derive(Debug, thiserror::Error)]
pub enum ContainError {
    #[error("{0}")]
    Usage(String),
    #[error(
        "containment is required (--containment require) but not held: {missing} ({summary}); {remedy}"
    )]
    Unavailable {
        missing: String,
        summary: String,
        /// What would make it hold, from the causes the status names.
        remedy: String,
    },
    #[error("could not contain the program: {0}")]
    Setup(String),
    #[error("could not run {program}: {source}")]
    Exec {
        program: String,
        #[source]
        source: std::io::Error,
    },
}
