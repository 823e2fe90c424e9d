//! GN_OPS: every op on real Blender, in order, deterministic and idempotent.

use serde_json::json;
use viga_gn::ExecContext;

use super::{PLANE, apply, changed_flags, fresh, on_blender, ops_step, raw, tree_ir};

fn scatter_ops() -> serde_json::Value {
    json!([
        {"op": "ensure_target", "object": "Plane", "modifier": "Scatter"},
        {"op": "ensure_single_group_io"},
        {"op": "add_node", "id": "points", "bl_idname": "GeometryNodeDistributePointsOnFaces", "location": [0.0, 0.0]},
        {"op": "add_node", "id": "cube", "bl_idname": "GeometryNodeMeshCube"},
        {"op": "add_node", "id": "instances", "bl_idname": "GeometryNodeInstanceOnPoints"},
        {"op": "link", "from_node": "Group Input", "from_socket": "Geometry", "to_node": "points", "to_socket": "Mesh"},
        {"op": "link", "from_node": "points", "from_socket": "Points", "to_node": "instances", "to_socket": "Points"},
        {"op": "link", "from_node": "cube", "from_socket": "Mesh", "to_node": "instances", "to_socket": "Instance"},
        {"op": "link", "from_node": "instances", "from_socket": 0, "to_node": "Group Output", "to_socket": 0},
        {"op": "set_input", "node": "points", "socket": "Density", "value": 3.5},
        {"op": "set_input", "node": "cube", "socket": "Size", "value": [0.2, 0.2, 0.2]}
    ])
}

