//! What the evaluation asks of Blender: run a program on the freshly reopened base scene,
//! render the instance's cameras, and read the rendered surfaces for Chamfer distance.

use std::time::Duration;

use serde::Deserialize;
use viga_blender::{BlenderCommands as _, BlenderTransport, TransportError};
use viga_protocol::bridge::{RenderRequest, SceneReset};
use viga_protocol::iteration::ExecutionResult;

use crate::chamfer::Triangle;
use crate::layout::{Instance, Suite};
use crate::leak::CameraPose;
use crate::scores::RenderSpec;

/// The line the surface script prints its JSON after.
const SURFACE_MARKER: &str = "VIGA_SURFACE:";

/// World-space triangles of the evaluated mesh of every mesh object that renders (not
/// `hide_render`, in no render-hidden collection, in the view layer): modifiers, shape keys
/// and Geometry Nodes applied, realized geometry only. Rounded to 1e-6 to keep the reply
/// small; that is far below any sampling spacing.
const SURFACE_SCRIPT: &str = r#"
import json
import bpy
import numpy as np
_viga_depsgraph = bpy.context.evaluated_depsgraph_get()
_viga_flat = []
_viga_names = []
for _viga_obj in bpy.context.view_layer.objects:
    if _viga_obj.type != "MESH" or _viga_obj.hide_render:
        continue
    if any(_c.hide_render for _c in _viga_obj.users_collection):
        continue
    _viga_eval = _viga_obj.evaluated_get(_viga_depsgraph)
    _viga_mesh = _viga_eval.to_mesh()
    try:
        _viga_mesh.calc_loop_triangles()
        _viga_co = np.empty(len(_viga_mesh.vertices) * 3, dtype=np.float32)
        _viga_mesh.vertices.foreach_get("co", _viga_co)
        _viga_co = _viga_co.reshape(-1, 3).astype(np.float64)
        _viga_m = np.array(_viga_eval.matrix_world, dtype=np.float64)
        _viga_world = _viga_co @ _viga_m[:3, :3].T + _viga_m[:3, 3]
        _viga_tri = np.empty(len(_viga_mesh.loop_triangles) * 3, dtype=np.int32)
        _viga_mesh.loop_triangles.foreach_get("vertices", _viga_tri)
        if len(_viga_tri):
            _viga_flat.extend(np.round(_viga_world[_viga_tri].reshape(-1), 6).tolist())
            _viga_names.append(_viga_obj.name)
    finally:
        _viga_eval.to_mesh_clear()
print("VIGA_SURFACE:" + json.dumps({"objects": _viga_names, "coords": _viga_flat}))
"#;

/// The line the cameras script prints its JSON after.
const CAMERAS_MARKER: &str = "VIGA_CAMERAS:";

/// Name and type of every object of the scene whose name starts with `Camera`.
const CAMERAS_SCRIPT: &str = r#"
import json as _viga_json
import bpy as _viga_bpy
print("VIGA_CAMERAS:" + _viga_json.dumps([[_viga_o.name, _viga_o.type] for _viga_o in _viga_bpy.context.scene.objects if _viga_o.name.startswith("Camera")]))
"#;

/// The line the camera poses script prints its JSON after.
const CAMERA_POSES_MARKER: &str = "VIGA_CAMERA_POSES:";

/// World pose (location, rotation as a quaternion w, x, y, z) and focal length of every
/// camera object of the scene. The view layer is updated first: a program that just set a
/// camera's `location` has not moved its world matrix yet.
const CAMERA_POSES_SCRIPT: &str = r#"
import json as _viga_json
import bpy as _viga_bpy
_viga_bpy.context.view_layer.update()
_viga_poses = []
for _viga_o in _viga_bpy.context.scene.objects:
    if _viga_o.type != "CAMERA":
        continue
    _viga_loc, _viga_rot, _viga_scale = _viga_o.matrix_world.decompose()
    _viga_poses.append({"name": _viga_o.name, "location": list(_viga_loc), "rotation": list(_viga_rot), "lens": _viga_o.data.lens})
print("VIGA_CAMERA_POSES:" + _viga_json.dumps(_viga_poses))
"#;

#[derive(Debug, Deserialize)]
struct SurfaceReply {
    objects: Vec<String>,
    coords: Vec<f64>,
}

/// The rendered surface of the current scene.
#[derive(Debug, Clone, PartialEq)]
pub struct Surface {
    pub objects: Vec<String>,
    pub triangles: Vec<Triangle>,
}

