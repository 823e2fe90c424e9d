//! Notices every time Blender is lost, whoever was talking to it.
//!
//! The loop talks to Blender itself (programs, the scoring render) and through the
//! verifier's tools, which turn a lost worker into a plain message for the model. Both go
//! through one [`WatchedBlender`], a pass-through transport that keeps count, so after any
//! phase the loop can ask whether Blender was lost meanwhile and, if so, rebuild the scene
//! and do the phase again (see `Run::blender_phase_end`).

use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use viga_blender::{BlenderTransport, Recovery, TransportError};
use viga_protocol::bridge::BridgeCommand;

use crate::error::{copy_of_loss, is_failed_restart};

/// How many restarts may fail one after the other before the run gives up on Blender.
const RESTART_FAILURES_TOLERATED: u32 = 1;

/// A loss as the supervisor reported it, in words for events and messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Loss {
    pub description: String,
}

#[derive(Debug, Default)]
struct Record {
    /// Every loss so far; a mark is a position in this count.
    losses: u64,
    last_loss: Option<Loss>,
    /// Restarts that failed since the last call Blender answered.
    failed_restarts_in_a_row: u32,
    /// What said so last: the error a run that gives up on Blender reports.
    last_failed_restart: Option<TransportError>,
    /// A loss nobody recovers from (a plain connection): the run cannot go on.
    unrecoverable: Option<TransportError>,
}

/// What happened to Blender since a [`Mark`].
#[derive(Debug)]
pub(crate) enum SinceMark {
    /// Nothing: every call was answered, or failed without losing Blender.
    Steady,
    /// Blender was lost (and restarted, or will be by the next call): the scene is gone.
    Lost(Loss),
    /// Blender is gone for good: restarts failed too often, or nobody restarts it.
    Gone(TransportError),
}

/// A point in a [`WatchedBlender`]'s history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mark(u64);

pub(crate) struct WatchedBlender {
    inner: std::sync::Arc<dyn BlenderTransport>,
    record: Mutex<Record>,
}

impl std::fmt::Debug for WatchedBlender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchedBlender")
            .field("inner", &self.inner.describe())
            .finish_non_exhaustive()
    }
}

impl WatchedBlender {
    pub(crate) fn new(inner: std::sync::Arc<dyn BlenderTransport>) -> Self {
        Self {
            inner,
            record: Mutex::new(Record::default()),
        }
    }

    pub(crate) fn mark(&self) -> Mark {
        Mark(self.record.lock().map(|r| r.losses).unwrap_or_default())
    }

    /// What happened to Blender since `mark`.
    pub(crate) fn since(&self, mark: Mark) -> SinceMark {
        let Ok(record) = self.record.lock() else {
            return SinceMark::Steady;
        };
        if let Some(err) = record.unrecoverable.as_ref().and_then(copy_of_loss) {
            return SinceMark::Gone(err);
        }
        if record.failed_restarts_in_a_row > RESTART_FAILURES_TOLERATED
            && let Some(err) = record.last_failed_restart.as_ref().and_then(copy_of_loss)
        {
            return SinceMark::Gone(err);
        }
        match &record.last_loss {
            Some(loss) if record.losses > mark.0 => SinceMark::Lost(loss.clone()),
            _ => SinceMark::Steady,
        }
    }

    fn note(&self, outcome: &Result<Value, TransportError>) {
        let Ok(mut record) = self.record.lock() else {
            return;
        };
        let err = match outcome {
            Ok(_) => {
                record.failed_restarts_in_a_row = 0;
                return;
            }
            Err(err) => err,
        };
        if is_failed_restart(err) {
            record.failed_restarts_in_a_row += 1;
            record.last_failed_restart = copy_of_loss(err);
        }
        match err {
            TransportError::Lost {
                recovery: Recovery::None,
                ..
            } => record.unrecoverable = copy_of_loss(err),
            TransportError::Lost { recovery, .. } => {
                if matches!(recovery, Recovery::Restarted { .. }) {
                    record.failed_restarts_in_a_row = 0;
                }
                record.losses += 1;
                record.last_loss = Some(Loss {
                    description: err.to_string(),
                });
            }
            // A restart that failed before the call could be sent: the scene is gone as
            // surely as after a loss.
            TransportError::Start(_) => {
                record.losses += 1;
                record.last_loss = Some(Loss {
                    description: err.to_string(),
                });
            }
            _ => {}
        }
    }
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

    fn shared_folder(&self) -> Option<&std::path::Path> {
        self.inner.shared_folder()
    }
}
