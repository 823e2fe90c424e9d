//! A follow-up from the terminal: `viga run --continue RUN` starts from the earlier run's
//! result and shows the model the earlier turn (scripted sessions that expect it, real
//! Blender).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic: that is how tests fail

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use viga_testkit::{BLENDER_TEST_LIMIT, output_within};

const FIRST: &str = "import bpy\nbpy.ops.mesh.primitive_cube_add(size=1.0, location=(0, 0, 0.5))\nbpy.context.object.name = 'Crate'\n";
/// Fails unless the scene it runs on already holds the first turn's crate.
const SECOND: &str =
    "import bpy\ncrate = bpy.data.objects['Crate']\ncrate.scale = (2.0, 2.0, 2.0)\n";

use crate::support;

use support::{gn_reply, plane_blend, scatter_steps, turn};

fn accepted() -> Value {
    json!({"response": {"text": "", "finish_reason": "tool_calls", "tool_calls": [
        {"id": "v", "name": "end_process", "arguments": {"visual_differences": [], "suggestions": [], "accepted": true}}
    ]}})
}

fn script(dir: &Path, name: &str, turns: Vec<Value>) -> PathBuf {
    support::script_file(dir, name, Value::from(turns))
}

/// Runs `command` to success; the run folder it printed.
fn printed_run_folder(command: &mut Command) -> PathBuf {
    let out = output_within(command, BLENDER_TEST_LIMIT);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let folder = stdout
        .lines()
        .find_map(|line| line.strip_prefix("run folder: "))
        .unwrap();
    PathBuf::from(folder)
}

/// Runs `viga run` with `script` and `extra` flags; the run folder it printed.
fn run(dir: &Path, task: &str, script: &Path, extra: &[&str]) -> PathBuf {
    let mut command = Command::new(env!("CARGO_BIN_EXE_viga"));
    command
        .args(["run", "--task", task, "--provider", "scripted", "--script"])
        .arg(script)
        .args([
            "--max-iterations",
            "1",
            "--resolution",
            "32",
            "--generator-tools",
            "off",
        ])
        .args(extra)
        .arg("--output")
        .arg(dir.join("out"));
    printed_run_folder(&mut command)
}

#[test]
fn a_follow_up_starts_from_the_result_and_sees_the_earlier_turn() {
    let dir = tempfile::tempdir().unwrap();
    let first_script = script(
        dir.path(),
        "first.json",
        vec![
            turn(json!({}), "1. a crate"),
            turn(json!({}), &format!("```python\n{FIRST}```")),
            accepted(),
        ],
    );
    let first = run(dir.path(), "a crate on the floor", &first_script, &[]);
    assert!(first.join("final.blend").is_file());

    let second_script = script(
        dir.path(),
        "second.json",
        vec![
            turn(
                json!({"any_message_contains": "1. Request: a crate on the floor\n   Plan: 1. a crate\n   Verdict: accepted"}),
                "1. scale the crate up",
            ),
            turn(json!({}), &format!("```python\n{SECOND}```")),
            accepted(),
        ],
    );
    let first_folder = first.to_string_lossy().into_owned();
    let second = run(
        dir.path(),
        "now make it twice as big",
        &second_script,
        &["--continue", &first_folder],
    );
    let log = std::fs::read_to_string(second.join("events.jsonl")).unwrap();
    assert!(
        !log.contains("KeyError"),
        "the program found the first turn's crate: {log}"
    );
    let args: Value =
        serde_json::from_slice(&std::fs::read(second.join("args.json")).unwrap()).unwrap();
    assert_eq!(args["conversation"][0]["request"], "a crate on the floor");
    assert_eq!(
        args["domain"]["settings"]["base_blend"],
        first.join("final.blend").to_string_lossy().as_ref()
    );

    // A third turn sees both earlier ones.
    let third_script = script(
        dir.path(),
        "third.json",
        vec![
            turn(
                json!({"any_message_contains": "2. Request: now make it twice as big"}),
                "1. done",
            ),
            turn(json!({}), &format!("```python\n{SECOND}```")),
            accepted(),
        ],
    );
    let second_folder = second.to_string_lossy().into_owned();
    run(
        dir.path(),
        "and keep it",
        &third_script,
        &["--continue", &second_folder],
    );
}

