//! A person's Blender, reached through the connection file the viga add-on writes, and the
//! results brought into it: as data made in a contained worker of viga's own (no program
//! runs in their Blender), or, trusted, by running the run's program there.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use viga_blender::ContainedWorkers;
use viga_blender::Worker;
use viga_blender::attach::{Connection, choose};
use viga_blender::client::FramedClient;
use viga_core::folder::WorkerInputs;
use viga_domain_scene::SceneSettings;
use viga_domain_scene::attached::{ChosenResult, apply_to_user_scene};
use viga_protocol::bridge::SceneResultImported;

use crate::{AppError, Tell};

/// How long one call into a person's Blender may take: applying a whole scene program.
const USER_CALL_TIMEOUT: Duration = Duration::from_secs(300);

/// A person's Blender, connected.
#[derive(Debug)]
pub struct UserBlender {
    pub transport: Arc<FramedClient>,
    pub connection: Connection,
}

/// Finds and connects to the person's Blender (the one `connection` names when several
/// run), or fails within five seconds with a one-line message that says what to do.
pub async fn attach(connection: Option<&Path>) -> Result<UserBlender, AppError> {
    let connection = choose(connection)?;
    let client = viga_blender::attach::attach(&connection, USER_CALL_TIMEOUT).await?;
    Ok(UserBlender {
        transport: Arc::new(client),
        connection,
    })
}

/// A contained Blender of viga's own for work on the scene of `user` that may read `scene`'s
/// inputs and the run folder's `inputs`.
pub async fn worker_beside(
    user: &UserBlender,
    contained: &ContainedWorkers,
    scene: &SceneSettings,
    inputs: &WorkerInputs,
    tell: &dyn Tell,
) -> Result<Arc<Worker>, AppError> {
    let mut reads = scene.prepare_blender_reads()?;
    reads.extend(inputs.paths());
    crate::workers::start_blender(
        contained,
        Some(&user.connection),
        viga_blender::Access::reading(reads),
        Some(&inputs.assets),
        tell,
    )
    .await
}

/// Makes `result` in a contained worker of viga's own and brings what it left into the
/// person's scene as one undo step: no program runs in their Blender. Returns what changed,
/// in a line.
pub async fn apply_as_data(
    result: &ChosenResult,
    user: &UserBlender,
    contained: &ContainedWorkers,
    tell: &dyn Tell,
) -> Result<String, AppError> {
    let inputs = result.worker_inputs()?;
    let worker = worker_beside(user, contained, result.scene(), &inputs, tell).await?;
    let imported = apply_to_user_scene(result, worker.as_ref(), user.transport.as_ref()).await;
    if let Ok(worker) = Arc::try_unwrap(worker) {
        worker.shutdown().await;
    }
    Ok(imported_summary(&imported?))
}

/// Runs `result`'s program in the person's Blender as one undo step (trusted mode: the
/// person confirmed it); a program that fails there is undone and said.
pub async fn apply_by_running(
    result: &ChosenResult,
    user: &UserBlender,
    tell: &dyn Tell,
) -> Result<String, AppError> {
    let applied = result.run_in(user.transport.as_ref()).await?;
    match &applied.execution.error {
        None => {
            tell.say("ran the program in your Blender as one undo step (Ctrl-Z takes it back)");
            Ok("applied to your scene by running its program (Ctrl-Z takes it back)".to_owned())
        }
        Some(error) => Err(AppError::Config(format!(
            "the program failed on your current scene and was undone ({error}); your scene is as it was"
        ))),
    }
}

/// One line on what a result changed in the person's scene.
pub fn imported_summary(imported: &SceneResultImported) -> String {
    let mut parts = Vec::new();
    for (what, names) in [
        ("added", &imported.added),
        ("replaced", &imported.replaced),
        ("removed", &imported.removed),
    ] {
        if !names.is_empty() {
            parts.push(format!("{what} {}", names.join(", ")));
        }
    }
    if !imported.data_replaced.is_empty() {
        parts.push(format!("changed {}", imported.data_replaced.join(", ")));
    }
    if !imported.renamed.is_empty() {
        let renamed: Vec<String> = imported
            .renamed
            .iter()
            .map(|(from, to)| format!("{from} as {to}"))
            .collect();
        parts.push(format!(
            "names you have, so numbered: {}",
            renamed.join(", ")
        ));
    }
    parts.extend(imported.notes.iter().cloned());
    if parts.is_empty() {
        parts.push("nothing to change: the result is your scene as it is".to_owned());
    }
    format!(
        "applied to your scene in Blender as one undo step (Ctrl-Z takes it back): {}",
        parts.join("; ")
    )
}
