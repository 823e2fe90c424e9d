//! A run's settings. Written to `args.json` in the run folder, so `viga resume` continues with
//! exactly the settings the run started with.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use viga_protocol::bridge::{RenderEngine, RenderSpec};
use viga_protocol::event::ModelRole;

/// The longest a program may run before it is stopped, unless the run says otherwise.
pub const DEFAULT_PROGRAM_TIMEOUT: Duration = Duration::from_secs(60);
/// Limits a run's program timeout is checked against: below a second nothing real runs,
/// and a day is long past anything a scene program needs.
const PROGRAM_TIMEOUT_RANGE: (Duration, Duration) =
    (Duration::from_secs(1), Duration::from_secs(86_400));

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunConfig {
    /// What the scene should be, in words.
    pub task: String,
    /// Short name used for the run folder.
    pub task_name: String,
    /// Folder level above the timestamp (`output/<mode>/<timestamp>/<task>/`).
    pub mode: String,
    /// Target image; copied into the run folder as `target.png`.
    #[serde(default)]
    pub target: Option<PathBuf>,
    /// The camera whose view the target shows; the scene's active camera when absent.
    #[serde(default)]
    pub target_camera: Option<String>,
    /// Base scene every program runs on; an empty factory scene when absent.
    #[serde(default)]
    pub base_blend: Option<PathBuf>,
    pub max_iterations: u32,
    /// L: iterations the memory keeps.
    pub memory_window: usize,
    pub memory_budget_bytes: usize,
    /// Fast retries per iteration for E1/E2 (seed 002: 3).
    pub max_fast_retries: u32,
    /// Model turns the verifier may take before it must conclude.
    pub verifier_max_turns: u32,
    /// Ask for a plan before the code every iteration (seed 000 step 2).
    pub plan_each_iteration: bool,
    pub render: RenderSpec,
    /// Recorded for the run folder; the provider itself is passed in.
    pub provider: String,
    pub model: String,
    #[serde(default)]
    pub prompts_dir: Option<PathBuf>,
    /// Output-token cap of the generator's replies (programs and fast fixes), which hold
    /// whole scene programs. Called `max_tokens` in run folders written before the caps
    /// were per role.
    #[serde(alias = "max_tokens")]
    pub generator_max_tokens: u32,
    /// Output-token cap of the plan before each program.
    #[serde(default = "default_planner_max_tokens")]
    pub planner_max_tokens: u32,
    /// Output-token cap of each verifier turn: a few sentences and a tool call. A model that
    /// falls into repeating itself is cut off here instead of running on for thousands of
    /// tokens.
    #[serde(default = "default_verifier_max_tokens")]
    pub verifier_max_tokens: u32,
    /// How long one program may run in Blender before it is stopped (and Blender
    /// restarted); the model hears it as a failure it can fix. Seconds in `args.json`.
    #[serde(with = "seconds", default = "default_program_timeout")]
    pub program_timeout: Duration,
}

fn default_planner_max_tokens() -> u32 {
    1024
}

fn default_verifier_max_tokens() -> u32 {
    1024
}

fn default_program_timeout() -> Duration {
    DEFAULT_PROGRAM_TIMEOUT
}

/// A duration as (possibly fractional) seconds.
mod seconds {
    use std::time::Duration;

    use serde::{Deserialize as _, Deserializer, Serializer, de::Error as _};

    pub fn serialize<S: Serializer>(duration: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_f64(duration.as_secs_f64())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
        let seconds = f64::deserialize(deserializer)?;
        Duration::try_from_secs_f64(seconds).map_err(D::Error::custom)
    }
}

impl RunConfig {
    /// Settings for `task` with the defaults of `viga run`.
    pub fn new(task: impl Into<String>) -> Self {
        let task = task.into();
        Self {
            task_name: slug(&task),
            task,
            mode: "scene".to_owned(),
            target: None,
            target_camera: None,
            base_blend: None,
            max_iterations: 10,
            memory_window: 3,
            memory_budget_bytes: 12_000,
            max_fast_retries: 3,
            verifier_max_turns: 6,
            plan_each_iteration: true,
            // Workbench at 512x512: about a second per view on a CPU.
            render: RenderSpec {
                engine: RenderEngine::Workbench,
                width: 512,
                height: 512,
                samples: None,
            },
            provider: String::new(),
            model: String::new(),
            prompts_dir: None,
            generator_max_tokens: 4096,
            planner_max_tokens: default_planner_max_tokens(),
            verifier_max_tokens: default_verifier_max_tokens(),
            program_timeout: DEFAULT_PROGRAM_TIMEOUT,
        }
    }

