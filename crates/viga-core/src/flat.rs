//! What the two 2D domains ([`crate::slides`], [`crate::page`]) share: their renderers'
//! losses reported to the domain's [`WorkerWatch`] the way a lost Blender is, pictures as the
//! loop keeps them, and target views parsed from their labels.

use std::time::Duration;

use viga_protocol::bridge::{RenderEngine, RenderOutput};
use viga_protocol::message::ImageData;
use viga_slides::{LostReason, Recovery, WorkerLost};

use crate::domain::{FaultKind, WorkerFault, WorkerWatch};

/// A renderer lost during a call, told to `watch` (so the loop rebuilds the result and redoes
/// the phase, or stops after two failed restarts) and returned as the loop's fault. `limit`
/// is the program's time limit when the call was the program itself (a page's load): its
/// timeout is then the program's, which the model hears as a fast retry.
pub(crate) fn lost(watch: &WorkerWatch, lost: WorkerLost, limit: Option<Duration>) -> WorkerFault {
    let message = lost.to_string();
    let kind = match (&lost.reason, &lost.recovery) {
        (_, Recovery::RestartFailed(_)) => FaultKind::Unavailable,
        (LostReason::Timeout(waited), _) if limit.is_some() => FaultKind::TimedOut(*waited),
        _ => FaultKind::Unavailable,
    };
    let fault = WorkerFault::new(kind, message.clone()).with_source(lost.clone());
    match lost.recovery {
        Recovery::RestartFailed(_) => watch.restart_failed(fault.clone()),
        // The page (the renderer's state) is gone either way: the tab, or the whole browser.
        Recovery::Restarted { .. } | Recovery::ProcessKept => watch.lost(message, true),
        // A renderer viga does not supervise, as a Blender viga does not run.
        Recovery::None => watch.gone(fault.clone()),
    }
    fault
}

/// A renderer that could not be started for a call: the state is gone as after a loss.
pub(crate) fn not_started(watch: &WorkerWatch, message: String) -> WorkerFault {
    let fault = WorkerFault::new(FaultKind::Unavailable, message);
    watch.restart_failed(fault.clone());
    fault
}

/// A PNG as the loop keeps renders. The 2D renderers are no Blender, so the engine field
/// holds its default and `camera` names the view; the loop reads neither.
pub(crate) fn picture(view: &str, png: Vec<u8>, width: u32, height: u32, ms: f64) -> RenderOutput {
    RenderOutput {
        image: ImageData::png(png),
        width,
        height,
        engine: RenderEngine::default(),
        camera: view.to_owned(),
        render_ms: ms,
    }
}

/// Milliseconds since `started`.
pub(crate) fn elapsed_ms(started: std::time::Instant) -> f64 {
    started.elapsed().as_secs_f64() * 1000.0
}
