//! A scene run's result coming into a person's scene as data (`viga_domain_scene::attached` and the
//! bridge's `scene_fingerprints` and `import_scene_result`), on real Blender. One worker
//! plays both parts: the run's worker while the result is made and saved, and the person's
//! Blender when it comes in (the command is the same in every bridge mode).

use std::path::Path;

use viga_blender::{BlenderCommands as _, BlenderTransport, TransportError};
use viga_core::CoreError;
use viga_domain_scene::attached::{PreparedResult, fingerprint_scene, import_result, plan_result};
use viga_protocol::bridge::{FaultKind, SceneReset};

use viga_testkit::scene::SCENE_DUMP;

use super::blender;

async fn run(blender: &dyn BlenderTransport, code: &str) -> String {
    let result = blender.execute(code, None, None).await.unwrap();
    assert!(result.succeeded(), "{result:?}");
    result.stdout.trim().to_owned()
}

async fn fresh(blender: &dyn BlenderTransport, code: &str) {
    let result = blender
        .execute(code, Some(SceneReset::Factory), None)
        .await
        .unwrap();
    assert!(result.succeeded(), "{result:?}");
}

async fn dump(blender: &dyn BlenderTransport) -> serde_json::Value {
    serde_json::from_str(&run(blender, SCENE_DUMP).await).unwrap()
}

async fn save(blender: &dyn BlenderTransport, path: &Path) {
    blender.save_blend(&path.to_string_lossy()).await.unwrap();
}

async fn open(blender: &dyn BlenderTransport, path: &Path) {
    blender.load_blend(&path.to_string_lossy()).await.unwrap();
}

/// Runs `program` on the scene saved as `base` as viga's worker does, and saves what it
/// left as `result`: the result, ready to import.
async fn made(
    blender: &dyn BlenderTransport,
    base: &Path,
    program: &str,
    result: &Path,
    from_open_scene: bool,
) -> PreparedResult {
    open(blender, base).await;
    let before = fingerprint_scene(blender).await.unwrap();
    run(blender, program).await;
    let after = fingerprint_scene(blender).await.unwrap();
    run(blender, "import bpy\nbpy.ops.file.make_paths_absolute()\n").await;
    save(blender, result).await;
    PreparedResult {
        blend: result.to_path_buf(),
        plan: plan_result(&before, &after, from_open_scene),
    }
}

/// A person's scene: a plane, a cube in a collection "Props" with the material "Shared", a
/// cone "Extra", the camera "Cam" and the world "World".
const PERSON: &str = r#"import bpy
scene = bpy.context.scene
bpy.ops.mesh.primitive_plane_add(size=4.0)
bpy.context.object.name = 'Plane'
props = bpy.data.collections.new('Props')
scene.collection.children.link(props)
bpy.ops.mesh.primitive_cube_add(location=(3, 0, 0))
cube = bpy.context.object
cube.name = 'UserCube'
scene.collection.objects.unlink(cube)
props.objects.link(cube)
shared = bpy.data.materials.new('Shared')
shared.diffuse_color = (0.5, 0.5, 0.5, 1.0)
cube.data.materials.append(shared)
bpy.ops.mesh.primitive_cone_add(location=(-3, 0, 0))
bpy.context.object.name = 'Extra'
bpy.ops.object.camera_add(location=(0, -8, 2))
bpy.context.object.name = 'Cam'
scene.camera = bpy.context.object
scene.world = bpy.data.worlds.new('World')
"#;

/// What the run does to it: moves the plane, makes "Shared" red, removes the cone, adds a
/// crate with a new material in a new collection under "Props", a ball named "Taken", a
/// camera it makes the scene's, and a new world.
const RUN: &str = r#"import bpy
scene = bpy.context.scene
bpy.data.objects['Plane'].location.x = 1.5
bpy.data.materials['Shared'].diffuse_color = (1.0, 0.0, 0.0, 1.0)
bpy.data.objects.remove(bpy.data.objects['Extra'])
furniture = bpy.data.collections.new('Furniture')
bpy.data.collections['Props'].children.link(furniture)
bpy.ops.mesh.primitive_cube_add(size=0.8, location=(0, 0, 0.4), rotation=(0, 0, 0.5))
crate = bpy.context.object
crate.name = 'Crate'
for collection in list(crate.users_collection):
    collection.objects.unlink(crate)
furniture.objects.link(crate)
wood = bpy.data.materials.new('Wood')
wood.diffuse_color = (0.4, 0.2, 0.1, 1.0)
crate.data.materials.append(wood)
bpy.ops.mesh.primitive_uv_sphere_add(location=(0, 3, 1))
bpy.context.object.name = 'Taken'
bpy.ops.object.camera_add(location=(6, -6, 4))
bpy.context.object.name = 'Cam2'
scene.camera = bpy.context.object
scene.world = bpy.data.worlds.new('Sky')
"#;