    /// The output-token cap of a reply in `role`.
    pub fn max_output_tokens(&self, role: ModelRole) -> u32 {
        match role {
            ModelRole::Planner => self.planner_max_tokens,
            ModelRole::Verifier => self.verifier_max_tokens,
            _ => self.generator_max_tokens,
        }
    }

    /// What is wrong with the settings, in words a user can act on.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.task.trim().is_empty() {
            problems.push("the task is empty: describe the scene to build (--task)".to_owned());
        }
        if self.max_iterations == 0 {
            problems.push("max_iterations must be at least 1".to_owned());
        }
        if self.memory_window == 0 {
            problems.push("the memory window (--memory) must be at least 1 iteration".to_owned());
        }
        if self.render.width == 0
            || self.render.height == 0
            || self.render.width > 8192
            || self.render.height > 8192
        {
            problems.push("render width and height must be between 1 and 8192".to_owned());
        }
        let (shortest, longest) = PROGRAM_TIMEOUT_RANGE;
        if !(shortest..=longest).contains(&self.program_timeout) {
            problems.push(format!(
                "the program timeout (--program-timeout) must be between {} s and {} s",
                shortest.as_secs(),
                longest.as_secs()
            ));
        }
        if [
            self.generator_max_tokens,
            self.planner_max_tokens,
            self.verifier_max_tokens,
        ]
        .contains(&0)
        {
            problems.push("every output-token cap must be at least 1".to_owned());
        }
        if self.verifier_max_turns == 0 {
            problems.push("verifier_max_turns must be at least 1".to_owned());
        }
        if let Some(target) = &self.target
            && !target.is_file()
        {
            problems.push(format!("target image {} does not exist", target.display()));
        }
        if let Some(blend) = &self.base_blend
            && !blend.is_file()
        {
            problems.push(format!("base scene {} does not exist", blend.display()));
        }
        problems
    }
}

/// A file-name-safe short form of a task: lowercase words joined by `-`, at most 40 bytes.
pub fn slug(text: &str) -> String {
    let mut slug = String::new();
    for word in text
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        if slug.len() + word.len() + 1 > 40 {
            break;
        }
        if !slug.is_empty() {
            slug.push('-');
        }
        slug.push_str(&word.to_ascii_lowercase());
    }
    if slug.is_empty() {
        "task".to_owned()
    } else {
        slug
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_folders_written_before_per_role_caps_still_resume() {
        let mut old = serde_json::to_value(RunConfig::new("a crate")).unwrap();
        let settings = old.as_object_mut().unwrap();
        for newer in [
            "generator_max_tokens",
            "planner_max_tokens",
            "verifier_max_tokens",
            "program_timeout",
        ] {
            settings.remove(newer);
        }
        settings.insert("max_tokens".into(), 2048.into());
        let read: RunConfig = serde_json::from_value(old).unwrap();
        assert_eq!(
            (
                read.max_output_tokens(ModelRole::Generator),
                read.max_output_tokens(ModelRole::FastFix),
                read.max_output_tokens(ModelRole::Planner),
                read.max_output_tokens(ModelRole::Verifier),
                read.program_timeout,
            ),
            (2048, 2048, 1024, 1024, DEFAULT_PROGRAM_TIMEOUT)
        );
    }

    #[test]
    fn the_program_timeout_is_seconds_in_args_json_and_checked() {
        let mut config = RunConfig::new("a crate");
        config.program_timeout = Duration::from_millis(2500);
        let json = serde_json::to_value(&config).unwrap();
        assert_eq!(json["program_timeout"], 2.5);
        assert_eq!(serde_json::from_value::<RunConfig>(json).unwrap(), config);
        config.program_timeout = Duration::from_millis(100);
        config.verifier_max_tokens = 0;
        let problems = config.problems().join("\n");
        assert!(problems.contains("--program-timeout") && problems.contains("output-token cap"));
    }
}
