//! NODE_TREE: a declared tree reconciled by node id; re-applying it changes nothing.

use serde_json::{Value, json};
use viga_gn::ExecContext;
use viga_protocol::gn::GnStep;

use super::{PLANE, apply, fresh, on_blender, step, tree_ir};

fn tree(density: f64, with_noise: bool) -> GnStep {
    let mut nodes = vec![
        json!({"id": "points", "bl_idname": "GeometryNodeDistributePointsOnFaces", "location": [0.0, 0.0], "inputs": {"Density": density}}),
        json!({"id": "cube", "bl_idname": "GeometryNodeMeshCube", "inputs": {"Size": [0.1, 0.1, 0.1]}}),
        json!({"id": "instances", "bl_idname": "GeometryNodeInstanceOnPoints"}),
        json!({"id": "scale", "bl_idname": "ShaderNodeMath", "properties": {"operation": "MULTIPLY"}, "inputs": {"1": 0.5}}),
    ];
    let mut links = vec![
        json!({"from_node": "Group Input", "from_socket": "Geometry", "to_node": "points", "to_socket": "Mesh"}),
        json!({"from_node": "points", "from_socket": "Points", "to_node": "instances", "to_socket": "Points"}),
        json!({"from_node": "cube", "from_socket": "Mesh", "to_node": "instances", "to_socket": "Instance"}),
        json!({"from_node": "instances", "from_socket": "Instances", "to_node": "Group Output", "to_socket": "Geometry"}),
        json!({"from_node": "scale", "from_socket": 0, "to_node": "instances", "to_socket": "Scale"}),
    ];
    if with_noise {
        nodes.push(
            json!({"id": "noise", "bl_idname": "ShaderNodeTexNoise", "inputs": {"Scale": 4.0}}),
        );
        links.push(
            json!({"from_node": "noise", "from_socket": "Fac", "to_node": "scale", "to_socket": 0}),
        );
    }
    step(json!({"id": "tree", "type": "NODE_TREE", "payload": {
        "object": "Plane", "modifier": "Scatter",
        "interface": [{"name": "Density", "direction": "input", "socket_type": "NodeSocketFloat", "default": 2.0}],
        "nodes": nodes, "links": links
    }}))
}

fn changes(detail: &Value) -> Vec<(String, u64)> {
    detail
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, v)| v.as_u64() != Some(0))
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
        .collect()
}

#[test]
fn reapplying_the_same_tree_changes_nothing() {
    on_blender(|blender| async move {
        fresh(&blender, PLANE).await;
        let mut context = ExecContext::default();
        let first = apply(&blender, &mut context, &tree(5.0, true))
            .await
            .unwrap();
        assert_eq!(first.detail["nodes_added"], json!(5));
        // The default Geometry pass-through link of a new group is not declared.
        assert_eq!(first.detail["links_removed"], json!(1));
        assert_eq!(first.detail["links_added"], json!(6));
        let declared = tree_ir(&blender, "Scatter").await;
        let interface: Vec<&str> = declared["interface"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap())
            .collect();
        assert_eq!(interface, ["Geometry", "Geometry", "Density"]);

        let second = apply(&blender, &mut context, &tree(5.0, true))
            .await
            .unwrap();
        assert_eq!(changes(&second.detail), vec![]);
        assert!(
            second.message.contains("nothing changed"),
            "{}",
            second.message
        );
        assert_eq!(tree_ir(&blender, "Scatter").await, declared);
    });
}

