//! Runs on a person's open scene (viga attached to their Blender through the add-on).
//!
//! Their scene is never the workbench: [`start_on_user_scene`] saves a copy of it into the
//! run folder (`base.blend`; their file, its path and their unsaved state are untouched) and
//! the run's own worker starts every iteration from that copy. Only when the run is over does
//! [`apply_to_user_scene`] run the chosen program on their scene, as one undo step, and only
//! when they want it. Nothing here saves or opens their .blend.

use std::path::Path;
use std::sync::Arc;

use viga_blender::{BlenderCommands as _, BlenderTransport};
use viga_protocol::bridge::AppliedProgram;
use viga_provider::Provider;

use super::{SceneDomain, SceneSettings, blender_error};
use crate::folder::{BASE_SNAPSHOT, RunFolder};
use crate::{CoreError, RunConfig, RunHandle, check_settings, start_in};

/// The longest task text an undo step's name carries.
const UNDO_NAME_CHARS: usize = 60;

/// Starts a run whose base scene is the open scene of `user` (a person's Blender). The
/// run's programs, renders and verification all happen in `worker`, with the scene settings
/// `scene` (whose base scene must be unset: it is the snapshot).
pub async fn start_on_user_scene(
    config: RunConfig,
    mut scene: SceneSettings,
    provider: Arc<dyn Provider>,
    worker: Arc<dyn BlenderTransport>,
    user: &dyn BlenderTransport,
    output_root: &Path,
) -> Result<RunHandle, CoreError> {
    if let Some(base) = &scene.base_blend {
        return Err(CoreError::Config(format!(
            "an attached run starts from the open scene in Blender; drop the base scene {} or run without --attach",
            base.display()
        )));
    }
    let has_target = !config.targets.is_empty();
    // Checked before the snapshot, with the base scene it does not have yet.
    check_settings(
        &config,
        &SceneDomain::new(scene.clone(), Arc::clone(&worker), has_target)?,
    )?;
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
