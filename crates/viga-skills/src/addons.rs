//! Tools generated at run time from Blender add-on manifests (seed 004). Each manifest
//! parameter becomes a JSON Schema property with its exact name, type, enum options, default
//! and required flag, so the model sees what the add-on really takes, and arguments are
//! checked against that schema before anything reaches Blender.
//!
//! The [`AddonRegistry`] follows the running Blender: [`AddonRegistry::refresh`] rediscovers
//! the add-ons enabled there (cheaply: the bridge fingerprints its listing), refuses tool
//! names that clash with built-in tools or with another add-on's, and keeps add-ons whose
//! requirements are not met out of what a model is offered, with the reason in
//! [`AddonRegistry::problems`].

mod discovery;
mod paths;
mod problems;
mod prompt;
mod requirements;

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value, json};
use viga_blender::BlenderTransport;
use viga_protocol::bridge::{AddonCommandResult, BridgeCommand};
use viga_protocol::manifest::{AddonManifest, AddonTool, ParameterType, ToolParameter};
use viga_protocol::{CompiledSchema, ProtocolError, parse_json};

use crate::context::ToolContext;
use crate::registry::{RegistryError, Tool, ToolError, ToolOutput, ToolRegistry};

pub use discovery::{AddonScan, AddonSetChange, discover};
pub use paths::{ConfinedFolder, PathRefused, confine_path_arguments, looks_like_path};
pub use problems::{AddonProblem, ProblemReason};

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AddonError {
    #[error("add-on manifest {source_name}: {message}")]
    Manifest {
        source_name: String,
        message: String,
    },
    #[error(
        "add-on {addon:?} declares tool {tool:?}, which add-on {owner:?} already provides; rename one of them"
    )]
    ToolClash {
        addon: String,
        tool: String,
        owner: String,
    },
    #[error(
        "add-on {addon:?} declares tool {tool:?}, which is the name of a built-in tool; rename the add-on's tool"
    )]
    BuiltInToolClash { addon: String, tool: String },
}

fn manifest_error(source_name: &str, err: ProtocolError) -> AddonError {
    AddonError::Manifest {
        source_name: source_name.to_owned(),
        message: err.to_string(),
    }
}

/// Reads and validates an `addon_ai.json`; errors name the file and the field.
pub fn load_manifest(path: &Path) -> Result<AddonManifest, AddonError> {
    let source_name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|err| AddonError::Manifest {
        source_name: source_name.clone(),
        message: format!("cannot be read: {err}"),
    })?;
    parse_json(&text).map_err(|err| manifest_error(&source_name, err))
}

/// The JSON Schema of one manifest parameter.
pub fn parameter_schema(parameter: &ToolParameter) -> Value {
    let mut schema = match parameter.kind {
        ParameterType::String | ParameterType::FilePath => json!({"type": "string"}),
        ParameterType::Integer => json!({"type": "integer"}),
        ParameterType::Float => json!({"type": "number"}),
        ParameterType::Boolean => json!({"type": "boolean"}),
        ParameterType::Enum => {
            json!({"type": "string", "enum": parameter.options.clone().unwrap_or_default()})
        }
        ParameterType::Vector3 => {
            json!({"type": "array", "items": {"type": "number"}, "minItems": 3, "maxItems": 3})
        }
        ParameterType::ObjectName | ParameterType::MaterialName | ParameterType::CollectionName => {
            json!({"type": "string", "minLength": 1})
        }
    };
    let kind_note = match parameter.kind {
        ParameterType::ObjectName => " (the exact name of an object in the scene)",
        ParameterType::MaterialName => " (a material name)",
        ParameterType::CollectionName => " (a collection name)",
        ParameterType::FilePath => " (a file path)",
        ParameterType::Vector3 => " (three numbers: x, y, z)",
        _ => "",
    };
    if let Some(object) = schema.as_object_mut() {
        object.insert(
            "description".into(),
            Value::String(format!("{}{kind_note}", parameter.description)),
        );
        if let Some(default) = &parameter.default {
            object.insert("default".into(), default.clone());
        }
    }
    schema
}

