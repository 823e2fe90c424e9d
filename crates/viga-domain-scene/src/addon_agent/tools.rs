//! The agent's tools and what each call does to the scene.
//!
//! Add-on tools change the scene: one that runs becomes one undo step, which Blender records
//! in the same call as the command (so nothing, not even a lost connection, comes between
//! them); one that fails in Blender is taken back there at once. Scene tools only read or look (`get_scene_info`, and the
//! verifier's `initialize_viewpoint`, `set_camera` and `investigate`); a look leaves an
//! inspection camera and changed render settings behind, so it is taken back too. Raw Python
//! (`execute_code`) is not offered: the agent acts through what the add-ons declare.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;

use viga_blender::{BlenderCommands as _, BlenderTransport, TransportError};
use viga_protocol::bridge::{AddonCommandResult, RenderSpec, SceneReset};
use viga_protocol::message::{ToolCall, ToolSpec};
use viga_skills::addons::{AddonRegistry, AddonToolAdapter, ConfinedFolder, arguments_object};
use viga_skills::camera::CanonicalView;
use viga_skills::context::InstructionTranslator;
use viga_skills::generator::generator_tools;
use viga_skills::verifier::verifier_tools;
use viga_skills::{
    CapturedRender, RenderSettings, ToolContext, ToolError, ToolOutput, ToolRegistry,
};

use crate::attached::undo_name;
use viga_core::CoreError;

/// The add-on tool that lists the scene, when an add-on declares it (seed 004).
pub(super) const SCENE_LISTING_TOOL: &str = "list_scene_objects";
/// The generator's tool that reads the scene as text.
const READING_TOOL: &str = "get_scene_info";
/// The verifier's tools that render the scene.
const LOOKING_TOOLS: [&str; 3] = ["initialize_viewpoint", "set_camera", "investigate"];
/// The undo step a look's traces go on before they are undone.
const LOOK_STEP: &str = "viga: look (taken back)";

/// Whether `name` is one of the scene tools that only read or look (no command: it leaves
/// the scene as it was).
pub(super) fn reads_or_looks(name: &str) -> bool {
    name == READING_TOOL || LOOKING_TOOLS.contains(&name)
}

/// What one tool call came to.
#[derive(Debug)]
pub(super) enum CallOutcome {
    /// An add-on command ran; its change is now the undo step named `undo_step`.
    Commanded {
        reply: AddonCommandResult,
        undo_step: String,
    },
    /// A scene tool answered.
    Answered(ToolOutput),
    /// Nothing changed: the call was refused before it reached Blender (an unknown tool,
    /// arguments its schema rejects), or it failed in Blender and was undone. The message
    /// goes back to the model so it can correct the call.
    Refused(String),
}

/// The tools offered to the model, and the Blender they act on.
pub(super) struct ToolBelt {
    tools: ToolRegistry,
    /// The add-on tools by name, called directly so the agent can tell arguments refused
    /// before Blender from a failure in Blender (which may have changed the scene).
    addon_tools: BTreeMap<String, Arc<AddonToolAdapter>>,
    context: ToolContext,
    blender: Arc<dyn BlenderTransport>,
    /// Where add-on commands' paths are resolved, and nowhere else; `None` when Blender
    /// confines them itself (a person's Blender dialled in to a server, whose files are
    /// not this machine's).
    results: Option<ConfinedFolder>,
}

impl std::fmt::Debug for ToolBelt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolBelt")
            .field("tools", &self.tools)
            .finish_non_exhaustive()
    }
}