/// The result matches what the program built, the person's own edits since the copy stay,
/// and one undo gives the scene back exactly.
#[tokio::test(flavor = "multi_thread")]
async fn a_result_comes_in_as_data_and_one_undo_gives_the_scene_back() {
    let blender = blender().await;
    let dir = tempfile::tempdir().unwrap();
    fresh(blender.as_ref(), PERSON).await;
    let base = dir.path().join("base.blend");
    save(blender.as_ref(), &base).await;
    let result = dir.path().join("result.blend");
    let prepared = made(blender.as_ref(), &base, RUN, &result, true).await;
    let built = dump(blender.as_ref()).await;

    // The person's Blender: their scene, edited since the copy was taken.
    open(blender.as_ref(), &base).await;
    run(
        blender.as_ref(),
        "import bpy\nbpy.data.objects['UserCube'].location.z = 5.0\n\
         bpy.ops.mesh.primitive_monkey_add(location=(9, 9, 9))\nbpy.context.object.name = 'Taken'\n",
    )
    .await;
    let before = dump(blender.as_ref()).await;
    let imported = import_result(blender.as_ref(), &prepared, "viga: a crate")
        .await
        .unwrap();
    assert_eq!(imported.replaced, ["Plane"], "{imported:?}");
    assert_eq!(imported.removed, ["Extra"], "{imported:?}");
    for name in ["Cam2", "Crate", "Taken.001"] {
        assert!(imported.added.iter().any(|n| n == name), "{imported:?}");
    }
    assert_eq!(
        imported.renamed.get("Taken").map(String::as_str),
        Some("Taken.001")
    );
    assert!(
        imported
            .data_replaced
            .contains(&"materials/Shared".to_owned()),
        "{imported:?}"
    );
    assert_eq!(imported.collections_made, ["Furniture"]);
    assert_eq!(
        (imported.camera.as_deref(), imported.world.as_deref()),
        (Some("Cam2"), Some("Sky"))
    );

    let after = dump(blender.as_ref()).await;
    let objects = &after[0];
    // What the run built is there as it built it...
    for name in ["Plane", "Crate", "Cam2"] {
        assert_eq!(objects[name], built[0][name], "{name}: {after}");
    }
    assert_eq!(objects["Taken.001"][1], built[0]["Taken"][1], "{after}");
    assert!(objects.get("Extra").is_none(), "{after}");
    assert_eq!((&after[1], &after[2]), (&built[1], &built[2]));
    assert_eq!(
        after[3]["Props"],
        serde_json::json!(["Furniture"]),
        "{after}"
    );
    assert_eq!(
        after[4]["Shared"], built[4]["Shared"],
        "the run's change of Shared"
    );
    assert_eq!(after[4]["Wood"], built[4]["Wood"]);
    // ...and what the person did since the copy is theirs still: the cube moved up, their
    // own "Taken", and no copies of what the run left alone.
    assert_eq!(
        objects["UserCube"][1],
        serde_json::json!([3.0, 0.0, 5.0]),
        "{after}"
    );
    assert_eq!(objects["Taken"], before[0]["Taken"]);
    let names = after[5].to_string();
    for copy in [
        "UserCube.001",
        "Shared.001",
        "Props.001",
        "Plane.001",
        "libraries",
    ] {
        assert!(!names.contains(copy), "{copy} in {names}");
    }

    blender.undo().await.unwrap();
    assert_eq!(
        dump(blender.as_ref()).await,
        before,
        "one undo gives the scene back"
    );
}

