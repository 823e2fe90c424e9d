//! What one evaluated instance records (`<out>/<instance>/scores.json`) and the settings of a
//! whole evaluation (`<out>/eval.json`), which resume and merge check before trusting results.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::EvalError;
use crate::judge::Judgement;
use crate::layout::{Suite, Task};
use crate::leak::LeakCheck;

pub const SCORES_FILE: &str = "scores.json";
pub const SETTINGS_FILE: &str = "eval.json";
/// `<out>/<instance>/instance.json`: the instance was selected into this folder by a run.
pub const SELECTED_FILE: &str = "instance.json";
/// `<out>/<instance>/harness-failure.json`: the harness could not score the instance (its
/// goal does not run, its views do not match its cameras, Blender was unavailable). Removed
/// when a later run scores it.
pub const HARNESS_FAILURE_FILE: &str = "harness-failure.json";

/// How every view is rendered, goal and proposal alike.
pub use viga_protocol::bridge::RenderSpec;

/// The settings that make results comparable. Every instance of an output folder (and every
/// shard merged into it) must share them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvalSettings {
    /// The benchmark whose layout was read; absent in BlenderGym results.
    #[serde(default, skip_serializing_if = "Suite::is_blendergym")]
    pub suite: Suite,
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
    /// The goal views the system saw and worked to match: the search's objective, the
    /// agent's target. Absent for systems that never look at the goal renders (noop, oracle).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fit_views: Option<FitViews>,
    /// How CD was computed; results from before the field are point-to-point.
    #[serde(default = "ChamferDefinition::legacy")]
    pub cd_definition: ChamferDefinition,
    /// The reference-free judge (`provider/model`), when one rated the results; absent: no
    /// judge, and no judge scores anywhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<String>,
    /// What containment the workers that ran the programs were under, as the first run into
    /// this folder found it (`eval.json` only; each instance's folder records its own
    /// worker's in `containment.json`); absent in results from before it was recorded.
    #[serde(default, skip_serializing_if = "Observed::is_none")]
    pub containment: Observed<Option<viga_blender::ContainmentStatus>>,
}

/// A fact of the machine an evaluation ran on, recorded beside its settings but never
/// compared: results made under other containment (a shard on another node) are the same
/// results.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Observed<T>(pub T);

impl<T> PartialEq for Observed<T> {
    fn eq(&self, _other: &Self) -> bool {
        true
    }
}

impl<T> Eq for Observed<T> {}

impl<T> Observed<Option<T>> {
    fn is_none(&self) -> bool {
        self.0.is_none()
    }
}

/// The definition of Chamfer distance a result used (see [`crate::chamfer`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChamferDefinition {
    /// From each sampled point to the nearest *sampled point* of the other surface: carries a
    /// sampling floor of about 1/sqrt(density). Only read from results made before
    /// point-to-surface; never computed any more.
    PointToPoint,
    /// From each sampled point to the other *surface* (its nearest triangle): no floor.
    PointToSurface,
}

impl ChamferDefinition {
    /// What this build computes.
    pub const CURRENT: ChamferDefinition = ChamferDefinition::PointToSurface;

    fn legacy() -> Self {
        ChamferDefinition::PointToPoint
    }

    pub fn name(self) -> &'static str {
        match self {
            ChamferDefinition::PointToPoint => "point-to-point",
            ChamferDefinition::PointToSurface => "point-to-surface",
        }
    }
}

/// Which goal views a system fits (sees and works to match). Scoring is always on every view.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FitViews {
    /// Every view that is scored: the system is fitted on the very views it is scored on.
    AllScored,
    /// Only these cameras; an instance's other views are held out.
    Only(Vec<String>),
}