/// The JSON Schema of a tool's arguments: exact names, required ones listed, nothing else
/// allowed.
pub fn tool_schema(tool: &AddonTool) -> Value {
    let properties: Map<String, Value> = tool
        .parameters
        .iter()
        .map(|p| (p.name.clone(), parameter_schema(p)))
        .collect();
    let required: Vec<&str> = tool
        .parameters
        .iter()
        .filter(|p| p.required)
        .map(|p| p.name.as_str())
        .collect();
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

/// Arguments as a command takes them: no arguments at all (`null`) are an empty object.
pub fn arguments_object(arguments: Value) -> Value {
    if arguments.is_null() {
        json!({})
    } else {
        arguments
    }
}

/// One add-on tool, dispatched to the add-on's handler inside Blender.
pub struct AddonToolAdapter {
    addon_id: String,
    tool: AddonTool,
    description: String,
    schema: Value,
    compiled: CompiledSchema,
}

impl std::fmt::Debug for AddonToolAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AddonToolAdapter")
            .field("addon_id", &self.addon_id)
            .field("tool", &self.tool.name)
            .finish()
    }
}

impl AddonToolAdapter {
    pub fn new(addon_id: &str, tool: &AddonTool) -> Result<Self, AddonError> {
        let schema = tool_schema(tool);
        let compiled =
            CompiledSchema::compile(&schema).map_err(|message| AddonError::Manifest {
                source_name: addon_id.to_owned(),
                message: format!("tool {:?} yields an unusable schema: {message}", tool.name),
            })?;
        let description = if tool.usage.is_empty() {
            tool.description.clone()
        } else {
            format!("{} Use: {}", tool.description, tool.usage)
        };
        Ok(Self {
            addon_id: addon_id.to_owned(),
            tool: tool.clone(),
            description,
            schema,
            compiled,
        })
    }

    /// Checks the arguments, then runs the command in Blender: what it returned and the
    /// scene after it, as data (front ends that pass JSON on, like the gateway, want that
    /// rather than the model's text).
    pub async fn run(
        &self,
        blender: &dyn BlenderTransport,
        arguments: Value,
    ) -> Result<AddonCommandResult, ToolError> {
        let arguments = arguments_object(arguments);
        self.check_arguments(&arguments)?;
        self.send(blender, arguments, None).await
    }

    /// Sends arguments already checked ([`AddonToolAdapter::check_arguments`]) to Blender:
    /// for a caller that must tell a refusal (nothing reached Blender) from a failure in
    /// Blender (which may have changed the scene). With `undo_step`, Blender makes the
    /// command that one undo step in the same call, and takes back a command that fails.
    pub async fn send(
        &self,
        blender: &dyn BlenderTransport,
        arguments: Value,
        undo_step: Option<String>,
    ) -> Result<AddonCommandResult, ToolError> {
        let command = BridgeCommand::AddonCommand {
            addon_id: self.addon_id.clone(),
            tool: self.tool.name.clone(),
            params: arguments,
            undo_step,
        };
        let reply = blender.call(command, None).await?;
        serde_json::from_value(reply).map_err(|err| {
            ToolError::Fatal(format!("the add-on command reply is malformed: {err}"))
        })
    }

    /// The tool's name (its command in the add-on).
    pub fn tool_name(&self) -> &str {
        &self.tool.name
    }

    /// The add-on it belongs to.
    pub fn addon_id(&self) -> &str {
        &self.addon_id
    }

    /// The tool as its manifest declares it.
    pub fn manifest_tool(&self) -> &AddonTool {
        &self.tool
    }

    /// `arguments` with every path in them resolved in `folder` and nothing outside it
    /// ([`confine_path_arguments`]); a refusal says which value and why.
    pub fn confine_paths(
        &self,
        arguments: Value,
        folder: &ConfinedFolder,
    ) -> Result<Value, ToolError> {
        confine_path_arguments(&self.tool, arguments, folder).map_err(ToolError::Recoverable)
    }

