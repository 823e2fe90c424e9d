//! What a run's result may bring into a person's Blender (the bridge's `import_scene_result`
//! and `import_gn_result`), checked in real Blender by `python/tests/result_checks.py`: a
//! result is made as viga's worker makes it (its program on a copy of the person's scene,
//! fingerprints, the run's own assets packed, the scene saved), then taken in by the
//! person's scene. What would read or write a file there (every Geometry Nodes importer,
//! a File Output node, an image, font or volume by path, a sound, a movie clip, a setting
//! naming a file) is refused with the scene as it was; the run's own images and fonts come
//! in packed, the person's own image stays theirs, and Blender's built-in font comes in.

use std::path::Path;
use std::process::Command;

use viga_blender::BlenderLauncher;
use viga_testkit::{BLENDER_TEST_LIMIT, output_within};

#[test]
fn results_that_would_read_files_are_refused_and_their_own_assets_come_in() {
    let BlenderLauncher::PythonModule { python } = super::blender() else {
        panic!("the result checks need the bpy module (cargo xtask setup)");
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/tests/result_checks.py");
    let output = output_within(Command::new(python).arg(script), BLENDER_TEST_LIMIT);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let summary = stdout.lines().last().unwrap_or_default();
    assert!(
        output.status.success() && summary.ends_with(" 0 failed"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // One check per kind: a check dropped from the script must be dropped here too.
    let passed: u32 = summary.split(' ').next().unwrap().parse().unwrap();
    assert!(passed >= 16, "only {passed} checks ran: {summary}");
}
