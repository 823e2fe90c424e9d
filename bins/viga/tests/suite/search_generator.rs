//! `viga run --generator search`: no model, real Blender, a real target picture.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic: that is how tests fail

use std::path::Path;
use std::process::Command;

use viga_testkit::{BLENDER_TEST_LIMIT, output_within};

#[test]
fn the_search_generator_moves_the_scene_towards_the_target() {
    let instance =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/blendergym-mini/placement1");
    let out = tempfile::tempdir().unwrap();
    let output = output_within(
        Command::new(env!("CARGO_BIN_EXE_viga"))
            .args([
                "run",
                "--generator",
                "search",
                "--task",
                "match the placement",
                "--camera",
                "Camera1",
            ])
            .args([
                "--engine",
                "cycles",
                "--samples",
                "4",
                "--search-budget",
                "30",
            ])
            .arg("--base")
            .arg(instance.join("blender_file.blend"))
            .arg("--start")
            .arg(instance.join("start.py"))
            .arg("--target")
            .arg(instance.join("renders/goal/render1.png"))
            .arg("--output")
            .arg(out.path()),
        BLENDER_TEST_LIMIT,
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let folder = std::fs::read_dir(out.path().join("search"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
        .join("match-the-placement");
    let result: serde_json::Value =
        serde_json::from_slice(&std::fs::read(folder.join("result.json")).unwrap()).unwrap();
    let (start, best) = (
        result["start_photometric_loss"].as_f64().unwrap(),
        result["best_photometric_loss"].as_f64().unwrap(),
    );
    assert!(best < start, "PL {start} -> {best}\n{stdout}");
    assert!(folder.join("best.py").is_file() && folder.join("best.png").is_file());
    // Its programs ran contained, and the folder says so.
    let status: serde_json::Value =
        serde_json::from_slice(&std::fs::read(folder.join("containment.json")).unwrap()).unwrap();
    assert_eq!(status["reads"]["active"], true, "{status}");
    assert!(result["programs_scored"].as_u64().unwrap() <= 30);
}

#[test]
fn the_search_generator_says_what_it_needs() {
    let output = output_within(
        Command::new(env!("CARGO_BIN_EXE_viga")).args([
            "run",
            "--generator",
            "search",
            "--task",
            "x",
            "--provider",
            "scripted",
        ]),
        BLENDER_TEST_LIMIT,
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("needs --start"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