impl ToolBelt {
    /// The scene tools plus every registered add-on's tools. An add-on tool named like a
    /// scene tool is refused, so the model never sees two tools of one name.
    pub(super) fn new(
        addons: &AddonRegistry,
        blender: Arc<dyn BlenderTransport>,
        render: RenderSpec,
        translator: Arc<dyn InstructionTranslator>,
        results: Option<ConfinedFolder>,
    ) -> Result<Self, String> {
        let addon_tools = addons
            .adapters()
            .into_iter()
            .map(|adapter| (adapter.tool_name().to_owned(), adapter))
            .collect();
        let tools = addons
            .extend(&scene_tools()?)
            .map_err(|err| format!("the add-on tools cannot be offered: {err}"))?;
        // No program ever runs through this context, so its base scene is never used.
        let context = ToolContext::new(
            Arc::clone(&blender),
            RenderSettings::new(render),
            SceneReset::Factory,
        )
        .with_translator(translator);
        Ok(Self {
            tools,
            addon_tools,
            context,
            blender,
            results,
        })
    }

    /// Where add-on commands' paths are resolved, when viga resolves them.
    pub(super) fn results(&self) -> Option<&ConfinedFolder> {
        self.results.as_ref()
    }

    /// Whether `name` is a tool the model is offered.
    pub(super) fn offers(&self, name: &str) -> bool {
        self.tools.get(name).is_some()
    }

    pub(super) fn specs(&self) -> Vec<ToolSpec> {
        self.tools.specs()
    }

    pub(super) fn names(&self) -> Vec<String> {
        self.tools.names().into_iter().map(str::to_owned).collect()
    }

    pub(super) fn is_look(&self, name: &str) -> bool {
        LOOKING_TOOLS.contains(&name)
    }

    /// Where the next look's renders go (Blender writes them there itself when it shares
    /// this machine's files).
    pub(super) fn keep_renders_in(&self, folder: PathBuf) {
        self.context.set_render_folder(Some(folder));
    }

    /// Records the scene as it is as the step every undo goes back to. Only for a Blender
    /// of viga's own: it has no undo history yet, while the add-on in a person's Blender
    /// keeps a base step itself, and a second one would make one Ctrl-Z seem to do nothing.
    pub(super) async fn record_base_step(&self) -> Result<(), CoreError> {
        self.blender
            .undo_push("viga: before the agent")
            .await
            .map_err(|err| undo_failed("record the scene before the first command", err))
    }

    /// Runs one tool call. Blender calls are not raced against a cancel: a command in
    /// flight finishes and gets its undo step, so every step the run leaves is whole.
    pub(super) async fn call(&self, call: &ToolCall) -> Result<CallOutcome, CoreError> {
        if let Some(adapter) = self.addon_tools.get(&call.name) {
            return self.command(adapter, call).await;
        }
        let answer = self
            .tools
            .invoke(&self.context, &call.name, call.arguments.clone())
            .await;
        if self.is_look(&call.name) {
            self.take_back(LOOK_STEP).await?;
        }
        match answer {
            Ok(output) => Ok(CallOutcome::Answered(output)),
            Err(ToolError::Recoverable(message)) => Ok(CallOutcome::Refused(message)),
            Err(ToolError::Fatal(message)) => Err(CoreError::Tool(message)),
        }
    }

    /// The scene as an add-on that declares a `list_scene_objects` tool lists it (seed 004:
    /// the context after every command comes from that tool when one is there), one line
    /// per object; `None` when no add-on declares one, or it failed (viga's own summary of
    /// the scene stands alone then).
    pub(super) async fn declared_scene_listing(&self) -> Option<Vec<String>> {
        let adapter = self.addon_tools.get(SCENE_LISTING_TOOL)?;
        let reply = adapter
            .send(self.blender.as_ref(), serde_json::json!({}), None)
            .await
            .ok()?;
        let objects = match reply.result {
            Value::Object(mut fields) if fields.get("objects").is_some_and(Value::is_array) => {
                fields.remove("objects").unwrap_or_default()
            }
            other => other,
        };
        let Value::Array(objects) = objects else {
            return None;
        };
        Some(
            objects
                .into_iter()
                .map(|object| match object {
                    Value::String(line) => line,
                    other => other.to_string(),
                })
                .collect(),
        )
    }

