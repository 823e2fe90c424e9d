//! What domains whose worker is a supervised renderer process (LibreOffice for slides,
//! Chromium for pages) share: their renderers' losses reported to the domain's
//! [`WorkerWatch`] the way any lost worker is, and pictures as the loop keeps them.

use std::time::Duration;

use viga_process::{LostReason, Recovery, WorkerLost};
use viga_protocol::bridge::ViewPicture;
use viga_protocol::message::ImageData;

use crate::domain::{FaultKind, WorkerFault, WorkerWatch};

/// A renderer lost during a call, told to `watch` (so the loop rebuilds the result and redoes
/// the phase, or stops after two failed restarts) and returned as the loop's fault. `limit`
/// is the program's time limit when the call was the program itself (a page's load): its
/// timeout is then the program's, which the model hears as a fast retry.
pub fn lost(watch: &WorkerWatch, lost: WorkerLost, limit: Option<Duration>) -> WorkerFault {
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
pub fn not_started(watch: &WorkerWatch, message: String) -> WorkerFault {
    let fault = WorkerFault::new(FaultKind::Unavailable, message);
    watch.restart_failed(fault.clone());
    fault
}

/// A PNG as the loop keeps pictures, made by a renderer that is not Blender.
pub fn picture(png: Vec<u8>, width: u32, height: u32, ms: f64) -> ViewPicture {
    ViewPicture {
        image: ImageData::png(png),
        width,
        height,
        render_ms: ms,
        engine: None,
    }
}

/// Milliseconds since `started`.
pub fn elapsed_ms(started: std::time::Instant) -> f64 {
    started.elapsed().as_secs_f64() * 1000.0
}
