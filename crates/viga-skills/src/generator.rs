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
    /// What the asset should be, in words ("wooden chair", "oak tree").
    pub query: String,
    #[serde(default)]
    #[schemars(range(min = 1, max = 20))]
    pub max_results: Option<u32>,
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
        parameters_of::<ExecuteCodeArgs>()
    }
    async fn invoke(
        &self,
        context: &ToolContext,
        arguments: Value,
    ) -> Result<ToolOutput, ToolError> {
        let args: ExecuteCodeArgs = parse_arguments(self.name(), arguments)?;
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
        "Find ready-made 3D assets matching a description, with the Python that imports each into the scene program."
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
        let hits = source
            .search(&args.query, args.max_results.unwrap_or(5) as usize)
            .await?;
        if hits.is_empty() {
            return Ok(ToolOutput::text(format!(
                "No asset in {} matches {:?}; model it with Blender Python instead.",
                source.describe(),
                args.query
            )));
        }
        let mut text = format!("{} assets match {:?}:", hits.len(), args.query);
        for hit in &hits {
            let _ = write!(
                text,
                "\n\n{} (score {:.2}): {}\nImport with:\n```python\n{}```",
                hit.name,
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
