//! The add-on's panels, preferences, operators and runner, checked inside real Blender (the
//! bpy module has no UI: `draw()` runs against a recording stand-in for `layout`, and the
//! operators run through `bpy.ops.viga.*`). The package is taken from the built zip, so what
//! is checked is what ships.

use std::path::{Path, PathBuf};
use std::process::Command;

use viga_blender::addon::{EXTENSION_ID, build_zip};

use super::{bpy_python, run_checks};

/// The extension's package as it ships: the built zip, extracted into `dir/package/`.
fn shipped_package(dir: &Path) -> PathBuf {
    let zip = build_zip(dir).unwrap();
    let package = dir.join("package").join(EXTENSION_ID);
    std::fs::create_dir_all(&package).unwrap();
    zip::ZipArchive::new(std::fs::File::open(&zip).unwrap())
        .unwrap()
        .extract(&package)
        .unwrap();
    dir.join("package")
}

fn checks_script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("addon/tests")
        .join(name)
}

#[test]
fn panels_and_operators_work_in_blender() {
    let python = bpy_python();
    let dir = tempfile::tempdir().unwrap();
    let package = shipped_package(dir.path());
    run_checks(
        Command::new(python)
            .arg(checks_script("ui_checks.py"))
            .arg("--")
            .arg("--package-dir")
            .arg(package)
            .env("VIGA_CONNECTION_DIR", dir.path().join("connections")),
        20,
    );
}

/// The add-on's WebSocket client against a server that sends, frame by frame, what real
/// servers rarely do; and its rule for the files a server may name.
#[test]
fn the_dial_out_websocket_client_holds_against_a_hostile_server() {
    run_checks(
        Command::new(bpy_python()).arg(checks_script("websocket_checks.py")),
        9,
    );
}

/// The dial-out in real Blender, against a server that asks for what a viga server may not.
#[test]
fn a_dialled_out_blender_answers_what_a_server_may_ask_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let package = shipped_package(dir.path());
    run_checks(
        Command::new(bpy_python())
            .arg(checks_script("dialout_checks.py"))
            .arg("--")
            .arg("--package-dir")
            .arg(package)
            .env("VIGA_CONNECTION_DIR", dir.path().join("connections"))
            .env("VIGA_CONFIG_DIR", dir.path().join("config"))
            .env("BLENDER_USER_RESOURCES", dir.path().join("blender-user")),
        4,
    );
}
