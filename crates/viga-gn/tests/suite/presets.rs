//! A run saved as a preset, stored, exported, imported and applied to a fresh scene gives
//! the same tree.

use serde_json::json;
use viga_gn::{ExecutorRegistry, GateConfig, Preset, PresetStore, PythonPolicy, apply_preset};

use super::{PLANE, fresh, on_blender, step, tree_ir};

#[test]
fn a_preset_applies_the_same_tree_again() {
    on_blender(|blender| async move {
        let tree = step(json!({"id": "tree", "type": "NODE_TREE", "payload": {
            "object": "Plane", "modifier": "Grid",
            "nodes": [{"id": "grid", "bl_idname": "GeometryNodeMeshGrid", "inputs": {"Vertices X": 5}}],
            "links": [{"from_node": "grid", "from_socket": "Mesh", "to_node": "Group Output", "to_socket": "Geometry"}]
        }}));
        let registry = ExecutorRegistry::with_defaults(PythonPolicy::safe());
        let dir = tempfile::tempdir().unwrap();
        let store = PresetStore::new(dir.path());
        let mut preset = Preset::new("grid", "a 5x3 grid", vec![tree]);
        preset.metadata.object = Some("Plane".into());
        store.save(&preset).unwrap();
        let exported = dir.path().join("exported.json");
        store.export("grid", &exported).unwrap();
        let loaded = Preset::read(&exported).unwrap();
        assert_eq!(loaded, preset);

        fresh(&blender, PLANE).await;
        let applied = apply_preset(&loaded, &blender, &registry, &GateConfig::default())
            .await
            .unwrap();
        assert!(applied.gates.report.success, "{:?}", applied.gates.report);
        let first = tree_ir(&blender, "Grid").await;
        fresh(&blender, PLANE).await;
        apply_preset(&loaded, &blender, &registry, &GateConfig::default())
            .await
            .unwrap();
        assert_eq!(tree_ir(&blender, "Grid").await, first);
        assert_eq!(first["nodes"][2]["inputs"]["Vertices X"], json!(5));
    });
}
