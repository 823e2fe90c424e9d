//! Blender add-on manifests (seed 004): each add-on describes the tools it offers, with typed
//! parameters, so the model sees exact names, types and required/optional flags.

use std::collections::{BTreeMap, HashSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::validate::{ProtocolType, Violation};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AddonManifest {
    pub addon_info: AddonInfo,
    pub ai_integration: AiIntegration,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AddonInfo {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub author: String,
    #[serde(default)]
    pub category: String,
    #[serde(default)]
    pub description: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AiIntegration {
    pub agent_description: String,
    pub tools: Vec<AddonTool>,
    #[serde(default)]
    pub context_hints: Vec<String>,
    #[serde(default)]
    pub requirements: Requirements,
    #[serde(default)]
    pub metadata: AddonMetadata,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AddonTool {
    pub name: String,
    pub description: String,
    #[serde(default)]
    pub usage: String,
    #[serde(default)]
    pub category: String,
    #[serde(default)]
    pub parameters: Vec<ToolParameter>,
    #[serde(default)]
    pub examples: Vec<String>,
}

/// The parameter types a manifest may declare. `enum` is a string from `options`;
/// `vector3` is three floats; the `*_name` types are strings naming Blender data.
// Variants carry no doc comments on purpose: schemars would turn them into a `oneOf` of
// constants, whose errors are far less readable than a plain `enum` list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ParameterType {
    String,
    Integer,
    Float,
    Boolean,
    Enum,
    Vector3,
    ObjectName,
    MaterialName,
    CollectionName,
    FilePath,
}

fn default_true() -> bool {
    true
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolParameter {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: ParameterType,
    #[serde(default)]
    pub description: String,
    #[serde(default = "default_true")]
    pub required: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    /// The allowed values of an `enum` parameter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Requirements {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blender_version_min: Option<String>,
    #[serde(default)]
    pub dependencies: Vec<String>,
    #[serde(default)]
    pub api_keys: BTreeMap<String, ApiKeyNeed>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ApiKeyNeed {
    Required,
    NotRequired,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PerformanceImpact {
    #[default]
    Low,
    Medium,
    High,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AddonMetadata {
    /// Higher comes first in the system prompt.
    #[serde(default = "default_priority")]
    pub priority: i32,
    #[serde(default)]
    pub performance_impact: PerformanceImpact,
    #[serde(default)]
    pub experimental: bool,
}

fn default_priority() -> i32 {
    50
}

impl Default for AddonMetadata {
    fn default() -> Self {
        Self {
            priority: default_priority(),
            performance_impact: PerformanceImpact::default(),
            experimental: false,
        }
    }
}

impl ProtocolType for AddonManifest {
    const NAME: &'static str = "AddonManifest";

    fn check(&self) -> Vec<Violation> {
        let mut violations = Vec::new();
        let mut tool_names = HashSet::new();
        for (tool_index, tool) in self.ai_integration.tools.iter().enumerate() {
            let tool_path = format!("/ai_integration/tools/{tool_index}");
            if !tool_names.insert(tool.name.as_str()) {
                violations.push(Violation::new(
                    format!("{tool_path}/name"),
                    "unique",
                    format!(
                        "add-on {:?} declares tool {:?} twice; tool names must be unique",
                        self.addon_info.id, tool.name
                    ),
                ));
            }
            let mut parameter_names = HashSet::new();
            for (parameter_index, parameter) in tool.parameters.iter().enumerate() {
                let path = format!("{tool_path}/parameters/{parameter_index}");
                if !parameter_names.insert(parameter.name.as_str()) {
                    violations.push(Violation::new(
                        format!("{path}/name"),
                        "unique",
                        format!(
                            "tool {:?} declares parameter {:?} twice",
                            tool.name, parameter.name
                        ),
                    ));
                }
                let has_options = parameter
                    .options
                    .as_ref()
                    .is_some_and(|options| !options.is_empty());
                match (parameter.kind, has_options) {
                    (ParameterType::Enum, false) => violations.push(Violation::new(
                        format!("{path}/options"),
                        "enum_options",
                        format!(
                            "parameter {:?} of tool {:?} has type enum but no options; list the allowed values in \"options\"",
                            parameter.name, tool.name
                        ),
                    )),
                    (kind, true) if kind != ParameterType::Enum => violations.push(Violation::new(
                        format!("{path}/options"),
                        "enum_options",
                        format!(
                            "parameter {:?} of tool {:?} has options but type {kind:?}; use type \"enum\" or drop the options",
                            parameter.name, tool.name
                        ),
                    )),
                    _ => {}
                }
            }
        }
        violations
    }
}
