//! Starting the workers model-written programs run in, contained under the front end's
//! choice: a Blender of viga's own (for a scene run, a person's scene, the search), and the
//! slide and page renderers, through the same launcher under the same policy.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use viga_blender::StartBlender as _;

use viga_blender::attach::Connection;
use viga_blender::{
    Access, BlenderLauncher, ContainedWorkers, ContainmentPolicy, ContainmentStatus, Worker,
    WorkerRequest, locate,
};
use viga_core::Domain;
use viga_domain_page::PageSettings;
use viga_domain_slides::SlidesSettings;

use crate::{AppError, Tell};

/// The Blender a worker of viga's own runs: the one set up for viga, or else the binary of
/// the `attached` Blender itself.
pub fn blender_for(attached: Option<&Connection>) -> Result<BlenderLauncher, AppError> {
    match (locate(), attached) {
        (Ok(launcher), _) => Ok(launcher),
        (Err(_), Some(connection)) if !connection.info.binary_path.is_empty() => {
            Ok(BlenderLauncher::Binary {
                blender: PathBuf::from(&connection.info.binary_path),
            })
        }
        (Err(err), _) => Err(err.into()),
    }
}

/// A Blender of viga's own for model-written programs, contained: besides its own scratch
/// folder and install it may reach what `access` names (viga itself writes the run folders),
/// and its programs find the run's `assets` in `VIGA_ASSETS_DIR`. It is the Blender set up
/// for viga, or else the binary of the `attached` Blender.
pub async fn start_blender(
    contained: &ContainedWorkers,
    attached: Option<&Connection>,
    access: Access,
    assets: Option<&Path>,
    tell: &dyn Tell,
) -> Result<Arc<Worker>, AppError> {
    let request = WorkerRequest::new(blender_for(attached)?, access).with_assets(assets);
    let worker = contained.start(&request).await?;
    warn_if_less(&worker.containment(), tell);
    Ok(Arc::new(worker))
}

/// Warns when model-written programs will run with less containment than asked for; the
/// run folder records the full status either way.
pub fn warn_if_less(status: &ContainmentStatus, tell: &dyn Tell) {
    if status.policy != ContainmentPolicy::Off && !status.is_complete() {
        tell.warn(&format!(
            "model-written programs run with {}",
            status.summary()
        ));
    }
}

/// The slides domain on a LibreOffice of its own, started contained (its containment said
/// when less than asked).
pub async fn slides_domain(
    settings: SlidesSettings,
    contained: &ContainedWorkers,
    program_timeout: std::time::Duration,
    tell: &dyn Tell,
) -> Result<Arc<dyn Domain>, AppError> {
    let domain = viga_domain_slides::start(settings, contained, program_timeout).await?;
    warn_about(&domain, tell);
    Ok(Arc::new(domain))
}

/// The page domain on a Chromium of its own, started contained (see [`slides_domain`]).
pub async fn page_domain(
    settings: PageSettings,
    contained: &ContainedWorkers,
    program_timeout: std::time::Duration,
    tell: &dyn Tell,
) -> Result<Arc<dyn Domain>, AppError> {
    let domain = viga_domain_page::start(settings, contained, program_timeout).await?;
    warn_about(&domain, tell);
    Ok(Arc::new(domain))
}

/// Says when `domain`'s worker runs with less containment than asked for.
pub fn warn_about(domain: &dyn Domain, tell: &dyn Tell) {
    if let Some(status) = domain.containment() {
        warn_if_less(&status, tell);
    }
}
