//! What one evaluated instance records (`<out>/<instance>/scores.json`) and the settings of a
//! whole evaluation (`<out>/eval.json`), which resume and merge check before trusting results.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::EvalError;
use crate::layout::Task;

pub const SCORES_FILE: &str = "scores.json";
pub const SETTINGS_FILE: &str = "eval.json";

/// How every view is rendered, goal and proposal alike.
pub use viga_protocol::bridge::RenderSpec;

/// The settings that make results comparable. Every instance of an output folder (and every
/// shard merged into it) must share them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvalSettings {
    /// Which system proposed the programs: `noop`, `oracle`, `search`, `agent <provider>/<model>`.
    pub system: String,
    pub render: RenderSpec,
    pub chamfer_points: usize,
    pub blender_version: String,
    /// The CLIP ViT-B/32 weights file N-CLIP was computed with; absent: N-CLIP unavailable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clip_weights: Option<String>,
    /// Whether every program the system proposed (and the start program) was scored too, for
    /// the labelled oracle-selected figure (`InstanceScores::oracle_selected`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub oracle_selected: bool,
}

impl EvalSettings {
    /// Differences from `other`, in words.
    pub fn differences(&self, other: &EvalSettings) -> Vec<String> {
        let mut out = Vec::new();
        if self.system != other.system {
            out.push(format!("system {:?} vs {:?}", self.system, other.system));
        }
        if self.render != other.render {
            out.push(format!("render {} vs {}", self.render, other.render));
        }
        if self.chamfer_points != other.chamfer_points {
            out.push(format!(
                "Chamfer points {} vs {}",
                self.chamfer_points, other.chamfer_points
            ));
        }
        if self.blender_version != other.blender_version {
            out.push(format!(
                "Blender {} vs {}",
                self.blender_version, other.blender_version
            ));
        }
        if self.clip_weights != other.clip_weights {
            let describe = |weights: &Option<String>| {
                weights
                    .as_deref()
                    .map_or("none".to_owned(), |path| format!("{path:?}"))
            };
            out.push(format!(
                "CLIP weights {} vs {}",
                describe(&self.clip_weights),
                describe(&other.clip_weights)
            ));
        }
        if self.oracle_selected != other.oracle_selected {
            let describe = |on: bool| if on { "with" } else { "without" };
            out.push(format!(
                "{} vs {} the oracle-selected figure",
                describe(self.oracle_selected),
                describe(other.oracle_selected)
            ));
        }
        out
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ViewScore {
    pub camera: String,
    pub pl: f64,
    /// Present when CLIP weights are configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n_clip: Option<f64>,
}

/// The scores of one instance. Lower is better everywhere.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstanceScores {
    pub instance: String,
    pub task: Task,
    pub settings: EvalSettings,
    /// The proposal ran and every view rendered (the public "executable" rule).
    pub executable: bool,
    /// Why not, when not executable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// PL per camera, `Camera1..CameraN`.
    pub views: Vec<ViewScore>,
    /// Mean PL over the views; absent when not executable.
    pub pl: Option<f64>,
    /// Mean N-CLIP over the views; absent without CLIP weights or when not executable,
    /// and `n_clip_note` says which.
    pub n_clip: Option<f64>,
    pub n_clip_note: String,
    /// Chamfer distance for blendshape, placement and geometry.
    pub cd: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cd_note: Option<String>,
    /// What the system said about its proposal (e.g. the search's render budget used).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proposal_note: Option<String>,
    /// The benchmark's "best proposal" figure, present when `settings.oracle_selected`. It
    /// uses the ground truth to choose, so it is never the headline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oracle_selected: Option<OracleSelected>,
    /// Wall time for the instance: goal, proposal and scoring.
    pub seconds: f64,
}

/// The best of every distinct program the system proposed for an instance, the start program
/// included, chosen by mean PL against the goal renders (the ground truth), as the public
/// evaluator chooses its "best proposal". The figures are the chosen program's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OracleSelected {
    /// Which program won: `final` (the headline proposal), `start.py`, or `candidate <k>`
    /// (the system's k-th intermediate program, 1-based, e.g. the agent's k-th iteration
    /// that ran).
    pub chosen: String,
    /// Distinct programs scored, and how many of them were executable.
    pub programs: usize,
    pub executable: usize,
    /// The chosen program's figures; `pl` is absent when no program was executable.
    pub pl: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n_clip: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cd: Option<f64>,
}

/// Why N-CLIP is missing: no CLIP weights can be fetched here, and the metric is never guessed.
pub const N_CLIP_UNAVAILABLE: &str = "unavailable: no CLIP ViT-B/32 weights are configured";
/// Why N-CLIP is missing although weights are configured.
pub const N_CLIP_NOT_EXECUTABLE: &str = "not computed: the proposal is not executable";

pub(crate) fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, EvalError> {
    let text = std::fs::read_to_string(path).map_err(|err| EvalError::io(path, err))?;
    serde_json::from_str(&text).map_err(|err| EvalError::BadResults {
        path: path.to_path_buf(),
        message: format!("{err}; delete the file to recompute it"),
    })
}

pub(crate) fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), EvalError> {
    let text = serde_json::to_string_pretty(value).map_err(|err| EvalError::io(path, err))?;
    crate::write_atomic(path, format!("{text}\n").as_bytes())
}
