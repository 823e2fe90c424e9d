//! Runs on a person's open scene (viga attached to their Blender through the add-on).
//!
//! Their scene is never the workbench: [`snapshot_user_scene`] saves a copy of it into the
//! run folder (`base.blend`; their file, its path and their unsaved state are untouched) and
//! the run's own worker, started after it, starts every iteration from that copy
//! ([`start_on_snapshot`]). Only when the run is over does
//! [`apply_to_user_scene`] run the chosen program on their scene, as one undo step, and only
//! when they want it. Nothing here saves or opens their .blend.

use std::path::Path;
use std::sync::Arc;

use viga_blender::{BlenderCommands as _, BlenderTransport};
use viga_protocol::bridge::AppliedProgram;
use viga_protocol::iteration::FailureClass;
use viga_provider::Provider;

use super::{SceneDomain, SceneSettings, blender_error};
use crate::folder::{BASE_SNAPSHOT, RunFolder};
use crate::{CoreError, RunConfig, RunHandle, check_problems, start_in};

/// The longest task text an undo step's name carries.
const UNDO_NAME_CHARS: usize = 60;

/// A new run on a person's open scene: its folder, made, with the copy of their scene in
/// it, ready to start once its worker is ([`start_on_snapshot`]). Made before the worker
/// starts, so a contained worker can be allowed to read the copy and nothing else of the
/// output folder.
#[derive(Debug)]
pub struct UserSceneSnapshot {
    folder: RunFolder,
    config: RunConfig,
    scene: SceneSettings,
}

impl UserSceneSnapshot {
    /// The run's settings.
    pub fn config(&self) -> &RunConfig {
        &self.config
    }

    /// The scene's settings, with the copy as its base scene.
    pub fn scene(&self) -> &SceneSettings {
        &self.scene
    }

    /// The run folder.
    pub fn folder(&self) -> &Path {
        self.folder.root()
    }

    /// What of the run folder its worker may read ([`RunFolder::worker_inputs`]).
    pub fn worker_inputs(&self) -> Result<Vec<std::path::PathBuf>, CoreError> {
        self.folder.worker_inputs()
    }
}

/// Makes the run folder of a run on the open scene of `user` (a person's Blender) and
/// saves a copy of that scene in it; `scene`'s base scene must be unset (the copy is it).
pub async fn snapshot_user_scene(
    config: RunConfig,
    mut scene: SceneSettings,
    user: &dyn BlenderTransport,
    output_root: &Path,
) -> Result<UserSceneSnapshot, CoreError> {
    if let Some(base) = &scene.base_blend {
        return Err(CoreError::Config(format!(
            "an attached run starts from the open scene in Blender; drop the base scene {} or run without --attach",
            base.display()
        )));
    }
    let mut problems = config.problems();
    problems.extend(scene.problems(config.generator_tools));
    check_problems(problems)?;
    let folder = RunFolder::create(output_root, &config)?;
    let snapshot = std::path::absolute(folder.root().join(BASE_SNAPSHOT))
        .map_err(|err| CoreError::io(folder.root().join(BASE_SNAPSHOT), err))?;
    user.save_blend(&snapshot.to_string_lossy())
        .await
        .map_err(|err| {
            blender_error(
                format!(
                    "Blender could not save a copy of the open scene to {}",
                    snapshot.display()
                ),
                err,
            )
        })?;
    scene.base_blend = Some(snapshot);
    Ok(UserSceneSnapshot {
        folder,
        config,
        scene,
    })
}

/// Starts the run whose base scene is the copy in `snapshot`. Its programs, renders and
/// verification all happen in `worker`; the person's Blender is not held.
pub fn start_on_snapshot(
    snapshot: UserSceneSnapshot,
    provider: Arc<dyn Provider>,
    worker: Arc<dyn BlenderTransport>,
) -> Result<RunHandle, CoreError> {
    let UserSceneSnapshot {
        folder,
        config,
        scene,
    } = snapshot;
    let has_target = !config.targets.is_empty();
    let domain = SceneDomain::new(scene, worker, has_target)?
        .with_model(Arc::clone(&provider), config.prompts_dir.as_deref())?;
    start_in(folder, config, provider, Arc::new(domain))
}

