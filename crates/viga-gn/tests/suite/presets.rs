//! A run saved as a preset, stored, exported, imported and applied to a fresh scene gives
//! the same tree; applying one is a run of its own, with a run folder and `final.blend`.

use std::path::Path;

use serde_json::{Value, json};
use viga_gn::run::StepStatus;
use viga_gn::{
    ExecutorRegistry, GnBlender, GnOutcome, GnRun, GnRunConfig, Preset, PresetStore, PythonPolicy,
    RunState,
};

use super::{PLANE, fresh, on_blender, step, tree_ir};

fn grid_preset() -> Preset {
    let tree = step(json!({"id": "tree", "type": "NODE_TREE", "payload": {
        "object": "Plane", "modifier": "Grid",
        "nodes": [{"id": "grid", "bl_idname": "GeometryNodeMeshGrid", "inputs": {"Vertices X": 5}}],
        "links": [{"from_node": "grid", "from_socket": "Mesh", "to_node": "Group Output", "to_socket": "Geometry"}]
    }}));
    let mut preset = Preset::new("grid", "a 5x3 grid", vec![tree]);
    preset.metadata.object = Some("Plane".into());
    preset
}

async fn run_preset(blender: &GnBlender, preset: Preset, output: &Path) -> GnOutcome {
    let mut config = GnRunConfig::new(preset.metadata.request.clone());
    config.object.clone_from(&preset.metadata.object);
    config.output = Some(output.to_path_buf());
    GnRun::from_preset(
        config,
        preset,
        blender.clone(),
        ExecutorRegistry::with_defaults(PythonPolicy::safe()),
    )
    .start()
    .wait()
    .await
    .unwrap()
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn a_preset_applies_the_same_tree_again() {
    on_blender(|blender| async move {
        let dir = tempfile::tempdir().unwrap();
        let store = PresetStore::new(dir.path().join("presets"));
        let preset = grid_preset();
        store.save(&preset).unwrap();
        let exported = dir.path().join("exported.json");
        store.export("grid", &exported).unwrap();
        let loaded = Preset::read(&exported).unwrap();
        assert_eq!(loaded, preset);

        fresh(&blender, PLANE).await;
        let outcome = run_preset(&blender, loaded.clone(), dir.path()).await;
        assert_eq!(outcome.state, RunState::Done, "{:?}", outcome.problem());
        assert!(outcome.last_report.as_ref().unwrap().success);
        let first = tree_ir(&blender, "Grid").await;
        fresh(&blender, PLANE).await;
        let again = run_preset(&blender, loaded, dir.path()).await;
        assert_eq!(again.state, RunState::Done, "{:?}", again.problem());
        assert_eq!(tree_ir(&blender, "Grid").await, first);
        assert_eq!(first["nodes"][2]["inputs"]["Vertices X"], json!(5));
    });
}

#[test]
fn a_preset_run_keeps_a_run_folder_labelled_as_a_preset() {
    on_blender(|blender| async move {
        fresh(&blender, PLANE).await;
        let output = tempfile::tempdir().unwrap();
        let outcome = run_preset(&blender, grid_preset(), output.path()).await;
        assert_eq!(outcome.state, RunState::Done, "{:?}", outcome.problem());
        assert_eq!(outcome.preset.as_deref(), Some("grid"));
        assert_eq!(outcome.rounds, 0);
        assert_eq!(
            outcome.final_message,
            "preset \"grid\" applied; all gates pass"
        );
        use RunState::*;
        let states: Vec<RunState> = outcome.transitions.iter().map(|c| c.to).collect();
        assert_eq!(states, [RequestingContext, Applying, Verifying, Done]);
        assert_eq!(outcome.steps[0].status, StepStatus::Succeeded);
        assert_eq!(outcome.telemetry.counters.requests, 0);

        let folder = outcome.folder.clone().unwrap();
        for file in [
            "events.jsonl",
            "steps.jsonl",
            "telemetry.json",
            "final.blend",
        ] {
            assert!(folder.join(file).is_file(), "{file} is missing");
        }
        let request = read_json(&folder.join("request.json"));
        assert_eq!(request["source"]["kind"], json!("preset"));
        assert_eq!(
            request["source"]["preset"]["metadata"]["name"],
            json!("grid")
        );
        let recorded = read_json(&folder.join("outcome.json"));
        assert_eq!(recorded["preset"], json!("grid"));
        assert_eq!(recorded["last_report"]["success"], json!(true));
    });
}

#[test]
fn a_preset_step_that_fails_ends_the_preset_run_in_error() {
    on_blender(|blender| async move {
        fresh(&blender, PLANE).await;
        let output = tempfile::tempdir().unwrap();
        let mut preset = grid_preset();
        preset.steps.push(step(
            json!({"id": "ghost", "type": "GN_OPS", "payload": {"ops": [
                {"op": "ensure_target", "object": "Ghost", "modifier": "GN"}
            ]}}),
        ));
        let outcome = run_preset(&blender, preset, output.path()).await;
        assert_eq!(outcome.state, RunState::Error);
        let error = outcome.problem().unwrap().to_owned();
        assert!(
            error.starts_with("preset \"grid\": step \"ghost\" (GN_OPS) failed"),
            "{error}"
        );
        assert!(error.contains("no object named 'Ghost'"), "{error}");
        let folder = outcome.folder.unwrap();
        assert!(!folder.join("final.blend").exists());
        assert!(folder.join("steps.jsonl").is_file());
    });
}