#[derive(Debug, thiserror::Error)]
pub enum SceneError {
    #[error(transparent)]
    Transport(#[from] TransportError),
    #[error("the script failed in Blender: {0}")]
    Script(String),
    #[error("the script's output is malformed: {0}")]
    Malformed(String),
}

/// Runs `code` on the instance's base scene, reopened from disk first.
pub async fn run_program(
    blender: &dyn BlenderTransport,
    instance: &Instance,
    code: &str,
    timeout: Duration,
) -> Result<ExecutionResult, TransportError> {
    let reset = SceneReset::Blend {
        path: instance.blend.to_string_lossy().into_owned(),
    };
    blender.execute(code, Some(reset), Some(timeout)).await
}

/// Renders `Camera1..CameraN` of the current scene; PNG bytes in camera order.
pub async fn render_views(
    blender: &dyn BlenderTransport,
    instance: &Instance,
    spec: RenderSpec,
    timeout: Duration,
) -> Result<Vec<Vec<u8>>, TransportError> {
    let mut views = Vec::new();
    for camera in instance.cameras() {
        let request = RenderRequest {
            camera: Some(camera),
            pose: None,
            spec,
            output_path: None,
        };
        views.push(blender.render(request, Some(timeout)).await?.image.data);
    }
    Ok(views)
}

/// Runs a script on the current scene (no reset) and parses the JSON it prints after `marker`.
async fn script_reply<T: serde::de::DeserializeOwned>(
    blender: &dyn BlenderTransport,
    script: &str,
    marker: &str,
    timeout: Duration,
) -> Result<T, SceneError> {
    let result = blender.execute(script, None, Some(timeout)).await?;
    parse_reply(&result, marker)
}

/// The JSON a script printed after `marker`, or why there is none.
fn parse_reply<T: serde::de::DeserializeOwned>(
    result: &ExecutionResult,
    marker: &str,
) -> Result<T, SceneError> {
    if let Some(error) = &result.error {
        return Err(SceneError::Script(error.to_string()));
    }
    let line = result
        .stdout
        .lines()
        .rev()
        .find_map(|line| line.strip_prefix(marker))
        .ok_or_else(|| SceneError::Malformed(format!("no {marker} line")))?;
    serde_json::from_str(line).map_err(|err| SceneError::Malformed(err.to_string()))
}

/// Name and Blender type (`CAMERA`, `MESH`, ...) of every object in the current scene whose
/// name starts with `Camera`.
pub async fn camera_objects(
    blender: &dyn BlenderTransport,
    timeout: Duration,
) -> Result<Vec<(String, String)>, SceneError> {
    script_reply(blender, CAMERAS_SCRIPT, CAMERAS_MARKER, timeout).await
}

/// The world pose and focal length of every camera of the current scene, after a program ran
/// with `reset` (`None`: the scene as it is). Running the script with a reset reads the
/// scene file itself, before any program.
pub async fn camera_poses(
    blender: &dyn BlenderTransport,
    reset: Option<SceneReset>,
    timeout: Duration,
) -> Result<Vec<CameraPose>, SceneError> {
    let result = blender
        .execute(CAMERA_POSES_SCRIPT, reset, Some(timeout))
        .await?;
    parse_reply(&result, CAMERA_POSES_MARKER)
}

/// `k` when `name` is `Camera<k>` exactly (k from 1, no leading zero).
fn view_number(name: &str) -> Option<u32> {
    name.strip_prefix("Camera")
        .and_then(|digits| digits.parse::<u32>().ok())
        .filter(|k| *k >= 1 && format!("Camera{k}") == name)
}

/// Checks the instance's views (`Camera1..CameraN`, N = its goal renders) against the
/// scene's objects named `Camera<k>`: the same set, every one a camera. Other objects whose
/// names start with `Camera` (`Camera`, `Camera.001`) are not views and are ignored. A
/// BlenderBench instance needs only its views to be cameras: VIGA renders Camera1 alone
/// whatever other cameras a scene has, so further `Camera<k>` are not views there. The error
/// says what differs and what to fix.
pub fn check_views(instance: &Instance, objects: &[(String, String)]) -> Result<(), String> {
    let expected: Vec<String> = instance.cameras().collect();
    let mut numbered: Vec<(u32, &str, &str)> = objects
        .iter()
        .filter_map(|(name, kind)| view_number(name).map(|k| (k, name.as_str(), kind.as_str())))
        .filter(|(_, name, _)| {
            instance.task.suite() == Suite::BlenderGym || expected.iter().any(|e| e == name)
        })
        .collect();
    numbered.sort_unstable();
    if let Some((_, name, kind)) = numbered.iter().find(|(.., kind)| *kind != "CAMERA") {
        return Err(format!(
            "the scene's object {name} is a {kind} object, not a camera, so view {name} cannot be rendered; fix the instance's scene"
        ));
    }
    let found: Vec<&str> = numbered.iter().map(|(_, name, _)| *name).collect();
    if found == expected {
        return Ok(());
    }
    let missing: Vec<&str> = expected
        .iter()
        .map(String::as_str)
        .filter(|name| !found.contains(name))
        .collect();
    let extra: Vec<&str> = found
        .iter()
        .copied()
        .filter(|name| !expected.iter().any(|e| e == name))
        .collect();
    let mut problems = Vec::new();
    if !missing.is_empty() {
        problems.push(format!("no camera for {}", missing.join(", ")));
    }
    if !extra.is_empty() {
        problems.push(format!("no goal render for {}", extra.join(", ")));
    }
    Err(format!(
        "the number of views does not match the scene: renders/goal holds {} render(s) (views {}), but the scene has {} camera(s) named Camera<k> ({}); {}. Every Camera<k> is a view and needs renders/goal/render<k>.png: fix the instance's data",
        instance.views,
        expected.join(", "),
        found.len(),
        if found.is_empty() {
            "none".to_owned()
        } else {
            found.join(", ")
        },
        problems.join("; ")
    ))
}

/// The current scene's rendered surface as world-space triangles.
pub async fn surface(
    blender: &dyn BlenderTransport,
    timeout: Duration,
) -> Result<Surface, SceneError> {
    let reply: SurfaceReply =
        script_reply(blender, SURFACE_SCRIPT, SURFACE_MARKER, timeout).await?;
    if !reply.coords.len().is_multiple_of(9) {
        return Err(SceneError::Malformed(format!(
            "{} coordinates is not a whole number of triangles",
            reply.coords.len()
        )));
    }
    let triangles = reply
        .coords
        .chunks_exact(9)
        .map(|c| [[c[0], c[1], c[2]], [c[3], c[4], c[5]], [c[6], c[7], c[8]]])
        .collect();
    Ok(Surface {
        objects: reply.objects,
        triangles,
    })
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::layout::Task;

    fn instance(views: u32) -> Instance {
        Instance {
            name: "placement1".to_owned(),
            task: Task::Placement,
            number: 1,
            dir: PathBuf::new(),
            blend: PathBuf::new(),
            start_py: PathBuf::new(),
            goal_py: PathBuf::new(),
            views,
            description: None,
            visual_prompt: None,
        }
    }

    fn objects(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(name, kind)| ((*name).to_owned(), (*kind).to_owned()))
            .collect()
    }

