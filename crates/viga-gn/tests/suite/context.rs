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
        let first = context::snapshot(&blender, Some("Plane"), &budget)
            .await
            .unwrap();
        let second = context::snapshot(&blender, Some("Plane"), &budget)
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
        let tiny = ContextBudget {
            snapshot_chars: 80,
            slice_chars: 80,
        };
        let cut = context::snapshot(&blender, Some("Plane"), &tiny)
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
