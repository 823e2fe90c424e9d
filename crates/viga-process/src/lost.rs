//! Why a warm worker process was lost and what its supervisor did about it, in the same terms
//! as the Blender worker's (`viga_blender::{LostReason, Recovery}`).

use std::time::Duration;

/// Why a worker process was lost during a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LostReason {
    /// The call did not finish within its limit; the process was killed.
    Timeout(Duration),
    /// The process exited (crash, out of memory, killed from outside).
    Exited(String),
    /// Its pipe broke or carried something that was not the protocol.
    Disconnected(String),
}

impl std::fmt::Display for LostReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Timeout(limit) => write!(f, "no answer within {limit:?}"),
            Self::Exited(status) => write!(f, "the process exited ({status})"),
            Self::Disconnected(why) => write!(f, "connection lost ({why})"),
        }
    }
}

/// What the supervisor did after a lost call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recovery {
    /// The process stayed up: only what the call worked on (a browser tab) was thrown away
    /// and replaced.
    ProcessKept,
    /// The process and its whole group were killed and a new one started.
    Restarted,
    /// Starting a new process failed; the next call tries again.
    RestartFailed(String),
}

impl Recovery {
    /// Whether the worker's process was restarted.
    pub fn restarted(&self) -> bool {
        matches!(self, Self::Restarted)
    }
}

impl std::fmt::Display for Recovery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::ProcessKept => {
                write!(f, "the process was kept, what the call worked on replaced")
            }
            Self::Restarted => write!(f, "the process was killed and restarted"),
            Self::RestartFailed(why) => write!(f, "restart failed: {why}"),
        }
    }
}

/// A warm worker's process lost during a call, and what its supervisor did: the error both
/// renderers return for it, so a caller treats a lost slide renderer and a lost browser alike.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{worker} was lost during `{op}`: {reason}; {recovery}")]
pub struct WorkerLost {
    /// What was lost ("the slide renderer", "the page").
    pub worker: &'static str,
    /// The call it was lost in.
    pub op: &'static str,
    pub reason: LostReason,
    pub recovery: Recovery,
}