#[test]
fn a_changed_declaration_updates_only_what_differs() {
    on_blender(|blender| async move {
        fresh(&blender, PLANE).await;
        let mut context = ExecContext::default();
        apply(&blender, &mut context, &tree(5.0, true))
            .await
            .unwrap();
        let updated = apply(&blender, &mut context, &tree(9.0, false))
            .await
            .unwrap();
        assert_eq!(
            changes(&updated.detail),
            // Removing the noise node takes its link with it.
            vec![
                ("nodes_removed".to_owned(), 1),
                ("nodes_updated".to_owned(), 1)
            ]
        );
        let ir = tree_ir(&blender, "Scatter").await;
        let points = ir["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["id"] == "points")
            .unwrap();
        assert_eq!(points["inputs"]["Density"], json!(9.0));
        assert!(
            ir["nodes"]
                .as_array()
                .unwrap()
                .iter()
                .all(|n| n["id"] != "noise")
        );
        let again = apply(&blender, &mut context, &tree(9.0, false))
            .await
            .unwrap();
        assert_eq!(changes(&again.detail), vec![]);
    });
}

#[test]
fn simulation_and_repeat_zones_are_paired() {
    on_blender(|blender| async move {
        fresh(&blender, PLANE).await;
        let zones = step(json!({"id": "zones", "type": "NODE_TREE", "payload": {
            "object": "Plane", "modifier": "Zones",
            "nodes": [
                {"id": "sim_in", "bl_idname": "GeometryNodeSimulationInput"},
                {"id": "sim_out", "bl_idname": "GeometryNodeSimulationOutput", "paired_with": "sim_in"},
                {"id": "rep_in", "bl_idname": "GeometryNodeRepeatInput", "inputs": {"Iterations": 3}},
                {"id": "rep_out", "bl_idname": "GeometryNodeRepeatOutput", "paired_with": "rep_in"}
            ],
            "links": [
                {"from_node": "Group Input", "from_socket": "Geometry", "to_node": "sim_in", "to_socket": "Geometry"},
                {"from_node": "sim_in", "from_socket": "Geometry", "to_node": "sim_out", "to_socket": "Geometry"},
                {"from_node": "sim_out", "from_socket": "Geometry", "to_node": "rep_in", "to_socket": "Geometry"},
                {"from_node": "rep_in", "from_socket": "Geometry", "to_node": "rep_out", "to_socket": "Geometry"},
                {"from_node": "rep_out", "from_socket": "Geometry", "to_node": "Group Output", "to_socket": "Geometry"}
            ]
        }}));
        let mut context = ExecContext::default();
        let first = apply(&blender, &mut context, &zones).await.unwrap();
        assert_eq!(first.detail["zones_paired"], json!(2));
        let ir = tree_ir(&blender, "Zones").await;
        let paired: Vec<(&str, &str)> = ir["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|n| Some((n["id"].as_str()?, n.get("paired_output")?.as_str()?)))
            .collect();
        assert_eq!(paired, [("rep_in", "rep_out"), ("sim_in", "sim_out")]);
        let again = apply(&blender, &mut context, &zones).await.unwrap();
        assert_eq!(changes(&again.detail), vec![]);
    });
}

#[test]
fn node_tree_errors_name_the_node() {
    on_blender(|blender| async move {
        fresh(&blender, PLANE).await;
        let cases = [
            (
                json!([{"id": "m", "bl_idname": "ShaderNodeMath", "properties": {"operation": "EXPLODE"}}]),
                "node 'm': property 'operation'",
            ),
            (
                json!([{"id": "m", "bl_idname": "ShaderNodeMath", "properties": {"nonsense": 1}}]),
                "has no property 'nonsense'",
            ),
            (
                json!([{"id": "c", "bl_idname": "GeometryNodeMeshCube", "inputs": {"Colour": 1}}]),
                "no input socket 'Colour'",
            ),
            (
                json!([{"id": "c", "bl_idname": "GeometryNodeMeshCube", "paired_with": "Group Input"}]),
                "must name a zone input node",
            ),
        ];
        for (nodes, needle) in cases {
            let bad = step(
                json!({"id": "t", "type": "NODE_TREE", "payload": {"object": "Plane", "modifier": "Bad", "nodes": nodes}}),
            );
            let err = apply(&blender, &mut ExecContext::default(), &bad)
                .await
                .unwrap_err()
                .to_string();
            assert!(err.contains(needle), "{needle}: {err}");
        }
    });
}
