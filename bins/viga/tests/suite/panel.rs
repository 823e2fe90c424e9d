//! The Blender panel against the REAL viga binary (not a stand-in printing canned lines): the
//! add-on from the zip `viga addon build` writes runs in the bpy module and drives `viga run`,
//! `viga gn`, `viga apply` and `viga key` itself (`tests/panel/real_viga.py`), with scripted
//! models that expect each second turn to show the first, and a local model server for a key
//! entered in the preferences.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic: that is how tests fail

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use viga_blender::addon::build_zip;
use viga_blender::{BlenderLauncher, locate};
use viga_testkit::openai::replay_server;
use viga_testkit::output_within;

const VIGA: &str = env!("CARGO_BIN_EXE_viga");
/// Five real runs (two with Cycles renders), two applies and a key: longer than one Blender
/// process's limit.
const PANEL_TEST_LIMIT: Duration = Duration::from_secs(600);
const KEY: &str = "sk-panel-key-canary-3d1e";

use crate::support;

use support::{assert_the_key_reached_the_server_alone, gn_reply, scatter_steps, turn as text};

fn program(code: &str) -> Value {
    text(json!({}), &format!("```python\n{code}```"))
}

fn verdict(accepted: bool) -> Value {
    json!({"expect": {"system_contains": "You are the verifier", "min_images": 1},
           "response": {"text": "", "finish_reason": "tool_calls", "tool_calls": [
        {"id": "v", "name": "end_process", "arguments": {
            "visual_differences": if accepted { vec![] } else { vec!["the crate is too small"] },
            "suggestions": [], "accepted": accepted}}
    ]}})
}

fn write_script(dir: &Path, name: &str, turns: Vec<Value>) {
    support::script_file(dir, name, Value::from(turns));
}

/// The scripted sessions the panel's runs replay; each second turn expects the first.
fn write_scripts(dir: &Path) {
    let crate_a = "import bpy\nbpy.ops.mesh.primitive_cube_add(size=0.5, location=(2, 0, 0))\nbpy.context.object.name = 'CrateA'\n";
    let crate_b = "import bpy\nbpy.ops.mesh.primitive_cube_add(size=1, location=(2, 0, 0))\nbpy.context.object.name = 'CrateB'\n";
    write_script(
        dir,
        "scene_first.json",
        vec![
            text(json!({}), "1. a crate"),
            program(crate_a),
            verdict(false),
            text(json!({}), "2. a bigger crate"),
            program(crate_b),
            verdict(true),
        ],
    );
    write_script(
        dir,
        "scene_second.json",
        vec![
            text(
                json!({"any_message_contains": "1. Request: a crate\n   Plan: 2. a bigger crate\n   Verdict: accepted"}),
                "1. twice as big",
            ),
            program("import bpy\nbpy.ops.mesh.primitive_cube_add(size=2)\n"),
            verdict(true),
        ],
    );
    let scatter = scatter_steps("Cube");
    write_script(
        dir,
        "gn_first.json",
        vec![gn_reply(json!({}), scatter, "points on the cube")],
    );
    let again = json!([{"id": "target", "type": "GN_OPS", "payload": {"ops": [
        {"op": "ensure_target", "object": "Cube", "modifier": "Scatter"}
    ]}}]);
    write_script(
        dir,
        "gn_second.json",
        vec![gn_reply(
            json!({"any_message_contains": "1. Request: scatter points on the cube\n   Result: points on the cube; steps applied: scatter\n   Verdict: accepted"}),
            again,
            "denser",
        )],
    );
    std::fs::write(
        dir.join("target.png"),
        viga_testkit::picture::halves_png(32, 32),
    )
    .unwrap();
}

/// PATH with the viga under test first: the add-on finds viga there, as in the Blender of a
/// person who installed viga (the zip names no path of the machine that built it).
fn path_with_viga() -> std::ffi::OsString {
    let folder = Path::new(VIGA).parent().unwrap().to_path_buf();
    let rest = std::env::var_os("PATH").unwrap_or_default();
    std::env::join_paths(std::iter::once(folder).chain(std::env::split_paths(&rest))).unwrap()
}

#[test]
fn the_panel_drives_the_real_viga_through_two_turn_conversations_and_a_key_it_was_given() {
    let BlenderLauncher::PythonModule { python } = locate().unwrap() else {
        panic!("the panel test needs the bpy module (cargo xtask setup)");
    };
    let dir = tempfile::tempdir().unwrap();
    let scripts = dir.path().join("scripts");
    std::fs::create_dir_all(&scripts).unwrap();
    write_scripts(&scripts);
    let zip = build_zip(&dir.path().join("dist")).unwrap();
    // The key run: a program that shows the model its whole environment, a fix, a verdict.
    let environ = "import os\nraise RuntimeError(repr(sorted(os.environ.items())))\n";
    let server = replay_server(vec![
        json!({"text": format!("```python\n{environ}```")}),
        json!({"text": "```python\nimport bpy\nbpy.ops.mesh.primitive_cube_add()\n```"}),
        json!({"tool_calls": [{"name": "end_process", "arguments": {"visual_differences": [], "suggestions": [], "accepted": true}}]}),
    ])
    .unwrap();
    let user: PathBuf = dir.path().join("blender-user");
    let key_file = dir.path().join("key.txt");
    std::fs::write(&key_file, KEY).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/panel/real_viga.py");
    let mut command = Command::new(python);
    command
        .arg(&script)
        .arg("--")
        .arg("--zip")
        .arg(&zip)
        .arg("--work")
        .arg(dir.path())
        .arg("--scripts")
        .arg(&scripts)
        .args(["--server", server.base(), "--key-file"])
        .arg(&key_file)
        .env("VIGA_CONNECTION_DIR", dir.path().join("connections"))
        .env("VIGA_KEY_STORE", "file")
        .env("VIGA_KEY_DIR", dir.path().join("keys"))
        .env("BLENDER_USER_CONFIG", user.join("config"))
        .env("BLENDER_USER_SCRIPTS", user.join("scripts"))
        .env("PATH", path_with_viga())
        .env_remove("VIGA_PANEL_TEST_KEY");
    let output = output_within(&mut command, PANEL_TEST_LIMIT);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let summary = stdout.lines().last().unwrap_or_default();
    assert!(
        output.status.success() && summary == "3 passed, 0 failed",
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );

    // The key reached the model server with every request, and no model program saw it.
    assert_the_key_reached_the_server_alone(&server, KEY);

    assert!(!stdout.contains(KEY), "the key reached the panel's output");
}
