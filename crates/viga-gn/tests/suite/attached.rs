//! An attached run's result coming into a person's scene (`viga_gn::attached` and the
//! bridge's `import_gn_result`), on real Blender. The shared worker plays both parts: it is
//! the run's worker while the result is made and saved, and the person's Blender when the
//! result comes in (the command is the same in every bridge mode).

use std::collections::BTreeMap;
use std::path::Path;

use viga_blender::{BlenderCommands as _, TransportError};
use viga_gn::attached::{SceneCopy, import_result};
use viga_gn::{GnBlender, GnError, Target};
use viga_protocol::bridge::FaultKind;
use viga_protocol::gn::{DatablockKind, DatablockRef, GnInputValue, GnModifierResult, GnResult};

use super::{fresh, on_blender, raw};

/// A person's scene: a plane, a cube with a node group "Keep" of its own.
const PERSON: &str = r#"import bpy
bpy.ops.mesh.primitive_plane_add(size=4.0)
bpy.context.object.name = 'Plane'
bpy.ops.mesh.primitive_cube_add(location=(3, 0, 0))
cube = bpy.context.object
cube.name = 'UserCube'
keep = bpy.data.node_groups.new('Keep', 'GeometryNodeTree')
keep.interface.new_socket('Geometry', in_out='INPUT', socket_type='NodeSocketGeometry')
keep.interface.new_socket('Geometry', in_out='OUTPUT', socket_type='NodeSocketGeometry')
group_in = keep.nodes.new('NodeGroupInput')
group_out = keep.nodes.new('NodeGroupOutput')
keep.links.new(group_in.outputs[0], group_out.inputs[0])
group_out.location.x = 1.0
cube.modifiers.new('Keep', 'NODES').node_group = keep
"#;

/// What a run makes of it: a new group "Scatter" on the plane that points at the cube, with
/// a Density and an Object input set on the modifier, and a change to "Keep".
const RUN: &str = r#"import bpy
plane = bpy.data.objects['Plane']
tree = bpy.data.node_groups.new('Scatter', 'GeometryNodeTree')
tree.interface.new_socket('Geometry', in_out='INPUT', socket_type='NodeSocketGeometry')
tree.interface.new_socket('Geometry', in_out='OUTPUT', socket_type='NodeSocketGeometry')
density = tree.interface.new_socket('Density', in_out='INPUT', socket_type='NodeSocketFloat')
target = tree.interface.new_socket('Target', in_out='INPUT', socket_type='NodeSocketObject')
group_in = tree.nodes.new('NodeGroupInput')
group_out = tree.nodes.new('NodeGroupOutput')
info = tree.nodes.new('GeometryNodeObjectInfo')
info.name = 'info'
info.inputs['Object'].default_value = bpy.data.objects['UserCube']
tree.links.new(group_in.outputs[0], group_out.inputs[0])
modifier = plane.modifiers.new('Scatter', 'NODES')
modifier.node_group = tree
modifier[density.identifier] = 7.5
modifier[target.identifier] = bpy.data.objects['UserCube']
bpy.data.node_groups['Keep'].nodes['Group Output'].location.x = 999.0
"#;

/// The scene's datablocks, by collection, as one line: what must not change when a result
/// is refused.
async fn datablocks(blender: &GnBlender) -> String {
    let code = "import bpy\n\
        skip = {'window_managers', 'screens', 'workspaces'}\n\
        names = {p.identifier: sorted(b.name for b in getattr(bpy.data, p.identifier))\n\
                 for p in bpy.data.bl_rna.properties if p.type == 'COLLECTION' and p.identifier not in skip}\n\
        print(sorted((k, v) for k, v in names.items() if v))\n";
    let result = blender.transport().execute(code, None, None).await.unwrap();
    assert!(result.succeeded(), "{result:?}");
    result.stdout
}

