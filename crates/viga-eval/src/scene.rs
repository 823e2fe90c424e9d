//! What the evaluation asks of Blender: run a program on the freshly reopened base scene,
//! render the instance's cameras, and read the rendered surfaces for Chamfer distance.

use std::time::Duration;

use serde::Deserialize;
use viga_blender::{BlenderCommands as _, BlenderTransport, TransportError};
use viga_protocol::bridge::{RenderRequest, SceneReset};
use viga_protocol::iteration::ExecutionResult;

use crate::chamfer::Triangle;
use crate::layout::Instance;
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
    #[error("the surface script failed in Blender: {0}")]
    Script(String),
    #[error("the surface script's output is malformed: {0}")]
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

/// The current scene's rendered surface as world-space triangles.
pub async fn surface(
    blender: &dyn BlenderTransport,
    timeout: Duration,
) -> Result<Surface, SceneError> {
    let result = blender.execute(SURFACE_SCRIPT, None, Some(timeout)).await?;
    if let Some(error) = &result.error {
        return Err(SceneError::Script(error.to_string()));
    }
    let line = result
        .stdout
        .lines()
        .rev()
        .find_map(|line| line.strip_prefix(SURFACE_MARKER))
        .ok_or_else(|| SceneError::Malformed(format!("no {SURFACE_MARKER} line")))?;
    let reply: SurfaceReply =
        serde_json::from_str(line).map_err(|err| SceneError::Malformed(err.to_string()))?;
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
