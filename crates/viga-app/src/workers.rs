//! Starting the workers model-written programs run in, contained under the front end's
//! choice: a Blender of viga's own (for a scene run, a person's scene, the search), and the
//! slide and page renderers, through the same launcher under the same policy.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use viga_blender::attach::Connection;
use viga_blender::{
    Access, BlenderLauncher, ContainedWorkers, ContainmentPolicy, ContainmentStatus, Worker,
    WorkerRequest, locate,
};
use viga_core::Domain;
use viga_domain_page::{PageDomain, PageSettings};
use viga_domain_slides::{SlidesDomain, SlidesSettings};
use viga_slides::{SlideTools, SlideWorker, SlidesConfig};
use viga_web::{WebConfig, WebWorker};

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

/// The slides domain on a LibreOffice of its own, started contained, knowing what holds for
/// it (the renderer's launcher's report), which the run records.
pub async fn slides_domain(
    settings: SlidesSettings,
    contained: &ContainedWorkers,
    program_timeout: std::time::Duration,
    tell: &dyn Tell,
) -> Result<Arc<dyn Domain>, AppError> {
    let reads = settings.assets.iter().cloned().collect();
    let mut config = SlidesConfig::new(SlideTools::locate()?);
    config.confinement = contained.confinement(&Access::reading(reads))?;
    config.program_timeout = program_timeout;
    let worker = SlideWorker::start(config).await?;
    let status = renderer_status(worker.contained_report().await, contained, tell)?;
    let domain = SlidesDomain::new(settings, Arc::new(worker))?.with_containment(status);
    Ok(Arc::new(domain))
}

/// The page domain on a Chromium of its own, started contained (see [`slides_domain`]).
pub async fn page_domain(
    settings: PageSettings,
    contained: &ContainedWorkers,
    program_timeout: std::time::Duration,
    tell: &dyn Tell,
) -> Result<Arc<dyn Domain>, AppError> {
    let mut config = WebConfig::locate()?;
    config.confinement = contained.confinement(&Access::default())?;
    config.load_timeout = program_timeout;
    let worker = WebWorker::start(config).await?;
    let status = renderer_status(worker.contained_report().await, contained, tell)?;
    let domain = PageDomain::new(settings, Arc::new(worker))?.with_containment(status);
    Ok(Arc::new(domain))
}

/// What holds for a renderer, from its launcher's report; said when it is less than asked.
fn renderer_status(
    report: Option<String>,
    contained: &ContainedWorkers,
    tell: &dyn Tell,
) -> Result<ContainmentStatus, AppError> {
    let status = contained.renderer_status(report.as_deref())?;
    warn_if_less(&status, tell);
    Ok(status)
}
