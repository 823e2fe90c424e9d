//! The verifier's tools (seed 001): initialize_viewpoint, set_camera, investigate,
//! set_keyframe, set_visibility, get_scene_info, end_process. Each camera change renders the
//! new view, so the model always sees what it asked for.

use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use viga_blender::BlenderCommands as _;
use viga_protocol::bridge::CameraPose;
use viga_protocol::iteration::Feedback;

use crate::camera::{CanonicalView, ViewState, parse_instruction};
use crate::context::ToolContext;
use crate::generator::{GetSceneInfo, arguments};
use crate::montage::{compose, decode_view};
use crate::registry::{
    CapturedRender, Control, RegistryError, Tool, ToolError, ToolOutput, ToolRegistry,
    parameters_of, parse_arguments,
};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ViewpointArgs {
    /// Objects to frame; every visible mesh when empty or absent.
    #[serde(default)]
    pub objects: Vec<String>,
    /// Margin around the objects as a fraction of their size (default 0.1).
    #[serde(default)]
    #[schemars(range(min = 0.0, max = 2.0))]
    pub padding: Option<f64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SetCameraArgs {
    /// Camera position in world space.
    pub location: [f64; 3],
    /// Point to look at (default: the framed objects' centre).
    #[serde(default)]
    pub look_at: Option<[f64; 3]>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InvestigateArgs {
    /// A camera instruction in words: "rotate left", "orbit right 45 degrees", "zoom in",
    /// "view from top", "move up", or anything else a camera can do.
    pub instruction: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KeyframeArgs {
    /// Frame number to show.
    pub frame: i32,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VisibilityArgs {
    #[schemars(length(min = 1))]
    pub objects: Vec<String>,
    pub visible: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VerdictArgs {
    /// Concrete mismatches between the render and the target (empty when it matches).
    pub visual_differences: Vec<String>,
    /// Corrections the generator should make next, most important first.
    pub suggestions: Vec<String>,
    /// True only when the scene matches the target closely enough to stop.
    pub accepted: bool,
}

arguments!(
    ViewpointArgs,
    SetCameraArgs,
    InvestigateArgs,
    KeyframeArgs,
    VisibilityArgs,
    VerdictArgs
);

/// Renders the current view state as one image for the model.
async fn render_from(
    context: &ToolContext,
    label: &str,
    state: ViewState,
) -> Result<ToolOutput, ToolError> {
    context.set_view(state);
    let render = context.render_view(label, Some(state.pose())).await?;
    Ok(ToolOutput {
        text: format!(
            "Rendered {label}: camera at {:?} looking at {:?}.",
            round3(state.location()),
            round3(state.target)
        ),
        images: vec![render.picture.image.clone()],
        renders: vec![render],
        control: Control::Continue,
    })
}

fn round3(v: [f64; 3]) -> [f64; 3] {
    v.map(|x| (x * 1000.0).round() / 1000.0)
}

fn current_view(context: &ToolContext) -> Result<ViewState, ToolError> {
    context.view().ok_or_else(|| {
        ToolError::Recoverable("no viewpoint yet: call initialize_viewpoint first".to_owned())
    })
}

#[derive(Debug)]
pub struct InitializeViewpoint;

#[async_trait]
impl Tool for InitializeViewpoint {
    fn name(&self) -> &str {
        "initialize_viewpoint"
    }
    fn description(&self) -> &str {
        "Frame the joint bounding box of the given objects (all visible meshes by default) and render canonical views (iso, front, right, top) as one labelled montage."
    }
    fn parameters(&self) -> Value {
        parameters_of::<ViewpointArgs>()
    }
    async fn invoke(
        &self,
        context: &ToolContext,
        arguments: Value,
    ) -> Result<ToolOutput, ToolError> {
        let args: ViewpointArgs = parse_arguments(self.name(), arguments)?;
        initialize_viewpoint(context, args.objects, args.padding).await
    }
}

/// Frames the objects and renders the canonical views; also what the loop runs before every
/// verification, so each critique starts from the same informative views.
pub async fn initialize_viewpoint(
    context: &ToolContext,
    objects: Vec<String>,
    padding: Option<f64>,
) -> Result<ToolOutput, ToolError> {
    let views = CanonicalView::INITIAL.map(|view| (view.name(), view.direction()));
    let framed = context
        .render_framed_views(&views, objects, padding)
        .await?;
    // The views arrive together, so they are decoded side by side.
    let decoding: Vec<_> = framed
        .iter()
        .map(|(_, render)| {
            let (label, png) = (render.view.clone(), render.picture.image.data.clone());
            tokio::task::spawn_blocking(move || {
                decode_view(&label, &png).map(|image| (label, image))
            })
        })
        .collect();
    let mut framed_objects = Vec::new();
    let mut first_state = None;
    let mut renders: Vec<CapturedRender> = Vec::with_capacity(framed.len());
    for (state, render) in framed {
        let Some(framing) = state.framing else {
            return Err(ToolError::Fatal(
                "render_framed_views returned a view without its framing".to_owned(),
            ));
        };
        first_state.get_or_insert(ViewState::looking_from(state.location, framing.center));
        framed_objects = framing.objects;
        renders.push(render);
    }
    if let Some(state) = first_state {
        context.set_view(state);
    }
    let mut views = Vec::with_capacity(decoding.len());
    for task in decoding {
        let decoded = task
            .await
            .map_err(|err| ToolError::Fatal(format!("decoding a view failed: {err}")))??;
        views.push(decoded);
    }
    Ok(ToolOutput {
        text: format!(
            "Framed {} ({} objects); views: {}.",
            framed_objects.join(", "),
            framed_objects.len(),
            CanonicalView::INITIAL.map(CanonicalView::name).join(", ")
        ),
        images: vec![compose(&views)?],
        renders,
        control: Control::Continue,
    })
}

#[derive(Debug)]
pub struct SetCamera;

#[async_trait]
impl Tool for SetCamera {
    fn name(&self) -> &str {
        "set_camera"
    }
    fn description(&self) -> &str {
        "Move the inspection camera to a position (looking at a point, by default the framed objects' centre) and render that view."
    }
    fn parameters(&self) -> Value {
        parameters_of::<SetCameraArgs>()
    }
    async fn invoke(
        &self,
        context: &ToolContext,
        arguments: Value,
    ) -> Result<ToolOutput, ToolError> {
        let args: SetCameraArgs = parse_arguments(self.name(), arguments)?;
        let target = match (args.look_at, context.view()) {
            (Some(point), _) => point,
            (None, Some(view)) => view.target,
            (None, None) => [0.0, 0.0, 0.0],
        };
        let state = ViewState::looking_from(args.location, target);
        render_from(context, "set_camera", state).await
    }
}

#[derive(Debug)]
pub struct Investigate;

#[async_trait]
impl Tool for Investigate {
    fn name(&self) -> &str {
        "investigate"
    }
    fn description(&self) -> &str {
        "Adjust the inspection camera with words (rotate left/right, orbit, zoom in/out, view from top/front/side, move up/down, ...) and render the new view."
    }
    fn parameters(&self) -> Value {
        parameters_of::<InvestigateArgs>()
    }
    async fn invoke(
        &self,
        context: &ToolContext,
        arguments: Value,
    ) -> Result<ToolOutput, ToolError> {
        let args: InvestigateArgs = parse_arguments(self.name(), arguments)?;
        let current = current_view(context)?;
        let next = match parse_instruction(&args.instruction) {
            Some(change) => current.apply(change),
            None => {
                let Some(translator) = &context.translator else {
                    return Err(ToolError::Recoverable(format!(
                        "{:?} is not a camera instruction I know; use rotate left/right, orbit, zoom in/out, view from top/front/side/back, move up/down, or set_camera",
                        args.instruction
                    )));
                };
                let pose = translator.translate(&args.instruction, &current).await?;
                pose_to_view(&pose, &current)?
            }
        };
        render_from(context, "investigate", next).await
    }
}

/// Checks a translated pose before it is used: finite numbers, not inside the target.
pub fn pose_to_view(pose: &CameraPose, current: &ViewState) -> Result<ViewState, ToolError> {
    let location = pose.location.unwrap_or_else(|| current.location());
    let target = pose.look_at.unwrap_or(current.target);
    if location
        .iter()
        .chain(target.iter())
        .any(|v| !v.is_finite() || v.abs() > 1e6)
    {
        return Err(ToolError::Recoverable(
            "the translated camera pose has a non-finite or absurd coordinate".to_owned(),
        ));
    }
    let state = ViewState::looking_from(location, target);
    if state.distance < 1e-3 {
        return Err(ToolError::Recoverable(
            "the translated camera sits on its own target".to_owned(),
        ));
    }
    Ok(state)
}

#[derive(Debug)]
pub struct SetKeyframe;

#[async_trait]
impl Tool for SetKeyframe {
    fn name(&self) -> &str {
        "set_keyframe"
    }
    fn description(&self) -> &str {
        "Go to a frame of the timeline (to inspect motion in animated scenes) and render the current view there; reports the frames holding keyframes."
    }
    fn parameters(&self) -> Value {
        parameters_of::<KeyframeArgs>()
    }
    async fn invoke(
        &self,
        context: &ToolContext,
        arguments: Value,
    ) -> Result<ToolOutput, ToolError> {
        let args: KeyframeArgs = parse_arguments(self.name(), arguments)?;
        let frame = context.blender.set_frame(args.frame).await?;
        let keys = context.blender.list_keyframes().await?;
        let current = current_view(context)?;
        let mut output = render_from(context, &format!("frame-{}", frame.frame), current).await?;
        output.text = format!(
            "At frame {} of {}-{}; keyframes at {:?}. {}",
            frame.frame, frame.frame_start, frame.frame_end, keys.frames, output.text
        );
        Ok(output)
    }
}

#[derive(Debug)]
pub struct SetVisibility;

#[async_trait]
impl Tool for SetVisibility {
    fn name(&self) -> &str {
        "set_visibility"
    }
    fn description(&self) -> &str {
        "Hide or show objects (to reveal occluded content or isolate parts) and render the current view."
    }
    fn parameters(&self) -> Value {
        parameters_of::<VisibilityArgs>()
    }
    async fn invoke(
        &self,
        context: &ToolContext,
        arguments: Value,
    ) -> Result<ToolOutput, ToolError> {
        let args: VisibilityArgs = parse_arguments(self.name(), arguments)?;
        let change = context
            .blender
            .set_visibility(args.objects, args.visible)
            .await?;
        let current = current_view(context)?;
        let mut output = render_from(context, "visibility", current).await?;
        output.text = format!(
            "{} now {}. {}",
            change.objects.join(", "),
            if change.visible { "visible" } else { "hidden" },
            output.text
        );
        Ok(output)
    }
}

#[derive(Debug)]
pub struct EndVerification;

#[async_trait]
impl<C: Sync + ?Sized> Tool<C> for EndVerification {
    fn name(&self) -> &str {
        "end_process"
    }
    fn description(&self) -> &str {
        "Finish verification with your verdict: the visual differences from the target, concrete suggestions for the generator, and whether the scene is accepted."
    }
    fn parameters(&self) -> Value {
        parameters_of::<VerdictArgs>()
    }
    async fn invoke(&self, _context: &C, arguments: Value) -> Result<ToolOutput, ToolError> {
        let args: VerdictArgs = parse_arguments("end_process", arguments)?;
        Ok(ToolOutput {
            text: "Verification ended.".to_owned(),
            control: Control::EndVerification(Feedback {
                visual_differences: args.visual_differences,
                suggestions: args.suggestions,
                accepted: args.accepted,
            }),
            ..ToolOutput::default()
        })
    }
}

/// The verifier's registry.
pub fn verifier_tools() -> Result<ToolRegistry, RegistryError> {
    let mut registry = ToolRegistry::new();
    let tools: [Arc<dyn Tool>; 7] = [
        Arc::new(InitializeViewpoint),
        Arc::new(SetCamera),
        Arc::new(Investigate),
        Arc::new(SetKeyframe),
        Arc::new(SetVisibility),
        Arc::new(GetSceneInfo),
        Arc::new(EndVerification),
    ];
    for tool in tools {
        registry.register(tool)?;
    }
    Ok(registry)
}
