//! Notices every time Blender is lost, whoever was talking to it.
//!
//! The loop talks to Blender through the scene domain (programs, the scoring render) and
//! through the verifier's tools, which turn a lost worker into a plain message for the
//! model. Both go through one [`WatchedBlender`], a pass-through transport that reports
//! each loss and each failed restart to the domain's [`WorkerWatch`], so after any phase the
//! loop can ask whether Blender was lost meanwhile and, if so, rebuild the scene and do the
//! phase again.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use viga_blender::{BlenderTransport, LostReason, Recovery, TransportError};
use viga_protocol::bridge::BridgeCommand;

use viga_core::domain::{FaultKind, WorkerFault, WorkerWatch};

pub(crate) struct WatchedBlender {
    inner: Arc<dyn BlenderTransport>,
    watch: Arc<WorkerWatch>,
}

impl std::fmt::Debug for WatchedBlender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchedBlender")
            .field("inner", &self.inner.describe())
            .finish_non_exhaustive()
    }
}

impl WatchedBlender {
    pub(crate) fn new(inner: Arc<dyn BlenderTransport>, watch: Arc<WorkerWatch>) -> Self {
        Self { inner, watch }
    }

    fn note(&self, outcome: &Result<Value, TransportError>) {
        let err = match outcome {
            Ok(_) => return self.watch.answered(),
            Err(err) => err,
        };
        match err {
            TransportError::Lost {
                recovery: Recovery::None,
                ..
            } => self.watch.gone(blender_fault(err)),
            TransportError::Lost {
                recovery: Recovery::RestartFailed(_),
                ..
            }
            // A restart that failed before the call could be sent: the scene is gone as
            // surely as after a loss.
            | TransportError::Start(_) => self.watch.restart_failed(blender_fault(err)),
            TransportError::Lost {
                recovery: Recovery::Restarted { .. },
                ..
            } => self.watch.lost(err.to_string(), true),
            _ => {}
        }
    }
}

/// A transport error as the loop sees a worker's failure; the error itself is kept as the
/// source.
pub(crate) fn blender_fault(err: &TransportError) -> WorkerFault {
    let kind = match err {
        TransportError::Lost {
            reason: LostReason::Timeout(limit),
            recovery: Recovery::Restarted { .. },
            ..
        } => FaultKind::TimedOut(*limit),
        TransportError::Start(_)
        | TransportError::Handshake(_)
        | TransportError::HandshakeRefused { .. }
        | TransportError::Lost { .. } => FaultKind::Unavailable,
        TransportError::Refused { .. }
        | TransportError::MalformedReply { .. }
        | TransportError::Untrusted { .. } => FaultKind::Refused,
    };
    WorkerFault {
        kind,
        message: err.to_string(),
        source: None,
    }
}

/// [`blender_fault`] keeping `err` as the source.
pub(crate) fn into_fault(err: TransportError) -> WorkerFault {
    let fault = blender_fault(&err);
    fault.with_source(err)
}

#[async_trait]
impl BlenderTransport for WatchedBlender {
    async fn call(
        &self,
        command: BridgeCommand,
        timeout: Option<Duration>,
    ) -> Result<Value, TransportError> {
        let outcome = self.inner.call(command, timeout).await;
        self.note(&outcome);
        outcome
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn last_program_output(&self) -> Option<String> {
        self.inner.last_program_output()
    }

    fn shared_folder(&self) -> Option<&viga_blender::ScratchFolder> {
        self.inner.shared_folder()
    }

    async fn distrust(&self, why: &str) -> Recovery {
        self.watch.refused(why);
        let recovery = self.inner.distrust(why).await;
        if let Recovery::RestartFailed(failed) = &recovery {
            let fault = WorkerFault::new(FaultKind::Unavailable, failed.clone());
            self.watch.restart_failed(fault);
        }
        recovery
    }

    fn containment(&self) -> Option<viga_sandbox::ContainmentStatus> {
        self.inner.containment()
    }
}
