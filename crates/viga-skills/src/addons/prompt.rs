//! The system-prompt section for the registered add-ons: everything the manifest tells a
//! model, so it calls add-on tools with exact names and valid values instead of guessing.

use std::fmt::Write as _;

use viga_protocol::manifest::{
    AddonManifest, AddonTool, ParameterType, PerformanceImpact, ToolParameter,
};

/// The section for `addons`, already in priority order; empty when there are none.
pub(super) fn render<'a>(addons: impl IntoIterator<Item = &'a AddonManifest>) -> String {
    let mut text = String::new();
    for manifest in addons {
        if text.is_empty() {
            text.push_str(
                "## Add-on tools\nCall them with exactly these parameter names. \
                 Add-ons are listed by priority, the most relevant first.\n",
            );
        }
        render_addon(&mut text, manifest);
    }
    text
}

fn render_addon(text: &mut String, manifest: &AddonManifest) {
    let info = &manifest.addon_info;
    let integration = &manifest.ai_integration;
    let _ = write!(text, "\n### {} ({})", info.name, info.id);
    if integration.metadata.experimental {
        text.push_str(" [experimental]");
    }
    let _ = writeln!(text, "\n{}", integration.agent_description);
    match integration.metadata.performance_impact {
        PerformanceImpact::Low => {}
        PerformanceImpact::Medium => {
            text.push_str("Its tools take a while: call them when they are needed.\n")
        }
        PerformanceImpact::High => text
            .push_str("Its tools are slow and heavy: call them only when nothing cheaper does.\n"),
    }
    for hint in &integration.context_hints {
        let _ = writeln!(text, "Reach for it when: {hint}");
    }
    for tool in &integration.tools {
        render_tool(text, tool);
    }
}

fn render_tool(text: &mut String, tool: &AddonTool) {
    let _ = writeln!(
        text,
        "- {}: {} (required: {}; optional: {})",
        tool.name,
        tool.description,
        parameter_names(tool, true),
        parameter_names(tool, false)
    );
    if !tool.usage.is_empty() {
        let _ = writeln!(text, "  usage: {}", tool.usage);
    }
    for parameter in &tool.parameters {
        let _ = writeln!(text, "  - {}", describe_parameter(parameter));
    }
    for example in &tool.examples {
        let _ = writeln!(text, "  example: {example}");
    }
}

fn parameter_names(tool: &AddonTool, required: bool) -> String {
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
}

/// `side (enum, required, one of: left, right): Which side of object2`.
pub(super) fn describe_parameter(parameter: &ToolParameter) -> String {
    let mut facts = vec![type_name(parameter.kind).to_owned()];
    facts.push(
        if parameter.required {
            "required"
        } else {
            "optional"
        }
        .to_owned(),
    );
    if let Some(options) = &parameter.options {
        facts.push(format!("one of: {}", options.join(", ")));
    }
    if let Some(default) = &parameter.default {
        facts.push(format!("default {default}"));
    }
    let mut line = format!("{} ({})", parameter.name, facts.join(", "));
    if !parameter.description.is_empty() {
        let _ = write!(line, ": {}", parameter.description);
    }
    line
}

/// The manifest's own type names (the model sees the same in the tool's schema), with the
/// shape of a vector, which the name alone does not say.
fn type_name(kind: ParameterType) -> &'static str {
    match kind {
        ParameterType::String => "string",
        ParameterType::Integer => "integer",
        ParameterType::Float => "float",
        ParameterType::Boolean => "boolean",
        ParameterType::Enum => "enum",
        ParameterType::Vector3 => "vector3 [x, y, z]",
        ParameterType::ObjectName => "object_name",
        ParameterType::MaterialName => "material_name",
        ParameterType::CollectionName => "collection_name",
        ParameterType::FilePath => "file_path",
    }
}
