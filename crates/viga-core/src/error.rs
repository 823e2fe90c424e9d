//! The one error type of the core, typed all the way through: every failure keeps the error
//! that caused it (`source()`) and says which [`FailureKind`] it is, so a front end can tell
//! a wrong API key from a model server that is down, Blender that cannot start, a full disk
//! or a cancel, and say what to do about each.

use std::path::PathBuf;

use viga_blender::{Recovery, TransportError};
use viga_memory::MemoryError;
use viga_protocol::event::FailureKind;
use viga_provider::{ErrorKind, ProviderError};

use crate::handle::Cancelled;

#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    /// Settings, arguments or files that cannot work; the message says what to change.
    #[error("{0}")]
    Config(String),
    /// A file or folder could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The run log could not be read or written.
    #[error("the run log could not be read or written: {0}")]
    Log(#[source] MemoryError),
    /// A model call failed after the provider's own retries.
    #[error("model call failed: {0}")]
    Provider(#[source] ProviderError),
    /// Blender failed in a way the loop cannot recover from; `context` says what the loop
    /// was doing.
    #[error("{context}: {source}")]
    Blender {
        context: String,
        #[source]
        source: TransportError,
    },
    /// A tool failed in a way no answer of the model can fix (a malformed reply, an image
    /// that does not decode).
    #[error("{0}")]
    Tool(String),
    /// The run's task ended without an outcome (it panicked, or the runtime shut down).
    #[error("the run task failed: {0}")]
    Task(#[source] tokio::task::JoinError),
    /// The front end cancelled the run.
    #[error("the run was cancelled")]
    Cancelled,
}

impl CoreError {
    /// Which kind of failure this is.
    pub fn kind(&self) -> FailureKind {
        match self {
            Self::Config(_) => FailureKind::Config,
            Self::Io { .. } | Self::Log(_) => FailureKind::Io,
            Self::Provider(err) => provider_failure_kind(err),
            Self::Blender { source, .. } => blender_failure_kind(source),
            Self::Tool(_) | Self::Task(_) => FailureKind::Other,
            Self::Cancelled => FailureKind::Cancelled,
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn blender(context: impl Into<String>, source: TransportError) -> Self {
        Self::Blender {
            context: context.into(),
            source,
        }
    }
}

impl From<Cancelled> for CoreError {
    fn from(Cancelled: Cancelled) -> Self {
        Self::Cancelled
    }
}

impl From<MemoryError> for CoreError {
    fn from(err: MemoryError) -> Self {
        Self::Log(err)
    }
}

impl From<ProviderError> for CoreError {
    fn from(err: ProviderError) -> Self {
        Self::Provider(err)
    }
}

/// The kind of a provider failure. A scripted session that runs out or does not match is
/// the script's fault, so it is configuration, like a provider that cannot be built.
pub fn provider_failure_kind(err: &ProviderError) -> FailureKind {
    match err.kind() {
        ErrorKind::Auth => FailureKind::ProviderAuth,
        ErrorKind::RateLimit | ErrorKind::Server | ErrorKind::Network | ErrorKind::Timeout => {
            FailureKind::ProviderUnavailable
        }
        ErrorKind::ContextTooLong => FailureKind::ContextOverflow,
        ErrorKind::BadRequest | ErrorKind::MalformedResponse => FailureKind::ProviderFailed,
        ErrorKind::Config | ErrorKind::Script => FailureKind::Config,
    }
}

/// The kind of a Blender failure: Blender gone (not started, not restarted, lost with
/// nobody to restart it) is `blender_unavailable`; a refusal or a malformed reply that
/// reaches the top is a bug somewhere, `other`.
pub fn blender_failure_kind(err: &TransportError) -> FailureKind {
    match err {
        TransportError::Start(_)
        | TransportError::Handshake(_)
        | TransportError::HandshakeRefused { .. }
        | TransportError::Lost { .. } => FailureKind::BlenderUnavailable,
        TransportError::Refused { .. } | TransportError::MalformedReply { .. } => {
            FailureKind::Other
        }
    }
}

/// A copy of a transport error that says Blender is gone, for the message of a run that
/// stops because of it (transport errors are not `Clone`).
pub(crate) fn copy_of_loss(err: &TransportError) -> Option<TransportError> {
    match err {
        TransportError::Lost {
            command,
            reason,
            recovery,
        } => Some(TransportError::Lost {
            command,
            reason: reason.clone(),
            recovery: recovery.clone(),
        }),
        TransportError::Start(why) => Some(TransportError::Start(why.clone())),
        _ => None,
    }
}

/// Whether `err` means the supervisor tried to start a new Blender and could not.
pub(crate) fn is_failed_restart(err: &TransportError) -> bool {
    matches!(
        err,
        TransportError::Start(_)
            | TransportError::Lost {
                recovery: Recovery::RestartFailed(_),
                ..
            }
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use viga_blender::LostReason;

    use super::*;

    #[test]
    fn every_failure_has_the_kind_a_person_acts_on() {
        let auth = ProviderError::Auth {
            provider: "openai".into(),
            key_env: "OPENAI_API_KEY".into(),
            message: "bad key".into(),
        };
        let down = ProviderError::Server {
            provider: "openai".into(),
            status: 503,
            message: "overloaded".into(),
        };
        let long = ProviderError::ContextTooLong {
            provider: "openai".into(),
            message: "too long".into(),
        };
        let restart_failed = TransportError::Lost {
            command: "render",
            reason: LostReason::Timeout(Duration::from_secs(1)),
            recovery: Recovery::RestartFailed("no python".into()),
        };
        let cases = [
            (CoreError::from(auth), FailureKind::ProviderAuth),
            (CoreError::from(down), FailureKind::ProviderUnavailable),
            (CoreError::from(long), FailureKind::ContextOverflow),
            (
                CoreError::blender("restarting Blender", restart_failed),
                FailureKind::BlenderUnavailable,
            ),
            (
                CoreError::io("/x/y", std::io::Error::other("disk full")),
                FailureKind::Io,
            ),
            (CoreError::Config("bad".into()), FailureKind::Config),
            (CoreError::from(Cancelled), FailureKind::Cancelled),
            (CoreError::Tool("broken".into()), FailureKind::Other),
        ];
        for (err, kind) in cases {
            assert_eq!(err.kind(), kind, "{err}");
        }
    }

    #[test]
    fn failed_stops_logged_before_kinds_existed_still_read() {
        let old: viga_protocol::event::StopReason =
            serde_json::from_str(r#"{"reason": "failed", "message": "model call failed"}"#)
                .unwrap();
        assert_eq!(
            old,
            viga_protocol::event::StopReason::failed("model call failed", FailureKind::Other)
        );
    }

    #[test]
    fn the_source_error_is_kept() {
        let err = CoreError::io("/runs/a/events.jsonl", std::io::Error::other("disk full"));
        assert_eq!(err.to_string(), "/runs/a/events.jsonl: disk full");
        let source = std::error::Error::source(&err).map(ToString::to_string);
        assert_eq!(source.as_deref(), Some("disk full"));
    }
}