    /// An add-on command: its arguments checked against the manifest's schema (and its
    /// paths confined to the results folder, where viga confines them), then sent as one
    /// undo step, which Blender records with the command, or takes back when it fails.
    async fn command(
        &self,
        adapter: &AddonToolAdapter,
        call: &ToolCall,
    ) -> Result<CallOutcome, CoreError> {
        let mut arguments = arguments_object(call.arguments.clone());
        if let Err(refused) = adapter.check_arguments(&arguments) {
            return Ok(CallOutcome::Refused(refused.to_string()));
        }
        if let Some(results) = &self.results {
            arguments = match adapter.confine_paths(arguments, results) {
                Ok(arguments) => arguments,
                Err(refused) => return Ok(CallOutcome::Refused(refused.to_string())),
            };
        }
        let undo_step = undo_name(&call.name);
        match adapter
            .send(self.blender.as_ref(), arguments, Some(undo_step.clone()))
            .await
        {
            Ok(reply) => Ok(CallOutcome::Commanded { reply, undo_step }),
            Err(ToolError::Recoverable(message)) => Ok(CallOutcome::Refused(format!(
                "{message}\nWhatever the command changed was undone: the scene is as it was before it."
            ))),
            Err(ToolError::Fatal(message)) => Err(CoreError::Tool(message)),
        }
    }

    /// One look at the whole scene from the iso view, at the run's render settings, taken
    /// back afterwards like every look; `Ok(Err(why))` when there is nothing to frame or
    /// Blender could not render it.
    pub(super) async fn look_at_scene(&self) -> Result<Result<CapturedRender, String>, CoreError> {
        let iso = CanonicalView::Iso;
        let rendered = self
            .context
            .render_framed_views(&[(iso.name(), iso.direction())], Vec::new(), None)
            .await;
        let taken_back = self.take_back(LOOK_STEP).await;
        match rendered {
            Ok(mut views) => {
                taken_back?;
                Ok(views
                    .pop()
                    .map(|(_, render)| render)
                    .ok_or_else(|| "Blender rendered no view".to_owned()))
            }
            // A look that failed may have left nothing to take back (a Blender replaced after
            // a refused reply has no undo steps): said with the look's failure, not a stop.
            Err(ToolError::Recoverable(message)) => Ok(Err(match taken_back {
                Ok(()) => message,
                Err(err) => format!("{message}; and then: {err}"),
            })),
            Err(ToolError::Fatal(message)) => Err(CoreError::Tool(message)),
        }
    }

    /// Takes the scene back to its last undo step: what a failed command or a look left.
    async fn take_back(&self, step: &str) -> Result<(), CoreError> {
        self.blender
            .undo_push(step)
            .await
            .map_err(|err| undo_failed("record what to take back", err))?;
        self.blender
            .undo()
            .await
            .map_err(|err| undo_failed("take the scene back to its last step", err))
    }
}

fn undo_failed(what: &str, err: TransportError) -> CoreError {
    crate::blender_error(
        format!(
            "Blender could not {what}, so the run stopped and no change is left that cannot be undone (is undo turned off in Preferences > System > Undo Steps?)"
        ),
        err,
    )
}

/// The scene tools the agent is offered beside the add-ons' (their names are reserved: an
/// add-on tool named like one is refused).
pub(super) fn scene_tools() -> Result<ToolRegistry, String> {
    let generator = generator_tools().map_err(|err| err.to_string())?;
    let verifier = verifier_tools().map_err(|err| err.to_string())?;
    let mut tools = ToolRegistry::new();
    let picked = std::iter::once((&generator, READING_TOOL))
        .chain(LOOKING_TOOLS.iter().map(|name| (&verifier, *name)));
    for (source, name) in picked {
        let tool = source
            .get(name)
            .ok_or_else(|| format!("the skill library has no tool {name:?}"))?;
        tools
            .register(Arc::clone(tool))
            .map_err(|err| err.to_string())?;
    }
    Ok(tools)
}
