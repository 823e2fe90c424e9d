//! Why a warm worker was lost during a call and what its supervisor did about it: the one
//! pair of types for every worker viga runs (Blender, the slide renderer, the browser), so a
//! caller reads a lost Blender and a lost renderer alike. The words name no worker: each
//! error that carries them names its own ("Blender worker lost during ...", "the slide
//! renderer was lost during ...").

use std::path::PathBuf;
use std::time::Duration;

/// Why a worker was lost during a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LostReason {
    /// The call did not finish within its limit.
    Timeout(Duration),
    /// The process exited (crash, `os._exit`, out of memory, killed from outside); its exit
    /// status, with the last lines it wrote when there were any.
    Exited(String),
    /// Its connection broke or carried something that was not the protocol.
    Disconnected(String),
}

impl std::fmt::Display for LostReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Timeout(limit) => write!(f, "no answer within {limit:?}"),
            Self::Exited(status) => write!(f, "it exited ({status})"),
            Self::Disconnected(why) => write!(f, "connection lost ({why})"),
        }
    }
}

/// What the supervisor did after a lost call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recovery {
    /// Nobody recovers this worker: viga does not run it (a person's Blender, one reached
    /// through a plain client or dialled in).
    None,
    /// The process stayed up: only what the call worked on (a browser tab) was thrown away
    /// and replaced.
    ProcessKept,
    /// The process and its whole group were killed and a new one started, given back the
    /// state it last saved when it keeps one (a Blender's scene, from this checkpoint).
    Restarted {
        restored_checkpoint: Option<PathBuf>,
    },
    /// Starting a new process failed; the next call tries again.
    RestartFailed(String),
}

impl Recovery {
    /// Whether the worker's process was restarted.
    pub fn restarted(&self) -> bool {
        matches!(self, Self::Restarted { .. })
    }
}

impl std::fmt::Display for Recovery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::None => write!(f, "not restarted"),
            Self::ProcessKept => {
                write!(f, "the process was kept, what the call worked on replaced")
            }
            Self::Restarted {
                restored_checkpoint: Some(path),
            } => write!(f, "killed and restarted, restored from {}", path.display()),
            Self::Restarted {
                restored_checkpoint: None,
            } => write!(f, "killed and restarted fresh (no checkpoint restored)"),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loss_reads_with_the_name_of_what_was_lost() {
        let lost = WorkerLost {
            worker: "the slide renderer",
            op: "render",
            reason: LostReason::Exited("signal: 9 (SIGKILL)".to_owned()),
            recovery: Recovery::Restarted {
                restored_checkpoint: None,
            },
        };
        assert_eq!(
            lost.to_string(),
            "the slide renderer was lost during `render`: it exited (signal: 9 (SIGKILL)); \
             killed and restarted fresh (no checkpoint restored)"
        );
        let restored = Recovery::Restarted {
            restored_checkpoint: Some(PathBuf::from("/scratch/checkpoint.blend")),
        };
        assert!(restored.restarted());
        assert_eq!(
            restored.to_string(),
            "killed and restarted, restored from /scratch/checkpoint.blend"
        );
        assert!(!Recovery::None.restarted());
    }
}
