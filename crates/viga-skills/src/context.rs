//! What every tool call can reach: Blender, render settings, the verifier's camera state,
//! an asset source and the translator for free-form camera instructions.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use viga_blender::{BlenderCommands as _, BlenderTransport};
use viga_protocol::bridge::{
    CameraPose, CameraState, FramedRender, FramedViewsRequest, RenderEngine, RenderOutput,
    RenderRequest, RenderSpec, SceneReset,
};

use crate::assets::AssetSource;
use crate::camera::ViewState;
use crate::registry::{CapturedRender, ToolError};

/// How tools render: what the images should be, and how long a render may take.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderSettings {
    /// Engine, size and samples of every render; the views from one camera (`set_camera`,
    /// `investigate`, ...) are this size.
    pub spec: RenderSpec,
    /// Width and height of each of `initialize_viewpoint`'s canonical views; by default
    /// [`overview_view_size`] of `spec`'s.
    pub overview_size: (u32, u32),
    pub timeout: Duration,
}

impl RenderSettings {
    pub fn new(spec: RenderSpec) -> Self {
        Self {
            spec,
            overview_size: overview_view_size(spec.width, spec.height),
            timeout: Duration::from_secs(600),
        }
    }

    /// Renders the canonical views `width` x `height` each.
    pub fn with_overview_size(mut self, width: u32, height: u32) -> Self {
        self.overview_size = (width, height);
        self
    }

    /// The spec of one canonical view: [`Self::spec`] at [`Self::overview_size`].
    pub fn overview_spec(&self) -> RenderSpec {
        let (width, height) = self.overview_size;
        RenderSpec {
            width,
            height,
            ..self.spec
        }
    }
}

/// The default size of each canonical view for renders of `width` x `height`: half of each
/// side (rounded up). The four views reach the model as one 2x2 montage, which at this size
/// is about as large as one render, and together they cost about as much as one render
/// (Cycles' time goes with the number of pixels), not four.
pub fn overview_view_size(width: u32, height: u32) -> (u32, u32) {
    (width.div_ceil(2), height.div_ceil(2))
}

impl Default for RenderSettings {
    /// Workbench at 512x512: about a second per view on a CPU.
    fn default() -> Self {
        Self::new(RenderSpec {
            engine: RenderEngine::Workbench,
            width: 512,
            height: 512,
            samples: None,
        })
    }
}

/// Turns a free-form camera instruction the fast path did not understand into a pose; the
/// loop implements it with a model call.
#[async_trait]
pub trait InstructionTranslator: Send + Sync {
    async fn translate(
        &self,
        instruction: &str,
        current: &ViewState,
    ) -> Result<CameraPose, ToolError>;
}

pub struct ToolContext {
    pub blender: Arc<dyn BlenderTransport>,
    pub render: RenderSettings,
    /// The scene every program runs on (reloaded before each run).
    pub base_scene: SceneReset,
    pub assets: Option<Arc<dyn AssetSource>>,
    pub translator: Option<Arc<dyn InstructionTranslator>>,
    view: Mutex<Option<ViewState>>,
    renders_made: AtomicU32,
    /// Where renders are kept, if anywhere (see [`ToolContext::set_render_folder`]).
    render_folder: Mutex<Option<PathBuf>>,
    /// Numbers the files in the render folder, so no two renders share a name.
    next_render_file: AtomicU32,
}

impl std::fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolContext")
            .field("blender", &self.blender.describe())
            .field("render", &self.render)
            .field("base_scene", &self.base_scene)
            .finish_non_exhaustive()
    }
}

impl ToolContext {
    pub fn new(
        blender: Arc<dyn BlenderTransport>,
        render: RenderSettings,
        base_scene: SceneReset,
    ) -> Self {
        Self {
            blender,
            render,
            base_scene,
            assets: None,
            translator: None,
            view: Mutex::new(None),
            renders_made: AtomicU32::new(0),
            render_folder: Mutex::new(None),
            next_render_file: AtomicU32::new(0),
        }
    }

    pub fn with_assets(mut self, assets: Arc<dyn AssetSource>) -> Self {
        self.assets = Some(assets);
        self
    }

