//! `viga gn preset list|export|import` and `viga gn --preset FILE` as a person runs them: the
//! store on disk, clear errors for a missing preset or a bad file, and a preset applied as a
//! run with its own run folder and `final.blend` (on real Blender).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic: that is how tests fail

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::{Value, json};
use viga_gn::Preset;
use viga_testkit::{BLENDER_TEST_LIMIT, output_within};

use crate::support;

use support::plane_blend;

const VIGA: &str = env!("CARGO_BIN_EXE_viga");
/// The preset commands touch files only.
const FILES_LIMIT: Duration = Duration::from_secs(30);

fn grid_preset() -> Value {
    json!({
        "version": 1,
        "metadata": {
            "name": "grid",
            "request": "a 5x3 grid",
            "object": "Plane",
            "created_unix_ms": 1,
            "viga_version": "0.1.0",
            "tags": ["mesh"]
        },
        "steps": [{"id": "tree", "type": "NODE_TREE", "payload": {
            "object": "Plane", "modifier": "Grid",
            "nodes": [{"id": "grid", "bl_idname": "GeometryNodeMeshGrid", "inputs": {"Vertices X": 5}}],
            "links": [{"from_node": "grid", "from_socket": "Mesh", "to_node": "Group Output", "to_socket": "Geometry"}]
        }}]
    })
}

fn write_json(path: &Path, value: &Value) -> PathBuf {
    std::fs::write(path, serde_json::to_string_pretty(value).unwrap()).unwrap();
    path.to_path_buf()
}

/// `viga gn preset <args> --presets-dir <store>`.
fn preset_command(store: &Path, args: &[&str]) -> Output {
    let mut command = Command::new(VIGA);
    command
        .args(["gn", "preset"])
        .args(args)
        .arg("--presets-dir")
        .arg(store);
    output_within(&mut command, FILES_LIMIT)
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn presets_are_listed_imported_and_exported_through_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("presets");
    let empty = preset_command(&store, &["list"]);
    assert!(empty.status.success(), "{}", stderr(&empty));
    assert!(
        stdout(&empty).starts_with("no presets in "),
        "{}",
        stdout(&empty)
    );

    let file = write_json(&dir.path().join("shared.json"), &grid_preset());
    let imported = preset_command(&store, &["import", file.to_str().unwrap()]);
    assert!(imported.status.success(), "{}", stderr(&imported));
    assert!(
        stdout(&imported).starts_with("imported preset \"grid\" into "),
        "{}",
        stdout(&imported)
    );
    let listed = preset_command(&store, &["list"]);
    assert_eq!(stdout(&listed), "grid: a 5x3 grid (on Plane) [mesh]\n");

    let exported = dir.path().join("out.json");
    let export = preset_command(&store, &["export", "grid", exported.to_str().unwrap()]);
    assert!(export.status.success(), "{}", stderr(&export));
    // The same preset; the export also spells out the fields left at their defaults.
    let back = Preset::read(&exported).unwrap();
    assert_eq!(back, Preset::from_json(&grid_preset().to_string()).unwrap());
}

#[test]
fn a_missing_preset_or_a_bad_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("presets");
    let file = write_json(&dir.path().join("grid.json"), &grid_preset());
    assert!(
        preset_command(&store, &["import", file.to_str().unwrap()])
            .status
            .success()
    );

    let missing = preset_command(&store, &["export", "nope", "x.json"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        stderr(&missing).contains("no preset named \"nope\" in ")
            && stderr(&missing).contains("stored presets: grid"),
        "{}",
        stderr(&missing)
    );

    let again = preset_command(&store, &["import", file.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(2));
    assert!(
        stderr(&again).contains("already stored"),
        "{}",
        stderr(&again)
    );

    let mut escaping = grid_preset();
    escaping["metadata"]["name"] = json!("../escape");
    let bad = write_json(&dir.path().join("bad.json"), &escaping);
    let refused = preset_command(&store, &["import", bad.to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        stderr(&refused).contains("bad.json") && stderr(&refused).contains("/metadata/name"),
        "{}",
        stderr(&refused)
    );

    let broken = dir.path().join("broken.json");
    std::fs::write(&broken, "{\"version\": 1,").unwrap();
    let unreadable = preset_command(&store, &["import", broken.to_str().unwrap()]);
    assert_eq!(unreadable.status.code(), Some(2));
    assert!(
        stderr(&unreadable).contains("broken.json"),
        "{}",
        stderr(&unreadable)
    );
    // Nothing bad got into the store.
    assert_eq!(
        stdout(&preset_command(&store, &["list"])).lines().count(),
        1
    );
}

#[test]
fn applying_a_preset_writes_a_run_folder_and_the_final_scene() {
    let dir = tempfile::tempdir().unwrap();
    let preset = write_json(&dir.path().join("grid.json"), &grid_preset());
    let output = dir.path().join("output");
    let mut command = Command::new(VIGA);
    command
        .args(["gn", "--preset"])
        .arg(&preset)
        .arg("--blend")
        .arg(plane_blend(dir.path()))
        .arg("--output")
        .arg(&output);
    let applied = output_within(&mut command, BLENDER_TEST_LIMIT);
    assert!(
        applied.status.success(),
        "{}{}",
        stdout(&applied),
        stderr(&applied)
    );
    assert!(
        stdout(&applied).contains("done: preset \"grid\" applied; all gates pass"),
        "{}",
        stdout(&applied)
    );
    let runs: Vec<PathBuf> = std::fs::read_dir(output.join("gn"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let folder = &runs[0];
    for file in [
        "final.blend",
        "steps.jsonl",
        "events.jsonl",
        "telemetry.json",
    ] {
        assert!(folder.join(file).is_file(), "{file} is missing");
    }
    let read = |name: &str| -> Value {
        serde_json::from_str(&std::fs::read_to_string(folder.join(name)).unwrap()).unwrap()
    };
    let request = read("request.json");
    assert_eq!(request["request"], json!("a 5x3 grid"));
    assert_eq!(request["object"], json!("Plane"));
    assert_eq!(request["source"]["kind"], json!("preset"));
    let outcome = read("outcome.json");
    assert_eq!(outcome["state"], json!("done"));
    assert_eq!(outcome["preset"], json!("grid"));
    assert_eq!(outcome["steps"][0]["status"], json!("succeeded"));
    assert_eq!(outcome["last_report"]["success"], json!(true));
}
