//! Starting a run of any domain in a new run folder, and resuming one from its folder. The
//! run folder is made first, so its worker may be granted the folder's inputs (generated
//! assets, a reconstruction) and nothing else of it; a start that fails leaves no folder.

use std::path::Path;
use std::sync::Arc;

use viga_blender::ContainedWorkers;
use viga_core::{RunConfig, RunFolder, RunHandle};
use viga_domain_page::PageSettings;
use viga_domain_scene::attached::{snapshot_user_scene, start_on_snapshot};
use viga_domain_scene::{OWN_INPUTS, SceneDomain, SceneSettings};
use viga_domain_slides::SlidesSettings;
use viga_provider::Provider;
use viga_skills::reconstruct::ReconstructionService;

use crate::attach::UserBlender;
use crate::provider::{ProviderChoice, chosen, unused_saved_settings};
use crate::{AppError, Tell};

/// What a new run builds and starts from.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)] // one per command, moved once: boxing would buy nothing
pub enum Start {
    /// A Blender scene in a Blender of viga's own; with `init`, its base scene is first
    /// reconstructed from the target pictures by that service.
    Scene {
        scene: SceneSettings,
        init: Option<ReconstructionService>,
    },
    /// A copy of the scene open in a person's Blender, worked on in a Blender of viga's own
    /// (the person's is asked for the copy and let go).
    Attached {
        scene: SceneSettings,
        user: UserBlender,
    },
    /// The scene open in a person's Blender, worked on there, reached through a Blender MCP
    /// server they run ([`crate::through_mcp`]): uncontained, each program from the scene
    /// as the run found it.
    ThroughMcp {
        scene: SceneSettings,
        blender: Arc<viga_serve::mcp_client::McpTransport>,
    },
    Slides(SlidesSettings),
    Page(PageSettings),
}

/// Starts a new run of `config` under `output`, building what `start` says on a contained
/// worker.
pub async fn start(
    config: RunConfig,
    start: Start,
    provider: Arc<dyn Provider>,
    output: &Path,
    contained: &ContainedWorkers,
    tell: &dyn Tell,
) -> Result<RunHandle, AppError> {
    // Settings that cannot work (a target that is no picture) are refused before a worker
    // starts, a folder is made or a model is asked.
    viga_core::check_problems(config.problems())?;
    let timeout = config.program_timeout;
    match start {
        Start::Attached { scene, user } => {
            start_attached(config, scene, user, provider, output, contained, tell).await
        }
        Start::Scene { scene, init } => {
            in_new_folder(output, config, async |folder, config| {
                start_scene(folder, config, scene, init, provider, contained, tell).await
            })
            .await
        }
        Start::ThroughMcp { scene, blender } => {
            in_new_folder(output, config, async |folder, config| {
                scene_run(folder, config, scene, provider, blender)
            })
            .await
        }
        Start::Slides(settings) => {
            in_new_folder(output, config, async |folder, config| {
                let domain =
                    crate::workers::slides_domain(settings, contained, timeout, tell).await?;
                Ok(viga_core::start_in_folder(
                    folder, config, provider, domain,
                )?)
            })
            .await
        }
        Start::Page(settings) => {
            in_new_folder(output, config, async |folder, config| {
                let domain =
                    crate::workers::page_domain(settings, contained, timeout, tell).await?;
                Ok(viga_core::start_in_folder(
                    folder, config, provider, domain,
                )?)
            })
            .await
        }
    }
}

/// Starts a run in a new folder under `output` made for `config` first (so its worker may be
/// granted the folder's inputs), with `start`; a start that fails removes the folder again.
async fn in_new_folder(
    output: &Path,
    config: RunConfig,
    start: impl AsyncFnOnce(RunFolder, RunConfig) -> Result<RunHandle, AppError>,
) -> Result<RunHandle, AppError> {
    let folder = RunFolder::create(output, &config)?;
    let root = folder.root().to_path_buf();
    unless_started(&root, start(folder, config).await)
}