/// Issue 35: a follow-up from another working directory, from the earlier run's base scene,
/// with every path given relative to where each command ran. The model is told that the
/// work starts again from that scene, and the program finds the base's plane and not the
/// first turn's crate.
#[test]
fn a_follow_up_from_the_base_works_from_another_folder_and_says_where_it_starts() {
    let dir = tempfile::tempdir().unwrap();
    let first_home = dir.path().join("first");
    // Deeper than the first, so a path recorded relative to the first resolves elsewhere.
    let second_home = dir.path().join("second").join("deeper");
    std::fs::create_dir_all(&first_home).unwrap();
    std::fs::create_dir_all(&second_home).unwrap();
    support::plane_blend(dir.path());
    script(
        dir.path(),
        "first.json",
        vec![
            turn(json!({}), "1. a crate"),
            turn(json!({}), &format!("```python\n{FIRST}```")),
            accepted(),
        ],
    );
    let mut first = Command::new(env!("CARGO_BIN_EXE_viga"));
    first
        .current_dir(&first_home)
        .args([
            "run",
            "--task",
            "a crate on the plane",
            "--provider",
            "scripted",
        ])
        .args([
            "--script",
            "../first.json",
            "--base",
            "../plane.blend",
            "--output",
            "out",
        ])
        .args([
            "--max-iterations",
            "1",
            "--resolution",
            "32",
            "--generator-tools",
            "off",
        ]);
    let first_folder = printed_run_folder(&mut first);
    let relative = Path::new("../../first").join(&first_folder);
    let needs_the_plane_only = "import bpy\nassert 'Crate' not in bpy.data.objects\nbpy.data.objects['Plane'].scale = (2, 2, 2)\n";
    script(
        dir.path(),
        "second.json",
        vec![
            turn(
                json!({"any_message_contains": "The work starts again from the scene the last turn started from"}),
                "1. scale the plane",
            ),
            turn(json!({}), &format!("```python\n{needs_the_plane_only}```")),
            accepted(),
        ],
    );
    let mut second = Command::new(env!("CARGO_BIN_EXE_viga"));
    second
        .current_dir(&second_home)
        .args([
            "run",
            "--task",
            "a bigger plane instead",
            "--provider",
            "scripted",
        ])
        .args([
            "--script",
            "../../second.json",
            "--from",
            "base",
            "--continue",
        ])
        .arg(&relative)
        .args([
            "--output",
            "out",
            "--max-iterations",
            "1",
            "--resolution",
            "32",
        ])
        .args(["--generator-tools", "off"]);
    let second_folder = second_home.join(printed_run_folder(&mut second));
    let log = std::fs::read_to_string(second_folder.join("events.jsonl")).unwrap();
    assert!(
        !log.contains("AssertionError") && !log.contains("KeyError"),
        "{log}"
    );
    let args: Value =
        serde_json::from_slice(&std::fs::read(second_folder.join("args.json")).unwrap()).unwrap();
    let base = args["domain"]["settings"]["base_blend"].as_str().unwrap();
    assert!(Path::new(base).is_absolute(), "{base}");
    assert_eq!(args["starts_from"], "base");
}

/// Follow-ups are for scene runs: continuing a slides run is refused, saying what to do
/// instead (README.md says the same), before anything starts.
#[test]
fn a_follow_up_of_a_slides_run_is_refused_with_what_to_do() {
    let slides_run = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/runs/before-domain-crates/slides");
    let out = tempfile::tempdir().unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_viga"));
    command
        .args([
            "run",
            "--task",
            "now a darker title",
            "--provider",
            "scripted",
            "--continue",
        ])
        .arg(&slides_run)
        .arg("--output")
        .arg(out.path());
    let ran = output_within(&mut command, BLENDER_TEST_LIMIT);
    let stderr = String::from_utf8_lossy(&ran.stderr);
    assert_eq!(ran.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("follow-ups (--continue) are for Blender scene runs only")
            && stderr.contains("--mode slides"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 0);
}

/// Runs `viga gn REQUEST` with `script` and `extra` flags; the run folder it printed.
fn gn(dir: &Path, request: &str, script: &Path, extra: &[&str]) -> PathBuf {
    let mut command = Command::new(env!("CARGO_BIN_EXE_viga"));
    command
        .args(["gn", request, "--provider", "scripted", "--script"])
        .arg(script)
        .args(extra)
        .arg("--output")
        .arg(dir.join("out"));
    printed_run_folder(&mut command)
}

/// `viga gn --continue RUN`: the model sees the earlier request and what it left, the object
/// is the earlier run's, and the run starts from the earlier result (a PYTHON step that needs
/// the earlier run's node group would fail on the plain plane).
#[test]
fn a_geometry_nodes_follow_up_starts_from_the_result_and_sees_the_earlier_turn() {
    let dir = tempfile::tempdir().unwrap();
    let blend = plane_blend(dir.path());
    let scatter = scatter_steps("Plane");
    let first_script = script(
        dir.path(),
        "gn_first.json",
        vec![gn_reply(json!({}), scatter, "points on the plane")],
    );
    let first = gn(
        dir.path(),
        "scatter points on the plane",
        &first_script,
        &["--object", "Plane", "--blend", &blend.to_string_lossy()],
    );
    assert!(first.join("final.blend").is_file());

    let needs_scatter = json!([
        {"id": "check", "type": "PYTHON", "payload": {
            "code": "tree = bpy.data.node_groups['Scatter']\n"
        }},
        {"id": "target", "type": "GN_OPS", "payload": {"ops": [
            {"op": "ensure_target", "object": "Plane", "modifier": "Scatter"}
        ]}}
    ]);
    let second_script = script(
        dir.path(),
        "gn_second.json",
        vec![gn_reply(
            json!({"any_message_contains": "1. Request: scatter points on the plane\n   Result: points on the plane; steps applied: scatter\n   Verdict: accepted\n\nRequest: now make them denser\nObject: Plane"}),
            needs_scatter,
            "denser",
        )],
    );
    let first_folder = first.to_string_lossy().into_owned();
    let second = gn(
        dir.path(),
        "now make them denser",
        &second_script,
        &["--continue", &first_folder],
    );
    let request: Value =
        serde_json::from_slice(&std::fs::read(second.join("request.json")).unwrap()).unwrap();
    assert_eq!(request["object"], "Plane");
    assert_eq!(
        request["conversation"][0]["request"],
        "scatter points on the plane"
    );
    assert_eq!(
        request["blend"],
        first.join("final.blend").to_string_lossy().as_ref()
    );
    let outcome: Value =
        serde_json::from_slice(&std::fs::read(second.join("outcome.json")).unwrap()).unwrap();
    assert_eq!(outcome["state"], "done", "{outcome}");

    // A scene run is no Geometry Nodes run to continue.
    let mut command = Command::new(env!("CARGO_BIN_EXE_viga"));
    command
        .args(["gn", "more", "--provider", "scripted", "--script"])
        .arg(&second_script)
        .arg("--continue")
        .arg(dir.path());
    let refused = output_within(&mut command, BLENDER_TEST_LIMIT);
    let said = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{said}");
    assert!(said.contains("not a Geometry Nodes run folder"), "{said}");
}
