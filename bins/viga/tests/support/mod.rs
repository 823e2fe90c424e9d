//! Helpers shared by the tests that drive a person's Blender (a headless host).
#![allow(dead_code)] // each test file uses the helpers it needs

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use viga_blender::{BlenderLauncher, locate};
use viga_testkit::{BLENDER_TEST_LIMIT, status_within};

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
