//! The queue pair every run is driven through: typed events out, cancel in, the outcome at
//! the end. The loop's runs ([`crate::start`], [`crate::resume`]) and viga-gn's Geometry
//! Nodes runs both hand their front end a [`RunHandle`]; the run itself holds the other end,
//! a [`RunLink`].

use std::path::PathBuf;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use viga_protocol::event::TimedEvent;

use crate::{CoreError, RunOutcome};

/// A run in progress: read its events, cancel it, wait for its outcome `O`.
///
/// `F` is where the run keeps its folder: a loop run always has one (`PathBuf`), a Geometry
/// Nodes run only when it was given an output root (`Option<PathBuf>`).
#[derive(Debug)]
pub struct RunHandle<O = RunOutcome, F = PathBuf> {
    events: mpsc::UnboundedReceiver<TimedEvent>,
    cancel: watch::Sender<bool>,
    task: JoinHandle<Result<O, CoreError>>,
    folder: F,
}

impl<O: Send + 'static, F> RunHandle<O, F> {
    /// Opens a queue pair, lets `prepare` build the run around its end of it, and spawns the
    /// run on the current tokio runtime (like `tokio::spawn`, it must be called inside one).
    pub fn spawn<R>(folder: F, prepare: impl FnOnce(RunLink) -> R) -> Self
    where
        R: Future<Output = Result<O, CoreError>> + Send + 'static,
    {
        let (events_sender, events) = mpsc::unbounded_channel();
        let (cancel, cancel_receiver) = watch::channel(false);
        let run = prepare(RunLink {
            events: events_sender,
            cancel: cancel_receiver,
        });
        Self {
            events,
            cancel,
            task: tokio::spawn(run),
            folder,
        }
    }

    /// The next event; `None` once the run has finished and every event was read.
    pub async fn next_event(&mut self) -> Option<TimedEvent> {
        self.events.recv().await
    }

    /// Asks the run to stop. A model call in flight is abandoned at once; the run then
    /// finishes writing its folder and ends as cancelled.
    pub fn cancel(&self) {
        let _ = self.cancel.send(true);
    }

    /// A handle that cancels this run from elsewhere (a Ctrl-C handler, a test's model).
    pub fn canceller(&self) -> Canceller {
        Canceller(self.cancel.clone())
    }

    pub fn folder(&self) -> &F {
        &self.folder
    }

    /// The run's outcome, once it has ended. `Err` only when the run's task itself failed
    /// (it panicked or the runtime shut down), or a loop run could not write its last event.
    pub async fn wait(self) -> Result<O, CoreError> {
        self.task.await.map_err(CoreError::Task)?
    }
}

/// Cancels one run; cloned freely.
#[derive(Debug, Clone)]
pub struct Canceller(watch::Sender<bool>);

impl Canceller {
    pub fn cancel(&self) {
        let _ = self.0.send(true);
    }
}

/// The run's end of the queue pair: where it sends its events and hears a cancel.
#[derive(Debug)]
pub struct RunLink {
    events: mpsc::UnboundedSender<TimedEvent>,
    cancel: watch::Receiver<bool>,
}

/// What [`RunLink::until_cancelled`] answers when the run was cancelled first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the run was cancelled")]
pub struct Cancelled;

impl RunLink {
    /// Hands an event to the front end.
    pub fn send(&self, event: TimedEvent) {
        // A front end that stopped listening does not stop the run.
        let _ = self.events.send(event);
    }

    /// Whether the front end asked the run to stop.
    pub fn is_cancelled(&self) -> bool {
        *self.cancel.borrow()
    }

    /// Awaits `work` unless the run is cancelled first; then `work` is dropped where it is
    /// (a model call is abandoned mid-flight) and the answer is [`Cancelled`].
    pub async fn until_cancelled<T>(&self, work: impl Future<Output = T>) -> Result<T, Cancelled> {
        if self.is_cancelled() {
            return Err(Cancelled);
        }
        let mut cancel = self.cancel.clone();
        tokio::pin!(work);
        let cancelled = tokio::select! {
            biased;
            // `is_ok` drops the borrow guard at once; it must not live across an await.
            changed = cancel.wait_for(|cancelled| *cancelled) => changed.is_ok(),
            output = &mut work => return Ok(output),
        };
        if cancelled {
            Err(Cancelled)
        } else {
            // The handle was dropped without cancelling: nobody can cancel any more.
            Ok(work.await)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    #[tokio::test]
    async fn a_cancel_interrupts_slow_work_at_once() {
        let handle = RunHandle::<(), ()>::spawn((), |link| async move {
            let slow = tokio::time::sleep(Duration::from_secs(30));
            assert_eq!(link.until_cancelled(slow).await, Err(Cancelled));
            assert!(link.is_cancelled());
            Ok(())
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        let cancelled_at = Instant::now();
        handle.canceller().cancel();
        handle.wait().await.unwrap();
        assert!(cancelled_at.elapsed() < Duration::from_secs(1));
    }

    #[tokio::test]
    async fn work_goes_on_when_the_handle_is_dropped_without_a_cancel() {
        let (sender, receiver) = tokio::sync::oneshot::channel();
        let handle = RunHandle::<(), ()>::spawn((), |link| async move {
            let work = tokio::time::sleep(Duration::from_millis(100));
            let _ = sender.send(link.until_cancelled(work).await);
            Ok(())
        });
        drop(handle);
        assert_eq!(receiver.await.unwrap(), Ok(()));
    }
}
