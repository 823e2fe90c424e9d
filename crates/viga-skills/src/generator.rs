//! The generator's tools (seed 001): make_plan, execute_code, get_scene_info,
//! get_better_assets, end_process.

use std::fmt::Write as _;
use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use viga_blender::BlenderCommands as _;
use viga_protocol::iteration::ExecutionResult;

use crate::assets::{Animation, AssetRequest, Reference, Region, Sourcing};
use crate::context::ToolContext;
use crate::registry::{
    Control, RegistryError, Tool, ToolError, ToolOutput, ToolRegistry, parameters_of,
    parse_arguments,
};
use crate::scene::summarize;

macro_rules! arguments {
    ($($ty:ident),* $(,)?) => {
        $(impl viga_protocol::ProtocolType for $ty {
            const NAME: &'static str = stringify!($ty);
        })*
    };
}
pub(crate) use arguments;

/// Default page size of `get_scene_info`.
const SCENE_PAGE: u32 = 40;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MakePlanArgs {
    /// The high-level steps to take, in order.
    pub plan: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecuteCodeArgs {
    /// The whole Blender Python program; it runs on a freshly reloaded base scene.
    pub code: String,
}

/// `execute_code`'s arguments in live mode, whose program runs on the scene as it is.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecuteCodeLiveArgs {
    /// The Blender Python program; it runs on the current scene, after every earlier change.
    pub code: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SceneInfoArgs {
    /// First object to list (objects are sorted by name).
    #[serde(default)]
    pub offset: u32,
    /// How many objects to list (default 40).
    #[serde(default)]
    #[schemars(range(min = 1, max = 200))]
    pub limit: Option<u32>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AssetArgs {
    /// What the asset should be, in words ("wooden chair", "oak tree"); for a generated
    /// asset, its description (at most 600 characters).
    pub query: String,
    #[serde(default)]
    #[schemars(range(min = 1, max = 20))]
    pub max_results: Option<u32>,
    /// Where to look: "any" (ready-made assets first; generated when none fits and the run
    /// can generate), "library" (ready-made only) or "generate" (make one; it costs the user
    /// credits and takes minutes).
    #[serde(default)]
    pub source: Option<Sourcing>,
    /// The object the asset is for ("Chair"); names a generated asset.
    #[serde(default)]
    pub object_name: Option<String>,
    /// Generate the asset from this part of a target picture instead of from words:
    /// [left, top, right, bottom] as fractions of the picture's width and height, from its
    /// top left (0 to 1).
    #[serde(default)]
    pub region: Option<[f64; 4]>,
    /// Which target picture `region` is of (its camera, "Camera1"); the first by default.
    #[serde(default)]
    pub target: Option<String>,
    /// Rig the generated asset (humanoid characters), so it can be animated.
    #[serde(default)]
    pub rig: bool,
    /// Animate the rigged asset: "walking", "running", or the number of an action of Meshy's
    /// animation library.
    #[serde(default)]
    pub animation: Option<String>,
}

impl AssetArgs {
    /// The request these arguments make; `Err` says what is wrong with them.
    pub fn request(self) -> Result<AssetRequest, ToolError> {
        let animation = match self.animation.as_deref().map(str::trim) {
            None | Some("") => None,
            Some("walking") => Some(Animation::Walking),
            Some("running") => Some(Animation::Running),
            Some(action) => Some(Animation::Action(action.parse().map_err(|_| {
                ToolError::Recoverable(format!(
                    "the animation {action:?} is none: say \"walking\", \"running\" or the number of an action of Meshy's animation library"
                ))
            })?)),
        };
        let reference = match self.region {
            None if self.target.is_some() => {
                return Err(ToolError::Recoverable(
                    "a target picture is named but no region of it: give region [left, top, right, bottom] too".to_owned(),
                ));
            }
            None => Reference::Text,
            Some([left, top, right, bottom]) => Reference::Image {
                region: Region {
                    left,
                    top,
                    right,
                    bottom,
                },
                view: self.target,
            },
        };
        Ok(AssetRequest {
            query: self.query,
            limit: self.max_results.unwrap_or(5) as usize,
            sourcing: self.source.unwrap_or_default(),
            object_name: self.object_name,
            reference,
            rig: self.rig,
            animation,
        })
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EndGenerationArgs {
    /// Why no further edits are needed.
    pub reason: String,
}

arguments!(
    MakePlanArgs,
    ExecuteCodeArgs,
    ExecuteCodeLiveArgs,
    SceneInfoArgs,
    AssetArgs,
    EndGenerationArgs
);

#[derive(Debug)]
pub struct MakePlan;

#[async_trait]
impl<C: Sync + ?Sized> Tool<C> for MakePlan {
    fn name(&self) -> &str {
        "make_plan"
    }
    fn description(&self) -> &str {
        "Write an explicit high-level plan before editing, so later edits stay consistent with it."
    }
    fn parameters(&self) -> Value {
        parameters_of::<MakePlanArgs>()
    }
    async fn invoke(&self, _context: &C, arguments: Value) -> Result<ToolOutput, ToolError> {
        let args: MakePlanArgs = parse_arguments("make_plan", arguments)?;
        if args.plan.trim().is_empty() {
            return Err(ToolError::Recoverable(
                "the plan is empty; list the steps you will take".to_owned(),
            ));
        }
        Ok(ToolOutput {
            text: "Plan recorded.".to_owned(),
            control: Control::Plan(args.plan),
            ..ToolOutput::default()
        })
    }
}

/// One readable paragraph about a program run, for the model.
pub fn describe_execution(result: &ExecutionResult) -> String {
    let mut text = match &result.error {
        None => format!(
            "The program ran without errors in {:.0} ms.",
            result.duration_ms
        ),
        Some(error) => format!(
            "The program failed: {error}\n{}",
            error.traceback.trim_end()
        ),
    };
    if !result.stdout.trim().is_empty() {
        let _ = write!(text, "\nstdout:\n{}", result.stdout.trim_end());
    }
    if !result.stderr.trim().is_empty() {
        let _ = write!(text, "\nstderr:\n{}", result.stderr.trim_end());
    }
    text
}

#[derive(Debug)]
pub struct ExecuteCode;

#[async_trait]
impl Tool for ExecuteCode {
    fn name(&self) -> &str {
        "execute_code"
    }
    fn description(&self) -> &str {
        "Run the whole scene program in Blender on a freshly reloaded base scene (every program starts from the same scene, so send the whole scene each time) and report stdout, stderr and any exception with its line."
    }
    fn parameters(&self) -> Value {
        parameters_of::<ExecuteCodeArgs>()
    }
    async fn invoke(
        &self,
        context: &ToolContext,
        arguments: Value,
    ) -> Result<ToolOutput, ToolError> {
        let args: ExecuteCodeArgs = parse_arguments(self.name(), arguments)?;
        let result = context
            .blender
            .execute(&args.code, Some(context.base_scene.clone()), None)
            .await?;
        outcome_of(&result, describe_execution(&result))
    }
}

/// `execute_code` on the scene as it is (live mode: a person's Blender, or an MCP client
/// that builds a scene step by step): each program edits the scene further, as one undo
/// step, and a program that fails is undone at once.
#[derive(Debug)]
pub struct ExecuteCodeLive;

#[async_trait]
impl Tool for ExecuteCodeLive {
    fn name(&self) -> &str {
        "execute_code"
    }
    fn description(&self) -> &str {
        "Run a Blender Python program on the current scene, which keeps every earlier change (live mode). Each program is one undo step; a program that raises is undone, so the scene is as before it. Reports stdout, stderr and any exception with its line."
    }
    fn parameters(&self) -> Value {
        parameters_of::<ExecuteCodeLiveArgs>()
    }
    async fn invoke(
        &self,
        context: &ToolContext,
        arguments: Value,
    ) -> Result<ToolOutput, ToolError> {
        let args: ExecuteCodeLiveArgs = parse_arguments(self.name(), arguments)?;
        let applied = context
            .blender
            .apply_program(&args.code, "viga: execute_code", None)
            .await?;
        let mut text = describe_execution(&applied.execution);
        if applied.reverted {
            text.push_str("\nThe program's changes were undone: the scene is as it was before it.");
        }
        outcome_of(&applied.execution, text)
    }
}

/// A program's run as a tool's answer: one that raised is a failure the model can correct
/// (an MCP client sees `isError`), told in the same words.
fn outcome_of(result: &ExecutionResult, text: String) -> Result<ToolOutput, ToolError> {
    if result.succeeded() {
        Ok(ToolOutput::text(text))
    } else {
        Err(ToolError::Recoverable(text))
    }
}

#[derive(Debug)]
pub struct GetSceneInfo;

#[async_trait]
impl Tool for GetSceneInfo {
    fn name(&self) -> &str {
        "get_scene_info"
    }
    fn description(&self) -> &str {
        "Summarise the scene as text: each object's type, location, rotation, scale, size, materials, modifiers, shape keys, lights and cameras. Paginated."
    }
    fn parameters(&self) -> Value {
        parameters_of::<SceneInfoArgs>()
    }
    async fn invoke(
        &self,
        context: &ToolContext,
        arguments: Value,
    ) -> Result<ToolOutput, ToolError> {
        let args: SceneInfoArgs = parse_arguments(self.name(), arguments)?;
        let info = context
            .blender
            .scene_info(args.offset, args.limit.unwrap_or(SCENE_PAGE))
            .await?;
        Ok(ToolOutput::text(summarize(&info)))
    }
}

#[derive(Debug)]
pub struct GetBetterAssets;

#[async_trait]
impl Tool for GetBetterAssets {
    fn name(&self) -> &str {
        "get_better_assets"
    }
    fn description(&self) -> &str {
        "Find ready-made 3D assets matching a description, or have one generated when the run can (from words, or from a region of a target picture; optionally rigged and animated for a 4D scene), with the Python that imports each into the scene program. Each result says where it came from, its licence where known and, for a generated one, what it cost."
    }
    fn parameters(&self) -> Value {
        parameters_of::<AssetArgs>()
    }
    async fn invoke(
        &self,
        context: &ToolContext,
        arguments: Value,
    ) -> Result<ToolOutput, ToolError> {
        let args: AssetArgs = parse_arguments(self.name(), arguments)?;
        let Some(source) = &context.assets else {
            return Err(ToolError::Recoverable(
                "no asset source is configured for this run; model the object with Blender Python instead".to_owned(),
            ));
        };
        let request = args.request()?;
        let hits = source.find(&request).await?;
        if hits.is_empty() {
            return Ok(ToolOutput::text(format!(
                "No asset in {} matches {:?}; model it with Blender Python instead.",
                source.describe(),
                request.query
            )));
        }
        let mut text = format!("{} assets match {:?}:", hits.len(), request.query);
        for hit in &hits {
            let licence = hit
                .licence
                .as_deref()
                .map(|licence| format!("; licence {licence}"))
                .unwrap_or_default();
            let _ = write!(
                text,
                "\n\n{} (source {}{licence}; score {:.2}): {}\nImport with:\n```python\n{}```",
                hit.name,
                hit.origin.as_str(),
                hit.score,
                if hit.description.is_empty() {
                    "(no description)"
                } else {
                    &hit.description
                },
                hit.import_snippet()
            );
        }
        Ok(ToolOutput::text(text))
    }
}

#[derive(Debug)]
pub struct EndGeneration;

#[async_trait]
impl<C: Sync + ?Sized> Tool<C> for EndGeneration {
    fn name(&self) -> &str {
        "end_process"
    }
    fn description(&self) -> &str {
        "Signal that the scene matches the target and no further edits are needed."
    }
    fn parameters(&self) -> Value {
        parameters_of::<EndGenerationArgs>()
    }
    async fn invoke(&self, _context: &C, arguments: Value) -> Result<ToolOutput, ToolError> {
        let args: EndGenerationArgs = parse_arguments("end_process", arguments)?;
        Ok(ToolOutput {
            text: "Generation ended.".to_owned(),
            control: Control::EndGeneration {
                reason: args.reason,
            },
            ..ToolOutput::default()
        })
    }
}

/// The generator's registry.
pub fn generator_tools() -> Result<ToolRegistry, RegistryError> {
    let mut registry = ToolRegistry::new();
    let tools: [Arc<dyn Tool>; 5] = [
        Arc::new(MakePlan),
        Arc::new(ExecuteCode),
        Arc::new(GetSceneInfo),
        Arc::new(GetBetterAssets),
        Arc::new(EndGeneration),
    ];
    for tool in tools {
        registry.register(tool)?;
    }
    Ok(registry)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(arguments: Value) -> Result<AssetRequest, ToolError> {
        parse_arguments::<AssetArgs>("get_better_assets", arguments)?.request()
    }

    #[test]
    fn asset_arguments_make_the_request_they_say() {
        let plain = request(serde_json::json!({"query": "oak chair"})).unwrap();
        assert_eq!(plain, AssetRequest::words("oak chair", 5));
        let picture = request(serde_json::json!({
            "query": "the robot", "source": "generate", "object_name": "Robot",
            "region": [0.1, 0.2, 0.5, 0.9], "target": "Camera2", "rig": true, "animation": "92",
        }))
        .unwrap();
        assert_eq!(picture.sourcing, Sourcing::Generate);
        assert_eq!(picture.animation, Some(Animation::Action(92)));
        assert_eq!(
            picture.reference,
            Reference::Image {
                region: Region {
                    left: 0.1,
                    top: 0.2,
                    right: 0.5,
                    bottom: 0.9
                },
                view: Some("Camera2".to_owned())
            }
        );
        assert_eq!(
            request(serde_json::json!({"query": "x", "animation": "walking", "rig": true}))
                .unwrap()
                .animation,
            Some(Animation::Walking)
        );
        for (bad, why) in [
            (
                serde_json::json!({"query": "x", "animation": "dance"}),
                "is none",
            ),
            (
                serde_json::json!({"query": "x", "target": "Camera1"}),
                "no region",
            ),
            (
                serde_json::json!({"query": "x", "source": "somewhere"}),
                "source",
            ),
            (
                serde_json::json!({"query": "x", "region": [0, 1]}),
                "region",
            ),
        ] {
            let err = request(bad.clone()).unwrap_err();
            assert!(err.to_string().contains(why), "{bad}: {err}");
        }
    }
}
