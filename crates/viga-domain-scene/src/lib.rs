//! # viga-domain-scene
//!
//! The Blender scene domain: programs are Blender Python, run in a warm (contained) Blender
//! on the reloaded base scene; the verifier looks at camera renders and canonical views and
//! moves around with its camera tools.
//!
//! **Owns:** the domain ([`SceneDomain`]) and its kind for reports and resume
//! ([`SceneKind`]); runs on a person's open scene ([`attached`]); scenes initialised from the
//! target pictures ([`init`]); the add-on agent ([`addon_agent`]), which drives a live
//! scene through add-on tools; refinement by search ([`refine`]): a program's numbers fitted
//! to target pictures with renders in the loop, for the generator's `refine_numbers`.
//!
//! **Must not:** parse command lines, print, or choose how its Blender is contained: the
//! front end starts the worker and hands it in.

#![warn(clippy::too_many_lines)] // no library function over 80 lines: clippy.toml sets the threshold

pub mod addon_agent;
pub mod attached;
pub mod init;
pub(crate) mod provenance;
pub mod refine;
mod settings;
pub(crate) mod watched;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use viga_blender::{BlenderCommands as _, BlenderTransport, TransportError};
use viga_protocol::bridge::{RenderRequest, RenderSpec};
use viga_protocol::iteration::ExecutionResult;
use viga_protocol::message::ToolSpec;
use viga_skills::assets::{
    AssetSource, AssetSources, GeneratorConfig, ReferencePicture, RunBinding, open_asset_sources,
};
use viga_skills::context::InstructionTranslator;
use viga_skills::generator::generator_tools;
use viga_skills::meshy::MeshyConfig;
use viga_skills::polyhaven::PolyHavenConfig;
use viga_skills::verifier::{initialize_viewpoint, verifier_tools};
use viga_skills::{ToolContext, ToolError, ToolOutput, ToolRegistry};

pub use self::settings::{
    AssetGenerator, InitialisedObject, SceneSettings, VERIFIER_CYCLES_SAMPLES,
};
use self::watched::{WatchedBlender, into_fault};
use viga_core::domain::{
    Domain, FaultKind, ProgramFormat, RoleTools, TargetView, ToolRole, ViewRender, WorkerFault,
    WorkerWatch,
};
use viga_core::folder::FINAL_BLEND;
use viga_core::{CoreError, Prompts, ProviderTranslator};
use viga_provider::Provider;

/// The domain's name, in run folders and args.json.
pub const SCENE_DOMAIN: &str = "scene";

/// The folders of a scene run folder its Blender reads besides the assets
/// ([`viga_core::RunFolder::worker_inputs`]): a reconstruction's meshes.
pub const OWN_INPUTS: &[&str] = &[init::INIT_MESHES];

/// The `viga_source` of the objects a base scene was initialised with ([`init`]).
pub const INITIALISED_SOURCE: &str = "init";

/// Tools the loop offers itself, so a domain's registry must not hold them.
const LOOP_TOOLS: [&str; 3] = ["execute_code", "make_plan", "end_process"];

/// A Blender scene built by whole programs, each run on the reloaded base scene.
pub struct SceneDomain {
    settings: SceneSettings,
    /// Every Blender call of the domain, its tools' included, goes through here, so a lost
    /// worker is noticed whoever was talking to it.
    blender: Arc<WatchedBlender>,
    watch: Arc<WorkerWatch>,
    tools: ToolContext,
    /// The run's asset sources, also in `tools`: kept to lend them the run's folder.
    assets: Option<Arc<AssetSources>>,
    tool_registries: RoleTools<ToolContext>,
    /// The model calls of its translator (`investigate`'s free-form instructions), for the
    /// loop to record.
    translations: Option<Arc<viga_core::ModelCalls>>,
    /// The run's target pictures (from `begin_run`): what `refine_numbers` fits.
    targets: std::sync::Mutex<Vec<TargetView>>,
}

