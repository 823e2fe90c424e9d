//! `viga run --mode slides|page` and `viga resume` of such a run: the 2D domains. Their
//! renderers (a warm LibreOffice and every python-pptx program; a warm Chromium) start
//! through the same containment launcher, under the same policy, as a scene's Blender.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context as _, Result, bail};
use viga_blender::{Access, ContainmentStatus};
use viga_core::Domain;
use viga_core::page::{PAGE_DOMAIN, PageDomain, PageSettings};
use viga_core::slides::{SLIDES_DOMAIN, SlidesDomain, SlidesSettings};
use viga_slides::{SlideTools, SlideWorker, SlidesConfig};
use viga_web::{WebConfig, WebWorker};

use crate::args::{Mode, RunArgs, parse_resolution};
use crate::progress::Output;
use viga_blender::ContainedWorkers;

/// A 2D domain's settings, before its renderer starts.
pub enum FlatSettings {
    Slides(SlidesSettings),
    Page(PageSettings),
}

impl FlatSettings {
    /// The settings of the run in `folder`, when it is a slides or page run.
    pub fn recorded(folder: &Path) -> Result<Option<Self>> {
        let (_, domain) = viga_core::RunFolder::open(folder)?.read_args()?;
        Ok(match domain.name.as_str() {
            SLIDES_DOMAIN => Some(Self::Slides(SlidesDomain::recorded_settings(folder)?)),
            PAGE_DOMAIN => Some(Self::Page(PageDomain::recorded_settings(folder)?)),
            _ => None,
        })
    }
}

/// The settings of a slides or page run from its flags; the default viewport of a page is
/// the size of its first target picture of the default view.
fn settings_of(args: &RunArgs, config: &viga_core::RunConfig) -> Result<FlatSettings> {
    match args.mode {
        Mode::Slides => {
            let mut settings = SlidesSettings {
                assets: args.assets.clone(),
                ..SlidesSettings::default()
            };
            if let Some(resolution) = &args.resolution {
                let (width, _) = parse_resolution(resolution)?;
                settings.view_width = width;
            }
            Ok(FlatSettings::Slides(settings))
        }
        Mode::Page => {
            let settings = PageSettings::for_targets(args.viewport.as_deref(), &config.targets)
                .context("--viewport")?;
            Ok(FlatSettings::Page(settings))
        }
        Mode::Scene => bail!("a scene run is not a slides or page run"),
    }
}

/// The domain of `settings` on its own renderer, started contained, knowing what containment
/// holds for it (the renderer's launcher's report), which the run records.
pub async fn start_domain(
    settings: FlatSettings,
    contained: &ContainedWorkers,
    program_timeout: std::time::Duration,
) -> Result<Arc<dyn Domain>> {
    match settings {
        FlatSettings::Slides(settings) => {
            let reads = settings.assets.iter().cloned().collect();
            let mut config = SlidesConfig::new(SlideTools::locate()?);
            config.confinement = contained.confinement(&Access::reading(reads))?;
            config.program_timeout = program_timeout;
            let worker = SlideWorker::start(config).await?;
            let status = status_of(worker.contained_report().await, contained)?;
            let domain = SlidesDomain::new(settings, Arc::new(worker))?.with_containment(status);
            Ok(Arc::new(domain))
        }
        FlatSettings::Page(settings) => {
            let mut config = WebConfig::locate()?;
            config.confinement = contained.confinement(&Access::default())?;
            config.load_timeout = program_timeout;
            let worker = WebWorker::start(config).await?;
            let status = status_of(worker.contained_report().await, contained)?;
            let domain = PageDomain::new(settings, Arc::new(worker))?.with_containment(status);
            Ok(Arc::new(domain))
        }
    }
}

/// What holds for the renderer, from its launcher's report; said on stderr when it is less
/// than asked for.
fn status_of(report: Option<String>, contained: &ContainedWorkers) -> Result<ContainmentStatus> {
    let status = contained.renderer_status(report.as_deref())?;
    crate::say_containment(&status);
    Ok(status)
}

/// `viga run --mode slides|page`.
pub async fn run(args: RunArgs, contained: &ContainedWorkers) -> Result<std::process::ExitCode> {
    args.check_viewport_flag()?;
    let flags = args.scene_only_flags();
    if !flags.is_empty() {
        bail!(
            "{} belong(s) to Blender scene runs, not to --mode {}; leave them out",
            flags.join(", "),
            match args.mode {
                Mode::Slides => "slides",
                _ => "page",
            }
        );
    }
    let mut out = Output::new(args.events, args.max_iterations);
    let mode = match args.mode {
        Mode::Slides => SLIDES_DOMAIN,
        _ => PAGE_DOMAIN,
    };
    let mut config = args.flat_run_config(mode)?;
    let provider = crate::run_model(&args, &mut config, &out)?;
    let settings = settings_of(&args, &config)?;
    let folder = viga_core::RunFolder::create(&args.output, &config)?;
    let root = folder.root().to_path_buf();
    let started = async {
        let domain = start_domain(settings, contained, config.program_timeout).await?;
        Ok::<_, anyhow::Error>(viga_core::start_in_folder(
            folder, config, provider, domain,
        )?)
    }
    .await;
    let handle = crate::unless_started(&root, started)?;
    let followed = crate::follow(handle, &mut out).await?;
    Ok(crate::finish(&followed, &out))
}
