//! The context snapshot is compact and deterministic; slices fit their budgets.

use serde_json::{Value, json};
use viga_gn::ExecContext;
use viga_gn::context::{self, ContextBudget, SliceKind};

use super::{PLANE, apply, fresh, on_blender, ops_step};

#[test]
fn the_snapshot_is_deterministic_and_names_what_the_spec_lists() {
    on_blender(|blender| async move {
        fresh(&blender, PLANE).await;
        let budget = ContextBudget::default();
        let first = context::snapshot(&blender, Some("Plane"), None, &budget)
            .await
            .unwrap();
        let second = context::snapshot(&blender, Some("Plane"), None, &budget)
            .await
            .unwrap();
        assert_eq!(first, second);
        let value: Value = serde_json::from_str(&first).unwrap();
        assert_eq!(value["blender_version"], json!("5.0.1"));
        assert_eq!(value["units"]["system"], json!("METRIC"));
        assert_eq!(value["frame_range"]["start"], json!(1));
        assert_eq!(value["active_object"]["name"], json!("Plane"));
        assert_eq!(value["modifiers"], json!([]));
        assert_eq!(value["node_groups"], json!([]));
        assert_eq!(value["active_node_group"], json!(null));
        let tiny = ContextBudget {
            snapshot_chars: 80,
            slice_chars: 80,
        };
        let cut = context::snapshot(&blender, Some("Plane"), None, &tiny)
            .await
            .unwrap();
        assert_eq!(cut.chars().count(), 80);
        assert!(cut.ends_with("[truncated to fit the context budget]"));
    });
}

#[test]
fn slices_shrink_their_lists_to_fit_the_budget() {
    on_blender(|blender| async move {
        fresh(&blender, PLANE).await;
        let mut ops = vec![json!({"op": "ensure_target", "object": "Plane", "modifier": "Big"})];
        for i in 0..60 {
            ops.push(
            json!({"op": "add_node", "id": format!("math{i:02}"), "bl_idname": "ShaderNodeMath"}),
        );
        }
        apply(
            &blender,
            &mut ExecContext::default(),
            &ops_step("big", json!(ops)),
        )
        .await
        .unwrap();

        let roomy = ContextBudget::default();
        let whole = context::slice(
            &blender,
            SliceKind::NodeTreeIr,
            Some("Plane"),
            Some("Big"),
            &roomy,
        )
        .await
        .unwrap();
        let whole: Value = serde_json::from_str(&whole).unwrap();
        assert_eq!(whole["nodes"].as_array().unwrap().len(), 62);
        assert!(whole.get("truncated").is_none());

        let tight = ContextBudget {
            snapshot_chars: 4000,
            slice_chars: 3000,
        };
        let text = context::slice(
            &blender,
            SliceKind::NodeTreeIr,
            Some("Plane"),
            Some("Big"),
            &tight,
        )
        .await
        .unwrap();
        assert!(text.chars().count() <= 3000, "{}", text.len());
        let part: Value = serde_json::from_str(&text).unwrap();
        let shown = part["nodes"].as_array().unwrap().len();
        assert!(shown < 62);
        assert_eq!(part["truncated"]["nodes"], json!(62 - shown));

        for kind in [
            SliceKind::ModifierStack,
            SliceKind::SceneSummary,
            SliceKind::GeometryStats,
        ] {
            let text = context::slice(&blender, kind, Some("Plane"), None, &roomy)
                .await
                .unwrap();
            assert!(
                serde_json::from_str::<Value>(&text).is_ok(),
                "{kind:?}: {text}"
            );
        }
        let stats: Value = serde_json::from_str(
            &context::slice(
                &blender,
                SliceKind::GeometryStats,
                Some("Plane"),
                None,
                &roomy,
            )
            .await
            .unwrap(),
        )
        .unwrap();
        assert_eq!(
            stats["faces"],
            json!(1),
            "the Big group passes the plane through: {stats}"
        );
    });
}