/// The file's own library links stay its own (a new object of the result may use them), and
/// a result that brings a text, a driver needing Python, a new link or a script node is
/// refused with the scene as it was.
#[tokio::test(flavor = "multi_thread")]
async fn links_of_the_persons_file_stay_theirs_and_code_or_new_links_are_refused() {
    let blender = blender().await;
    let dir = tempfile::tempdir().unwrap();
    let library = dir.path().join("library.blend");
    fresh(
        blender.as_ref(),
        "import bpy\nmesh = bpy.data.meshes.new('LibMesh')\n\
         mesh.from_pydata([(0, 0, 0), (1, 0, 0), (0, 1, 0)], [], [(0, 1, 2)])\nmesh.use_fake_user = True\n",
    )
    .await;
    save(blender.as_ref(), &library).await;
    fresh(
        blender.as_ref(),
        &format!(
            "import bpy\nwith bpy.data.libraries.load({:?}, link=True) as (source, target):\n    target.meshes = ['LibMesh']\n\
             obj = bpy.data.objects.new('Linked', target.meshes[0])\nbpy.context.scene.collection.objects.link(obj)\n",
            library.display().to_string()
        ),
    )
    .await;
    let base = dir.path().join("base.blend");
    save(blender.as_ref(), &base).await;

    let uses_link = "import bpy\nobj = bpy.data.objects.new('UsesLinked', bpy.data.meshes['LibMesh'])\n\
                     bpy.context.scene.collection.objects.link(obj)\n";
    let prepared = made(
        blender.as_ref(),
        &base,
        uses_link,
        &dir.path().join("uses.blend"),
        true,
    )
    .await;
    open(blender.as_ref(), &base).await;
    import_result(blender.as_ref(), &prepared, "viga: x")
        .await
        .unwrap();
    assert_eq!(
        run(
            blender.as_ref(),
            "import bpy\nprint(bpy.data.objects['UsesLinked'].data == bpy.data.objects['Linked'].data, len(bpy.data.libraries))"
        )
        .await,
        "True 1"
    );

    let elsewhere = dir.path().join("elsewhere.blend");
    let hostile = [
        (
            "text",
            "import bpy\nobj = bpy.data.objects.new('Notes', None)\nbpy.context.scene.collection.objects.link(obj)\n\
             text = bpy.data.texts.new('evil.py')\ntext.from_string('print(1)')\ntext.use_module = True\nobj['notes'] = text\n"
                .to_owned(),
            "Text 'evil.py'",
        ),
        (
            "driver",
            "import bpy\nbpy.ops.mesh.primitive_cube_add()\nobj = bpy.context.object\nobj.name = 'Driven'\n\
             curve = obj.driver_add('location', 0)\ncurve.driver.type = 'SCRIPTED'\n\
             curve.driver.expression = \"__import__('os').getpid()\"\n"
                .to_owned(),
            "driver that needs Python",
        ),
        (
            "linked",
            format!(
                "import bpy\nmesh = bpy.data.meshes.new('Far')\nbpy.data.libraries.write({path:?}, {{mesh}}, fake_user=True)\n\
                 with bpy.data.libraries.load({path:?}, link=True) as (source, target):\n    target.meshes = ['Far']\n\
                 obj = bpy.data.objects.new('Linker', target.meshes[0])\nbpy.context.scene.collection.objects.link(obj)\n",
                path = elsewhere.display().to_string()
            ),
            "linked from another file",
        ),
        (
            "script node",
            "import bpy\nbpy.ops.mesh.primitive_cube_add()\nobj = bpy.context.object\nobj.name = 'Scripted'\n\
             material = bpy.data.materials.new('Osl')\nnode = material.node_tree.nodes.new('ShaderNodeScript')\n\
             node.mode = 'EXTERNAL'\nnode.filepath = '/tmp/evil.osl'\nobj.data.materials.append(material)\n"
                .to_owned(),
            "script node",
        ),
    ];
    for (name, program, needle) in hostile {
        let prepared = made(
            blender.as_ref(),
            &base,
            &program,
            &dir.path().join(format!("{name}.blend")),
            true,
        )
        .await;
        open(blender.as_ref(), &base).await;
        let before = dump(blender.as_ref()).await;
        let err = import_result(blender.as_ref(), &prepared, "viga: x")
            .await
            .unwrap_err();
        let CoreError::Worker { source, .. } = &err else {
            panic!("{name}: not a refusal: {err}");
        };
        let refusal = source
            .source
            .as_deref()
            .and_then(|source| source.downcast_ref::<TransportError>());
        let Some(TransportError::Refused { kind, message, .. }) = refusal else {
            panic!("{name}: not a refusal: {err:?}");
        };
        assert_eq!(*kind, FaultKind::ResultRefused, "{name}: {message}");
        assert!(message.contains(needle), "{name}: {message}");
        assert_eq!(
            dump(blender.as_ref()).await,
            before,
            "{name}: the scene changed"
        );
    }
}

/// A result of a run that did not start from the person's scene only adds: a name of
/// theirs it also has comes in numbered, and nothing of theirs is replaced or removed.
#[tokio::test(flavor = "multi_thread")]
async fn a_result_from_another_scene_only_adds() {
    let blender = blender().await;
    let dir = tempfile::tempdir().unwrap();
    fresh(blender.as_ref(), "").await;
    let empty = dir.path().join("empty.blend");
    save(blender.as_ref(), &empty).await;
    let prepared = made(
        blender.as_ref(),
        &empty,
        "import bpy\nbpy.ops.mesh.primitive_plane_add(size=10)\nbpy.context.object.name = 'Plane'\n",
        &dir.path().join("result.blend"),
        false,
    )
    .await;
    fresh(blender.as_ref(), PERSON).await;
    let before = dump(blender.as_ref()).await;
    let imported = import_result(blender.as_ref(), &prepared, "viga: x")
        .await
        .unwrap();
    assert_eq!(imported.added, ["Plane.001"], "{imported:?}");
    assert!(imported.replaced.is_empty() && imported.removed.is_empty());
    let after = dump(blender.as_ref()).await;
    for (name, object) in before[0].as_object().unwrap() {
        assert_eq!(&after[0][name], object, "{name}");
    }
    assert_eq!((&after[1], &after[2]), (&before[1], &before[2]));
}