impl std::fmt::Debug for SceneDomain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SceneDomain")
            .field("settings", &self.settings)
            .field("blender", &self.blender)
            .finish_non_exhaustive()
    }
}

impl SceneDomain {
    /// The scene domain over `blender`. `has_target` says whether the run compares with
    /// target pictures, which decides the verifier's default engine
    /// ([`SceneSettings::verifier_render`]).
    pub fn new(
        settings: SceneSettings,
        blender: Arc<dyn BlenderTransport>,
        has_target: bool,
    ) -> Result<Self, CoreError> {
        let watch = Arc::new(WorkerWatch::new());
        let blender = Arc::new(WatchedBlender::new(blender, Arc::clone(&watch)));
        let tools = ToolContext::new(
            Arc::clone(&blender) as Arc<dyn BlenderTransport>,
            settings.tool_render(has_target),
            settings.base_scene(),
        );
        let generator = settings.assets_generate.map(|generator| match generator {
            AssetGenerator::Meshy => GeneratorConfig::Meshy(MeshyConfig::from_env()),
        });
        let assets = open_asset_sources(
            settings.assets.as_deref(),
            settings.polyhaven.then(PolyHavenConfig::default),
            generator,
        )
        .map_err(|err| CoreError::Config(format!("the run's asset sources: {err}")))?;
        let tools = match &assets {
            Some(assets) => tools.with_assets(Arc::clone(assets) as Arc<dyn AssetSource>),
            None => tools,
        };
        Ok(Self {
            settings,
            blender,
            watch,
            tools,
            assets,
            tool_registries: RoleTools::new(
                without_loop_tools(generator_tools())?,
                without_loop_tools(verifier_tools())?,
            ),
            translations: None,
            targets: std::sync::Mutex::default(),
        })
    }

    /// Lets `investigate` turn free-form camera instructions into poses with a model (the
    /// loop's [`viga_core::ProviderTranslator`]); without one, only its fast path works.
    pub fn with_translator(mut self, translator: Arc<dyn InstructionTranslator>) -> Self {
        self.tools = self.tools.with_translator(translator);
        self
    }

    /// [`Self::with_translator`] asking `provider` with the scene's `investigate` prompt (or
    /// the one in `prompts_dir`, as the run's other prompts).
    pub fn with_model(
        self,
        provider: Arc<dyn Provider>,
        prompts_dir: Option<&Path>,
    ) -> Result<Self, CoreError> {
        let prompts = Prompts::load(prompts_dir, Prompts::default())?;
        let translator = ProviderTranslator::new(provider, prompts.investigate);
        let mut domain = self;
        domain.translations = Some(translator.calls());
        Ok(domain.with_translator(Arc::new(translator)))
    }

    /// The scene domain of the run in `run_folder`, built again from what its `args.json`
    /// records, over `blender`, to resume it.
    pub fn for_resume(
        run_folder: &Path,
        blender: Arc<dyn BlenderTransport>,
        provider: Arc<dyn Provider>,
    ) -> Result<Self, CoreError> {
        let (config, settings) = resumable_scene(run_folder)?;
        Self::new(settings, blender, !config.targets.is_empty())?
            .with_model(provider, config.prompts_dir.as_deref())
    }

    pub fn settings(&self) -> &SceneSettings {
        &self.settings
    }

    fn verifier_render(&self) -> RenderSpec {
        self.tools.render.spec
    }

    /// The camera a target shows: the one it names, else the scene's active camera;
    /// `Err` with words for the model when the scene has none.
    async fn target_camera(
        &self,
        target: &TargetView,
    ) -> Result<Result<String, String>, WorkerFault> {
        if let Some(named) = &target.view {
            return Ok(Ok(named.clone()));
        }
        let info = self.blender.scene_info(0, 1).await.map_err(into_fault)?;
        Ok(info.active_camera.ok_or_else(|| {
            "the scene has no camera, so it cannot be compared with the target".to_owned()
        }))
    }
}