    #[test]
    fn views_must_match_the_numbered_cameras_of_the_scene() {
        let two = objects(&[
            ("Camera2", "CAMERA"),
            ("Camera1", "CAMERA"),
            ("Camera", "CAMERA"),
            ("Camera.001", "CAMERA"),
            ("CameraRig", "EMPTY"),
        ]);
        assert_eq!(check_views(&instance(2), &two), Ok(()));

        let err = check_views(&instance(1), &two).unwrap_err();
        assert!(
            err.contains("renders/goal holds 1 render(s) (views Camera1)")
                && err.contains("2 camera(s) named Camera<k> (Camera1, Camera2)")
                && err.contains("no goal render for Camera2"),
            "{err}"
        );
        let err = check_views(&instance(3), &two).unwrap_err();
        assert!(err.contains("no camera for Camera3"), "{err}");
        let err = check_views(
            &instance(2),
            &objects(&[("Camera1", "CAMERA"), ("Camera3", "CAMERA")]),
        )
        .unwrap_err();
        assert!(
            err.contains("no camera for Camera2") && err.contains("no goal render for Camera3"),
            "{err}"
        );
        let err = check_views(&instance(1), &[]).unwrap_err();
        assert!(err.contains("0 camera(s) named Camera<k> (none)"), "{err}");
        let err = check_views(
            &instance(2),
            &objects(&[("Camera1", "CAMERA"), ("Camera2", "MESH")]),
        )
        .unwrap_err();
        assert!(
            err.contains("Camera2 is a MESH object, not a camera"),
            "{err}"
        );

        // BlenderBench: a further numbered camera, or object, is no view.
        let mut level = instance(1);
        level.task = Task::Level1;
        let extra = objects(&[
            ("Camera1", "CAMERA"),
            ("Camera2", "MESH"),
            ("Camera3", "CAMERA"),
        ]);
        assert_eq!(check_views(&level, &extra), Ok(()));
        let err = check_views(&level, &objects(&[("Camera2", "CAMERA")])).unwrap_err();
        assert!(err.contains("no camera for Camera1"), "{err}");
    }
}
