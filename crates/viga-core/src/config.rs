//! A run's settings. Written to `args.json` in the run folder, so `viga resume` continues with
//! exactly the settings the run started with.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use viga_protocol::bridge::{RenderEngine, RenderSpec};

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
    pub max_tokens: u32,
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
            max_tokens: 4096,
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
