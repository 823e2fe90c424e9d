//! What an agent run did, step by step: `transcript.json` in its run folder, rewritten whole
//! after every step, so a killed run still leaves the steps it finished. The report is made
//! from it.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use viga_core::CoreError;

/// The transcript file in an agent's run folder.
pub const TRANSCRIPT_FILE: &str = "transcript.json";

/// The whole conversation of one agent run, as the report shows it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Transcript {
    /// What the user asked for.
    pub request: String,
    /// The add-ons whose tools were offered, by id.
    pub addons: Vec<String>,
    /// Every tool offered, add-on and scene tools alike.
    pub tools: Vec<String>,
    /// The scene as the model first saw it.
    pub opening_scene: String,
    pub steps: Vec<AgentStep>,
    /// The model's final answer (its first reply without a tool call); `None` while the run
    /// works, or when it stopped without one.
    #[serde(default)]
    pub answer: Option<String>,
}

/// One model turn and the commands it asked for.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentStep {
    pub index: u32,
    /// What the model wrote beside its tool calls.
    #[serde(default)]
    pub text: String,
    pub calls: Vec<CommandRecord>,
}

/// One tool call: what was asked, what came back, and what it did to the scene.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandRecord {
    pub tool: String,
    pub arguments: Value,
    pub ok: bool,
    /// What the model was sent back: an add-on command's own result (JSON), a scene tool's
    /// text, or the error.
    pub result: Value,
    /// The scene after an add-on command, one line per object (the bridge's summary).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scene: Vec<String>,
    /// Renders a look made, relative to the run folder.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub render_ids: Vec<String>,
    /// The undo step holding an add-on command's change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undo_step: Option<String>,
}

/// Reads an agent run's transcript; a run killed before its first step has none yet.
pub fn read_transcript(run_folder: &Path) -> Result<Option<Transcript>, CoreError> {
    let path = run_folder.join(TRANSCRIPT_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(CoreError::io(path, err)),
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|err| CoreError::Config(format!("{} is not valid: {err}", path.display())))
}
