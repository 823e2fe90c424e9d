//! `viga run --through-mcp`: a scene run in a person's Blender reached through the Blender MCP
//! server they already run. Here the real mcp-for-blender 2.2.4 from PyPI: its own add-on in a
//! headless Blender, its own MCP server started by viga as an MCP client would, telemetry off.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic: that is how tests fail

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};
use viga_testkit::mcp_for_blender::{PeerBlender, TELEMETRY_OFF};
use viga_testkit::{BLENDER_TEST_LIMIT, output_within};

use crate::support;

const NAMES: &str = "import bpy\nprint(sorted(o.name for o in bpy.data.objects))";

/// Two iterations: the first builds `First` and is not accepted; the second builds a red
/// `Crate` (its first attempt raises after making `Half`, so its retry is what runs).
fn script(dir: &Path) -> PathBuf {
    let program = |code: &str| json!({"response": {"text": format!("```python\n{code}\n```"), "finish_reason": "stop"}});
    let verdict = |id: &str, accepted: bool| {
        json!({"response": {"text": "", "finish_reason": "tool_calls", "tool_calls": [
            {"id": id, "name": "end_process", "arguments": {
                "visual_differences": if accepted { vec![] } else { vec!["no crate yet"] },
                "suggestions": [], "accepted": accepted}}]}})
    };
    let turns = vec![
        program(
            "import bpy\nbpy.ops.mesh.primitive_uv_sphere_add(location=(0, 0, 3))\nbpy.context.object.name = 'First'",
        ),
        verdict("v1", false),
        program(
            "import bpy\nbpy.ops.mesh.primitive_cone_add()\nbpy.context.object.name = 'Half'\nraise ValueError('not like this')",
        ),
        program(
            "import bpy\nbpy.ops.mesh.primitive_cube_add(size=1, location=(0, 0, 0.5))\n\
             crate = bpy.context.object\ncrate.name = 'Crate'\n\
             material = bpy.data.materials.new('CrateRed')\nmaterial.diffuse_color = (0.8, 0.1, 0.1, 1)\n\
             crate.data.materials.append(material)",
        ),
        verdict("v2", true),
    ];
    support::script_file(dir, "through-mcp.json", Value::from(turns))
}

fn viga_through(peer: &PeerBlender, files: &Path, script: &Path, extra: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_viga"));
    command
        .args(["run", "--through-mcp", &peer.server_command()])
        .args(extra)
        .args(["--events", "jsonl", "--no-plan", "--task", "a red crate"])
        .args(["--provider", "scripted", "--script"])
        .arg(script)
        .args(["--max-iterations", "3", "--resolution", "32", "--output"])
        .arg(files.join("runs"))
        .envs(TELEMETRY_OFF);
    output_within(&mut command, BLENDER_TEST_LIMIT)
}

fn run_folder(files: &Path) -> PathBuf {
    let scene = files.join("runs/scene");
    let stamp = std::fs::read_dir(&scene)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::read_dir(stamp)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
}

#[test]
fn a_run_through_mcp_for_blender_builds_renders_and_leaves_its_result_one_undo_away() {
    let files = tempfile::tempdir().unwrap();
    let peer = PeerBlender::start(None, None).unwrap();
    let before = peer.execute(NAMES).unwrap();
    let output = viga_through(
        &peer,
        files.path(),
        &script(files.path()),
        &["--confirm-trusted"],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    let finished: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(finished["stop"]["reason"], "accepted", "{stdout}");

    // The run folder says it was uncontained, and through which server.
    let folder = run_folder(files.path());
    let containment: Value =
        serde_json::from_slice(&std::fs::read(folder.join("containment.json")).unwrap()).unwrap();
    assert_eq!(containment["policy"], "off");
    let detail = containment["writes"]["detail"].as_str().unwrap();
    assert!(
        detail.contains("uncontained") && detail.contains("MCP server MCP for Blender"),
        "{detail}"
    );
    // Every view of both iterations was rendered there and came back as pictures.
    for iteration in ["1", "2"] {
        let renders = std::fs::read_dir(folder.join("renders").join(iteration)).unwrap();
        let pngs: Vec<Vec<u8>> = renders
            .map(|entry| std::fs::read(entry.unwrap().path()).unwrap())
            .collect();
        assert!(!pngs.is_empty(), "no renders of iteration {iteration}");
        assert!(pngs.iter().all(|png| png.starts_with(b"\x89PNG")));
    }

    // Each program started from the scene as the run found it: the person's Blender holds
    // the last one's crate, neither the first iteration's sphere nor the failed attempt's cone.
    let after = peer.execute(NAMES).unwrap();
    assert!(after.contains("'Crate'"), "{after}");
    assert!(
        !after.contains("'First'") && !after.contains("'Half'"),
        "{after}"
    );
    let red = peer
        .execute("import bpy\nprint(bpy.data.objects['Crate'].active_material.name)")
        .unwrap();
    assert_eq!(red.trim(), "CrateRed");
    // One undo gives the scene back as it was.
    let undone = peer
        .execute(&format!("import bpy\nbpy.ops.ed.undo()\n{NAMES}"))
        .unwrap();
    assert_eq!(undone, before);
}

#[test]
fn a_run_through_mcp_needs_trusted_mode_confirmed_and_says_so() {
    let files = tempfile::tempdir().unwrap();
    let peer = PeerBlender::start(None, None).unwrap();
    let before = peer.execute(NAMES).unwrap();
    // Nobody at a terminal to ask, and no --confirm-trusted: a no, before anything runs.
    let output = viga_through(&peer, files.path(), &script(files.path()), &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("runs as you") && stderr.contains("not confirmed"),
        "{stderr}"
    );
    assert!(!files.path().join("runs").exists(), "no run folder");
    assert_eq!(peer.execute(NAMES).unwrap(), before);
}

#[test]
fn a_base_scene_does_not_go_with_the_persons_blender() {
    let files = tempfile::tempdir().unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_viga"));
    command
        .args([
            "run",
            "--through-mcp",
            "mcp-for-blender",
            "--base",
            "scene.blend",
        ])
        .args(["--task", "x", "--provider", "scripted", "--script"])
        .arg(script(files.path()));
    let output = output_within(&mut command, BLENDER_TEST_LIMIT);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("--base does not go with --through-mcp"),
        "{stderr}"
    );
}
