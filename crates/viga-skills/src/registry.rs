//! Tools, their registry, and the split between errors the model should correct itself from
//! and errors that stop the run.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde_json::Value;
use viga_blender::TransportError;
use viga_protocol::bridge::ViewPicture;
use viga_protocol::iteration::Feedback;
use viga_protocol::message::{ImageData, ToolSpec};
use viga_protocol::{ProtocolType, parse_value, schema_of};

use crate::context::ToolContext;

/// Why a tool failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// Sent back to the model as the tool's result, so it can correct itself.
    #[error("{0}")]
    Recoverable(String),
    /// Stops the run: nothing the model does can fix it.
    #[error("{0}")]
    Fatal(String),
}

impl From<TransportError> for ToolError {
    fn from(err: TransportError) -> Self {
        match &err {
            // An unreadable reply is a refused command, not a broken Blender: the worker is
            // kept, and the model can try something else.
            TransportError::Refused { .. }
            | TransportError::MalformedReply { .. }
            | TransportError::Lost {
                recovery: viga_blender::Recovery::Restarted { .. },
                ..
            }
            // A refused reply is the program's doing: said to the model, with the worker
            // replaced (or, a person's Blender, left to them).
            | TransportError::Untrusted {
                recovery: viga_blender::Recovery::Restarted { .. } | viga_blender::Recovery::None,
                ..
            } => Self::Recoverable(err.to_string()),
            _ => Self::Fatal(err.to_string()),
        }
    }
}

/// A render a tool made, for the run folder.
#[derive(Debug, Clone, PartialEq)]
pub struct CapturedRender {
    /// The view's name ("front", "iso", "investigate-2", ...).
    pub view: String,
    pub picture: ViewPicture,
    /// Where the PNG was kept, when the context keeps renders in a folder
    /// ([`crate::ToolContext::set_render_folder`]); `None` when it is only in memory.
    pub file: Option<std::path::PathBuf>,
}

/// What a tool asks of the loop after it ran.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Control {
    #[default]
    Continue,
    /// The generator's `end_process`: no further edits are needed.
    EndGeneration { reason: String },
    /// The verifier's `end_process`: its verdict.
    EndVerification(Feedback),
    /// The generator's `make_plan`.
    Plan(String),
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolOutput {
    /// What the model reads.
    pub text: String,
    /// Images the model sees (a montage, a single view).
    pub images: Vec<ImageData>,
    /// Every render made, for the run folder.
    pub renders: Vec<CapturedRender>,
    pub control: Control,
}

impl ToolOutput {
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            ..Self::default()
        }
    }
}

/// A tool the model may call, over what its calls reach (`C`): a Blender scene's
/// [`ToolContext`] by default; a domain that is not a Blender scene brings its own context,
/// and tools that reach nothing (`make_plan`, `end_process`) work over any.
#[async_trait]
pub trait Tool<C: Sync + ?Sized = ToolContext>: Send + Sync {
    fn name(&self) -> &str;
    fn description(&self) -> &str;
    /// JSON Schema of the arguments (derived, never hand-written).
    fn parameters(&self) -> Value;
    async fn invoke(&self, context: &C, arguments: Value) -> Result<ToolOutput, ToolError>;

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name().to_owned(),
            description: self.description().to_owned(),
            parameters: self.parameters(),
        }
    }
}

/// The JSON Schema of an arguments type, without the `$schema`/`title` noise providers
/// reject or ignore.
pub fn parameters_of<A: JsonSchema>() -> Value {
    let mut schema = schema_of::<A>();
    if let Some(object) = schema.as_object_mut() {
        object.remove("$schema");
        object.remove("title");
    }
    schema
}

/// Validates a model's arguments against their schema and converts them; a failure names the
/// path and rule and goes back to the model.
pub fn parse_arguments<A: ProtocolType>(tool: &str, arguments: Value) -> Result<A, ToolError> {
    // Models sometimes send no arguments for a tool without required ones.
    let arguments = if arguments.is_null() {
        Value::Object(Default::default())
    } else {
        arguments
    };
    parse_value::<A>(arguments)
        .map_err(|err| ToolError::Recoverable(format!("invalid arguments for {tool}: {err}")))
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    #[error("a tool named {0:?} is already registered; tool names must be unique")]
    Duplicate(String),
}

/// The tools offered to one role, over the context `C` their calls reach. Ordered by name,
/// so prompts are deterministic.
pub struct ToolRegistry<C: Sync + ?Sized = ToolContext> {
    tools: BTreeMap<String, Arc<dyn Tool<C>>>,
}

impl<C: Sync + ?Sized> Clone for ToolRegistry<C> {
    fn clone(&self) -> Self {
        Self {
            tools: self.tools.clone(),
        }
    }
}

impl<C: Sync + ?Sized> Default for ToolRegistry<C> {
    fn default() -> Self {
        Self {
            tools: BTreeMap::new(),
        }
    }
}

impl<C: Sync + ?Sized> std::fmt::Debug for ToolRegistry<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.tools.keys()).finish()
    }
}

impl<C: Sync + ?Sized> ToolRegistry<C> {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn register(&mut self, tool: Arc<dyn Tool<C>>) -> Result<(), RegistryError> {
        let name = tool.name().to_owned();
        if self.tools.contains_key(&name) {
            return Err(RegistryError::Duplicate(name));
        }
        self.tools.insert(name, tool);
        Ok(())
    }

    /// Removes a tool; returns whether it was there.
    pub fn unregister(&mut self, name: &str) -> bool {
        self.tools.remove(name).is_some()
    }

    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.values().map(|tool| tool.spec()).collect()
    }

    pub fn names(&self) -> Vec<&str> {
        self.tools.keys().map(String::as_str).collect()
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool<C>>> {
        self.tools.get(name)
    }

    /// Runs a tool by name; an unknown name goes back to the model with the known ones.
    pub async fn invoke(
        &self,
        context: &C,
        name: &str,
        arguments: Value,
    ) -> Result<ToolOutput, ToolError> {
        let Some(tool) = self.tools.get(name) else {
            return Err(ToolError::Recoverable(format!(
                "there is no tool named {name:?}; available tools: {}",
                self.names().join(", ")
            )));
        };
        tool.invoke(context, arguments).await
    }
}
