//! The one error type of the core, typed all the way through: every failure keeps the error
//! that caused it (`source()`) and says which [`FailureKind`] it is, so a front end can tell
//! a wrong API key from a model server that is down, a worker (Blender) that cannot start, a
//! full disk or a cancel, and say what to do about each.

use std::path::PathBuf;

use viga_memory::MemoryError;
use viga_protocol::event::FailureKind;
use viga_provider::{ErrorKind, ProviderError};

use crate::domain::{FaultKind, WorkerFault};
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
    /// The domain's worker (Blender, for a scene) failed in a way the loop cannot recover
    /// from; `context` says what the loop was doing.
    #[error("{context}: {source}")]
    Worker {
        context: String,
        #[source]
        source: WorkerFault,
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
            Self::Worker { source, .. } => worker_failure_kind(source),
            Self::Tool(_) | Self::Task(_) => FailureKind::Other,
            Self::Cancelled => FailureKind::Cancelled,
        }
    }

    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }

    pub fn worker(context: impl Into<String>, source: WorkerFault) -> Self {
        Self::Worker {
            context: context.into(),
            source,
        }
    }

    /// A worker that could not be started (`context` says which), `err` kept as the source:
    /// a `worker_unavailable` failure.
    pub fn not_started(
        context: impl Into<String>,
        err: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        let fault = WorkerFault::new(crate::domain::FaultKind::Unavailable, err.to_string())
            .with_source(err);
        Self::worker(context, fault)
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

/// The kind of a worker's failure: a worker gone (not started, not restarted, lost with
/// nobody to restart it) is `blender_unavailable`; a refusal or anything else that reaches
/// the top is a bug somewhere, `other`.
pub fn worker_failure_kind(fault: &WorkerFault) -> FailureKind {
    match fault.kind {
        FaultKind::Unavailable | FaultKind::TimedOut(_) => FailureKind::WorkerUnavailable,
        FaultKind::Refused | FaultKind::Other => FailureKind::Other,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

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
        let restart_failed = WorkerFault::new(FaultKind::Unavailable, "no python");
        let timed_out = WorkerFault::new(FaultKind::TimedOut(Duration::from_secs(1)), "slow");
        let cases = [
            (CoreError::from(auth), FailureKind::ProviderAuth),
            (CoreError::from(down), FailureKind::ProviderUnavailable),
            (CoreError::from(long), FailureKind::ContextOverflow),
            (
                CoreError::worker("restarting Blender", restart_failed),
                FailureKind::WorkerUnavailable,
            ),
            (
                CoreError::worker("rendering", timed_out),
                FailureKind::WorkerUnavailable,
            ),
            (
                CoreError::worker("rendering", WorkerFault::new(FaultKind::Refused, "no")),
                FailureKind::Other,
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
