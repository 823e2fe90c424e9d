//! The queue pair every run is driven through: typed events out, cancel in, the outcome at
//! the end. The loop's runs ([`crate::start`], [`crate::resume`]) and viga-gn's Geometry
//! Nodes runs both hand their front end a [`RunHandle`]; the run itself holds the other end,
//! a [`RunLink`].
//!
//! A front end that shows model text as it arrives (the Blender panel, through `--events
//! jsonl`) asks for it with [`RunHandle::stream_model_text`]: the run then asks the model
//! through [`Provider::stream`] and hands each piece over as a [`RunUpdate::ModelText`]
//! beside its events. The pieces are not events: the run's log keeps the whole reply, in the
//! event that records it.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use viga_protocol::event::{ModelRole, StopReason, TimedEvent};
use viga_provider::{ModelRequest, ModelResponse, Provider, ProviderError, StreamEvent};

use crate::{CoreError, RunOutcome};

/// A piece of a model's reply as it arrives (see [`RunHandle::stream_model_text`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelText {
    /// The iteration (a Geometry Nodes run's round, the add-on agent's step) it belongs to.
    pub index: u32,
    pub role: ModelRole,
    /// The next piece of the reply.
    pub delta: String,
}

/// What a run hands its front end: its events, in order, and, when asked for, model text
/// as it arrives, before the event that records the whole reply.
#[derive(Debug, Clone, PartialEq)]
pub enum RunUpdate {
    Event(TimedEvent),
    ModelText(ModelText),
}

/// Whether a run was asked to stop, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Halt {
    Running,
    Cancelled,
    /// The run's time limit passed.
    OutOfTime(Duration),
}

/// A run in progress: read its events, cancel it, wait for its outcome `O`.
///
/// `F` is where the run keeps its folder: a loop run always has one (`PathBuf`), a Geometry
/// Nodes run only when it was given an output root (`Option<PathBuf>`).
#[derive(Debug)]
pub struct RunHandle<O = RunOutcome, F = PathBuf> {
    updates: mpsc::UnboundedReceiver<RunUpdate>,
    cancel: watch::Sender<Halt>,
    /// Whether the front end wants model text as it arrives.
    model_text: Arc<AtomicBool>,
    task: JoinHandle<Result<O, CoreError>>,
    /// The timer of the run's time limit, stopped when the run is waited for.
    timer: Option<JoinHandle<()>>,
    folder: F,
}

impl<O: Send + 'static, F> RunHandle<O, F> {
    /// Opens a queue pair, lets `prepare` build the run around its end of it, and spawns the
    /// run on the current tokio runtime (like `tokio::spawn`, it must be called inside one).
    pub fn spawn<R>(folder: F, prepare: impl FnOnce(RunLink) -> R) -> Self
    where
        R: Future<Output = Result<O, CoreError>> + Send + 'static,
    {
        let (updates_sender, updates) = mpsc::unbounded_channel();
        let (cancel, cancel_receiver) = watch::channel(Halt::Running);
        let model_text = Arc::new(AtomicBool::new(false));
        let run = prepare(RunLink {
            updates: updates_sender,
            cancel: cancel_receiver,
            model_text: Arc::clone(&model_text),
        });
        Self {
            updates,
            cancel,
            model_text,
            task: tokio::spawn(run),
            timer: None,
            folder,
        }
    }

    /// Stops the run once `limit` has passed since now, as a cancel does (a model call in
    /// flight is abandoned, the run writes its folder), and the run ends as
    /// [`StopReason::TimeLimit`]. `None`: no limit.
    #[must_use]
    pub fn with_time_limit(mut self, limit: Option<Duration>) -> Self {
        if let Some(limit) = limit {
            let halt = self.cancel.clone();
            self.timer = Some(tokio::spawn(async move {
                tokio::time::sleep(limit).await;
                halt.send_if_modified(|halt| {
                    let running = *halt == Halt::Running;
                    if running {
                        *halt = Halt::OutOfTime(limit);
                    }
                    running
                });
            }));
        }
        self
    }

    /// The next event; `None` once the run has finished and every event was read. Model
    /// text, if it was asked for, is skipped: [`RunHandle::next_update`] has it.
    pub async fn next_event(&mut self) -> Option<TimedEvent> {
        loop {
            match self.updates.recv().await? {
                RunUpdate::Event(event) => return Some(event),
                RunUpdate::ModelText(_) => {}
            }
        }
    }

    /// The next event or piece of model text; `None` once the run has finished and
    /// everything was read.
    pub async fn next_update(&mut self) -> Option<RunUpdate> {
        self.updates.recv().await
    }

    /// Asks the run to hand over model text as it arrives ([`RunUpdate::ModelText`]), from
    /// the next model call on: the run asks the model through [`Provider::stream`]. Call it
    /// right after the run started; a call already in flight is not streamed (its reply
    /// still arrives whole in the events).
    pub fn stream_model_text(&self) {
        self.model_text.store(true, Ordering::SeqCst);
    }

    /// Asks the run to stop. A model call in flight is abandoned at once; the run then
    /// finishes writing its folder and ends as cancelled.
    pub fn cancel(&self) {
        stop(&self.cancel);
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
        let ended = self.task.await.map_err(CoreError::Task);
        if let Some(timer) = self.timer {
            timer.abort();
        }
        ended?
    }
}

