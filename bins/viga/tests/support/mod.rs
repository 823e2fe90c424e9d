//! Helpers shared by the tests that drive a person's Blender (a headless host).
#![allow(dead_code)] // each test file uses the helpers it needs

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use viga_blender::addon::{HostOptions, RunningHost, ServerLogin, build_zip, start_host};
use viga_blender::attach::{Connection, attach};
use viga_blender::client::FramedClient;
use viga_blender::{BlenderLauncher, locate};
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
        let zip = build_zip(&dir.path().join("dist"), Some(Path::new(VIGA))).unwrap();
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
    let path = dir.join("room.blend");
    let script = format!(
        "import bpy\nbpy.ops.wm.read_factory_settings(use_empty=True)\n\
         bpy.ops.mesh.primitive_cube_add(size=1, location=(0, 0, 0.5))\nbpy.context.object.name = 'Table'\n\
         bpy.ops.mesh.primitive_cube_add(size=0.4, location=(3, 0, 0.2))\nbpy.context.object.name = 'Lamp'\n\
         bpy.ops.wm.save_as_mainfile(filepath={:?})\n",
        path.display().to_string()
    );
    let BlenderLauncher::PythonModule { python } = locate().unwrap() else {
        panic!("these tests need the bpy module (cargo xtask setup)");
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
