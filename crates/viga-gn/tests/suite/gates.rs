//! Each of the five gates fails on a broken scene and passes once it is repaired.

use serde_json::json;
use viga_gn::{Baseline, ExecContext, GateConfig, GnBlender, check_gates};
use viga_protocol::gn::GateName;

use super::{PLANE, apply, fresh, on_blender, ops_step, raw};

/// A Plane with a working "GN" modifier (Group Input straight to Group Output), and the
/// baseline taken before it was made.
async fn working_target(blender: &GnBlender) -> (Baseline, ExecContext) {
    fresh(blender, PLANE).await;
    let baseline = Baseline::take(blender).await.unwrap();
    let mut context = ExecContext::default();
    let ops = json!([{"op": "ensure_target", "object": "Plane", "modifier": "GN"}]);
    apply(blender, &mut context, &ops_step("t", ops))
        .await
        .unwrap();
    (baseline, context)
}

async fn failed(
    blender: &GnBlender,
    baseline: &Baseline,
    context: &ExecContext,
) -> (Vec<GateName>, Vec<String>) {
    let check = check_gates(blender, baseline, context, &GateConfig::default())
        .await
        .unwrap();
    assert_eq!(check.report.success, check.report.failed_gates.is_empty());
    (check.report.failed_gates, check.report.messages)
}

async fn edit(blender: &GnBlender, context: &mut ExecContext, ops: serde_json::Value) {
    apply(blender, context, &ops_step("e", ops)).await.unwrap();
}

#[test]
fn a_new_target_passes_every_gate() {
    on_blender(|blender| async move {
        let (baseline, context) = working_target(&blender).await;
        // The target's own new modifier and group are expected, not "unexpected".
        assert_eq!(
            failed(&blender, &baseline, &context).await,
            (vec![], vec![])
        );
        // With no target at all, the structural gates cannot pass.
        let (gates, messages) = failed(&blender, &baseline, &ExecContext::default()).await;
        assert!(gates.contains(&GateName::SingleGroupOutput), "{gates:?}");
        assert!(
            messages
                .iter()
                .any(|m| m.contains("no Geometry Nodes target yet")),
            "{messages:?}"
        );
    });
}

#[test]
fn single_group_output_fails_then_passes() {
    on_blender(|blender| async move {
        let (baseline, mut context) = working_target(&blender).await;
        edit(
            &blender,
            &mut context,
            json!([{"op": "add_node", "id": "Second Output", "bl_idname": "NodeGroupOutput"}]),
        )
        .await;
        let (gates, messages) = failed(&blender, &baseline, &context).await;
        assert_eq!(gates, [GateName::SingleGroupOutput]);
        assert!(
            messages[0].contains("has 2 Group Output nodes"),
            "{messages:?}"
        );
        edit(
            &blender,
            &mut context,
            json!([{"op": "ensure_single_group_io"}]),
        )
        .await;
        assert_eq!(failed(&blender, &baseline, &context).await.0, []);
    });
}

#[test]
fn output_connected_fails_then_passes() {
    on_blender(|blender| async move {
        let (baseline, mut context) = working_target(&blender).await;
        let link = json!({"from_node": "Group Input", "from_socket": "Geometry", "to_node": "Group Output", "to_socket": "Geometry"});
        let mut unlink = link.clone();
        unlink["op"] = json!("unlink");
        edit(&blender, &mut context, json!([unlink])).await;
        let (gates, messages) = failed(&blender, &baseline, &context).await;
        assert_eq!(gates, [GateName::OutputConnected]);
        assert!(
            messages[0].contains("nothing valid is linked"),
            "{messages:?}"
        );
        let mut relink = link;
        relink["op"] = json!("link");
        edit(&blender, &mut context, json!([relink])).await;
        assert_eq!(failed(&blender, &baseline, &context).await.0, []);
    });
}

#[test]
fn no_modifier_error_fails_then_passes() {
    on_blender(|blender| async move {
        let (baseline, mut context) = working_target(&blender).await;
        // Reading the modifier's own object is a dependency cycle Blender reports as an error.
        edit(&blender, &mut context, json!([
            {"op": "add_node", "id": "self", "bl_idname": "GeometryNodeObjectInfo"},
            {"op": "set_input", "node": "self", "socket": "Object", "value": "Plane"},
            {"op": "link", "from_node": "self", "from_socket": "Geometry", "to_node": "Group Output", "to_socket": 0}
        ])).await;
        let (gates, messages) = failed(&blender, &baseline, &context).await;
        assert_eq!(gates, [GateName::NoModifierError]);
        assert!(
            messages[0].contains("Geometry cannot be retrieved"),
            "{messages:?}"
        );
        edit(&blender, &mut context, json!([
            {"op": "link", "from_node": "Group Input", "from_socket": "Geometry", "to_node": "Group Output", "to_socket": 0},
            {"op": "cleanup_unused"}
        ])).await;
        assert_eq!(failed(&blender, &baseline, &context).await.0, []);
    });
}

#[test]
fn no_unexpected_new_modifier_fails_then_passes() {
    on_blender(|blender| async move {
        let (baseline, context) = working_target(&blender).await;
        raw(
            &blender,
            "import bpy\nbpy.data.objects['Plane'].modifiers.new('Smooth', 'SUBSURF')\n",
        )
        .await;
        let (gates, messages) = failed(&blender, &baseline, &context).await;
        assert_eq!(gates, [GateName::NoUnexpectedNewModifier]);
        assert!(
            messages[0].contains("unexpected new modifier 'Smooth' (SUBSURF) on 'Plane'"),
            "{messages:?}"
        );
        raw(
        &blender,
        "import bpy\np = bpy.data.objects['Plane']\np.modifiers.remove(p.modifiers['Smooth'])\n",
    )
    .await;
        assert_eq!(failed(&blender, &baseline, &context).await.0, []);
    });
}

#[test]
fn no_unexpected_new_node_group_fails_then_passes() {
    on_blender(|blender| async move {
        let (baseline, context) = working_target(&blender).await;
        raw(
            &blender,
            "import bpy\nbpy.data.node_groups.new('Leftover', 'GeometryNodeTree')\n",
        )
        .await;
        let (gates, messages) = failed(&blender, &baseline, &context).await;
        assert_eq!(gates, [GateName::NoUnexpectedNewNodeGroup]);
        assert!(messages[0].contains("'Leftover'"), "{messages:?}");
        raw(
            &blender,
            "import bpy\nbpy.data.node_groups.remove(bpy.data.node_groups['Leftover'])\n",
        )
        .await;
        assert_eq!(failed(&blender, &baseline, &context).await.0, []);
    });
}

#[test]
fn gates_that_are_not_required_only_warn() {
    on_blender(|blender| async move {
        let (baseline, context) = working_target(&blender).await;
        raw(
            &blender,
            "import bpy\nbpy.data.node_groups.new('Leftover', 'GeometryNodeTree')\n",
        )
        .await;
        let mut config = GateConfig::default();
        config.required.remove(&GateName::NoUnexpectedNewNodeGroup);
        let check = check_gates(&blender, &baseline, &context, &config)
            .await
            .unwrap();
        assert!(check.report.success);
        assert!(!check.results[&GateName::NoUnexpectedNewNodeGroup].passed);
        assert_eq!(check.advisory.len(), 1);
        assert!(check.advisory[0].starts_with("NO_UNEXPECTED_NEW_NODE_GROUP: "));
    });
}