async fn print(blender: &GnBlender, expression: &str) -> String {
    let code = format!("import bpy\nprint({expression})\n");
    let result = blender
        .transport()
        .execute(&code, None, None)
        .await
        .unwrap();
    assert!(result.succeeded(), "{result:?}");
    result.stdout.trim().to_owned()
}

fn target(object: &str, modifier: &str) -> Target {
    Target {
        object: object.into(),
        modifier: modifier.into(),
        group: modifier.into(),
    }
}

/// Saves the worker's scene as `path`.
async fn save(blender: &GnBlender, path: &Path) {
    blender
        .transport()
        .save_blend(&path.to_string_lossy())
        .await
        .unwrap();
}

/// Opens `path` as the person's scene.
async fn open_person(blender: &GnBlender, path: &Path) {
    blender
        .transport()
        .load_blend(&path.to_string_lossy())
        .await
        .unwrap();
}

#[test]
fn a_result_comes_in_as_one_undo_step_and_replaces_groups_of_its_name() {
    on_blender(|blender| async move {
        let dir = tempfile::tempdir().unwrap();
        fresh(&blender, PERSON).await;
        let base = dir.path().join("base.blend");
        let copy = SceneCopy::open(blender.transport().as_ref(), &blender, &base)
            .await
            .unwrap();
        raw(&blender, RUN).await;
        let result = copy
            .result(&blender, &[target("Plane", "Scatter")])
            .await
            .unwrap();
        assert_eq!(result.node_groups, ["Keep", "Scatter"], "{result:?}");
        let inputs = &result.modifiers[0].inputs;
        assert!(
            inputs.values().any(|v| *v == GnInputValue::Number(7.5)),
            "{inputs:?}"
        );
        let cube = GnInputValue::Datablock(DatablockRef {
            kind: DatablockKind::Object,
            name: Some("UserCube".into()),
        });
        assert!(inputs.values().any(|v| *v == cube), "{inputs:?}");
        let final_blend = dir.path().join("final.blend");
        save(&blender, &final_blend).await;

        open_person(&blender, &base).await;
        let before = datablocks(&blender).await;
        let imported = import_result(
            blender.transport().as_ref(),
            &final_blend,
            &result,
            "viga: scatter",
        )
        .await
        .unwrap();
        assert_eq!(imported.replaced, ["Keep"]);
        assert_eq!(imported.modifiers, ["Plane/Scatter"]);
        // The scene's own cube stays the cube the groups use: no copy of it came in, nor a
        // library entry.
        let after = datablocks(&blender).await;
        assert!(
            !after.contains("UserCube.001") && !after.contains("libraries"),
            "{after}"
        );
        assert_eq!(
            print(&blender, "bpy.data.node_groups['Scatter'].nodes['info'].inputs['Object'].default_value == bpy.data.objects['UserCube']").await,
            "True"
        );
        assert_eq!(
            print(&blender, "(bpy.data.node_groups['Keep'].nodes['Group Output'].location.x, bpy.data.objects['UserCube'].modifiers['Keep'].node_group.name)").await,
            "(999.0, 'Keep')"
        );
        assert_eq!(
            print(&blender, "sorted((k, v if isinstance(v, (float, str, bool)) else v.name) for k, v in bpy.data.objects['Plane'].modifiers['Scatter'].items() if not k.endswith(('_use_attribute', '_attribute_name')))").await,
            "[('Socket_2', 7.5), ('Socket_3', 'UserCube')]"
        );
        blender.transport().undo().await.unwrap();
        assert_eq!(
            datablocks(&blender).await,
            before,
            "one undo takes it all back"
        );
        assert_eq!(
            print(
                &blender,
                "bpy.data.node_groups['Keep'].nodes['Group Output'].location.x"
            )
            .await,
            "1.0"
        );
    });
}

