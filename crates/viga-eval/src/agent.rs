//! The system under test that matters: the VIGA loop itself. It edits the instance's start
//! program on the instance's base scene, with the goal's Camera1 render (or the picture of the
//! goal a BlenderBench instance ships) as its target, and
//! proposes its own final program — the last one the verifier accepted, or else the last that
//! ran — never one picked by looking at the ground truth.

use std::sync::Arc;

use async_trait::async_trait;
use viga_blender::BlenderTransport;
use viga_core::{RunConfig, TargetSpec};
use viga_domain_scene::{SceneDomain, SceneSettings};
use viga_protocol::bridge::{RenderEngine, RenderSpec};
use viga_protocol::event::RunEvent;
use viga_provider::Provider;

use crate::EvalError;
use crate::benchmark::{Context, Proposal, Proposer};
use crate::layout::{Instance, Suite, Task};
use crate::scenes::SceneBenchmark;

#[derive(Clone)]
pub struct AgentProposer {
    pub provider: Arc<dyn Provider>,
    pub max_iterations: u32,
    pub memory_window: usize,
    /// What the verifier looks at while the agent works (scoring uses the eval's settings);
    /// the engine is chosen per task ([`verifier_engine`]).
    pub verifier_render: RenderSpec,
    /// How long one program may run (SlideBench, pages); the loop's own limit without.
    pub program_timeout: Option<std::time::Duration>,
    /// How long one instance's run may take; `None`: no limit.
    pub time_limit: Option<std::time::Duration>,
    /// SlideBench: the instruction alone (AutoPresent's setting), not also the reference
    /// slide's picture (VIGA's).
    pub instruction_only: bool,
}

impl AgentProposer {
    /// The agent as `cargo xtask eval` runs it: memory of the last 3 iterations, and the
    /// verifier looking at 256x256 views while it works, in the engine its task needs
    /// ([`verifier_engine`]; the scores use the evaluation's own render settings).
    pub fn new(provider: Arc<dyn Provider>, max_iterations: u32) -> Self {
        Self {
            provider,
            max_iterations,
            memory_window: 3,
            verifier_render: RenderSpec {
                engine: viga_protocol::bridge::RenderEngine::Workbench,
                width: 256,
                height: 256,
                samples: None,
            },
            program_timeout: None,
            time_limit: Some(viga_core::time_limit::DEFAULT_RUN_TIME_LIMIT),
            instruction_only: false,
        }
    }
}

impl std::fmt::Debug for AgentProposer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentProposer")
            .field("provider", &self.provider.name())
            .finish_non_exhaustive()
    }
}

/// The engine the agent's verifier judges a task's renders in: Cycles (low samples,
/// denoised) for lighting and material tasks and for BlenderBench's multi-step and
/// compositional levels (which change lights and materials too), since Workbench shows
/// neither lights nor most material settings; Workbench for shapes, places and camera
/// adjustment, which it shows as well at a fraction of the time (about 0.06 s against 1.5 s
/// for a 256x256 view on a 2-core machine).
pub fn verifier_engine(task: Task) -> RenderEngine {
    match task {
        Task::Lighting | Task::Material | Task::Level2 | Task::Level3 => RenderEngine::Cycles,
        Task::Blendshape | Task::Placement | Task::Geometry | Task::Level1 => {
            RenderEngine::Workbench
        }
    }
}

/// What each BlenderBench level asks of the program, for the agent's task.
fn level_guidance(task: Task) -> &'static str {
    match task {
        Task::Level1 => {
            "Camera adjustment: move Camera1 until its view matches the target. The program must set Camera1's \
             location and rotation (and its lens if the framing needs it) itself; leave every other object, light \
             and material as the program has them. The verifier's own views do not count: only Camera1's does."
        }
        Task::Level2 => {
            "Multi-step editing: the target needs several dependent changes (for example a light to be turned \
             on before a shape or material can be judged); make them one after another, checking each."
        }
        Task::Level3 => {
            "Compositional editing: the target combines a new viewpoint (set Camera1's pose in the program) with \
             changes to the scene itself (lights, objects, shapes)."
        }
        _ => "",
    }
}

