//! A worker (Blender, for a scene) lost in the middle of a phase costs nothing but time: the
//! supervisor restarts it, the iteration's program runs again from the starting state (a
//! restarted worker has lost its state), and the phase is done again. Only a worker that
//! cannot be restarted twice in a row stops the run.

use viga_protocol::event::RunEvent;

use crate::CoreError;
use crate::domain::{Mark, SinceMark, WorkerFault};
use crate::run::Run;

/// How many times one phase is done again after losing the worker, before the loop gives
/// that phase up (a result that takes the worker down whenever it is rendered) and goes on
/// without it.
pub(crate) const PHASE_REDOS: u32 = 3;

/// The error of a run that stops because its worker is gone (`fault`): nothing restarts it
/// (`nobody_restarts`), or restarts failed twice in a row.
pub(crate) fn gone(fault: WorkerFault, nobody_restarts: bool) -> CoreError {
    let context = if nobody_restarts {
        "the worker is gone and nothing restarts it (one viga does not supervise, such as a person's Blender)"
    } else {
        "the worker could not be restarted twice in a row; check it with `viga doctor`"
    };
    CoreError::worker(context, fault)
}

/// How a phase that talked to the worker ended.
#[derive(Debug)]
pub(crate) enum PhaseEnd {
    /// The worker stayed up (or the run was cancelled): the phase's result stands.
    Done,
    /// The worker was lost and the state has been rebuilt: do the phase again.
    Redo,
    /// The worker was lost every time: go on without the phase; the text says so.
    GaveUp(String),
}

impl Run {
    /// Ends a phase that began at `mark`, described by `phase` ("iteration 2: rendering the
    /// canonical views"). When the worker was lost meanwhile, rebuilds the state and asks for
    /// the phase again, at most [`PHASE_REDOS`] times (`redos` counts them).
    pub(crate) async fn phase_end<T>(
        &mut self,
        phase: &str,
        mark: Mark,
        redos: &mut u32,
        outcome: &Result<T, CoreError>,
    ) -> Result<PhaseEnd, CoreError> {
        if matches!(outcome, Err(CoreError::Cancelled)) {
            return Ok(PhaseEnd::Done);
        }
        let loss = match self.domain.watch().since(mark) {
            SinceMark::Steady => return Ok(PhaseEnd::Done),
            SinceMark::Gone {
                fault,
                nobody_restarts,
            } => return Err(gone(fault, nobody_restarts)),
            SinceMark::Lost(loss) => loss,
        };
        if *redos < PHASE_REDOS {
            *redos += 1;
            if self.rebuild_scene(phase, &loss).await? {
                return Ok(PhaseEnd::Redo);
            }
        }
        let message = format!(
            "{phase}: the worker was lost every time ({} tries), so this is skipped; last: {loss}",
            *redos + 1,
        );
        self.emit(RunEvent::Warning {
            message: message.clone(),
        })?;
        Ok(PhaseEnd::GaveUp(message))
    }

    /// Runs the program the state was built by again from the starting state, after
    /// `loss`; whether the state is back (`false`: the worker was lost every time it tried).
    async fn rebuild_scene(&mut self, phase: &str, loss: &str) -> Result<bool, CoreError> {
        self.emit(RunEvent::WorkerRestarted {
            reason: format!("{loss} ({phase}); the result is rebuilt by running its program again"),
        })?;
        let code = self.scene_program.clone().unwrap_or_default();
        for _ in 0..PHASE_REDOS {
            let mark = self.domain.watch().mark();
            // The program ran before: its result is known, only its state is wanted.
            let _rerun = self.run_from_start(&code).await?;
            match self.domain.watch().since(mark) {
                SinceMark::Steady => return Ok(true),
                SinceMark::Gone {
                    fault,
                    nobody_restarts,
                } => return Err(gone(fault, nobody_restarts)),
                SinceMark::Lost(again) => self.emit(RunEvent::WorkerRestarted {
                    reason: format!("{again} (rebuilding the result)"),
                })?,
            }
        }
        Ok(false)
    }
}
