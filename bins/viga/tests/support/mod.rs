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

/// A .blend with a 4 m plane named Plane, written by the bpy module.
pub fn plane_blend(dir: &Path) -> PathBuf {
    let path = dir.join("plane.blend");
    let script = format!(
        "import bpy\nbpy.ops.wm.read_factory_settings(use_empty=True)\n\
         bpy.ops.mesh.primitive_plane_add(size=4)\nbpy.context.object.name = 'Plane'\n\
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