/// A run on a copy of the scene open in `user`'s Blender: the copy makes the run folder.
async fn start_attached(
    config: RunConfig,
    scene: SceneSettings,
    user: UserBlender,
    provider: Arc<dyn Provider>,
    output: &Path,
    contained: &ContainedWorkers,
    tell: &dyn Tell,
) -> Result<RunHandle, AppError> {
    let snapshot = snapshot_user_scene(config, scene, user.transport.as_ref(), output).await?;
    let root = snapshot.folder().to_path_buf();
    let started = async {
        let inputs = snapshot.worker_inputs()?;
        let worker =
            crate::attach::worker_beside(&user, contained, snapshot.scene(), &inputs, tell).await?;
        Ok(start_on_snapshot(snapshot, provider, worker)?)
    };
    unless_started(&root, started.await)
}

/// `started`, or else the run folder at `root` made for it removed again.
fn unless_started<T>(root: &Path, started: Result<T, AppError>) -> Result<T, AppError> {
    if started.is_err() {
        viga_core::folder::discard_unstarted(root);
    }
    started
}

/// A scene run in `folder` on a contained Blender that may read the scene's inputs and the
/// folder's.
async fn start_scene(
    folder: RunFolder,
    config: RunConfig,
    scene: SceneSettings,
    init: Option<ReconstructionService>,
    provider: Arc<dyn Provider>,
    contained: &ContainedWorkers,
    tell: &dyn Tell,
) -> Result<RunHandle, AppError> {
    let mut reads = scene.prepare_blender_reads()?;
    let inputs = folder.worker_inputs(OWN_INPUTS)?;
    reads.extend(inputs.paths());
    let worker = crate::workers::start_blender(
        contained,
        None,
        viga_blender::Access::reading(reads),
        Some(&inputs.assets),
        tell,
    )
    .await?;
    let handle = match init {
        Some(service) => {
            tell.say(&format!(
                "initialising the scene from the target pictures with the reconstruction service at {}...",
                service.url()
            ));
            viga_domain_scene::init::start_initialised(
                folder, config, scene, &service, provider, worker,
            )
            .await?
        }
        None => scene_run(folder, config, scene, provider, worker)?,
    };
    Ok(handle)
}

/// A scene run in `folder` on `blender`, as it is (no reconstruction first).
fn scene_run(
    folder: RunFolder,
    config: RunConfig,
    scene: SceneSettings,
    provider: Arc<dyn Provider>,
    blender: Arc<dyn viga_blender::BlenderTransport>,
) -> Result<RunHandle, AppError> {
    let has_target = !config.targets.is_empty();
    let domain = SceneDomain::new(scene, blender, has_target)?
        .with_model(Arc::clone(&provider), config.prompts_dir.as_deref())?;
    Ok(viga_core::start_in_folder(
        folder,
        config,
        provider,
        Arc::new(domain),
    )?)
}

/// Continues the run in `folder` at the iteration after its last, with the provider the
/// folder saved unless `choice` names one, on a new contained worker of its domain;
/// `max_iterations` may raise its budget.
pub async fn resume(
    folder: &Path,
    choice: &ProviderChoice,
    max_iterations: Option<u32>,
    contained: &ContainedWorkers,
    tell: &dyn Tell,
) -> Result<RunHandle, AppError> {
    // Checked first, so a wrong path is reported as such, not as a provider problem.
    let run_folder = RunFolder::open(folder)?;
    let kinds = crate::domains::kinds();
    kinds.check_resumable(folder)?;
    let saved = run_folder
        .read_provider()
        .filter(|_| !choice.names_a_provider());
    if let Some(saved) = &saved {
        for line in unused_saved_settings(saved, choice) {
            tell.say(&line);
        }
    }
    let (_, provider) = chosen(choice, saved.map(|saved| saved.settings))?;
    let domain = kinds
        .reopen(folder, contained, Arc::clone(&provider))
        .await?;
    crate::workers::warn_about(domain.as_ref(), tell);
    Ok(viga_core::resume(folder, provider, domain, max_iterations)?)
}
