//! Tools generated from add-on manifests: schemas, bad manifests, argument checks, churn,
//! and both example add-ons on real Blender.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::json;
use viga_blender::{BlenderCommands as _, Worker, WorkerConfig, locate};
use viga_protocol::bridge::SceneReset;
use viga_skills::addons::{
    AddonError, AddonRegistry, AddonToolAdapter, discover, load_manifest, tool_schema,
};
use viga_skills::generator::generator_tools;
use viga_skills::{RenderSettings, ToolContext, ToolError};
use viga_testkit::{BLENDER_TEST_LIMIT, within};

fn addons_folder() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/addons")
}

fn example(name: &str) -> viga_protocol::manifest::AddonManifest {
    load_manifest(&addons_folder().join(name).join("addon_ai.json")).unwrap()
}

#[test]
fn manifest_parameters_become_exact_schemas() {
    let placer = example("object_placer");
    let tool = &placer.ai_integration.tools[0];
    insta::assert_json_snapshot!("place_object_relative_schema", tool_schema(tool));
    let painter = example("material_painter");
    let schema = tool_schema(&painter.ai_integration.tools[0]);
    assert_eq!(schema["properties"]["color"]["minItems"], 3);
    assert_eq!(schema["required"], json!(["object_name", "color"]));
}

#[test]
fn arguments_are_checked_before_dispatch() {
    let placer = example("object_placer");
    let adapter = AddonToolAdapter::new("object_placer", &placer.ai_integration.tools[0]).unwrap();
    adapter
        .check_arguments(&json!({"object1_name": "Chair", "object2_name": "Table", "side": "right", "distance": 0.5}))
        .unwrap();
    let cases = [
        (
            json!({"object1_name": "Chair", "object2_name": "Table", "side": "diagonal"}),
            "/side",
        ),
        (
            json!({"object1_name": "Chair", "side": "left"}),
            "object2_name",
        ),
        (
            json!({"object1_name": "Chair", "object2_name": "Table", "side": "left", "object_to_move": "x"}),
            "object_to_move",
        ),
        (
            json!({"object1_name": "", "object2_name": "Table", "side": "left"}),
            "/object1_name",
        ),
        (
            json!({"object1_name": "Chair", "object2_name": "Table", "side": "left", "distance": "far"}),
            "/distance",
        ),
    ];
    for (arguments, named) in cases {
        match adapter.check_arguments(&arguments) {
            Err(ToolError::Recoverable(message)) => {
                assert!(message.contains(named), "{arguments}: {message}")
            }
            other => panic!("{arguments}: expected a recoverable error, got {other:?}"),
        }
    }
    let painter = example("material_painter");
    let paint =
        AddonToolAdapter::new("material_painter", &painter.ai_integration.tools[0]).unwrap();
    assert!(
        paint
            .check_arguments(&json!({"object_name": "Cube", "color": [1.0, 0.0]}))
            .is_err(),
        "vector3 needs three numbers"
    );
}

fn write_manifest(dir: &Path, body: serde_json::Value) -> PathBuf {
    let path = dir.join("addon_ai.json");
    std::fs::write(&path, body.to_string()).unwrap();
    path
}

#[test]
fn malformed_manifests_name_the_addon_and_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let base = json!({
        "addon_info": {"id": "broken", "name": "Broken"},
        "ai_integration": {"agent_description": "d", "tools": [{"name": "t", "description": "d", "parameters": []}]}
    });
    let cases = [
        (
            json!({"addon_info": {"id": "broken"}, "ai_integration": base["ai_integration"].clone()}),
            "/addon_info",
        ),
        (
            {
                let mut m = base.clone();
                m["ai_integration"]["tools"][0]["parameters"] =
                    json!([{"name": "p", "type": "colour"}]);
                m
            },
            "/ai_integration/tools/0/parameters/0/type",
        ),
        (
            {
                let mut m = base.clone();
                m["ai_integration"]["tools"][0]["parameters"] =
                    json!([{"name": "side", "type": "enum"}]);
                m
            },
            "/ai_integration/tools/0/parameters/0/options",
        ),
        (
            {
                let mut m = base.clone();
                m["ai_integration"]["tools"] =
                    json!([{"name": "t", "description": "d"}, {"name": "t", "description": "e"}]);
                m
            },
            "/ai_integration/tools/1/name",
        ),
    ];
    for (manifest, path) in cases {
        let file = write_manifest(dir.path(), manifest);
        let err = load_manifest(&file).unwrap_err();
        let message = err.to_string();
        assert!(
            message.contains("addon_ai.json") && message.contains(path),
            "{message}"
        );
    }
    std::fs::write(dir.path().join("addon_ai.json"), "{not json").unwrap();
    assert!(
        load_manifest(&dir.path().join("addon_ai.json"))
            .unwrap_err()
            .to_string()
            .contains("malformed JSON")
    );
}

