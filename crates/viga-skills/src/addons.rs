//! Tools generated at run time from Blender add-on manifests (seed 004). Each manifest
//! parameter becomes a JSON Schema property with its exact name, type, enum options, default
//! and required flag, so the model sees what the add-on really takes, and arguments are
//! checked against that schema before anything reaches Blender.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value, json};
use viga_blender::BlenderTransport;
use viga_protocol::bridge::{AddonCommandResult, AddonListing, BridgeCommand};
use viga_protocol::manifest::{AddonManifest, AddonTool, ParameterType, ToolParameter};
use viga_protocol::{CompiledSchema, ProtocolError, parse_json, parse_value};

use crate::context::ToolContext;
use crate::registry::{RegistryError, Tool, ToolError, ToolOutput, ToolRegistry};

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

    /// Checks arguments before they reach Blender; the message names the path and rule.
    pub fn check_arguments(&self, arguments: &Value) -> Result<(), ToolError> {
        let violations = self.compiled.violations(arguments);
        if violations.is_empty() {
            return Ok(());
        }
        let listed: Vec<String> = violations.iter().map(ToString::to_string).collect();
        Err(ToolError::Recoverable(format!(
            "invalid arguments for {}: {}",
            self.tool.name,
            listed.join("; ")
        )))
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
        let arguments = if arguments.is_null() {
            json!({})
        } else {
            arguments
        };
        self.check_arguments(&arguments)?;
        let command = BridgeCommand::AddonCommand {
            addon_id: self.addon_id.clone(),
            tool: self.tool.name.clone(),
            params: arguments,
        };
        let reply = context.blender.call(command, None).await?;
        let answer: AddonCommandResult = serde_json::from_value(reply).map_err(|err| {
            ToolError::Fatal(format!("the add-on command reply is malformed: {err}"))
        })?;
        Ok(ToolOutput::text(format!(
            "{} returned {}\nScene now:\n{}",
            self.tool.name,
            answer.result,
            answer.scene.join("\n")
        )))
    }
}

/// The add-ons available right now. Add-ons come and go between turns; the tools and the
/// prompt section are derived from what is registered at the moment they are asked for.
#[derive(Debug, Clone, Default)]
pub struct AddonRegistry {
    addons: BTreeMap<String, AddonManifest>,
}

impl AddonRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers (or replaces) an add-on. A tool name another add-on already provides is
    /// refused, so the model never sees two tools of one name.
    pub fn register(&mut self, manifest: AddonManifest) -> Result<(), AddonError> {
        let id = manifest.addon_info.id.clone();
        for tool in &manifest.ai_integration.tools {
            for (other_id, other) in &self.addons {
                if *other_id != id
                    && other
                        .ai_integration
                        .tools
                        .iter()
                        .any(|t| t.name == tool.name)
                {
                    return Err(AddonError::ToolClash {
                        addon: id,
                        tool: tool.name.clone(),
                        owner: other_id.clone(),
                    });
                }
            }
        }
        self.addons.insert(id, manifest);
        Ok(())
    }

    pub fn unregister(&mut self, addon_id: &str) -> bool {
        self.addons.remove(addon_id).is_some()
    }

    pub fn ids(&self) -> Vec<&str> {
        self.addons.keys().map(String::as_str).collect()
    }

    /// Whether `addon_id` is registered and declares the tool `tool`.
    pub fn provides(&self, addon_id: &str, tool: &str) -> bool {
        self.addons
            .get(addon_id)
            .is_some_and(|manifest| manifest.ai_integration.tools.iter().any(|t| t.name == tool))
    }

    /// Add-ons by priority (highest first), then id.
    fn ordered(&self) -> Vec<&AddonManifest> {
        let mut ordered: Vec<&AddonManifest> = self.addons.values().collect();
        ordered.sort_by(|a, b| {
            b.ai_integration
                .metadata
                .priority
                .cmp(&a.ai_integration.metadata.priority)
                .then_with(|| a.addon_info.id.cmp(&b.addon_info.id))
        });
        ordered
    }

    /// Every registered add-on's tools.
    pub fn tools(&self) -> Result<Vec<Arc<dyn Tool>>, AddonError> {
        let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
        for manifest in self.ordered() {
            for tool in &manifest.ai_integration.tools {
                tools.push(Arc::new(AddonToolAdapter::new(
                    &manifest.addon_info.id,
                    tool,
                )?));
            }
        }
        Ok(tools)
    }

    /// `base` plus every add-on tool: the registry a role is offered this turn.
    pub fn extend(&self, base: &ToolRegistry) -> Result<ToolRegistry, AddonRegistryError> {
        let mut registry = base.clone();
        for tool in self.tools()? {
            registry.register(tool)?;
        }
        Ok(registry)
    }

    /// The system-prompt section describing the add-ons, by priority: what each does, its
    /// tools with required and optional parameters, usage and context hints.
    pub fn prompt_section(&self) -> String {
        let ordered = self.ordered();
        if ordered.is_empty() {
            return String::new();
        }
        let mut text =
            String::from("## Add-on tools\nCall them with exactly these parameter names.\n");
        for manifest in ordered {
            let integration = &manifest.ai_integration;
            text.push_str(&format!(
                "\n### {} ({})\n{}\n",
                manifest.addon_info.name, manifest.addon_info.id, integration.agent_description
            ));
            for tool in &integration.tools {
                let names = |required: bool| -> String {
                    let names: Vec<&str> = tool
                        .parameters
                        .iter()
                        .filter(|p| p.required == required)
                        .map(|p| p.name.as_str())
                        .collect();
                    if names.is_empty() {
                        "none".to_owned()
                    } else {
                        names.join(", ")
                    }
                };
                text.push_str(&format!(
                    "- {}: {} (required: {}; optional: {})\n",
                    tool.name,
                    tool.description,
                    names(true),
                    names(false)
                ));
                if !tool.usage.is_empty() {
                    text.push_str(&format!("  use when: {}\n", tool.usage));
                }
            }
            for hint in &integration.context_hints {
                text.push_str(&format!("  hint: {hint}\n"));
            }
        }
        text
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AddonRegistryError {
    #[error(transparent)]
    Addon(#[from] AddonError),
    #[error(transparent)]
    Registry(#[from] RegistryError),
}

/// Asks Blender which add-ons it has (installed ones, plus those in `folder`), validates
/// their manifests, and registers the valid ones. Returns the problems found, each naming the
/// add-on, so one broken add-on never hides the others.
pub async fn discover(
    blender: &dyn BlenderTransport,
    folder: Option<&Path>,
    registry: &mut AddonRegistry,
) -> Result<Vec<String>, ToolError> {
    let command = BridgeCommand::ListAddons {
        folder: folder.map(|f| f.to_string_lossy().into_owned()),
    };
    let listing: AddonListing = serde_json::from_value(blender.call(command, None).await?)
        .map_err(|err| ToolError::Fatal(format!("the add-on listing is malformed: {err}")))?;
    let mut problems = listing.problems;
    for found in listing.addons {
        let manifest = match parse_value::<AddonManifest>(found.manifest) {
            Ok(manifest) => manifest,
            Err(err) => {
                problems.push(manifest_error(&found.path, err).to_string());
                continue;
            }
        };
        if !found.has_handlers {
            problems.push(format!(
                "add-on {:?} ({}) has a manifest but no VIGA_COMMANDS handlers; its tools are not offered",
                manifest.addon_info.id, found.path
            ));
            continue;
        }
        if let Err(err) = registry.register(manifest) {
            problems.push(err.to_string());
        }
    }
    Ok(problems)
}