    /// Checks arguments before they reach Blender. A refusal names the path and rule broken,
    /// the closest parameter to each name the tool does not take, and every parameter the
    /// tool does take with its type, options and default, as the manifest says them: the
    /// model corrects its call from that.
    pub fn check_arguments(&self, arguments: &Value) -> Result<(), ToolError> {
        let violations = self.compiled.violations(arguments);
        if violations.is_empty() {
            return Ok(());
        }
        let listed: Vec<String> = violations.iter().map(ToString::to_string).collect();
        let mut message = format!(
            "invalid arguments for {}: {}",
            self.tool.name,
            listed.join("; ")
        );
        for (unknown, known) in self.closest_parameters(arguments) {
            let _ = write!(
                message,
                "\n{unknown:?} is not a parameter of {}",
                self.tool.name
            );
            if let Some(known) = known {
                let _ = write!(message, "; did you mean {known:?}?");
            }
        }
        if self.tool.parameters.is_empty() {
            let _ = write!(
                message,
                "\n{} takes no parameters: call it with {{}}.",
                self.tool.name
            );
        } else {
            let _ = write!(
                message,
                "\n{} takes exactly these parameters (names as written here):",
                self.tool.name
            );
            for parameter in &self.tool.parameters {
                let _ = write!(message, "\n- {}", prompt::describe_parameter(parameter));
            }
        }
        Err(ToolError::Recoverable(message))
    }

    /// Each argument name the tool does not take, with the parameter it most likely meant
    /// (a small edit away, or one name holding the other), if any.
    fn closest_parameters(&self, arguments: &Value) -> Vec<(String, Option<String>)> {
        let Some(given) = arguments.as_object() else {
            return Vec::new();
        };
        given
            .keys()
            .filter(|name| !self.tool.parameters.iter().any(|p| &p.name == *name))
            .map(|name| {
                let closest = self
                    .tool
                    .parameters
                    .iter()
                    .filter(|p| !given.contains_key(&p.name))
                    .map(|p| (edit_distance(name, &p.name), &p.name))
                    .filter(|(distance, known)| {
                        *distance <= 2.max(known.len() / 3)
                            || known.contains(name.as_str())
                            || name.contains(known.as_str())
                    })
                    .min_by_key(|(distance, _)| *distance)
                    .map(|(_, known)| known.clone());
                (name.clone(), closest)
            })
            .collect()
    }
}

#[async_trait]
impl Tool for AddonToolAdapter {
    fn name(&self) -> &str {
        &self.tool.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        self.schema.clone()
    }

    async fn invoke(
        &self,
        context: &ToolContext,
        arguments: Value,
    ) -> Result<ToolOutput, ToolError> {
        let answer = self.run(context.blender.as_ref(), arguments).await?;
        Ok(ToolOutput::text(format!(
            "{} returned {}\nScene now:\n{}",
            self.tool.name,
            answer.result,
            answer.scene.join("\n")
        )))
    }
}

/// The Levenshtein distance between two names, by characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != *cb);
            current.push(substitution.min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}

/// One registered add-on: its manifest and its tools, built once at registration.
#[derive(Debug, Clone)]
struct RegisteredAddon {
    manifest: AddonManifest,
    tools: Vec<Arc<AddonToolAdapter>>,
    /// The manifest file, for add-ons found by discovery.
    source: Option<String>,
}

impl RegisteredAddon {
    fn tool_names(&self) -> impl Iterator<Item = &str> {
        self.manifest
            .ai_integration
            .tools
            .iter()
            .map(|tool| tool.name.as_str())
    }
}

/// Higher priority first, then by id, so listings and prompts are deterministic.
fn by_priority(a: &AddonManifest, b: &AddonManifest) -> Ordering {
    b.ai_integration
        .metadata
        .priority
        .cmp(&a.ai_integration.metadata.priority)
        .then_with(|| a.addon_info.id.cmp(&b.addon_info.id))
}