#[test]
fn addons_come_and_go_between_turns() {
    let mut registry = AddonRegistry::new();
    registry.register(example("material_painter")).unwrap();
    registry.register(example("object_placer")).unwrap();
    let offered = registry.extend(&generator_tools().unwrap()).unwrap();
    assert!(
        offered.names().contains(&"place_object_relative")
            && offered.names().contains(&"paint_object")
    );
    let section = registry.prompt_section();
    let placer_at = section.find("Object Placer").unwrap();
    assert!(
        placer_at < section.find("Material Painter").unwrap(),
        "higher priority first:\n{section}"
    );
    assert!(section.contains("- place_object_relative: Move object1 to the given side of object2, `distance` metres from it, centred on the other axes. (required: object1_name, object2_name, side; optional: distance)"), "{section}");

    assert!(registry.unregister("object_placer"));
    let offered = registry.extend(&generator_tools().unwrap()).unwrap();
    assert!(!offered.names().contains(&"place_object_relative"));
    assert!(!registry.prompt_section().contains("Object Placer"));

    let mut clash = example("object_placer");
    clash.addon_info.id = "other".into();
    clash
        .ai_integration
        .tools
        .retain(|t| t.name == "list_scene_objects");
    registry.register(example("object_placer")).unwrap();
    let err = registry.register(clash).unwrap_err();
    assert!(
        matches!(err, AddonError::ToolClash { ref owner, .. } if owner == "object_placer"),
        "{err}"
    );
    assert!(AddonRegistry::new().prompt_section().is_empty());
}

#[tokio::test]
async fn both_example_addons_work_on_real_blender() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let worker = Worker::start(WorkerConfig::new(locate().unwrap()))
            .await
            .unwrap();
        let scene = "import bpy\nbpy.ops.mesh.primitive_cube_add(size=2)\nbpy.context.object.name = 'Table'\nbpy.ops.mesh.primitive_cube_add(size=1, location=(5, 5, 5))\nbpy.context.object.name = 'Chair'\n";
        assert!(
            worker
                .execute(scene, Some(SceneReset::Factory), None)
                .await
                .unwrap()
                .succeeded()
        );
        let mut registry = AddonRegistry::new();
        let problems = discover(&worker, Some(&addons_folder()), &mut registry)
            .await
            .unwrap();
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(registry.ids(), ["material_painter", "object_placer"]);

        let context = ToolContext::new(
            Arc::new(worker),
            RenderSettings::default(),
            SceneReset::Factory,
        );
        let tools = registry.extend(&generator_tools().unwrap()).unwrap();
        let placed = tools
            .invoke(&context, "place_object_relative", json!({"object1_name": "Chair", "object2_name": "Table", "side": "right", "distance": 0.5}))
            .await
            .unwrap();
        assert!(
            placed
                .text
                .contains("Chair [MESH] at (2.000, 0.000, 0.000)"),
            "1 (table half) + 0.5 (chair half) + 0.5 gap: {}",
            placed.text
        );
        let painted = tools
            .invoke(
                &context,
                "paint_object",
                json!({"object_name": "Table", "color": [0.8, 0.1, 0.05], "roughness": 0.3}),
            )
            .await
            .unwrap();
        assert!(painted.text.contains("Table_paint"), "{}", painted.text);
        let info = context.blender.scene_info(0, 10).await.unwrap();
        assert_eq!(
            info.objects
                .iter()
                .find(|o| o.name == "Table")
                .unwrap()
                .materials,
            ["Table_paint"]
        );

        let missing = tools
            .invoke(
                &context,
                "place_object_relative",
                json!({"object1_name": "Ghost", "object2_name": "Table", "side": "top"}),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(&missing, ToolError::Recoverable(m) if m.contains("no object named 'Ghost'")),
            "{missing}"
        );
        let unregistered = context
            .blender
            .call(
                viga_protocol::bridge::BridgeCommand::AddonCommand {
                    addon_id: "nope".into(),
                    tool: "x".into(),
                    params: json!({}),
                },
                None,
            )
            .await
            .unwrap_err();
        assert!(
            unregistered
                .to_string()
                .contains("no registered add-on \"nope\"")
                || unregistered
                    .to_string()
                    .contains("no registered add-on 'nope'"),
            "{unregistered}"
        );
    })
    .await;
}

#[tokio::test]
async fn discovery_reports_broken_addons_without_hiding_good_ones() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let dir = tempfile::tempdir().unwrap();
        let copy = |name: &str| {
            let target = dir.path().join(name);
            std::fs::create_dir_all(&target).unwrap();
            for file in ["__init__.py", "addon_ai.json"] {
                std::fs::copy(addons_folder().join(name).join(file), target.join(file)).unwrap();
            }
        };
        copy("object_placer");
        let crashing = dir.path().join("crashing");
        std::fs::create_dir_all(&crashing).unwrap();
        std::fs::write(
            crashing.join("__init__.py"),
            "raise RuntimeError('boom at import')\n",
        )
        .unwrap();
        std::fs::copy(
            addons_folder().join("material_painter/addon_ai.json"),
            crashing.join("addon_ai.json"),
        )
        .unwrap();
        let silent = dir.path().join("silent");
        std::fs::create_dir_all(&silent).unwrap();
        std::fs::write(silent.join("__init__.py"), "def register():\n    pass\n").unwrap();
        std::fs::write(
            silent.join("addon_ai.json"),
            json!({"addon_info": {"id": "silent", "name": "Silent"}, "ai_integration": {"agent_description": "d", "tools": []}}).to_string(),
        )
        .unwrap();

        let worker = Worker::start(WorkerConfig::new(locate().unwrap()))
            .await
            .unwrap();
        let mut registry = AddonRegistry::new();
        let problems = discover(&worker, Some(dir.path()), &mut registry)
            .await
            .unwrap();
        assert_eq!(registry.ids(), ["object_placer"]);
        assert!(
            problems
                .iter()
                .any(|p| p.contains("crashing: cannot be loaded: RuntimeError: boom at import")),
            "{problems:?}"
        );
        assert!(
            problems
                .iter()
                .any(|p| p.contains("\"silent\"") && p.contains("no VIGA_COMMANDS")),
            "{problems:?}"
        );
        let err = discover(&worker, Some(&dir.path().join("missing")), &mut registry)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("no add-on folder"), "{err}");
    })
    .await;
}