/// Runs the finished run's program (`final.py`) on the open scene of `user` as one undo
/// step named after the task. A program that fails there is undone at once; the reply says
/// so.
pub async fn apply_to_user_scene(
    run_folder: &Path,
    user: &dyn BlenderTransport,
) -> Result<AppliedProgram, CoreError> {
    let folder = RunFolder::open(run_folder)?;
    let (config, domain) = folder.read_args()?;
    if domain.name != super::SCENE_DOMAIN {
        return Err(CoreError::Config(format!(
            "{} is a {} run; only a scene run's result can be applied to a Blender scene",
            run_folder.display(),
            domain.name
        )));
    }
    let path = folder.final_program_path();
    if !path.exists() {
        return Err(CoreError::Config(format!(
            "{} has no {}: the run produced no program that ran, so there is nothing to apply",
            run_folder.display(),
            crate::folder::FINAL_PROGRAM
        )));
    }
    let code = std::fs::read_to_string(&path).map_err(|err| CoreError::io(&path, err))?;
    user.apply_program(&code, &undo_name(&config.task), None)
        .await
        .map_err(|err| blender_error("Blender could not apply the result", err))
}

/// An iteration of a finished run whose program ran to the end (whatever the verifier
/// thought of its result): one a person may pick to apply.
#[derive(Debug, Clone, PartialEq)]
pub struct RanIteration {
    pub index: u32,
    pub code: String,
    /// The renders made while verifying it, relative to the run folder.
    pub render_ids: Vec<String>,
}

/// The iterations of the scene run in `run_folder` whose programs ran, oldest first; the last
/// one is the run's result (`final.py`).
pub fn iterations_that_ran(run_folder: &Path) -> Result<Vec<RanIteration>, CoreError> {
    let folder = RunFolder::open(run_folder)?;
    let log = viga_memory::read_run_log(&folder.events_path())?;
    Ok(viga_memory::iterations_in(&log.events)
        .into_iter()
        .filter(|record| {
            matches!(record.failure, None | Some(FailureClass::E3)) && !record.code.is_empty()
        })
        .map(|record| RanIteration {
            index: record.index,
            code: record.code,
            render_ids: record.render_ids,
        })
        .collect())
}

/// Applies the program of one iteration of the finished run in `run_folder` to the open
/// scene of `user`, as one undo step; `None`, or the run's last iteration that ran, is the
/// run's result and goes through [`apply_to_user_scene`], how a result is applied. An
/// earlier iteration's program is applied as one undo step named after the task; one that
/// fails there is undone at once. Returns which iteration was applied.
pub async fn apply_iteration_to_user_scene(
    run_folder: &Path,
    iteration: Option<u32>,
    user: &dyn BlenderTransport,
) -> Result<(u32, AppliedProgram), CoreError> {
    let ran = iterations_that_ran(run_folder)?;
    let Some(last) = ran.last() else {
        return Err(CoreError::Config(format!(
            "{} has no iteration whose program ran, so there is nothing to apply",
            run_folder.display()
        )));
    };
    let wanted = iteration.unwrap_or(last.index);
    if wanted == last.index {
        return Ok((wanted, apply_to_user_scene(run_folder, user).await?));
    }
    let Some(chosen) = ran.iter().find(|it| it.index == wanted) else {
        let listed: Vec<String> = ran.iter().map(|it| it.index.to_string()).collect();
        return Err(CoreError::Config(format!(
            "iteration {wanted} of {} did not run to the end (or does not exist); the iterations that ran are {}",
            run_folder.display(),
            listed.join(", ")
        )));
    };
    let (config, _) = RunFolder::open(run_folder)?.read_args()?;
    let name = format!("{} (iteration {wanted})", undo_name(&config.task));
    let applied = user
        .apply_program(&chosen.code, &name, None)
        .await
        .map_err(|err| blender_error("Blender could not apply the result", err))?;
    Ok((wanted, applied))
}

/// `viga: <task>`, cut to a length Blender's undo history shows whole.
pub fn undo_name(task: &str) -> String {
    let mut name: String = task.chars().take(UNDO_NAME_CHARS).collect();
    if task.chars().count() > UNDO_NAME_CHARS {
        name.push('…');
    }
    format!("viga: {name}")
}

#[cfg(test)]
mod tests {
    use super::undo_name;

    #[test]
    fn undo_names_are_short() {
        assert_eq!(undo_name("a red crate"), "viga: a red crate");
        let long = "x".repeat(200);
        assert_eq!(undo_name(&long).chars().count(), "viga: ".len() + 61);
    }
}
