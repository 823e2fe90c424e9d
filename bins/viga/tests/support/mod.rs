//! Helpers several of viga's end-to-end tests share (each test file includes this module; the
//! helpers one file does not use are not dead, they are another file's).
#![allow(dead_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic: that is how tests fail

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use viga_testkit::{BLENDER_TEST_LIMIT, status_within};

/// A scripted turn that answers `text` to a request meeting `expect`.
pub fn turn(expect: Value, text: &str) -> Value {
    json!({"expect": expect, "response": {"text": text, "finish_reason": "stop"}})
}

/// A Geometry Nodes reply with `steps` that says it is done with `message`.
pub fn gn_reply(expect: Value, steps: Value, message: &str) -> Value {
    let reply = json!({"version": 1, "steps": steps, "done": true, "final_message": message});
    turn(expect, &reply.to_string())
}

/// A .blend `name` in `dir` holding what `objects` (Blender Python, after an empty factory
/// scene) makes, written by the bpy module.
pub fn blend_with(dir: &Path, name: &str, objects: &str) -> PathBuf {
    let path = dir.join(name);
    let script = format!(
        "import bpy\nbpy.ops.wm.read_factory_settings(use_empty=True)\n{objects}\
         bpy.ops.wm.save_as_mainfile(filepath={:?})\n",
        path.display().to_string()
    );
    let viga_blender::BlenderLauncher::PythonModule { python } = viga_blender::locate().unwrap()
    else {
        panic!("this test needs the bpy module (cargo xtask setup)")
    };
    let status = status_within(
        Command::new(python)
            .args(["-c", &script])
            .stdout(Stdio::null()),
        BLENDER_TEST_LIMIT,
    );
    assert!(status.success());
    path
}

/// A .blend with a 4 m plane named Plane.
pub fn plane_blend(dir: &Path) -> PathBuf {
    blend_with(
        dir,
        "plane.blend",
        "bpy.ops.mesh.primitive_plane_add(size=4)\nbpy.context.object.name = 'Plane'\n",
    )
}

/// A Geometry Nodes step that scatters points on `object`'s faces (group and modifier
/// "Scatter").
pub fn scatter_steps(object: &str) -> Value {
    json!([{"id": "scatter", "type": "GN_OPS", "payload": {"ops": [
        {"op": "ensure_target", "object": object, "modifier": "Scatter"},
        {"op": "ensure_single_group_io"},
        {"op": "add_node", "id": "points", "bl_idname": "GeometryNodeDistributePointsOnFaces"},
        {"op": "link", "from_node": "Group Input", "from_socket": "Geometry", "to_node": "points", "to_socket": "Mesh"},
        {"op": "link", "from_node": "points", "from_socket": "Points", "to_node": "Group Output", "to_socket": "Geometry"}
    ]}}])
}

/// The three requests of a run whose program showed the model its whole environment, was
/// fixed, then judged: each carried `key`, and the request that showed the environment (the
/// fix's) did not hold it.
pub fn assert_the_key_reached_the_server_alone(server: &viga_testkit::http::TestServer, key: &str) {
    let requests = server.requests();
    assert_eq!(requests.len(), 3, "{:?}", server.lines());
    for request in &requests {
        assert_eq!(
            request.header("authorization"),
            Some(format!("Bearer {key}").as_str())
        );
    }
    let fix = String::from_utf8_lossy(&requests[1].body);
    assert!(
        fix.contains("PATH"),
        "the program's environment was not shown: {fix}"
    );
    assert!(
        !fix.contains(key),
        "a model program's environment held the key"
    );
}
