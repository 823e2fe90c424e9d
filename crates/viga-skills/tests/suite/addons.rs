//! Tools generated from add-on manifests: schemas, bad manifests, argument checks, churn,
//! the prompt section, both example add-ons on real Blender, add-ons installed through
//! Blender's own add-on machinery, and requirements checked inside Blender.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::json;
use viga_blender::{BlenderCommands as _, BlenderLauncher, Worker, WorkerConfig, locate};
use viga_protocol::bridge::SceneReset;
use viga_skills::addons::{
    AddonError, AddonRegistry, AddonSetChange, AddonToolAdapter, ProblemReason, discover,
    load_manifest, tool_schema,
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

/// A manifest that uses every field the prompt section shows, beside the two examples.
fn every_field_manifest() -> viga_protocol::manifest::AddonManifest {
    viga_protocol::parse_value(json!({
        "addon_info": {"id": "scatter_kit", "name": "Scatter Kit", "version": "0.3.0"},
        "ai_integration": {
            "agent_description": "Scatters copies of an object over a surface.",
            "tools": [{
                "name": "scatter_instances",
                "description": "Scatter copies of an object over another object's surface.",
                "usage": "When a surface needs many small things on it: rocks, trees, props.",
                "category": "layout",
                "parameters": [
                    {"name": "source_object", "type": "object_name", "description": "What to copy"},
                    {"name": "surface", "type": "object_name", "description": "Where the copies go"},
                    {"name": "count", "type": "integer", "description": "How many copies", "required": false, "default": 25},
                    {"name": "spread", "type": "enum", "options": ["even", "clustered", "random"], "required": false, "default": "even"},
                    {"name": "align_to_normal", "type": "boolean", "required": false, "default": true},
                    {"name": "scale_jitter", "type": "vector3", "description": "Random scale per axis", "required": false, "default": [0.1, 0.1, 0.1]},
                    {"name": "seed", "type": "float", "required": false},
                    {"name": "label", "type": "string", "description": "Name prefix for the copies", "required": false},
                    {"name": "collection", "type": "collection_name", "required": false},
                    {"name": "material", "type": "material_name", "required": false},
                    {"name": "density_map", "type": "file_path", "description": "A greyscale image", "required": false}
                ],
                "examples": ["scatter_instances(source_object='Rock', surface='Ground', count=40)", "scatter_instances(source_object='Tree', surface='Hill', spread='clustered')"]
            }],
            "context_hints": ["The user wants many copies of something", "A surface looks empty"],
            "metadata": {"priority": 95, "performance_impact": "high", "experimental": true}
        }
    }))
    .unwrap()
}

#[test]
fn the_prompt_section_carries_every_manifest_field() {
    let mut registry = AddonRegistry::new();
    registry.register(example("material_painter")).unwrap();
    registry.register(example("object_placer")).unwrap();
    registry.register(every_field_manifest()).unwrap();
    let section = registry.prompt_section();
    insta::assert_snapshot!("addon_prompt_section", section);

    let manifest = every_field_manifest();
    let tool = &manifest.ai_integration.tools[0];
    for text in manifest
        .ai_integration
        .context_hints
        .iter()
        .chain(&tool.examples)
        .chain([&tool.usage, &tool.description])
    {
        assert!(
            section.contains(text.as_str()),
            "{text:?} missing:\n{section}"
        );
    }
    for parameter in &tool.parameters {
        assert!(
            section.contains(&format!("  - {} (", parameter.name)),
            "{} missing",
            parameter.name
        );
    }
    for fact in [
        "(integer, optional, default 25)",
        "(enum, optional, one of: even, clustered, random, default \"even\")",
        "(boolean, optional, default true)",
        "default [0.1,0.1,0.1]",
        "[experimental]",
        "slow",
    ] {
        assert!(section.contains(fact), "{fact:?} missing:\n{section}");
    }
    let scatter = section.find("Scatter Kit").unwrap();
    let placer = section.find("Object Placer").unwrap();
    let painter = section.find("Material Painter").unwrap();
    assert!(
        scatter < placer && placer < painter,
        "by priority:\n{section}"
    );
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
                    undo_step: None,
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

/// A Blender whose user folder (add-ons, extensions, preferences) is `user`, so what a test
/// installs never reaches the machine's Blender or another test's. Blender reads
/// `BLENDER_USER_RESOURCES` at start, so a small script sets it before starting Blender.
#[cfg(unix)]
fn isolated_launcher(user: &Path) -> BlenderLauncher {
    let launcher = locate().unwrap();
    let real = match &launcher {
        BlenderLauncher::PythonModule { python } => python.clone(),
        BlenderLauncher::Binary { blender } => blender.clone(),
    };
    let script = user.join("isolated-blender.sh");
    let body = format!(
        "#!/bin/sh\nBLENDER_USER_RESOURCES='{}' exec '{}' \"$@\"\n",
        user.display(),
        real.display()
    );
    // Written by a child process: a file this multi-threaded test process had open for
    // writing could be inherited by a concurrent fork, and executing it would then fail
    // with "Text file busy".
    let written = std::process::Command::new("sh")
        .args([
            "-c",
            "printf '%s' \"$1\" > \"$2\" && chmod 755 \"$2\"",
            "sh",
        ])
        .arg(&body)
        .arg(&script)
        .status()
        .unwrap();
    assert!(written.success());
    match launcher {
        BlenderLauncher::PythonModule { .. } => BlenderLauncher::PythonModule { python: script },
        BlenderLauncher::Binary { .. } => BlenderLauncher::Binary { blender: script },
    }
}

/// Python that zips the `scene_stats` fixture, installs it the way a person would and
/// enables it: `extension` as an extension (files at the zip's root), otherwise as a legacy
/// add-on (one package folder in the zip).
fn install_scene_stats(zip_folder: &Path, extension: bool) -> String {
    let source = addons_folder().join("installable/scene_stats");
    let zip = zip_folder.join(if extension {
        "scene_stats_ext.zip"
    } else {
        "scene_stats.zip"
    });
    format!(
        r#"
import os, zipfile, addon_utils, bpy
source, zip_path, extension = {source:?}, {zip:?}, {extension}
with zipfile.ZipFile(zip_path, "w") as archive:
    for name in sorted(os.listdir(source)):
        if os.path.isfile(os.path.join(source, name)):
            archive.write(os.path.join(source, name), name if extension else "scene_stats/" + name)
if extension:
    result = bpy.ops.extensions.package_install_files(filepath=zip_path, repo="user_default", enable_on_install=True)
else:
    result = bpy.ops.preferences.addon_install(filepath=zip_path)
    addon_utils.enable("scene_stats", default_set=True)
assert result == {{"FINISHED"}}, result
"#,
        extension = if extension { "True" } else { "False" },
    )
}

#[cfg(unix)]
#[tokio::test]
async fn addons_installed_through_blenders_own_machinery_are_found() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let user = tempfile::tempdir().unwrap();
        let worker = Worker::start(WorkerConfig::new(isolated_launcher(user.path())))
            .await
            .unwrap();
        let context = ToolContext::new(Arc::new(worker), RenderSettings::default(), SceneReset::Factory);
        let blender = context.blender.as_ref();
        let run = async |code: &str| {
            let ran = blender.execute(code, None, None).await.unwrap();
            assert!(ran.succeeded(), "{ran:?}");
        };
        let mut registry = AddonRegistry::new();
        registry.refresh(blender, None).await.unwrap();
        assert!(registry.ids().is_empty(), "{:?}", registry.ids());

        run(&install_scene_stats(user.path(), true)).await;
        assert_eq!(registry.refresh(blender, None).await.unwrap(), AddonSetChange::Changed);
        assert_eq!(registry.ids(), ["scene_stats"], "{:?}", registry.problems());
        assert!(registry.problems().is_empty(), "{:?}", registry.problems());
        let tools = registry.extend(&generator_tools().unwrap()).unwrap();
        let counted = tools
            .invoke(&context, "count_scene_objects", json!({"object_type": "CAMERA"}))
            .await
            .unwrap();
        assert!(counted.text.contains(r#""object_type":"CAMERA""#), "{}", counted.text);
        assert!(
            extension_files_are_in(user.path()),
            "the extension went into the isolated user folder"
        );
        assert_eq!(registry.refresh(blender, None).await.unwrap(), AddonSetChange::Unchanged);

        run("import addon_utils\naddon_utils.disable('bl_ext.user_default.scene_stats', default_set=True)").await;
        assert_eq!(registry.refresh(blender, None).await.unwrap(), AddonSetChange::Changed);
        assert!(registry.ids().is_empty(), "a disabled add-on is gone");
        let gone = context
            .blender
            .call(
                viga_protocol::bridge::BridgeCommand::AddonCommand {
                    addon_id: "scene_stats".into(),
                    tool: "count_scene_objects".into(),
                    params: json!({}),
                    undo_step: None,
                },
                None,
            )
            .await
            .unwrap_err();
        assert!(gone.to_string().contains("no registered add-on"), "{gone}");

        run(&install_scene_stats(user.path(), false)).await;
        assert_eq!(registry.refresh(blender, None).await.unwrap(), AddonSetChange::Changed);
        assert_eq!(registry.ids(), ["scene_stats"], "a legacy add-on is found too");
        let tools = registry.extend(&generator_tools().unwrap()).unwrap();
        let counted = tools.invoke(&context, "count_scene_objects", json!({})).await.unwrap();
        assert!(counted.text.contains(r#""object_type":"ANY""#), "{}", counted.text);
    })
    .await;
}

fn extension_files_are_in(user: &Path) -> bool {
    user.join("extensions/user_default/scene_stats/addon_ai.json")
        .is_file()
}

#[tokio::test]
async fn requirements_are_checked_inside_the_running_blender() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let dir = tempfile::tempdir().unwrap();
        let write_addon = |id: &str, requirements: serde_json::Value| {
            let package = dir.path().join(id);
            std::fs::create_dir_all(&package).unwrap();
            std::fs::write(
                package.join("__init__.py"),
                format!("VIGA_COMMANDS = {{'{id}_tool': lambda: 'ok'}}\n"),
            )
            .unwrap();
            let manifest = json!({
                "addon_info": {"id": id, "name": id},
                "ai_integration": {"agent_description": "d", "requirements": requirements,
                    "tools": [{"name": format!("{id}_tool"), "description": "d"}]}
            });
            std::fs::write(package.join("addon_ai.json"), manifest.to_string()).unwrap();
        };
        write_addon(
            "fits",
            json!({"blender_version_min": "4.2", "dependencies": ["numpy"]}),
        );
        write_addon("from_the_future", json!({"blender_version_min": "99.0"}));
        write_addon(
            "needs_more",
            json!({"dependencies": ["numpy>=1.0", "viga_no_such_package>=2", "json"]}),
        );

        let worker = Worker::start(WorkerConfig::new(locate().unwrap()))
            .await
            .unwrap();
        let running = worker.hello().blender_version.clone();
        let mut registry = AddonRegistry::new();
        discover(&worker, Some(dir.path()), &mut registry)
            .await
            .unwrap();
        assert_eq!(registry.ids(), ["fits"], "{:?}", registry.problems());
        let reasons = |addon: &str| -> Vec<ProblemReason> {
            registry
                .problems()
                .iter()
                .filter(|p| p.addon.as_deref() == Some(addon))
                .map(|p| p.reason.clone())
                .collect()
        };
        assert_eq!(
            reasons("from_the_future"),
            [ProblemReason::BlenderTooOld {
                required: "99.0".into(),
                running
            }]
        );
        assert_eq!(
            reasons("needs_more"),
            [ProblemReason::MissingDependencies {
                missing: vec!["viga_no_such_package>=2".into()]
            }]
        );

        // The folder is remembered: a later discovery without it still finds its add-ons.
        let mut again = AddonRegistry::new();
        discover(&worker, None, &mut again).await.unwrap();
        assert_eq!(again.ids(), ["fits"]);
    })
    .await;
}
