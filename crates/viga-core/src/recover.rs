//! Blender lost in the middle of a phase costs nothing but time: the supervisor restarts it,
//! the iteration's program runs again on the base scene (a restarted Blender has an empty
//! scene), and the phase is done again. Only Blender that cannot be restarted twice in a row
//! stops the run.

use viga_protocol::event::RunEvent;

use crate::CoreError;
use crate::run::Run;
use crate::watch::{Loss, SinceMark};

/// How many times one phase is done again after losing Blender, before the loop gives that
/// phase up (a scene that takes Blender down whenever it is rendered) and goes on without it.
pub(crate) const PHASE_REDOS: u32 = 3;

/// What a run that stops because Blender is gone (`err`) says happened: a Blender nobody
/// restarts (one viga does not supervise), or restarts that failed.
pub(crate) fn gone(err: &viga_blender::TransportError) -> &'static str {
    match err {
        viga_blender::TransportError::Lost {
            recovery: viga_blender::Recovery::None,
            ..
        } => "Blender is gone and nothing restarts it (a Blender viga does not supervise)",
        _ => "Blender could not be restarted twice in a row; check it with `viga doctor`",
    }
}

/// How a phase that talked to Blender ended.
#[derive(Debug)]
pub(crate) enum PhaseEnd {
    /// Blender stayed up (or the run was cancelled): the phase's result stands.
    Done,
    /// Blender was lost and the scene has been rebuilt: do the phase again.
    Redo,
    /// Blender was lost every time: go on without the phase; the text says so.
    GaveUp(String),
}

impl Run {
    /// Ends a phase that began at `mark`, described by `phase` ("iteration 2: rendering the
    /// canonical views"). When Blender was lost meanwhile, rebuilds the scene and asks for
    /// the phase again, at most [`PHASE_REDOS`] times (`redos` counts them).
    pub(crate) async fn blender_phase_end<T>(
        &mut self,
        phase: &str,
        mark: crate::watch::Mark,
        redos: &mut u32,
        outcome: &Result<T, CoreError>,
    ) -> Result<PhaseEnd, CoreError> {
        if matches!(outcome, Err(CoreError::Cancelled)) {
            return Ok(PhaseEnd::Done);
        }
        let loss = match self.blender.since(mark) {
            SinceMark::Steady => return Ok(PhaseEnd::Done),
            SinceMark::Gone(err) => return Err(CoreError::blender(gone(&err), err)),
            SinceMark::Lost(loss) => loss,
        };
        if *redos < PHASE_REDOS {
            *redos += 1;
            if self.rebuild_scene(phase, &loss).await? {
                return Ok(PhaseEnd::Redo);
            }
        }
        let message = format!(
            "{phase}: Blender was lost every time ({} tries), so this is skipped; last: {}",
            *redos + 1,
            loss.description
        );
        self.emit(RunEvent::Warning {
            message: message.clone(),
        })?;
        Ok(PhaseEnd::GaveUp(message))
    }

    /// Runs the program the scene was built by again on the base scene, after `loss`;
    /// whether the scene is back (`false`: Blender was lost every time it tried).
    async fn rebuild_scene(&mut self, phase: &str, loss: &Loss) -> Result<bool, CoreError> {
        self.emit(RunEvent::WorkerRestarted {
            reason: format!(
                "{} ({phase}); the scene is rebuilt by running its program again",
                loss.description
            ),
        })?;
        let code = self.scene_program.clone().unwrap_or_default();
        for _ in 0..PHASE_REDOS {
            let mark = self.blender.mark();
            // The program ran before: its result is known, only its scene is wanted.
            let _rerun = self.run_on_base_scene(&code).await?;
            match self.blender.since(mark) {
                SinceMark::Steady => return Ok(true),
                SinceMark::Gone(err) => return Err(CoreError::blender(gone(&err), err)),
                SinceMark::Lost(again) => self.emit(RunEvent::WorkerRestarted {
                    reason: format!("{} (rebuilding the scene)", again.description),
                })?,
            }
        }
        Ok(false)
    }
}
