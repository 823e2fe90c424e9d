//! The reconstruction-service client against local servers: a good answer with a GLB and an
//! OBJ, a slow service, broken and hostile meshes and answers, and a service that is down.

use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};
use viga_protocol::message::ImageData;
use viga_skills::assets::ReferencePicture;
use viga_skills::meshfile::MeshFormat;
use viga_skills::reconstruct::{ReconstructionConfig, ReconstructionService};
use viga_testkit::http::{Reply, Request, TestServer, closed_address};
use viga_testkit::mesh::{cube_glb, cube_obj};
use viga_testkit::within;

const LIMIT: Duration = Duration::from_secs(60);

fn pictures() -> Vec<ReferencePicture> {
    vec![ReferencePicture {
        label: "Camera1".to_owned(),
        image: ImageData {
            media_type: "image/png".to_owned(),
            data: b"\x89PNG stand-in".to_vec(),
        },
    }]
}

fn object(name: &str, mesh: &str) -> Value {
    json!({
        "name": name,
        "mesh": mesh,
        "transform": {
            "location": [1.0, 2.0, 0.5],
            "rotation_quaternion": [0.0, 0.0, 0.0, 2.0],
            "scale": [1.0, 1.0, 1.0],
        },
        "confidence": 0.9,
    })
}

/// A service answering `objects` at `/reconstruct` and the meshes under `/meshes/`.
fn service(objects: Value) -> TestServer {
    TestServer::start(move |request: &Request| match request.path() {
        "/reconstruct" => Reply::json(200, json!({"objects": objects}).to_string()),
        "/meshes/chair.glb" => Reply::bytes(200, cube_glb("chair")),
        "/meshes/table.obj" => Reply::bytes(200, cube_obj("table")),
        "/meshes/cut.glb" => {
            let mut cut = cube_glb("cut");
            cut.truncate(cut.len() / 2);
            Reply::bytes(200, cut)
        }
        "/meshes/huge.glb" => Reply::endless(),
        "/meshes/script.obj" => Reply::bytes(200, "csh touch /tmp/pwned\nv 0 0 0\n"),
        _ => Reply::not_found(),
    })
    .unwrap()
}

fn client(server: &TestServer, deadline: Duration) -> ReconstructionService {
    ReconstructionService::new(ReconstructionConfig {
        deadline,
        max_mesh_bytes: 1 << 20,
        ..ReconstructionConfig::new(format!("{}/reconstruct", server.base()))
    })
    .unwrap()
}

#[tokio::test]
async fn the_service_gets_the_pictures_and_its_meshes_come_back_checked() {
    within(LIMIT, "the test", async {
        let server = service(json!([
            object("chair", "meshes/chair.glb"),
            object("table", "/meshes/table.obj"),
        ]));
        let into = tempfile::tempdir().unwrap();
        let made = client(&server, Duration::from_secs(30))
            .reconstruct(&pictures(), into.path())
            .await
            .unwrap();
        let sent: Value = serde_json::from_slice(&server.requests()[0].body).unwrap();
        assert_eq!(sent["viga_init"], 1);
        assert_eq!(sent["pictures"][0]["view"], "Camera1");
        let data = base64::engine::general_purpose::STANDARD
            .decode(sent["pictures"][0]["data"].as_str().unwrap())
            .unwrap();
        assert_eq!(data, b"\x89PNG stand-in");
        let names: Vec<(&str, MeshFormat)> = made
            .objects
            .iter()
            .map(|o| (o.name.as_str(), o.format))
            .collect();
        assert_eq!(
            names,
            [("chair", MeshFormat::Glb), ("table", MeshFormat::Obj)]
        );
        assert_eq!(
            std::fs::read(&made.objects[0].mesh).unwrap(),
            cube_glb("chair")
        );
        assert!(
            made.objects[1]
                .mesh
                .starts_with(into.path().join("02-table"))
        );
        assert_eq!(
            made.objects[0].transform.rotation_quaternion,
            [0.0, 0.0, 0.0, 1.0],
            "normalised"
        );
        assert!(made.refused.is_empty());
        assert_eq!(made.answer["objects"][0]["name"], "chair");
    })
    .await;
}

