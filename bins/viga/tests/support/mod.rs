//! Helpers several of viga's end-to-end tests share (each test file includes this module; the
//! helpers one file does not use are not dead, they are another file's): blends, scripted
//! turns, and a headless Blender with the viga extension installed as a person has it.
#![allow(dead_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic: that is how tests fail

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use viga_blender::addon::{HostOptions, RunningHost, ServerLogin, build_zip, start_host};
use viga_blender::attach::{Connection, attach};
use viga_blender::client::FramedClient;
use viga_blender::locate;
use viga_testkit::{BLENDER_TEST_LIMIT, status_within};

const VIGA: &str = env!("CARGO_BIN_EXE_viga");

/// A headless Blender with the viga extension installed from its zip, as a person would
/// have it (a .blend open, add-ons of a folder loaded, dialled out to a server when asked);
/// killed when dropped.
pub struct Host {
    pub child: Child,
    pub connection: PathBuf,
    pub dir: tempfile::TempDir,
}

impl Host {
    /// `server`: the server's URL, the user and their token.
    pub fn start(blend: &Path, addons: Option<&Path>, server: Option<(&str, &str, &str)>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let zip = build_zip(&dir.path().join("dist")).unwrap();
        let options = HostOptions {
            user_dir: dir.path().join("blender-user"),
            blend: Some(blend.to_path_buf()),
            stats: None,
            connection_dir: Some(dir.path().join("connections")),
            addons: addons.map(Path::to_path_buf),
            server: server.map(|(url, username, token)| ServerLogin {
                url: url.to_owned(),
                username: username.to_owned(),
                token: token.to_owned(),
                config_dir: dir.path().join("config"),
                files: dir.path().join("server-files"),
            }),
        };
        let RunningHost { child, connection } =
            start_host(&locate().unwrap(), &zip, &options, 3 * BLENDER_TEST_LIMIT).unwrap();
        Self {
            child,
            connection,
            dir,
        }
    }

    /// Its bridge, as `viga --attach` reaches it.
    pub async fn client(&self) -> FramedClient {
        let connection = Connection::read(&self.connection).unwrap();
        attach(&connection, Duration::from_secs(60)).await.unwrap()
    }

    pub fn connection_dir(&self) -> PathBuf {
        self.dir.path().join("connections")
    }

    /// The folder the server's add-on commands may name (when it dialled out).
    pub fn server_files(&self) -> PathBuf {
        self.dir.path().join("server-files")
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn workspace_file(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(relative)
}

/// A person's .blend: a table at the origin and a lamp off to its right.
pub fn table_and_lamp_blend(dir: &Path) -> PathBuf {
    blend_with(
        dir,
        "room.blend",
        "bpy.ops.mesh.primitive_cube_add(size=1, location=(0, 0, 0.5))\nbpy.context.object.name = 'Table'\n\
         bpy.ops.mesh.primitive_cube_add(size=0.4, location=(3, 0, 0.2))\nbpy.context.object.name = 'Lamp'\n",
    )
}

/// A scripted model session `dir/name` holding `turns` (a JSON array), for `--script`.
pub fn script_file(dir: &Path, name: &str, turns: Value) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(
        &path,
        json!({"description": name, "turns": turns}).to_string(),
    )
    .unwrap();
    path
}

/// A scripted turn that answers `text` to a request meeting `expect`.
pub fn turn(expect: Value, text: &str) -> Value {
    json!({"expect": expect, "response": {"text": text, "finish_reason": "stop"}})
}

/// A Geometry Nodes reply with `steps` that says it is done with `message`.
pub fn gn_reply(expect: Value, steps: Value, message: &str) -> Value {
    let reply = json!({"version": 1, "steps": steps, "done": true, "final_message": message});
    turn(expect, &reply.to_string())
}

/// A .blend `name` in `dir` holding what `objects` (Blender Python, after an empty factory
/// scene) makes, written by the bpy module.
pub fn blend_with(dir: &Path, name: &str, objects: &str) -> PathBuf {
    let path = dir.join(name);
    let script = format!(
        "import bpy\nbpy.ops.wm.read_factory_settings(use_empty=True)\n{objects}\
         bpy.ops.wm.save_as_mainfile(filepath={:?})\n",
        path.display().to_string()
    );
    let viga_blender::BlenderLauncher::PythonModule { python } = locate().unwrap() else {
        panic!("this test needs the bpy module (cargo xtask setup)")
    };
    let status = status_within(
        Command::new(python)
            .args(["-c", &script])
            .stdout(Stdio::null()),
        BLENDER_TEST_LIMIT,
    );
    assert!(status.success());
    path
}

/// A .blend with a 4 m plane named Plane.
pub fn plane_blend(dir: &Path) -> PathBuf {
    blend_with(
        dir,
        "plane.blend",
        "bpy.ops.mesh.primitive_plane_add(size=4)\nbpy.context.object.name = 'Plane'\n",
    )
}

/// A Geometry Nodes step that scatters points on `object`'s faces (group and modifier
/// "Scatter").
pub fn scatter_steps(object: &str) -> Value {
    json!([{"id": "scatter", "type": "GN_OPS", "payload": {"ops": [
        {"op": "ensure_target", "object": object, "modifier": "Scatter"},
        {"op": "ensure_single_group_io"},
        {"op": "add_node", "id": "points", "bl_idname": "GeometryNodeDistributePointsOnFaces"},
        {"op": "link", "from_node": "Group Input", "from_socket": "Geometry", "to_node": "points", "to_socket": "Mesh"},
        {"op": "link", "from_node": "points", "from_socket": "Points", "to_node": "Group Output", "to_socket": "Geometry"}
    ]}}])
}

/// The three requests of a run whose program showed the model its whole environment, was
/// fixed, then judged: each carried `key`, and the request that showed the environment (the
/// fix's) did not hold it.
pub fn assert_the_key_reached_the_server_alone(server: &viga_testkit::http::TestServer, key: &str) {
    let requests = server.requests();
    assert_eq!(requests.len(), 3, "{:?}", server.lines());
    for request in &requests {
        assert_eq!(
            request.header("authorization"),
            Some(format!("Bearer {key}").as_str())
        );
    }
    let fix = String::from_utf8_lossy(&requests[1].body);
    assert!(
        fix.contains("PATH"),
        "the program's environment was not shown: {fix}"
    );
    assert!(
        !fix.contains(key),
        "a model program's environment held the key"
    );
}