/// The cameras the targets name, each once, in order.
fn named_views(targets: &[TargetView]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for name in targets.iter().filter_map(|t| t.view.clone()) {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

/// The animation frames the targets show, sorted, each once.
fn target_frames(targets: &[TargetView]) -> Vec<i32> {
    let mut frames: Vec<i32> = targets.iter().filter_map(|t| t.frame).collect();
    frames.sort_unstable();
    frames.dedup();
    frames
}

/// The settings of the scene run in `run_folder` and of its scene, as `args.json` records
/// them (what its Blender must read is in them); a run of another domain, or an add-on
/// agent run, is refused.
pub fn resumable_scene(
    run_folder: &Path,
) -> Result<(viga_core::RunConfig, SceneSettings), CoreError> {
    let (config, domain) = viga_core::resumable_config(run_folder)?;
    if domain.name != SCENE_DOMAIN {
        return Err(CoreError::Config(format!(
            "{} is a {} run, not a Blender scene run",
            run_folder.display(),
            domain.name
        )));
    }
    let settings: SceneSettings = serde_json::from_value(domain.settings).map_err(|err| {
        CoreError::Config(format!(
            "{}: the scene settings in args.json are not valid: {err}",
            run_folder.display()
        ))
    })?;
    Ok((config, settings))
}

fn without_loop_tools(
    registry: Result<ToolRegistry, viga_skills::registry::RegistryError>,
) -> Result<ToolRegistry, CoreError> {
    let mut registry = registry.map_err(|err| CoreError::Tool(err.to_string()))?;
    for name in LOOP_TOOLS {
        registry.unregister(name);
    }
    Ok(registry)
}

/// A refusal the model should hear about (the camera was removed or renamed, the frame is
/// out of range) as the reason a view cannot be rendered; anything else is the worker's
/// failure.
fn unavailable_or_fault(err: TransportError, what: &str) -> Result<ViewRender, WorkerFault> {
    match err {
        TransportError::Refused { .. } => Ok(ViewRender::Unavailable(format!("{what}: {err}"))),
        err => Err(into_fault(err)),
    }
}

#[async_trait]
impl Domain for SceneDomain {
    fn name(&self) -> &str {
        SCENE_DOMAIN
    }

    fn program_format(&self) -> ProgramFormat {
        ProgramFormat::new("python", "the whole scene program").with_aliases(&["py", "python3"])
    }

    fn watch(&self) -> &WorkerWatch {
        &self.watch
    }

    fn describe(&self) -> String {
        self.blender.describe()
    }

    fn worker_name(&self) -> &str {
        "Blender"
    }

    fn containment(&self) -> Option<viga_sandbox::ContainmentStatus> {
        self.blender.containment()
    }

    fn settings(&self) -> Value {
        serde_json::to_value(&self.settings).unwrap_or(Value::Null)
    }

    fn problems(&self, generator_tools: bool) -> Vec<String> {
        self.settings.problems(generator_tools)
    }

    fn brief(&self, targets: &[TargetView]) -> Option<String> {
        let cameras = named_views(targets);
        let mut brief = Vec::new();
        if !cameras.is_empty() {
            brief.push(format!(
                "The target pictures are seen from the cameras {}: the scene must have cameras with exactly these names, placed and aimed as the pictures show.",
                cameras.join(", ")
            ));
        }
        let frames = target_frames(targets);
        if !frames.is_empty() {
            brief.push(format!(
                "This is an animated (4D) scene: the targets show frames {}. Animate it with keyframes (keyframe_insert on location, rotation, scale or other properties) and set scene.frame_start and scene.frame_end to cover those frames; each target is compared with a render at its frame.",
                frames
                    .iter()
                    .map(i32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if !self.settings.initialised.is_empty() {
            let objects: Vec<String> = self
                .settings
                .initialised
                .iter()
                .map(|object| format!("{:?} (confidence {:.2})", object.name, object.confidence))
                .collect();
            brief.push(format!(
                "The base scene every program starts from was initialised from the target pictures: it already holds the objects {}, reconstructed from them (get_scene_info lists them with source=init). Edit these objects: move, rotate, scale, re-material or re-parent them, and add what is missing. Do not delete them to rebuild the scene from primitives; remove one only when it is clearly wrong, and say why.",
                objects.join(", ")
            ));
        }
        (!brief.is_empty()).then(|| brief.join("\n"))
    }

    async fn result_notes(&self) -> Result<Vec<String>, WorkerFault> {
        if self.settings.initialised.is_empty() {
            return Ok(Vec::new());
        }
        let info = self
            .blender
            .scene_info(0, 10_000)
            .await
            .map_err(into_fault)?;
        let kept = info
            .objects
            .iter()
            .any(|object| object.source.as_deref() == Some(INITIALISED_SOURCE));
        if kept {
            return Ok(Vec::new());
        }
        let names: Vec<&str> = self
            .settings
            .initialised
            .iter()
            .map(|object| object.name.as_str())
            .collect();
        Ok(vec![format!(
            "none of the objects the scene was initialised with from the target pictures ({}) is in the result any more: the program deleted them all. Keep them and edit them (move, rotate, scale, change materials) instead of rebuilding the scene from primitives.",
            names.join(", ")
        )])
    }

    async fn check_targets(&self, targets: &[TargetView]) -> Result<Vec<String>, WorkerFault> {
        let cameras = named_views(targets);
        // From an empty scene the programs make the cameras; a given base scene must have them.
        if cameras.is_empty() || self.settings.base_blend.is_none() {
            return Ok(Vec::new());
        }
        let reset = self
            .blender
            .execute("", Some(self.settings.base_scene()), None)
            .await
            .map_err(into_fault)?;
        if !reset.succeeded() {
            return Ok(vec![format!(
                "the base scene could not be opened: {}",
                reset.error.map(|e| e.message).unwrap_or_default()
            )]);
        }
        let info = self
            .blender
            .scene_info(0, 10_000)
            .await
            .map_err(into_fault)?;
        let present: Vec<&str> = info
            .objects
            .iter()
            .filter(|object| object.kind == "CAMERA")
            .map(|object| object.name.as_str())
            .collect();
        Ok(cameras
            .iter()
            .filter(|camera| !present.contains(&camera.as_str()))
            .map(|camera| {
                format!(
                    "the base scene has no camera named {camera:?} (its cameras: {}); name the target's camera as the scene does (--target CAMERA=PICTURE), or add the camera",
                    if present.is_empty() {
                        "none".to_owned()
                    } else {
                        present.join(", ")
                    }
                )
            })
            .collect())
    }

    fn begin_run(&self, folder: &Path, targets: &[TargetView]) {
        if let Ok(mut kept) = self.targets.lock() {
            *kept = targets.to_vec();
        }
        if let Some(assets) = &self.assets {
            assets.bind_run(&RunBinding {
                folder: folder.to_path_buf(),
                pictures: targets
                    .iter()
                    .map(|target| ReferencePicture {
                        label: target.label(),
                        image: target.image.clone(),
                    })
                    .collect(),
            });
        }
    }

    fn begin_iteration(&self, renders: &Path) {
        self.tools.reset_view();
        self.tools.set_render_folder(Some(renders.to_path_buf()));
    }

    async fn execute(
        &self,
        program: &str,
        limit: Duration,
    ) -> Result<ExecutionResult, WorkerFault> {
        self.blender
            .execute(program, Some(self.settings.base_scene()), Some(limit))
            .await
            .map_err(into_fault)
    }

    fn take_model_calls(&self) -> Vec<viga_core::ModelCallRecord> {
        self.translations
            .as_ref()
            .map(|calls| calls.take())
            .unwrap_or_default()
    }

    fn last_program_output(&self) -> Option<String> {
        self.blender.last_program_output()
    }

    async fn render_view(
        &self,
        target: &TargetView,
        width: u32,
        height: u32,
    ) -> Result<ViewRender, WorkerFault> {
        let camera = match self.target_camera(target).await? {
            Ok(camera) => camera,
            Err(why) => return Ok(ViewRender::Unavailable(why)),
        };
        if let Some(frame) = target.frame
            && let Err(err) = self.blender.set_frame(frame).await
        {
            return unavailable_or_fault(err, &format!("frame {frame} cannot be shown"));
        }
        // The verifier's engine and samples, in the target's shape at the scoring size.
        let (width, height) = self.settings.scoring_size(width, height);
        let request = RenderRequest {
            camera: Some(camera.clone()),
            pose: None,
            output_path: None,
            spec: RenderSpec {
                width,
                height,
                ..self.verifier_render()
            },
        };
        match self.blender.render(request, None).await {
            Ok(output) => Ok(ViewRender::Rendered {
                view: viga_core::domain::label_of(Some(&camera), target.frame),
                picture: output.into(),
            }),
            Err(err) => unavailable_or_fault(err, &format!("camera {camera:?} cannot be rendered")),
        }
    }

    async fn overview(&self) -> Result<ToolOutput, ToolError> {
        initialize_viewpoint(&self.tools, Vec::new(), None).await
    }

    fn tools(&self, role: ToolRole) -> Vec<ToolSpec> {
        self.tool_registries.specs(role)
    }

    async fn call_tool(
        &self,
        role: ToolRole,
        name: &str,
        arguments: Value,
    ) -> Result<ToolOutput, ToolError> {
        self.tool_registries
            .invoke(&self.tools, role, name, arguments)
            .await
    }

    fn can_refine(&self) -> bool {
        !self.run_targets().is_empty()
    }

    async fn refine(
        &self,
        program: &str,
        request: &viga_core::domain::RefineRequest,
    ) -> Result<Result<viga_core::domain::Refined, String>, WorkerFault> {
        self.refine_program(program, request).await
    }

    async fn save_result(
        &self,
        program: &str,
        limit: Duration,
        folder: &Path,
    ) -> Result<Vec<PathBuf>, WorkerFault> {
        let result = self
            .blender
            .execute(program, Some(self.settings.base_scene()), Some(limit))
            .await
            .map_err(into_fault)?;
        if !result.succeeded() {
            return Err(WorkerFault::new(
                FaultKind::Other,
                "the final program no longer runs",
            ));
        }
        let path = folder.join(FINAL_BLEND);
        save_scene_as(self.blender.as_ref(), &path).await?;
        Ok(vec![path])
    }
}

/// Saves the scene in `blender` as `path` on this machine. A Blender that shares a folder
/// with this process (a worker's scratch folder, the one place a contained Blender may
/// write) saves there, and the file is moved into place; one without (a person's Blender)
/// writes `path` itself.
pub async fn save_scene_as(blender: &dyn BlenderTransport, path: &Path) -> Result<(), WorkerFault> {
    let saving = |err: TransportError| {
        let fault = into_fault(err);
        WorkerFault {
            message: format!(
                "the scene could not be saved as {}: {}",
                path.display(),
                fault.message
            ),
            ..fault
        }
    };
    let Some(shared) = blender.shared_folder() else {
        blender
            .save_blend(&path.to_string_lossy())
            .await
            .map_err(saving)?;
        return Ok(());
    };
    let staged = shared.fresh_name("scene", "blend");
    blender
        .save_blend(&shared.full_path(&staged).to_string_lossy())
        .await
        .map_err(saving)?;
    let io = |err: std::io::Error| {
        WorkerFault::other(format!("{}: {err}", path.display())).with_source(err)
    };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(io)?;
    }
    // Copied out of a folder programs write: only the name viga gave, read as untrusted (a
    // link swapped in for it is refused), never what the reply says it saved.
    let copied = shared
        .copy_out(&staged, MAX_SAVED_SCENE_BYTES, path)
        .map(drop)
        .map_err(io);
    let _ = shared.remove(&staged);
    copied
}

/// The largest scene viga copies out of a worker's folder (a result's `final.blend`).
const MAX_SAVED_SCENE_BYTES: u64 = 4 << 30;

/// The recorded domain of a run folder in a line for its report: a scene's verifier renders
/// (engine, size, samples, the size of the canonical views), or another domain's name.
fn describe_recorded(domain: &viga_core::RecordedDomain, has_target: bool) -> String {
    match serde_json::from_value::<SceneSettings>(domain.settings.clone()) {
        Ok(settings) => {
            let (width, height) = settings.overview_size();
            format!(
                "Blender scene; verifier renders {}, canonical views {width}x{height}",
                settings.verifier_render(has_target)
            )
        }
        Err(_) => "Blender scene".to_owned(),
    }
}

/// The scene domain as run folders know it; the add-on agent's runs are its folders too
/// (their report is their transcript, and they cannot be resumed).
#[derive(Debug, Clone, Copy, Default)]
pub struct SceneKind;

#[async_trait]
impl viga_core::DomainKind for SceneKind {
    fn name(&self) -> &'static str {
        SCENE_DOMAIN
    }

    fn describe(&self, recorded: &viga_core::RecordedDomain, has_target: bool) -> String {
        describe_recorded(recorded, has_target)
    }

    fn view_words(&self, view: Option<&str>, frame: Option<i32>) -> String {
        viga_core::kind::with_frame(view.unwrap_or("the active camera"), frame)
    }

    fn report_sections(&self, folder: &viga_core::RunFolder) -> String {
        provenance::assets_section(folder.root())
    }

    fn own_report(&self, run_folder: &Path) -> Option<Result<String, CoreError>> {
        addon_agent::is_agent_run(run_folder).then(|| addon_agent::report::render_html(run_folder))
    }

    fn refuses_resume(&self, run_folder: &Path) -> Option<String> {
        addon_agent::is_agent_run(run_folder).then(|| {
            format!(
                "{} is an add-on agent run, which cannot be resumed; start a new one with `viga agent`",
                run_folder.display()
            )
        })
    }

    async fn reopen(
        &self,
        run_folder: &Path,
        contained: &viga_contain::ContainedWorkers,
        provider: Arc<dyn Provider>,
    ) -> Result<Arc<dyn Domain>, CoreError> {
        let (_, scene) = resumable_scene(run_folder)?;
        let mut reads = scene.prepare_blender_reads()?;
        let inputs = viga_core::RunFolder::open(run_folder)?.worker_inputs(OWN_INPUTS)?;
        reads.extend(inputs.paths());
        let launcher =
            viga_blender::locate().map_err(|err| CoreError::not_started("Blender", err))?;
        let request =
            viga_blender::WorkerRequest::new(launcher, viga_blender::Access::reading(reads))
                .with_assets(Some(&inputs.assets));
        let blender = start_blender(contained, &request).await?;
        Ok(Arc::new(SceneDomain::for_resume(
            run_folder, blender, provider,
        )?))
    }
}

/// A contained Blender of viga's own for a scene's programs, started as `request` says.
pub async fn start_blender(
    contained: &viga_contain::ContainedWorkers,
    request: &viga_blender::WorkerRequest,
) -> Result<Arc<viga_blender::Worker>, CoreError> {
    use viga_blender::StartBlender as _;
    let worker = contained.start(request).await.map_err(|err| match err {
        viga_blender::StartError::Start(err) => blender_error("Blender did not start", err),
        viga_blender::StartError::Contained(err) => {
            CoreError::not_started("Blender's containment", err)
        }
    })?;
    Ok(Arc::new(worker))
}

/// `context` and a Blender transport error as one core error (the error kept as the
/// source), for the Blender-only parts of the core.
pub(crate) fn blender_error(context: impl Into<String>, err: TransportError) -> CoreError {
    CoreError::worker(context, into_fault(err))
}

/// The failure kind of a Blender transport error, for front ends that meet one outside a run.
pub fn blender_failure_kind(err: &TransportError) -> viga_protocol::event::FailureKind {
    viga_core::worker_failure_kind(&watched::blender_fault(err))
}
