//! Inputs where people keep them: under a folder the container hides (the home folder,
//! `/tmp`), reached through a symbolic link or a `..`. The launcher grants a worker its
//! inputs by their real paths, so viga must hand the worker those same paths, in every mode.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic: that is how tests fail

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::json;
use viga_testkit::picture::files_under;
use viga_testkit::{BLENDER_TEST_LIMIT, output_within};

use crate::support::{
    gn_reply, plane_blend, scatter_steps, script_file, table_and_lamp_blend, turn, workspace_file,
};

const VIGA: &str = env!("CARGO_BIN_EXE_viga");

/// `dir/real` with the inputs, `dir/link` a link to it, and `dir/detour` a folder to walk
/// back out of: every input is reachable as `link/NAME` and as `detour/../real/NAME`.
struct Inputs {
    dir: tempfile::TempDir,
}

impl Inputs {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("real")).unwrap();
        std::fs::create_dir(dir.path().join("detour")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("real"), dir.path().join("link")).unwrap();
        Self { dir }
    }

    fn real(&self) -> PathBuf {
        self.dir.path().join("real")
    }

    fn through_link(&self, name: &str) -> PathBuf {
        self.dir.path().join("link").join(name)
    }

    fn through_dots(&self, name: &str) -> PathBuf {
        self.dir.path().join("detour/../real").join(name)
    }

    fn output(&self) -> PathBuf {
        self.dir.path().join("out")
    }
}

fn said(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn events_of(output: &Path) -> String {
    files_under(output)
        .into_iter()
        .filter(|path| path.ends_with("events.jsonl"))
        .map(|path| std::fs::read_to_string(path).unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_scene_run_opens_a_base_reached_through_a_link_or_dots() {
    let inputs = Inputs::new();
    table_and_lamp_blend(&inputs.real());
    let program = "import bpy\nprint('OBJECTS', len(bpy.data.objects))\n";
    let verdict = json!({"response": {"text": "", "finish_reason": "tool_calls", "tool_calls": [
        {"id": "v", "name": "end_process", "arguments": {"visual_differences": [], "suggestions": [], "accepted": true}}
    ]}});
    let turns = json!([
        turn(json!({}), "1. count"),
        turn(json!({}), &format!("```python\n{program}```")),
        verdict
    ]);
    let script = script_file(inputs.dir.path(), "scene.json", turns);
    for base in [
        inputs.through_link("room.blend"),
        inputs.through_dots("room.blend"),
    ] {
        let output_dir = inputs.output().join(base.components().count().to_string());
        let mut command = Command::new(VIGA);
        command
            .args([
                "run",
                "--task",
                "count",
                "--provider",
                "scripted",
                "--script",
            ])
            .arg(&script)
            .arg("--base")
            .arg(&base)
            .args(["--max-iterations", "1", "--resolution", "32", "--output"])
            .arg(&output_dir);
        let output = output_within(&mut command, BLENDER_TEST_LIMIT);
        assert!(output.status.success(), "{}", said(&output));
        let events = events_of(&output_dir);
        assert!(events.contains("OBJECTS 2"), "{}: {events}", base.display());
    }
}

#[test]
fn a_geometry_nodes_run_opens_a_blend_reached_through_a_link() {
    let inputs = Inputs::new();
    plane_blend(&inputs.real());
    let turns = json!([gn_reply(json!({}), scatter_steps("Plane"), "scattered")]);
    let script = script_file(&inputs.real(), "gn.json", turns);
    let mut command = Command::new(VIGA);
    command
        .args(["gn", "scatter points", "--object", "Plane"])
        .args(["--provider", "scripted", "--script"])
        .arg(inputs.through_dots("gn.json"))
        .arg("--blend")
        .arg(inputs.through_link("plane.blend"))
        .arg("--output")
        .arg(inputs.output());
    let output = output_within(&mut command, BLENDER_TEST_LIMIT);
    assert!(output.status.success(), "{}", said(&output));
    assert!(said(&output).contains("scattered"), "{}", said(&output));
    assert!(script.is_file());
}

#[test]
fn the_agent_finds_add_ons_and_a_blend_reached_through_dots_and_a_link() {
    let inputs = Inputs::new();
    table_and_lamp_blend(&inputs.real());
    let copied = Command::new("cp")
        .arg("-r")
        .arg(workspace_file("fixtures/addons"))
        .arg(inputs.real().join("addons"))
        .status()
        .unwrap();
    assert!(copied.success());
    // The add-ons' tools are offered only when the folder was found inside the container.
    let turns = json!([turn(
        json!({"system_contains": "Object Placer"}),
        "Nothing to do."
    )]);
    let script = script_file(&inputs.real(), "agent.json", turns);
    let mut command = Command::new(VIGA);
    command
        .args(["agent", "look at the room", "--resolution", "32"])
        .arg("--addons")
        .arg(inputs.through_dots("addons"))
        .arg("--blend")
        .arg(inputs.through_link("room.blend"))
        .args(["--provider", "scripted", "--script"])
        .arg(&script)
        .arg("--output")
        .arg(inputs.output());
    let output = output_within(&mut command, BLENDER_TEST_LIMIT);
    assert!(output.status.success(), "{}", said(&output));
}

#[test]
fn a_slidebench_evaluation_reads_its_data_reached_through_dots() {
    let inputs = Inputs::new();
    let copied = Command::new("cp")
        .arg("-r")
        .arg(workspace_file("fixtures/slidebench-mini"))
        .arg(inputs.real().join("slidebench"))
        .status()
        .unwrap();
    assert!(copied.success());
    let out = inputs.output();
    let mut command = Command::new(VIGA);
    command
        .args(["eval", "slidebench", "--data"])
        .arg(inputs.through_dots("slidebench"))
        .args(["--baseline", "oracle", "--out"])
        .arg(&out)
        .env_remove("VIGA_CONTAINMENT");
    let output = output_within(&mut command, BLENDER_TEST_LIMIT);
    assert!(output.status.success(), "{}", said(&output));
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    // The oracle opens each reference deck from the data folder, inside its container.
    assert_eq!(summary["execution_rate"], 100.0, "{summary}");
}
