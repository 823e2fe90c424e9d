//! Generated assets and scenes initialised from the target picture, end to end from the CLI
//! on real Blender with scripted sessions and local servers standing in for Meshy and for a
//! reconstruction service (never the live services):
//!
//! - a run that asks for a generated asset gets a GLB from the Meshy replay into its scene,
//!   and its folder records the request, the asset and its cost;
//! - a run with `--init` starts from the service's objects, and an iteration that deletes
//!   them all is flagged to the verifier and to the next generator turn;
//! - a service that is down, too slow or sends only broken meshes stops the run before it
//!   starts, with a clear error and no run folder; so does generation without its key.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic: that is how tests fail

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use viga_testkit::http::{Reply, Request, TestServer, closed_address};
use viga_testkit::mesh::{cube_glb, cube_obj};
use viga_testkit::picture::files_under;
use viga_testkit::{BLENDER_TEST_LIMIT, output_within};

const MESHY_KEY: &str = "msy-acceptance-test-key";

fn target_picture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/clip-reference/odd.png")
}

/// `viga run` with the scripted `turns`, small Workbench renders, `--events jsonl` and
/// `extra` flags, its output in `output`.
fn viga(turns: &[Value], extra: &[&str], output: &Path, env: &[(&str, &str)]) -> Output {
    let script = output.with_extension("script.json");
    let session = json!({"description": "SCRIPTED acceptance session", "turns": turns});
    std::fs::write(&script, serde_json::to_vec_pretty(&session).unwrap()).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_viga"));
    command
        .args(["run", "--task", "the crate and barrel in the picture"])
        .arg("--target")
        .arg(target_picture())
        .args(["--provider", "scripted", "--script"])
        .arg(&script)
        .args([
            "--verifier-engine",
            "workbench",
            "--resolution",
            "32",
            "--no-plan",
        ])
        .args(["--events", "jsonl"])
        .args(extra)
        .arg("--output")
        .arg(output)
        .env_remove("MESHY_API_KEY")
        .env_remove("VIGA_MESHY_URL");
    for (name, value) in env {
        command.env(name, value);
    }
    output_within(&mut command, BLENDER_TEST_LIMIT)
}