/// Asks a running run to stop as cancelled (a run already stopped keeps its reason).
fn stop(halt: &watch::Sender<Halt>) {
    halt.send_if_modified(|halt| {
        let running = *halt == Halt::Running;
        if running {
            *halt = Halt::Cancelled;
        }
        running
    });
}

/// Cancels one run; cloned freely.
#[derive(Debug, Clone)]
pub struct Canceller(watch::Sender<Halt>);

impl Canceller {
    pub fn cancel(&self) {
        stop(&self.0);
    }
}

/// The run's end of the queue pair: where it sends its events and hears a cancel.
#[derive(Debug)]
pub struct RunLink {
    updates: mpsc::UnboundedSender<RunUpdate>,
    cancel: watch::Receiver<Halt>,
    model_text: Arc<AtomicBool>,
}

/// What [`RunLink::until_cancelled`] answers when the run was cancelled first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the run was cancelled")]
pub struct Cancelled;

impl RunLink {
    /// Hands an event to the front end.
    pub fn send(&self, event: TimedEvent) {
        // A front end that stopped listening does not stop the run.
        let _ = self.updates.send(RunUpdate::Event(event));
    }

    /// Whether the front end wants model text as it arrives.
    pub fn wants_model_text(&self) -> bool {
        self.model_text.load(Ordering::SeqCst)
    }

    /// Asks `provider` as `role` for iteration (round, step) `index`, unless the run is
    /// cancelled first (the call is then abandoned where it is). When the front end wants
    /// model text, the reply is streamed and each piece handed over as it arrives.
    pub async fn ask_model(
        &self,
        provider: &dyn Provider,
        request: &ModelRequest,
        index: u32,
        role: ModelRole,
    ) -> Result<Result<ModelResponse, ProviderError>, Cancelled> {
        if !self.wants_model_text() {
            return self.until_cancelled(provider.complete(request)).await;
        }
        let streamed = async {
            let mut stream = provider.stream(request).await?;
            while let Some(event) = stream.next().await {
                match event? {
                    StreamEvent::TextDelta(delta) => {
                        let text = ModelText { index, role, delta };
                        let _ = self.updates.send(RunUpdate::ModelText(text));
                    }
                    StreamEvent::ToolCall(_) => {}
                    StreamEvent::Completed(response) => return Ok(response),
                }
            }
            Err(ProviderError::MalformedResponse {
                provider: provider.name().to_owned(),
                message: "the stream ended without a completed response".to_owned(),
            })
        };
        self.until_cancelled(streamed).await
    }

    /// Whether the run was asked to stop: by its front end, or by its time limit.
    pub fn is_cancelled(&self) -> bool {
        *self.cancel.borrow() != Halt::Running
    }

    /// Why a run that was stopped from outside ends: cancelled, or out of time.
    pub fn stop_reason(&self) -> StopReason {
        match *self.cancel.borrow() {
            Halt::OutOfTime(limit) => StopReason::TimeLimit {
                seconds: limit.as_secs(),
            },
            Halt::Running | Halt::Cancelled => StopReason::Cancelled,
        }
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
            changed = cancel.wait_for(|halt| *halt != Halt::Running) => changed.is_ok(),
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
    async fn a_time_limit_stops_slow_work_and_says_so() {
        let handle = RunHandle::<StopReason, ()>::spawn((), |link| async move {
            let slow = tokio::time::sleep(Duration::from_secs(30));
            assert_eq!(link.until_cancelled(slow).await, Err(Cancelled));
            Ok(link.stop_reason())
        })
        .with_time_limit(Some(Duration::from_millis(50)));
        let canceller = handle.canceller();
        let stop = handle.wait().await.unwrap();
        assert_eq!(stop, StopReason::TimeLimit { seconds: 0 });
        // A cancel after the limit does not change why the run stopped.
        canceller.cancel();
    }

    #[tokio::test]
    async fn a_cancel_before_the_time_limit_is_a_cancel() {
        let handle = RunHandle::<StopReason, ()>::spawn((), |link| async move {
            let slow = tokio::time::sleep(Duration::from_secs(30));
            assert_eq!(link.until_cancelled(slow).await, Err(Cancelled));
            tokio::time::sleep(Duration::from_millis(200)).await;
            Ok(link.stop_reason())
        })
        .with_time_limit(Some(Duration::from_millis(100)));
        handle.cancel();
        assert_eq!(handle.wait().await.unwrap(), StopReason::Cancelled);
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