#[tokio::test]
async fn broken_and_hostile_objects_are_refused_one_by_one() {
    within(LIMIT, "the test", async {
        let mut bad_transform = object("floating", "meshes/chair.glb");
        bad_transform["transform"]["scale"] = json!([1.0, 0.0, 1.0]);
        let server = service(json!([
            object("chair", "meshes/chair.glb"),
            object("chair", "meshes/chair.glb"),
            object("cut", "meshes/cut.glb"),
            object("far", "https://elsewhere.example/far.glb"),
            object("huge", "meshes/huge.glb"),
            object("script", "meshes/script.obj"),
            object("unknown", "meshes/thing.fbx"),
            object("line\nbreak", "meshes/chair.glb"),
            bad_transform,
            {"name": "lost"},
        ]));
        let into = tempfile::tempdir().unwrap();
        let made = client(&server, Duration::from_secs(30))
            .reconstruct(&pictures(), into.path())
            .await
            .unwrap();
        assert_eq!(made.objects.len(), 1);
        let refused: Vec<String> = made
            .refused
            .iter()
            .map(|r| format!("{}: {}", r.name, r.reason))
            .collect();
        for expected in [
            "chair: another object of the answer has the same name",
            "cut: its mesh is refused: it is too short|cut off",
            "far: its mesh https://elsewhere.example/far.glb is not on the service's own address",
            "huge: its mesh is refused: the reconstruction service's download",
            "script: its mesh is refused: its line 1 is a `csh` statement",
            "unknown: its mesh is neither a .glb nor an .obj file",
            "linebreak: its name has control characters",
            "floating: its transform scales an axis to nothing",
            "lost: it is not the object the contract describes",
        ] {
            let (name, reason) = expected.split_once(": ").unwrap();
            let found = refused.iter().any(|r| {
                r.starts_with(&format!("{name}: "))
                    && reason.split('|').any(|part| r.contains(part))
            });
            assert!(found, "{expected} in {refused:#?}");
        }
        assert!(!server.lines().iter().any(|l| l.contains("elsewhere")));
        let left: Vec<_> = std::fs::read_dir(into.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(left, ["01-chair"], "refused meshes are not kept");
    })
    .await;
}

#[tokio::test]
async fn no_usable_object_a_slow_service_and_a_service_that_is_down_are_clear_errors() {
    within(LIMIT, "the test", async {
        let into = tempfile::tempdir().unwrap();
        let broken = service(json!([object("cut", "meshes/cut.glb")]));
        let err = client(&broken, Duration::from_secs(30))
            .reconstruct(&pictures(), into.path())
            .await
            .unwrap_err();
        assert!(
            err.message
                .contains("could use none of the reconstruction service's objects"),
            "{err}"
        );
        assert!(err.message.contains("cut: its mesh is refused"), "{err}");

        let empty = service(json!([]));
        let err = client(&empty, Duration::from_secs(30))
            .reconstruct(&pictures(), into.path())
            .await
            .unwrap_err();
        assert!(err.message.contains("found no object"), "{err}");

        let slow = TestServer::start(|_: &Request| {
            Reply::json(200, r#"{"objects": []}"#).after(Duration::from_secs(5))
        })
        .unwrap();
        let started = std::time::Instant::now();
        let err = client(&slow, Duration::from_millis(500))
            .reconstruct(&pictures(), into.path())
            .await
            .unwrap_err();
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "the deadline holds"
        );
        assert!(
            err.message
                .contains("the reconstruction service did not finish the reconstruction request"),
            "{err}"
        );

        let not_json = TestServer::start(|_: &Request| Reply::bytes(200, "<html>oops")).unwrap();
        let err = client(&not_json, Duration::from_secs(30))
            .reconstruct(&pictures(), into.path())
            .await
            .unwrap_err();
        assert!(
            err.message.contains("is not JSON") && err.message.contains("docs/init-service.md"),
            "{err}"
        );

        let failing = TestServer::start(|_: &Request| {
            Reply::json(500, r#"{"message": "CUDA out of memory"}"#)
        })
        .unwrap();
        let err = client(&failing, Duration::from_secs(30))
            .reconstruct(&pictures(), into.path())
            .await
            .unwrap_err();
        assert!(
            err.message.contains("HTTP 500") && err.message.contains("CUDA out of memory"),
            "{err}"
        );

        let down = ReconstructionService::new(ReconstructionConfig::new(format!(
            "{}/reconstruct",
            closed_address().unwrap()
        )))
        .unwrap();
        let err = down
            .reconstruct(&pictures(), into.path())
            .await
            .unwrap_err();
        assert!(
            err.message
                .contains("the reconstruction service cannot be reached")
                && err.message.contains("docs/init-service.md"),
            "{err}"
        );
        assert!(ReconstructionService::new(ReconstructionConfig::new("gpu-box:8765")).is_err());
    })
    .await;
}

/// The adapter that serves VIGA's SAM / SAM-3D reconstruction
/// (`tools/init_service/sam3d_adapter.py`) speaks the contract: run here with stand-ins for
/// VIGA's two workers (the models need GPUs and their weights, so they never run in tests),
/// its answer is one this client takes, with the meshes it made and VIGA's poses turned into
/// Blender's coordinates.
#[tokio::test]
async fn the_sam3d_adapter_speaks_the_contract_with_stand_in_workers() {
    use tokio::io::AsyncBufReadExt as _;
    within(LIMIT, "the test", async {
        let viga = tempfile::tempdir().unwrap();
        let tools = viga.path().join("tools");
        std::fs::create_dir_all(&tools).unwrap();
        let cube = viga.path().join("cube.glb");
        std::fs::write(&cube, cube_glb("stand-in")).unwrap();
        // VIGA's SAM worker writes one mask per object and their names beside --out.
        std::fs::write(
            tools.join("sam_worker.py"),
            "import argparse, json, os\np = argparse.ArgumentParser()\np.add_argument('--image')\np.add_argument('--out')\na = p.parse_args()\nfor n in ['red_chair', 'table']:\n    open(os.path.join(os.path.dirname(a.out), n + '.npy'), 'wb').write(b'mask')\njson.dump({'object_mapping': ['red_chair', 'table']}, open(a.out.replace('.npy', '_object_names.json'), 'w'))\n",
        )
        .unwrap();
        // VIGA's SAM-3D worker exports a GLB and prints its pose as its last line.
        std::fs::write(
            tools.join("sam3d_worker.py"),
            format!(
                "import argparse, json, shutil\np = argparse.ArgumentParser()\nfor f in ['--image', '--mask', '--config', '--glb']:\n    p.add_argument(f)\na = p.parse_args()\nshutil.copy({:?}, a.glb)\nprint('loading the model...')\nprint(json.dumps({{'glb_path': a.glb, 'translation': [[0.1, 0.2, 2.0]], 'rotation': [[1.0, 0.0, 0.0, 0.0]], 'scale': [[0.5, 0.5, 0.5]]}}))\n",
                cube.display().to_string()
            ),
        )
        .unwrap();
        let adapter = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tools/init_service/sam3d_adapter.py");
        let work = tempfile::tempdir().unwrap();
        let mut child = tokio::process::Command::new("python3")
            .arg(&adapter)
            .arg("--viga")
            .arg(viga.path())
            .args(["--sam-python", "python3", "--sam3d-python", "python3", "--port", "0"])
            .arg("--work")
            .arg(work.path())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let first = tokio::io::BufReader::new(stdout)
            .lines()
            .next_line()
            .await
            .unwrap()
            .unwrap();
        let url = first
            .split(" at ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .unwrap_or_else(|| panic!("no address in {first:?}"))
            .to_owned();
        let into = tempfile::tempdir().unwrap();
        let made = ReconstructionService::new(ReconstructionConfig::new(url))
            .unwrap()
            .reconstruct(&pictures(), into.path())
            .await
            .unwrap();
        let names: Vec<&str> = made.objects.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(names, ["red_chair", "table"]);
        assert!(made.refused.is_empty(), "{:?}", made.refused);
        let transform = made.objects[0].transform;
        assert_eq!(transform.location, [0.1, -0.2, -2.0], "OpenCV's Y and Z flipped");
        assert_eq!(transform.rotation_quaternion, [0.0, 1.0, 0.0, 0.0], "a half turn about X");
        assert_eq!(transform.scale, [0.5; 3]);
        assert_eq!(std::fs::read(&made.objects[1].mesh).unwrap(), cube_glb("stand-in"));
        assert_eq!(made.answer["objects"][0]["confidence_source"], "default");
        child.kill().await.unwrap();
    })
    .await;
}
