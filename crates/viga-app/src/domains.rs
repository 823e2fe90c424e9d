//! The domains this application knows (the scene, slides, pages), each as its kind (what
//! reports and resume read of its run folders) and how its domain is built again on a
//! contained worker to continue a run. Reports and resume ask this table, so a new domain
//! is a crate of its own and one more entry here.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use viga_blender::ContainedWorkers;
use viga_core::{Domain, DomainKind, DomainKinds, RunFolder};
use viga_domain_page::{PageDomain, PageKind};
use viga_domain_scene::{OWN_INPUTS, SceneDomain, SceneKind, resumable_scene};
use viga_domain_slides::{SlidesDomain, SlidesKind};
use viga_provider::Provider;

use crate::{AppError, Tell};

/// How a domain is built again from a run folder, on a worker started contained.
#[async_trait]
pub trait Reopen: Send + Sync {
    /// The domain of the run in `folder`, on a new worker, for `viga_core::resume`.
    async fn reopen(
        &self,
        folder: &Path,
        contained: &ContainedWorkers,
        provider: Arc<dyn Provider>,
        tell: &dyn Tell,
    ) -> Result<Arc<dyn Domain>, AppError>;
}

/// One domain this application runs.
#[derive(Clone)]
pub struct Registered {
    pub kind: Arc<dyn DomainKind>,
    pub reopen: Arc<dyn Reopen>,
}

impl std::fmt::Debug for Registered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registered")
            .field("kind", &self.kind.name())
            .finish_non_exhaustive()
    }
}

/// Every domain viga runs.
pub fn registered() -> Vec<Registered> {
    vec![
        Registered {
            kind: Arc::new(SceneKind),
            reopen: Arc::new(ReopenScene),
        },
        Registered {
            kind: Arc::new(SlidesKind),
            reopen: Arc::new(ReopenSlides),
        },
        Registered {
            kind: Arc::new(PageKind),
            reopen: Arc::new(ReopenPage),
        },
    ]
}

/// Every domain viga runs, for reports and resume.
pub fn kinds() -> DomainKinds {
    registered()
        .into_iter()
        .fold(DomainKinds::new(), |kinds, domain| kinds.with(domain.kind))
}

/// The registered domain called `name`, or an error that names the ones there are.
pub fn named(name: &str) -> Result<Registered, AppError> {
    let all = registered();
    let known: Vec<&str> = all.iter().map(|domain| domain.kind.name()).collect();
    let message = format!(
        "{name:?} is a domain this build of viga does not know; it knows {}",
        known.join(", ")
    );
    all.into_iter()
        .find(|domain| domain.kind.name() == name)
        .ok_or(AppError::Config(message))
}

#[derive(Debug)]
struct ReopenScene;

#[async_trait]
impl Reopen for ReopenScene {
    async fn reopen(
        &self,
        folder: &Path,
        contained: &ContainedWorkers,
        provider: Arc<dyn Provider>,
        tell: &dyn Tell,
    ) -> Result<Arc<dyn Domain>, AppError> {
        let (_, scene) = resumable_scene(folder)?;
        let mut reads = scene.prepare_blender_reads()?;
        let inputs = RunFolder::open(folder)?.worker_inputs(OWN_INPUTS)?;
        reads.extend(inputs.paths());
        let blender = crate::workers::start_blender(
            contained,
            None,
            viga_blender::Access::reading(reads),
            Some(&inputs.assets),
            tell,
        )
        .await?;
        Ok(Arc::new(SceneDomain::for_resume(
            folder, blender, provider,
        )?))
    }
}

#[derive(Debug)]
struct ReopenSlides;

#[async_trait]
impl Reopen for ReopenSlides {
    async fn reopen(
        &self,
        folder: &Path,
        contained: &ContainedWorkers,
        _provider: Arc<dyn Provider>,
        tell: &dyn Tell,
    ) -> Result<Arc<dyn Domain>, AppError> {
        let settings = SlidesDomain::recorded_settings(folder)?;
        let (config, _) = RunFolder::open(folder)?.read_args()?;
        crate::workers::slides_domain(settings, contained, config.program_timeout, tell).await
    }
}

#[derive(Debug)]
struct ReopenPage;

#[async_trait]
impl Reopen for ReopenPage {
    async fn reopen(
        &self,
        folder: &Path,
        contained: &ContainedWorkers,
        _provider: Arc<dyn Provider>,
        tell: &dyn Tell,
    ) -> Result<Arc<dyn Domain>, AppError> {
        let settings = PageDomain::recorded_settings(folder)?;
        let (config, _) = RunFolder::open(folder)?.read_args()?;
        crate::workers::page_domain(settings, contained, config.program_timeout, tell).await
    }
}