/// The add-ons available right now. Add-ons come and go between turns; the tools and the
/// prompt section are derived from what is registered at the moment they are asked for.
#[derive(Debug, Clone, Default)]
pub struct AddonRegistry {
    addons: BTreeMap<String, RegisteredAddon>,
    /// Tool names add-ons may not take: the built-in tools theirs are offered beside.
    reserved: BTreeSet<String>,
    /// Ids registered by discovery, which the next refresh replaces; add-ons registered by
    /// hand are not Blender's to take away.
    discovered: BTreeSet<String>,
    /// Why add-ons are not offered, from the last discovery and refusals since.
    problems: Vec<AddonProblem>,
    /// The bridge's fingerprint of the listing last applied: an equal one changes nothing.
    fingerprint: Option<String>,
}

impl AddonRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers (or replaces) an add-on. A tool name that is reserved for a built-in tool
    /// or that another add-on already provides is refused, so the model never sees two
    /// tools of one name.
    pub fn register(&mut self, manifest: AddonManifest) -> Result<(), AddonError> {
        let id = self.insert(manifest, None)?;
        self.discovered.remove(&id);
        Ok(())
    }

    fn register_discovered(
        &mut self,
        manifest: AddonManifest,
        source: &str,
    ) -> Result<(), AddonError> {
        let id = self.insert(manifest, Some(source.to_owned()))?;
        self.discovered.insert(id);
        Ok(())
    }

    fn insert(
        &mut self,
        manifest: AddonManifest,
        source: Option<String>,
    ) -> Result<String, AddonError> {
        self.check_tool_names(&manifest)?;
        let id = manifest.addon_info.id.clone();
        let tools = manifest
            .ai_integration
            .tools
            .iter()
            .map(|tool| AddonToolAdapter::new(&id, tool).map(Arc::new))
            .collect::<Result<Vec<_>, _>>()?;
        let addon = RegisteredAddon {
            manifest,
            tools,
            source,
        };
        self.addons.insert(id.clone(), addon);
        Ok(id)
    }

    fn check_tool_names(&self, manifest: &AddonManifest) -> Result<(), AddonError> {
        let id = &manifest.addon_info.id;
        for tool in &manifest.ai_integration.tools {
            if self.reserved.contains(&tool.name) {
                return Err(AddonError::BuiltInToolClash {
                    addon: id.clone(),
                    tool: tool.name.clone(),
                });
            }
            let owner = self
                .addons
                .iter()
                .find(|(other, addon)| *other != id && addon.tool_names().any(|t| t == tool.name));
            if let Some((owner, _)) = owner {
                return Err(AddonError::ToolClash {
                    addon: id.clone(),
                    tool: tool.name.clone(),
                    owner: owner.clone(),
                });
            }
        }
        Ok(())
    }

    /// Reserves the names of the built-in tools add-on tools are offered beside (the scene
    /// tools: `execute_code`, `get_scene_info`, ...). An add-on that declares one is refused
    /// from now on; one already registered is dropped, and the refusal recorded in
    /// [`AddonRegistry::problems`]. Reserving names already reserved changes nothing.
    pub fn reserve_tool_names<I, S>(&mut self, names: I)
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let before = self.reserved.len();
        self.reserved.extend(names.into_iter().map(Into::into));
        if self.reserved.len() == before {
            return;
        }
        // The next refresh must decide afresh, even if Blender's listing is the same.
        self.fingerprint = None;
        let clashing: Vec<(String, String)> = self
            .addons
            .iter()
            .filter_map(|(id, addon)| {
                let tool = addon.tool_names().find(|t| self.reserved.contains(*t))?;
                Some((id.clone(), tool.to_owned()))
            })
            .collect();
        for (id, tool) in clashing {
            self.discovered.remove(&id);
            let source = self.addons.remove(&id).and_then(|addon| addon.source);
            let mut problem = AddonProblem::from(AddonError::BuiltInToolClash { addon: id, tool });
            problem.source = source;
            self.problems.push(problem);
        }
    }

    /// Removes an add-on; returns whether it was registered. One that Blender still has
    /// comes back at the next [`AddonRegistry::refresh`]: disable it in Blender to remove it
    /// for good.
    pub fn unregister(&mut self, addon_id: &str) -> bool {
        if self.discovered.remove(addon_id) {
            self.fingerprint = None;
        }
        self.addons.remove(addon_id).is_some()
    }

    /// The ids of the add-ons offered, in id order.
    pub fn ids(&self) -> Vec<&str> {
        self.addons.keys().map(String::as_str).collect()
    }

    /// Whether `addon_id` is registered and declares the tool `tool`.
    /// The tool `tool` of the registered add-on `addon_id`.
    pub fn tool(&self, addon_id: &str, tool: &str) -> Option<Arc<AddonToolAdapter>> {
        self.addons
            .get(addon_id)?
            .tools
            .iter()
            .find(|adapter| adapter.name() == tool)
            .cloned()
    }

    pub fn provides(&self, addon_id: &str, tool: &str) -> bool {
        self.addons
            .get(addon_id)
            .is_some_and(|addon| addon.tool_names().any(|t| t == tool))
    }

    /// Why add-ons are not offered: unavailable ones (requirements not met, no handlers),
    /// refused ones (a clashing tool name, a duplicate id), invalid manifests and packages
    /// Blender could not load. Each has a machine-readable [`ProblemReason`].
    pub fn problems(&self) -> &[AddonProblem] {
        &self.problems
    }

    /// Add-ons by priority (highest first), then id.
    fn ordered(&self) -> Vec<&RegisteredAddon> {
        let mut ordered: Vec<&RegisteredAddon> = self.addons.values().collect();
        ordered.sort_by(|a, b| by_priority(&a.manifest, &b.manifest));
        ordered
    }

    /// What a refresh compares to tell whether the add-ons offered changed.
    fn offered_manifests(&self) -> Vec<AddonManifest> {
        self.addons.values().map(|a| a.manifest.clone()).collect()
    }

    /// Every registered add-on's tools as their adapters, by priority.
    pub fn adapters(&self) -> Vec<Arc<AddonToolAdapter>> {
        self.ordered()
            .into_iter()
            .flat_map(|addon| addon.tools.iter().cloned())
            .collect()
    }

    /// Every registered add-on's tools, by priority. (Tools are built at registration, so
    /// this no longer fails; the `Result` is kept for callers written against it.)
    pub fn tools(&self) -> Result<Vec<Arc<dyn Tool>>, AddonError> {
        Ok(self
            .adapters()
            .into_iter()
            .map(|tool| tool as Arc<dyn Tool>)
            .collect())
    }

    /// `base` plus every add-on tool: the registry a role is offered this turn. An add-on
    /// with a tool named like one of `base`'s is left out (with a warning) rather than
    /// breaking the whole listing; reserve `base`'s names
    /// ([`AddonRegistry::reserve_tool_names`]) to have it refused and reported instead.
    pub fn extend(&self, base: &ToolRegistry) -> Result<ToolRegistry, AddonRegistryError> {
        let mut registry = base.clone();
        for addon in self.ordered() {
            let id = &addon.manifest.addon_info.id;
            if let Some(tool) = addon.tool_names().find(|t| base.get(t).is_some()) {
                tracing::warn!(addon = %id, tool, "an add-on tool has a built-in tool's name; the add-on is not offered");
                continue;
            }
            for tool in &addon.tools {
                registry.register(Arc::clone(tool) as Arc<dyn Tool>)?;
            }
        }
        Ok(registry)
    }

    /// The system-prompt section describing the add-ons, by priority: what each does, when
    /// to reach for it, and each tool with its description, usage, parameters (type,
    /// required or optional, options, default, description) and examples. Empty when no
    /// add-on is registered; add-ons that cannot run are never in it.
    pub fn prompt_section(&self) -> String {
        prompt::render(self.ordered().into_iter().map(|addon| &addon.manifest))
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AddonRegistryError {
    #[error(transparent)]
    Addon(#[from] AddonError),
    #[error(transparent)]
    Registry(#[from] RegistryError),
}