/// The task the agent is given: BlenderGym's edit task, or a BlenderBench level's with the
/// instance's own task text, and the start program to edit.
pub fn task_text(instance: &Instance, start_program: &str) -> String {
    match instance.task.suite() {
        Suite::BlenderGym => format!(
            "BlenderGym {} task: edit this Blender Python program so that the scene, seen from Camera1, matches the \
             target image. The program runs on the instance's base scene every time; keep its structure and change \
             only what differs from the target.\n\nCurrent program (start.py):\n```python\n{start_program}```",
            instance.task.name()
        ),
        Suite::BlenderBench => format!(
            "BlenderBench {} ({}) task: edit this Blender Python program so that the scene, seen from Camera1, \
             matches the target image and the task below. The program runs on the instance's base scene every \
             time; keep its structure.\n\n{}\n\nTask: {}\n\nCurrent program (start.py):\n```python\n{start_program}```",
            instance.task.name(),
            instance.task.level_title().unwrap_or_default(),
            level_guidance(instance.task),
            instance
                .description
                .as_deref()
                .unwrap_or("(no task text: match the target image)"),
        ),
    }
}

#[async_trait]
impl Proposer<SceneBenchmark> for AgentProposer {
    fn system(&self) -> String {
        format!("agent {}/{}", self.provider.name(), self.provider.model())
    }

    /// The agent is given the goal's Camera1 render as its target; the other views are held
    /// out.
    fn fit_views(&self) -> Option<crate::scores::FitViews> {
        Some(crate::scores::FitViews::Only(vec!["Camera1".to_owned()]))
    }

    async fn propose(
        &self,
        instance: &Instance,
        context: Context<Arc<dyn BlenderTransport>>,
    ) -> Result<Proposal, EvalError> {
        let Context {
            worker: blender,
            goal: goal_renders,
            scratch: work_dir,
        } = context;
        let start = std::fs::read_to_string(&instance.start_py)
            .map_err(|err| EvalError::io(&instance.start_py, err))?;
        // The picture of the goal the instance shows a model, else the goal's Camera1 render.
        let Some(target) = instance.visual_prompt.as_ref().or(goal_renders.first()) else {
            return Err(EvalError::Harness {
                instance: instance.name.clone(),
                message: "the goal has no Camera1 render to use as the target".to_owned(),
            });
        };
        let mut config = RunConfig::new(task_text(instance, &start));
        config.task_name = instance.name.clone();
        config.mode = instance.task.suite().name().to_ascii_lowercase();
        config.targets = vec![TargetSpec {
            path: target.clone(),
            view: Some("Camera1".to_owned()),
            frame: None,
        }];
        config.max_iterations = self.max_iterations;
        if let Some(limit) = self.program_timeout {
            config.program_timeout = limit;
        }
        config.memory_window = self.memory_window;
        config.time_limit = self.time_limit;
        config.provider = self.provider.name().to_owned();
        config.model = self.provider.model().to_owned();
        let harness = |message: String| EvalError::Harness {
            instance: instance.name.clone(),
            message,
        };
        let scene = SceneSettings {
            base_blend: Some(instance.blend.clone()),
            render: self.verifier_render,
            verifier_engine: Some(verifier_engine(instance.task)),
            ..SceneSettings::default()
        };
        let domain = SceneDomain::new(scene, blender, true)
            .map_err(|err| harness(format!("the agent could not start: {err}")))?;
        let mut handle = viga_core::start(
            config,
            Arc::clone(&self.provider),
            Arc::new(domain),
            &work_dir.join("agent"),
        )
        .map_err(|err| harness(format!("the agent could not start: {err}")))?;
        // Every iteration whose program ran is a candidate for the oracle-selected figure.
        let mut candidates = Vec::new();
        while let Some(timed) = handle.next_event().await {
            if let RunEvent::IterationFinished { record, .. } = timed.event
                && record.execution.succeeded()
            {
                candidates.push(record.code);
            }
        }
        let outcome = handle
            .wait()
            .await
            .map_err(|err| harness(format!("the agent run failed: {err}")))?;
        let stop = outcome.stop.in_words();
        Ok(Proposal {
            code: outcome.final_code,
            candidates,
            note: Some(format!(
                "{} iterations, {stop}; run folder {}",
                outcome.iterations,
                outcome.folder.display()
            )),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lights_and_materials_are_judged_in_an_engine_that_shows_them() {
        let engines: Vec<(Task, RenderEngine)> = Task::ALL
            .into_iter()
            .map(|task| (task, verifier_engine(task)))
            .collect();
        assert_eq!(
            engines,
            [
                (Task::Blendshape, RenderEngine::Workbench),
                (Task::Placement, RenderEngine::Workbench),
                (Task::Geometry, RenderEngine::Workbench),
                (Task::Lighting, RenderEngine::Cycles),
                (Task::Material, RenderEngine::Cycles),
                (Task::Level1, RenderEngine::Workbench),
                (Task::Level2, RenderEngine::Cycles),
                (Task::Level3, RenderEngine::Cycles),
            ]
        );
    }
}