    pub fn with_translator(mut self, translator: Arc<dyn InstructionTranslator>) -> Self {
        self.translator = Some(translator);
        self
    }

    pub fn view(&self) -> Option<ViewState> {
        self.view.lock().ok().and_then(|view| *view)
    }

    pub fn set_view(&self, state: ViewState) {
        if let Ok(mut view) = self.view.lock() {
            *view = Some(state);
        }
    }

    /// Forgets the camera state (a new iteration's scene may be framed differently).
    pub fn reset_view(&self) {
        if let Ok(mut view) = self.view.lock() {
            *view = None;
        }
    }

    /// Keeps renders in `folder` from now on (the loop passes each iteration's
    /// `renders/<n>/`); [`CapturedRender::file`] says where each one is. viga writes the
    /// files, not Blender: a contained Blender may write only in its own scratch folder.
    /// `None`, the default, keeps renders in memory only.
    pub fn set_render_folder(&self, folder: Option<PathBuf>) {
        if let Ok(mut kept) = self.render_folder.lock() {
            *kept = folder;
        }
    }

    /// Where the render of `view` is kept; `None` when renders are not kept.
    fn render_file(&self, view: &str) -> Option<PathBuf> {
        let folder = self.render_folder.lock().ok()?.clone()?;
        let number = self.next_render_file.fetch_add(1, Ordering::Relaxed) + 1;
        Some(folder.join(format!("{}-{number}.png", safe_file_stem(view))))
    }

    /// Renders from a pose (or the scene camera) with the run's render settings.
    pub async fn render_view(
        &self,
        view: &str,
        pose: Option<CameraPose>,
    ) -> Result<CapturedRender, ToolError> {
        let request = RenderRequest {
            camera: None,
            pose,
            spec: self.render.spec,
            output_path: None,
        };
        let output = self
            .blender
            .render(request, Some(self.render.timeout))
            .await?;
        self.renders_made.fetch_add(1, Ordering::Relaxed);
        Ok(CapturedRender {
            view: view.to_owned(),
            file: keep(self.render_file(view), &output)?,
            picture: output.into(),
        })
    }

    /// Frames `objects` (every visible mesh when empty) from each of `views`' directions
    /// and renders it with the run's render settings at the overview size, in one Blender
    /// call; one render per view, in order, each with the camera state that made it.
    pub async fn render_framed_views(
        &self,
        views: &[(&str, [f64; 3])],
        objects: Vec<String>,
        padding: Option<f64>,
    ) -> Result<Vec<(CameraState, CapturedRender)>, ToolError> {
        let request = FramedViewsRequest {
            objects,
            padding,
            directions: views.iter().map(|(_, direction)| *direction).collect(),
            spec: self.render.overview_spec(),
            output_paths: Vec::new(),
        };
        let framed = self
            .blender
            .render_framed_views(request, Some(self.render.timeout))
            .await?;
        self.renders_made
            .fetch_add(framed.len() as u32, Ordering::Relaxed);
        views
            .iter()
            .zip(framed)
            .map(|((view, _), FramedRender { framing, output })| {
                let render = CapturedRender {
                    view: (*view).to_owned(),
                    file: keep(self.render_file(view), &output)?,
                    picture: output.into(),
                };
                Ok((framing, render))
            })
            .collect()
    }

    /// How many renders tools made through this context.
    pub fn renders_made(&self) -> u32 {
        self.renders_made.load(Ordering::Relaxed)
    }
}

/// `view` as a file name stem: ASCII letters, digits, `-` and `_`, anything else `_`.
pub fn safe_file_stem(view: &str) -> String {
    view.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Writes a render's PNG to `file` whole, so a killed run never leaves half a PNG under a
/// render's name.
fn keep(file: Option<PathBuf>, output: &RenderOutput) -> Result<Option<PathBuf>, ToolError> {
    let Some(file) = file else {
        return Ok(None);
    };
    viga_io::files::write_atomic(&file, &output.image.data).map_err(|err| {
        ToolError::Fatal(format!(
            "could not keep the render {}: {err}",
            file.display()
        ))
    })?;
    Ok(Some(file))
}