/// A group with a Float input besides Geometry, a noise texture feeding a Set Position's
/// offset, and the geometry through it.
async fn offset_by_noise(blender: &viga_gn::GnBlender) {
    let tree = super::step(json!({"id": "tree", "type": "NODE_TREE", "payload": {
        "object": "Plane", "modifier": "Wobble",
        "interface": [{"name": "Strength", "direction": "input", "socket_type": "NodeSocketFloat", "default": 0.5}],
        "nodes": [
            {"id": "noise", "bl_idname": "ShaderNodeTexNoise"},
            {"id": "offset", "bl_idname": "GeometryNodeSetPosition"}
        ],
        "links": [
            {"from_node": "Group Input", "from_socket": "Geometry", "to_node": "offset", "to_socket": "Geometry"},
            {"from_node": "noise", "from_socket": "Color", "to_node": "offset", "to_socket": "Offset"},
            {"from_node": "offset", "from_socket": "Geometry", "to_node": "Group Output", "to_socket": "Geometry"}
        ]
    }}));
    apply(blender, &mut ExecContext::default(), &tree)
        .await
        .unwrap();
}

#[test]
fn the_snapshot_summarises_the_active_group_with_links_and_sockets() {
    on_blender(|blender| async move {
        fresh(&blender, PLANE).await;
        offset_by_noise(&blender).await;
        let text = context::snapshot(&blender, Some("Plane"), None, &ContextBudget::default())
            .await
            .unwrap();
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            value["active_node_group"],
            json!({
                "modifier": "Wobble",
                "group": "Wobble",
                "inputs": [["Geometry", "NodeSocketGeometry"], ["Strength", "NodeSocketFloat"]],
                "outputs": [["Geometry", "NodeSocketGeometry"]],
                "nodes": {
                    "Group Input": "NodeGroupInput",
                    "Group Output": "NodeGroupOutput",
                    "noise": "ShaderNodeTexNoise",
                    "offset": "GeometryNodeSetPosition"
                },
                "links": [
                    ["Group Input", "Geometry", "offset", "Geometry"],
                    ["noise", "Color", "offset", "Offset"],
                    ["offset", "Geometry", "Group Output", "Geometry"]
                ]
            })
        );
        // Named, the modifier is found even when it is not the active one.
        let named = context::snapshot(
            &blender,
            Some("Plane"),
            Some("Wobble"),
            &ContextBudget::default(),
        )
        .await
        .unwrap();
        assert_eq!(named, text);
    });
}

#[test]
fn the_node_tree_summary_slice_fits_its_budget() {
    on_blender(|blender| async move {
        fresh(&blender, PLANE).await;
        offset_by_noise(&blender).await;
        let roomy = ContextBudget::default();
        let text = context::slice(
            &blender,
            SliceKind::NodeTreeSummary,
            Some("Plane"),
            None,
            &roomy,
        )
        .await
        .unwrap();
        let summary: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(summary["modifier"], json!("Wobble"));
        assert_eq!(summary["links"].as_array().unwrap().len(), 3);
        assert!(summary.get("truncated").is_none());

        let mut ops = vec![json!({"op": "ensure_target", "object": "Plane", "modifier": "Wobble"})];
        for i in 0..80 {
            ops.push(json!({"op": "add_node", "id": format!("math{i:02}"), "bl_idname": "ShaderNodeMath"}));
        }
        apply(
            &blender,
            &mut ExecContext::default(),
            &ops_step("many", json!(ops)),
        )
        .await
        .unwrap();
        let tight = ContextBudget {
            snapshot_chars: 1500,
            slice_chars: 2000,
        };
        let text = context::slice(
            &blender,
            SliceKind::NodeTreeSummary,
            Some("Plane"),
            None,
            &tight,
        )
        .await
        .unwrap();
        assert!(text.chars().count() <= 2000, "{}", text.len());
        let part: Value = serde_json::from_str(&text).unwrap();
        let shown = part["nodes"].as_object().unwrap().len();
        assert!(shown < 84);
        assert_eq!(part["truncated"]["nodes"], json!(84 - shown));
        // The snapshot shortens the same lists to its own, smaller budget and stays JSON.
        let snapshot = context::snapshot(&blender, Some("Plane"), None, &tight)
            .await
            .unwrap();
        assert!(snapshot.chars().count() <= 1500);
        let snapshot: Value = serde_json::from_str(&snapshot).unwrap();
        assert!(
            snapshot["active_node_group"]["truncated"]["nodes"]
                .as_u64()
                .unwrap()
                > 0
        );
    });
}