#[test]
fn ops_apply_in_order_and_a_second_application_changes_nothing() {
    on_blender(|blender| async move {
        fresh(&blender, PLANE).await;
        let mut context = ExecContext::default();
        let first = apply(&blender, &mut context, &ops_step("a", scatter_ops()))
            .await
            .unwrap();
        // ensure_single_group_io finds the new group already has one input and one output.
        let mut expected = vec![true; 11];
        expected[1] = false;
        assert_eq!(changed_flags(&first), expected);
        let target = context.current.clone().unwrap();
        assert_eq!(
            (
                target.object.as_str(),
                target.modifier.as_str(),
                target.group.as_str()
            ),
            ("Plane", "Scatter", "Scatter")
        );
        let before = tree_ir(&blender, "Scatter").await;

        let again = apply(&blender, &mut context, &ops_step("b", scatter_ops()))
            .await
            .unwrap();
        assert_eq!(changed_flags(&again), vec![false; 11]);
        assert_eq!(tree_ir(&blender, "Scatter").await, before);

        let nodes: Vec<&str> = before["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["id"].as_str().unwrap())
            .collect();
        assert_eq!(
            nodes,
            ["Group Input", "Group Output", "cube", "instances", "points"]
        );
        assert_eq!(before["links"].as_array().unwrap().len(), 4);
        let points = &before["nodes"][4];
        assert_eq!(points["inputs"]["Density"], json!(3.5));
        assert_eq!(before["nodes"][2]["inputs"]["Size"], json!([0.2, 0.2, 0.2]));
    });
}

#[test]
fn unlink_remove_node_and_cleanup_unused() {
    on_blender(|blender| async move {
        fresh(&blender, PLANE).await;
        let mut context = ExecContext::default();
        apply(&blender, &mut context, &ops_step("a", scatter_ops()))
            .await
            .unwrap();
        let edits = json!([
            {"op": "unlink", "from_node": "cube", "from_socket": "Mesh", "to_node": "instances", "to_socket": "Instance"},
            {"op": "unlink", "from_node": "cube", "from_socket": "Mesh", "to_node": "instances", "to_socket": "Instance"},
            {"op": "add_node", "id": "stray", "bl_idname": "ShaderNodeMath"},
            {"op": "remove_node", "id": "stray"},
            {"op": "remove_node", "id": "stray"},
            {"op": "cleanup_unused"},
            {"op": "cleanup_unused"}
        ]);
        let outcome = apply(&blender, &mut context, &ops_step("b", edits))
            .await
            .unwrap();
        assert_eq!(
            changed_flags(&outcome),
            [true, false, true, true, false, true, false]
        );
        let ir = tree_ir(&blender, "Scatter").await;
        let nodes: Vec<&str> = ir["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["id"].as_str().unwrap())
            .collect();
        // The cube no longer feeds the output, so cleanup removed it.
        assert_eq!(
            nodes,
            ["Group Input", "Group Output", "instances", "points"]
        );
        assert_eq!(ir["links"].as_array().unwrap().len(), 3);
    });
}

#[test]
fn ensure_single_group_io_repairs_a_group() {
    on_blender(|blender| async move {
        fresh(&blender, PLANE).await;
        let mut context = ExecContext::default();
        let target = json!([{"op": "ensure_target", "object": "Plane", "modifier": "GN", "group": "Repair"}]);
        apply(&blender, &mut context, &ops_step("a", target))
            .await
            .unwrap();
        raw(
            &blender,
            "import bpy\ng = bpy.data.node_groups['Repair']\ng.nodes.new('NodeGroupOutput')\ng.nodes.remove(g.nodes['Group Input'])\n",
        )
        .await;
        let repair = json!([{"op": "ensure_single_group_io"}, {"op": "ensure_single_group_io"}]);
        let outcome = apply(&blender, &mut context, &ops_step("b", repair))
            .await
            .unwrap();
        assert_eq!(changed_flags(&outcome), [true, false]);
        let ir = tree_ir(&blender, "GN").await;
        let kinds: Vec<&str> = ir["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["bl_idname"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["NodeGroupInput", "NodeGroupOutput"]);
    });
}

#[test]
fn set_input_resolves_datablocks_by_name() {
    on_blender(|blender| async move {
        fresh(
            &blender,
            &format!(
                "{PLANE}bpy.ops.mesh.primitive_cube_add()\nbpy.context.object.name = 'Rock'\n"
            ),
        )
        .await;
        let mut context = ExecContext::default();
        let ops = json!([
            {"op": "ensure_target", "object": "Plane", "modifier": "GN"},
            {"op": "add_node", "id": "info", "bl_idname": "GeometryNodeObjectInfo"},
            {"op": "set_input", "node": "info", "socket": "Object", "value": "Rock"},
            {"op": "set_input", "node": "info", "socket": "Object", "value": "Rock"}
        ]);
        let outcome = apply(&blender, &mut context, &ops_step("a", ops))
            .await
            .unwrap();
        assert_eq!(changed_flags(&outcome), [true, true, true, false]);
        let ir = tree_ir(&blender, "GN").await;
        assert_eq!(ir["nodes"][2]["inputs"]["Object"], json!("Rock"));
    });
}

#[test]
fn op_errors_say_what_is_wrong() {
    on_blender(|blender| async move {
        fresh(&blender, PLANE).await;
        let cases = [
            (
                json!([{"op": "add_node", "id": "x", "bl_idname": "GeometryNodeMeshCube"}]),
                "start the ops with ensure_target",
            ),
            (
                json!([{"op": "ensure_target", "object": "Nope", "modifier": "GN"}]),
                "no object named 'Nope'",
            ),
            (
                json!([{"op": "ensure_target", "object": "Plane", "modifier": "GN"},
                    {"op": "add_node", "id": "x", "bl_idname": "GeometryNodeNoSuchThing"}]),
                "cannot add a node of type 'GeometryNodeNoSuchThing'",
            ),
            (
                json!([{"op": "ensure_target", "object": "Plane", "modifier": "GN"},
                    {"op": "add_node", "id": "c", "bl_idname": "GeometryNodeMeshCube"},
                    {"op": "link", "from_node": "c", "from_socket": "Volume", "to_node": "Group Output", "to_socket": 0}]),
                "has no output socket 'Volume'",
            ),
            (
                json!([{"op": "ensure_target", "object": "Plane", "modifier": "GN"},
                    {"op": "add_node", "id": "m", "bl_idname": "ShaderNodeMath"},
                    {"op": "link", "from_node": "Group Input", "from_socket": "Geometry", "to_node": "m", "to_socket": 0}]),
                "the socket types do not connect",
            ),
            (
                json!([{"op": "ensure_target", "object": "Plane", "modifier": "GN"},
                    {"op": "add_node", "id": "c", "bl_idname": "GeometryNodeMeshCube"},
                    {"op": "add_node", "id": "c", "bl_idname": "ShaderNodeMath"}]),
                "remove_node it first",
            ),
            (
                json!([{"op": "ensure_target", "object": "Plane", "modifier": "GN"},
                    {"op": "set_input", "node": "Group Output", "socket": 9, "value": 1}]),
                "index 9 is out of range",
            ),
        ];
        for (ops, needle) in cases {
            let mut context = ExecContext::default();
            let err = apply(&blender, &mut context, &ops_step("a", ops.clone()))
                .await
                .unwrap_err()
                .to_string();
            assert!(err.contains(needle), "{ops}: {err}");
            assert!(err.starts_with("op "), "the failing op is named: {err}");
        }
    });
}