/// A result is refused, and the scene keeps every datablock it had, when its file carries
/// what a person's scene must not take in or it does not fit the scene.
#[test]
fn a_result_that_carries_code_or_does_not_fit_is_refused_and_nothing_changes() {
    on_blender(|blender| async move {
        let dir = tempfile::tempdir().unwrap();
        let library = dir.path().join("library.blend");
        fresh(
            &blender,
            "import bpy\nbpy.data.node_groups.new('Linked', 'GeometryNodeTree').use_fake_user = True\n",
        )
        .await;
        save(&blender, &library).await;
        fresh(&blender, PERSON).await;
        let base = dir.path().join("base.blend");
        save(&blender, &base).await;
        raw(&blender, RUN).await;
        let plain = dir.path().join("plain.blend");
        save(&blender, &plain).await;
        let files = [
            (
                "text",
                "import bpy\nframe = bpy.data.node_groups['Scatter'].nodes.new('NodeFrame')\n\
                 frame.text = bpy.data.texts.new('evil.py')\nframe.text.from_string('print(1)')\n\
                 frame.text.use_module = True\n",
            ),
            (
                "driver",
                "import bpy\ncurve = bpy.data.node_groups['Scatter'].driver_add('nodes[\"info\"].location', 0)\n\
                 curve.driver.type = 'SCRIPTED'\ncurve.driver.expression = \"__import__('os').getpid()\"\n",
            ),
            (
                "linked",
                &format!(
                    "import bpy\nwith bpy.data.libraries.load({:?}, link=True) as (src, dst):\n    dst.node_groups = ['Linked']\n\
                     node = bpy.data.node_groups['Scatter'].nodes.new('GeometryNodeGroup')\nnode.node_tree = dst.node_groups[0]\n",
                    library.display().to_string()
                ),
            ),
        ];
        let mut saved = Vec::new();
        for (name, code) in files {
            open_person(&blender, &plain).await;
            raw(&blender, code).await;
            let path = dir.path().join(format!("{name}.blend"));
            save(&blender, &path).await;
            saved.push(path);
        }
        let fits = |inputs: BTreeMap<String, GnInputValue>, object: &str| GnResult {
            node_groups: vec!["Scatter".into()],
            modifiers: vec![GnModifierResult {
                object: object.into(),
                modifier: "Scatter".into(),
                node_group: "Scatter".into(),
                inputs,
            }],
        };
        let plain_result = fits(BTreeMap::new(), "Plane");
        let cases = [
            (&saved[0], plain_result.clone(), "Text 'evil.py'"),
            (&saved[1], plain_result.clone(), "driver that needs Python"),
            (&saved[2], plain_result.clone(), "linked from another file"),
            (
                &plain,
                fits(
                    BTreeMap::from([("Socket_99".into(), GnInputValue::Integer(1))]),
                    "Plane",
                ),
                "has no input 'Socket_99'",
            ),
            (
                &plain,
                fits(
                    BTreeMap::from([("Socket_2".into(), GnInputValue::Text("x".into()))]),
                    "Plane",
                ),
                "must be a number",
            ),
            (&plain, fits(BTreeMap::new(), "Ghost"), "no object 'Ghost'"),
            (
                &plain,
                GnResult {
                    node_groups: vec!["Nowhere".into()],
                    modifiers: Vec::new(),
                },
                "has no node group 'Nowhere'",
            ),
        ];
        for (file, result, needle) in cases {
            open_person(&blender, &base).await;
            let before = datablocks(&blender).await;
            let err = import_result(blender.transport().as_ref(), file, &result, "viga: x")
                .await
                .unwrap_err();
            let GnError::Blender {
                source: TransportError::Refused { kind, message, .. },
                ..
            } = &err
            else {
                panic!("{needle}: not a refusal: {err}");
            };
            assert_eq!(*kind, FaultKind::ResultRefused, "{needle}: {message}");
            assert!(message.contains(needle), "{needle}: {message}");
            assert_eq!(
                datablocks(&blender).await,
                before,
                "{needle}: the scene changed"
            );
        }
        // The same result without what was refused comes in.
        open_person(&blender, &base).await;
        import_result(
            blender.transport().as_ref(),
            &plain,
            &plain_result,
            "viga: x",
        )
        .await
        .unwrap();
    });
}
