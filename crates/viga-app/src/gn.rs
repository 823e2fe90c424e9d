//! A Geometry Nodes run's set-up: where it works (a contained Blender of viga's own, a copy of
//! the person's open scene, or their own Blender when trusted), how a follow-up continues an
//! earlier run, and what a finished run brought into the person's scene, in a line.

use std::path::PathBuf;

use viga_blender::{Access, BlenderCommands as _, ContainedWorkers};
use viga_core::conversation::StartFrom;
use viga_gn::Workbench;
use viga_gn::conversation::FollowUp;
use viga_protocol::gn::GnResultImported;

use crate::attach::UserBlender;
use crate::{AppError, Tell};

/// Where a Geometry Nodes run works.
#[derive(Debug)]
pub enum GnPlace {
    /// A Blender of viga's own, contained, with this scene opened first (else empty).
    Own { blend: Option<PathBuf> },
    /// A copy of the scene open in the person's Blender, in a contained Blender of viga's own.
    CopyOf(UserBlender),
    /// The person's own Blender (trusted mode, confirmed).
    Live(UserBlender),
}

/// The workbench of a run at `place`.
pub async fn workbench(
    place: GnPlace,
    contained: &ContainedWorkers,
    tell: &dyn Tell,
) -> Result<Workbench, AppError> {
    match place {
        GnPlace::Own { blend } => {
            let access = Access::reading(blend.iter().cloned().collect());
            let worker = crate::workers::start_blender(contained, None, access, None, tell).await?;
            if let Some(blend) = &blend {
                worker
                    .load_blend(&blend.to_string_lossy())
                    .await
                    .map_err(|err| AppError::open_scene(blend, err))?;
            }
            Ok(Workbench::own(worker))
        }
        GnPlace::Live(user) => Ok(Workbench::live(user.transport)),
        GnPlace::CopyOf(user) => {
            // The copy is staged in the worker's own scratch folder: it reads nothing else.
            let worker = crate::workers::start_blender(
                contained,
                Some(&user.connection),
                Access::default(),
                None,
                tell,
            )
            .await?;
            Ok(Workbench::copy_of(user.transport, worker).await?)
        }
    }
}

/// A follow-up of the Geometry Nodes run in `previous`: its earlier turns, with `object`
/// (unless named) the earlier run's and, for a run in viga's own Blender without a scene of
/// its own (`blend`), the scene `from` picks.
pub fn follow_up(
    previous: &std::path::Path,
    object: &mut Option<String>,
    blend: &mut Option<PathBuf>,
    attached: bool,
    from: StartFrom,
) -> Result<FollowUp, AppError> {
    let follow_up = viga_gn::conversation::follow_up(previous)?;
    if object.is_none() {
        object.clone_from(&follow_up.object);
    }
    if !attached && blend.is_none() {
        *blend = viga_gn::conversation::start_scene(previous, from)?;
    }
    Ok(follow_up)
}

/// One line on what a run brought into the person's scene.
pub fn imported_summary(imported: &GnResultImported) -> String {
    let mut line = format!(
        "in your scene as one undo step: node groups {}",
        imported.node_groups.join(", ")
    );
    if !imported.replaced.is_empty() {
        line.push_str(&format!(" ({} replaced)", imported.replaced.join(", ")));
    }
    if !imported.modifiers.is_empty() {
        line.push_str(&format!("; modifiers {}", imported.modifiers.join(", ")));
    }
    line
}
