//! The add-on's panels, preferences, operators and runner, checked inside real Blender (the
//! bpy module has no UI: `draw()` runs against a recording stand-in for `layout`, and the
//! operators run through `bpy.ops.viga.*`). The package is taken from the built zip, so what
//! is checked is what ships.

use std::process::Command;

use viga_blender::BlenderLauncher;
use viga_blender::addon::{EXTENSION_ID, build_zip};
use viga_testkit::{BLENDER_TEST_LIMIT, output_within};

#[test]
fn panels_and_operators_work_in_blender() {
    let BlenderLauncher::PythonModule { python } = super::blender() else {
        panic!("the panel checks need the bpy module (cargo xtask setup)");
    };
    let dir = tempfile::tempdir().unwrap();
    let zip = build_zip(dir.path(), None).unwrap();
    let package = dir.path().join("package").join(EXTENSION_ID);
    std::fs::create_dir_all(&package).unwrap();
    zip::ZipArchive::new(std::fs::File::open(&zip).unwrap())
        .unwrap()
        .extract(&package)
        .unwrap();
    let checks = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("addon/tests/ui_checks.py");
    let output = output_within(
        Command::new(python)
            .arg(&checks)
            .arg("--")
            .arg("--package-dir")
            .arg(dir.path().join("package"))
            .env("VIGA_CONNECTION_DIR", dir.path().join("connections")),
        BLENDER_TEST_LIMIT,
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let summary = stdout.lines().last().unwrap_or_default();
    assert!(
        output.status.success() && summary.ends_with(" 0 failed"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let passed: u32 = summary.split(' ').next().unwrap().parse().unwrap();
    assert!(passed >= 20, "only {passed} checks ran: {summary}");
}