impl FitViews {
    /// Reads camera names such as `Camera1,Camera3`: each `Camera<k>` (k from 1, as the
    /// views are named), none twice, at least one; sorted by k.
    pub fn parse(names: &[String]) -> Result<FitViews, EvalError> {
        let bad = |message: String| EvalError::BadFitViews { message };
        let mut numbers = Vec::new();
        for name in names {
            let name = name.trim();
            let number = name
                .strip_prefix("Camera")
                .and_then(|digits| digits.parse::<u32>().ok())
                .filter(|k| *k >= 1 && format!("Camera{k}") == name)
                .ok_or_else(|| {
                    bad(format!(
                        "{name:?} is not a view name; views are the cameras Camera1, Camera2, ... (e.g. --search-views Camera1)"
                    ))
                })?;
            if numbers.contains(&number) {
                return Err(bad(format!("{name} is named twice")));
            }
            numbers.push(number);
        }
        if numbers.is_empty() {
            return Err(bad(
                "no view named; give at least one camera, e.g. --search-views Camera1".to_owned(),
            ));
        }
        numbers.sort_unstable();
        Ok(FitViews::Only(
            numbers.into_iter().map(|k| format!("Camera{k}")).collect(),
        ))
    }

    /// Whether the system fits the view of `camera`.
    pub fn fits(&self, camera: &str) -> bool {
        match self {
            FitViews::AllScored => true,
            FitViews::Only(names) => names.iter().any(|name| name == camera),
        }
    }

    /// For reports: `all scored views` or the names.
    pub fn describe(&self) -> String {
        match self {
            FitViews::AllScored => "all scored views".to_owned(),
            FitViews::Only(names) => names.join(", "),
        }
    }
}

impl EvalSettings {
    /// Differences from `other`, in words.
    pub fn differences(&self, other: &EvalSettings) -> Vec<String> {
        let mut out = Vec::new();
        if self.suite != other.suite {
            out.push(format!(
                "benchmark {} vs {}",
                self.suite.name(),
                other.suite.name()
            ));
        }
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
        if self.fit_views != other.fit_views {
            let describe = |fit: &Option<FitViews>| {
                fit.as_ref().map_or("none".to_owned(), |fit| fit.describe())
            };
            out.push(format!(
                "fit views {} vs {}",
                describe(&self.fit_views),
                describe(&other.fit_views)
            ));
        }
        if self.cd_definition != other.cd_definition {
            out.push(format!(
                "CD {} vs {}",
                self.cd_definition.name(),
                other.cd_definition.name()
            ));
        }
        if self.judge != other.judge {
            let describe = |judge: &Option<String>| {
                judge
                    .as_deref()
                    .map_or("no judge".to_owned(), |judge| format!("judge {judge}"))
            };
            out.push(format!(
                "{} vs {}",
                describe(&self.judge),
                describe(&other.judge)
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
    /// The views scored: every camera of the instance, `Camera1..CameraN` (N = its goal
    /// renders, checked against the scene's cameras). Empty in results from before the field.
    #[serde(default)]
    pub cameras: Vec<String>,
    /// PL per camera, `Camera1..CameraN`; empty when not executable.
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
    /// start.py scored exactly as the proposal, present when the proposal is not executable:
    /// the all-instances figure counts it in the proposal's place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_program: Option<StartProgram>,
    /// BlenderBench: whether the scene file already holds the goal camera pose.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_leak: Option<LeakCheck>,
    /// The reference-free judge's ratings of the proposal's Camera1 render, present when the
    /// evaluation has a judge (`settings.judge`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<Judgement>,
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

impl InstanceScores {
    /// The views scored (from `views` in results from before `cameras`).
    pub fn scored_views(&self) -> Vec<String> {
        if self.cameras.is_empty() {
            self.views.iter().map(|view| view.camera.clone()).collect()
        } else {
            self.cameras.clone()
        }
    }
}

/// The start program's figures for an instance whose proposal is not executable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StartProgram {
    pub executable: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub pl: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n_clip: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cd: Option<f64>,
}

/// `instance.json`: written for every instance a run selects (its shard's share), so a
/// report can count instances selected but not (yet) scored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SelectedInstance {
    pub instance: String,
    pub task: Task,
    /// `Camera1..CameraN`, from the shipped goal renders.
    pub cameras: Vec<String>,
}

/// `harness-failure.json`: the harness could not score the instance; nothing else was
/// written for it and the next run retries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HarnessFailure {
    pub instance: String,
    pub task: Task,
    pub error: String,
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