/// The JSON lines `viga run --events jsonl` printed.
fn lines(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

/// The run folder of a finished run, checking it ended as `outcome`.
fn finished_in(out: &Output, outcome: &str) -> PathBuf {
    let lines = lines(out);
    let folder = lines
        .iter()
        .find(|line| line["kind"] == "run_folder")
        .and_then(|line| line["path"].as_str());
    let finished = lines.iter().find(|line| line["kind"] == "finished");
    assert!(
        folder.is_some() && finished.is_some_and(|f| f["stop"]["reason"] == outcome),
        "viga run did not end {outcome} ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // The last line names the program the run kept, where it is.
    let folder = PathBuf::from(folder.unwrap());
    if outcome == "accepted" {
        let kept = finished.unwrap()["final_program"]
            .as_str()
            .map(PathBuf::from);
        assert_eq!(
            kept,
            Some(std::path::absolute(folder.join("final.py")).unwrap())
        );
    }
    folder
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(
        &std::fs::read(path).unwrap_or_else(|err| panic!("{}: {err}", path.display())),
    )
    .unwrap()
}

fn call(id: &str, name: &str, arguments: Value) -> Value {
    json!({"text": "", "finish_reason": "tool_calls",
           "tool_calls": [{"id": id, "name": name, "arguments": arguments}]})
}

fn turn(expect: Value, response: Value) -> Value {
    json!({"expect": expect, "response": response})
}

/// The verifier asks for the scene as text, then, finding `seen` in it, ends with `verdict`.
fn verifier_reads_the_scene(seen: &str, verdict: Value) -> [Value; 2] {
    [
        turn(
            json!({"system_contains": "verifier"}),
            call("v1", "get_scene_info", json!({})),
        ),
        turn(json!({"last_message_contains": seen}), verdict),
    ]
}

fn end_process(accepted: bool, difference: &str) -> Value {
    call(
        "v-end",
        "end_process",
        json!({"visual_differences": if accepted { vec![] } else { vec![difference] },
               "suggestions": [], "accepted": accepted}),
    )
}

/// A Meshy replay: every task succeeds at its first look (as Meshy documents the task
/// object), and its model is a cube GLB on the same server.
fn meshy_replay() -> TestServer {
    let created = Arc::new(Mutex::new(0u32));
    TestServer::start(move |request: &Request| {
        if let Some(asset) = request.path().strip_prefix("/assets/") {
            return Reply::bytes(200, cube_glb(asset));
        }
        if request.header("authorization") != Some(&format!("Bearer {MESHY_KEY}")) {
            return Reply::json(401, r#"{"message": "Invalid API key"}"#);
        }
        if request.method == "POST" {
            let mut created = created.lock().unwrap();
            *created += 1;
            return Reply::json(202, json!({"result": format!("task-{created}")}).to_string());
        }
        let id = request.path().rsplit('/').next().unwrap_or_default();
        Reply::json(
            200,
            json!({
                "id": id, "type": "text-to-3d-preview", "status": "SUCCEEDED", "progress": 100,
                "model_urls": {"glb": format!("{}/assets/{id}/model.glb?Expires=1692945600", request.base)},
                "created_at": 1692771650657_u64, "started_at": 1692771667037_u64,
                "finished_at": 1692771669037_u64, "task_error": {"message": ""}
            })
            .to_string(),
        )
    })
    .unwrap()
}

#[test]
fn a_scripted_run_generates_an_asset_with_meshy_into_its_scene_and_records_its_cost() {
    let meshy = meshy_replay();
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("out");
    // The program imports what the tool generated from the run's asset folder, which
    // programs find in VIGA_ASSETS_DIR (a scripted session cannot know the run folder's name
    // in advance; a model copies the path from the tool's answer). A contained Blender may
    // read that folder and nothing else of the run folder.
    let program = "import bpy, glob, os\npath = sorted(glob.glob(os.environ['VIGA_ASSETS_DIR'] + '/meshy/Crate-*/model.glb'))[0]\nbefore = set(bpy.data.objects.keys())\nbpy.ops.import_scene.gltf(filepath=path)\nfor obj in [o for o in bpy.data.objects if o.name not in before]:\n    obj['viga_source'] = 'meshy'\n    obj.name = 'Crate'\nbpy.ops.object.camera_add(location=(0, -6, 2), rotation=(1.3, 0, 0))\nbpy.context.scene.camera = bpy.context.object\n".to_owned();
    let turns = [
        turn(
            json!({"tools_include": ["get_better_assets"]}),
            call(
                "g1",
                "get_better_assets",
                json!({"query": "a small wooden crate", "source": "generate", "object_name": "Crate"}),
            ),
        ),
        turn(
            json!({"last_message_contains": "(source meshy; score 1.00): Generated by Meshy from the words \"a small wooden crate\". Meshy: 30 credits"}),
            call("g2", "execute_code", json!({"code": program})),
        ),
        turn(
            json!({"last_message_contains": "The program ran without errors"}),
            json!({"text": "The crate is in.", "finish_reason": "stop"}),
        ),
    ];
    let turns: Vec<Value> = turns
        .into_iter()
        .chain(verifier_reads_the_scene(
            "source=meshy",
            end_process(true, ""),
        ))
        .collect();
    let out = viga(
        &turns,
        &[
            "--assets-generate",
            "meshy",
            "--generator-tools",
            "on",
            "--max-iterations",
            "1",
        ],
        &output,
        &[
            ("MESHY_API_KEY", MESHY_KEY),
            ("VIGA_MESHY_URL", &format!("{}/openapi", meshy.base())),
        ],
    );
    let folder = finished_in(&out, "accepted");

    let records: Vec<Value> = std::fs::read_to_string(folder.join("assets/requests.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0]["request"]["query"], "a small wooden crate");
    let hit = &records[0]["hits"][0];
    assert_eq!(hit["origin"], "meshy");
    assert_eq!(hit["generation"]["credits"], 30.0);
    let model = PathBuf::from(hit["path"].as_str().unwrap());
    assert!(model.starts_with(&folder), "{}", model.display());
    assert_eq!(std::fs::read(&model).unwrap(), cube_glb("task-2/model.glb"));
    let asset = model.parent().unwrap();
    let result = read_json(&asset.join("result.json"));
    assert_eq!(
        result["generation"]["tasks"].as_array().unwrap().len(),
        2,
        "preview and refine"
    );
    assert_eq!(
        read_json(&asset.join("request.json"))["prompt"],
        "a small wooden crate"
    );
    assert!(folder.join("final.blend").is_file());
    let report = std::fs::read_to_string(folder.join("report.html")).unwrap();
    assert!(
        report.contains("<h2>Assets</h2>")
            && report.contains("meshy")
            && report.contains("30 credits")
    );

    assert_eq!(
        meshy
            .lines()
            .iter()
            .filter(|l| l.starts_with("POST"))
            .count(),
        2,
        "one preview and one refine task: {:?}",
        meshy.lines()
    );
    // The key went to Meshy and nowhere into the run folder.
    for file in files_under(&folder) {
        let bytes = std::fs::read(&file).unwrap();
        assert!(
            !bytes
                .windows(MESHY_KEY.len())
                .any(|w| w == MESHY_KEY.as_bytes()),
            "{} holds the key",
            file.display()
        );
    }
}

fn object(name: &str, mesh: &str, location: [f64; 3]) -> Value {
    json!({"name": name, "mesh": mesh, "confidence": 0.8,
           "transform": {"location": location, "rotation_quaternion": [1, 0, 0, 0], "scale": [1, 1, 1]}})
}

/// A reconstruction service that answers `objects` and serves cube meshes, a broken one
/// among them.
fn reconstruction(objects: Value, delay: std::time::Duration) -> TestServer {
    TestServer::start(move |request: &Request| match request.path() {
        "/reconstruct" => Reply::json(200, json!({"objects": objects}).to_string()).after(delay),
        "/meshes/crate.glb" => Reply::bytes(200, cube_glb("crate")),
        "/meshes/barrel.obj" => Reply::bytes(200, cube_obj("barrel")),
        "/meshes/broken.glb" => Reply::bytes(200, b"PK\x03\x04 a zip, not a mesh".to_vec()),
        _ => Reply::not_found(),
    })
    .unwrap()
}

const FLAG: &str = "none of the objects the scene was initialised with from the target pictures (Crate, Barrel) is in the result any more";

#[test]
fn a_run_with_init_starts_from_the_services_objects_and_a_deletion_of_them_all_is_flagged() {
    let service = reconstruction(
        json!([
            object("Crate", "meshes/crate.glb", [0.0, 0.0, 0.5]),
            object("Barrel", "/meshes/barrel.obj", [2.0, 0.0, 0.5]),
            object("Ghost", "meshes/broken.glb", [0.0, 2.0, 0.5]),
        ]),
        std::time::Duration::ZERO,
    );
    let dir = tempfile::tempdir().unwrap();
    let camera = "import bpy\nbpy.ops.object.camera_add(location=(1, -7, 3), rotation=(1.2, 0, 0))\nbpy.context.scene.camera = bpy.context.object\n";
    let keep = format!("```python\n{camera}bpy.data.objects['Crate'].location.x = -1.0\n```");
    let delete_all = format!(
        "```python\nimport bpy\nfor obj in list(bpy.data.objects):\n    bpy.data.objects.remove(obj, do_unlink=True)\nbpy.ops.mesh.primitive_cube_add(location=(0, 0, 0.5))\n{camera}```"
    );
    let fenced = |text: &str| json!({"text": text, "finish_reason": "stop"});
    let turns = [
        // Iteration 1: the brief names the initialised objects; the scene has them.
        turn(
            json!({"any_message_contains": "it already holds the objects \"Crate\" (confidence 0.80), \"Barrel\" (confidence 0.80)"}),
            fenced(&keep),
        ),
    ]
    .into_iter()
    .chain(verifier_reads_the_scene(
        "source=init",
        end_process(false, "the crate is too far left"),
    ))
    .chain([
        // Iteration 2: the program deletes them all; the verifier hears it first.
        turn(json!({}), fenced(&delete_all)),
        turn(
            json!({"any_message_contains": FLAG}),
            end_process(false, "the scene was rebuilt"),
        ),
        // Iteration 3: the next generator turn reads it in its memory.
        turn(json!({"any_message_contains": FLAG}), fenced(&keep)),
        turn(
            json!({"system_contains": "verifier"}),
            end_process(true, ""),
        ),
    ])
    .collect::<Vec<Value>>();
    let output = dir.path().join("out");
    let out = viga(
        &turns,
        &[
            "--init",
            &format!("{}/reconstruct", service.base()),
            "--generator-tools",
            "off",
            "--max-iterations",
            "3",
        ],
        &output,
        &[],
    );
    let folder = finished_in(&out, "accepted");
    let sent: Value = serde_json::from_slice(&service.requests()[0].body).unwrap();
    assert_eq!(sent["pictures"].as_array().unwrap().len(), 1);

    assert!(folder.join("init/init.blend").is_file());
    let init = read_json(&folder.join("init.json"));
    let imported: Vec<&str> = init["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["scene_name"].as_str().unwrap())
        .collect();
    assert_eq!(imported, ["Crate", "Barrel"]);
    assert_eq!(init["refused"][0]["name"], "Ghost");
    assert!(folder.join("init/01-Crate/mesh.glb").is_file());
    assert!(folder.join("init/02-Barrel/mesh.obj").is_file());
    let args = read_json(&folder.join("args.json"));
    let settings = &args["domain"]["settings"];
    assert!(
        settings["base_blend"]
            .as_str()
            .unwrap()
            .ends_with("init/init.blend")
    );
    assert_eq!(settings["initialised"][1]["name"], "Barrel");

    let warnings: Vec<String> = std::fs::read_to_string(folder.join("events.jsonl"))
        .unwrap()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|e| e["type"] == "warning")
        .filter_map(|e| e["message"].as_str().map(str::to_owned))
        .collect();
    assert!(
        warnings
            .iter()
            .any(|w| w.starts_with("iteration 2: ") && w.contains(FLAG)),
        "{warnings:?}"
    );
    assert!(
        !warnings.iter().any(|w| w.starts_with("iteration 1: none")),
        "{warnings:?}"
    );
    let report = std::fs::read_to_string(folder.join("report.html")).unwrap();
    assert!(report.contains("Initialised from the target pictures") && report.contains("Ghost"));
}

#[test]
fn an_initialisation_that_cannot_be_made_stops_before_the_run_and_leaves_no_run_folder() {
    let broken = reconstruction(
        json!([object("Ghost", "meshes/broken.glb", [0.0; 3])]),
        std::time::Duration::ZERO,
    );
    let slow = reconstruction(
        json!([object("Crate", "meshes/crate.glb", [0.0; 3])]),
        std::time::Duration::from_secs(30),
    );
    let down = closed_address().unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (name, url, timeout, why) in [
        (
            "down",
            format!("{down}/reconstruct"),
            "60",
            "the reconstruction service cannot be reached",
        ),
        (
            "slow",
            format!("{}/reconstruct", slow.base()),
            "1",
            "did not finish the reconstruction request",
        ),
        (
            "broken",
            format!("{}/reconstruct", broken.base()),
            "60",
            "Ghost: its mesh is refused: it is not a GLB file",
        ),
    ] {
        let output = dir.path().join(name);
        let out = viga(
            &[],
            &["--init", &url, "--init-timeout", timeout],
            &output,
            &[],
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
        assert!(
            stderr.contains("scene initialisation failed, so the run did not start")
                && stderr.contains(why),
            "{name}: {stderr}"
        );
        let left: Vec<_> = std::fs::read_dir(&output)
            .map(|entries| entries.flatten().map(|e| e.file_name()).collect())
            .unwrap_or_default();
        assert!(
            left.is_empty(),
            "{name}: nothing is left in the output folder: {left:?}"
        );
    }

    let output = dir.path().join("no-key");
    let out = viga(
        &[],
        &["--assets-generate", "meshy", "--generator-tools", "on"],
        &output,
        &[],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("export MESHY_API_KEY="), "{stderr}");
    assert!(!output.exists() || std::fs::read_dir(&output).unwrap().next().is_none());
}
