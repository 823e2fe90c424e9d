//! Run folders written before the domains moved to crates of their own (a scene run and a
//! slides run, `fixtures/runs/before-domain-crates/`) resume and get their report with the
//! viga of today: their `args.json` names their domain as it did then.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic: that is how tests fail
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;
use viga_testkit::{BLENDER_TEST_LIMIT, output_within};

use crate::support;

/// A copy of the fixture run folder `name`, to resume without touching the checkout.
fn copy_of(name: &str, into: &Path) -> PathBuf {
    let from = support::workspace_file(&format!("fixtures/runs/before-domain-crates/{name}"));
    let to = into.join(name);
    copy_folder(&from, &to);
    to
}

fn copy_folder(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_folder(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// A script whose generator writes `program` in `language` and whose verifier accepts.
fn accepting_script(dir: &Path, language: &str, program: &str) -> PathBuf {
    let turn = |text: &str| json!({"response": {"text": text, "finish_reason": "stop"}});
    let verdict = json!({"response": {"text": "", "finish_reason": "tool_calls", "tool_calls": [
        {"id": "v", "name": "end_process", "arguments": {"visual_differences": [], "suggestions": [], "accepted": true}}
    ]}});
    let turns = json!([
        turn("2. keep it"),
        turn(&format!("```{language}\n{program}```")),
        verdict
    ]);
    support::script_file(dir, "resume.json", turns)
}

fn resumes_and_reports(name: &str, language: &str, program: &str, described: &str) {
    let dir = tempfile::tempdir().unwrap();
    let folder = copy_of(name, dir.path());
    let script = accepting_script(dir.path(), language, program);
    let output = output_within(
        Command::new(env!("CARGO_BIN_EXE_viga"))
            .arg("resume")
            .arg(&folder)
            .args(["--max-iterations", "2", "--script"])
            .arg(&script),
        BLENDER_TEST_LIMIT,
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("resuming at iteration 2"), "{stdout}");
    assert!(
        stdout.contains("stopped after 2 iterations: the verifier accepted"),
        "{stdout}"
    );
    let report = dir.path().join("report.html");
    let output = output_within(
        Command::new(env!("CARGO_BIN_EXE_viga"))
            .arg("report")
            .arg(&folder)
            .arg("--out")
            .arg(&report),
        BLENDER_TEST_LIMIT,
    );
    assert!(output.status.success(), "{output:?}");
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(html.contains(described), "the report names the domain");
    assert_eq!(html.matches("<h2>Iteration ").count(), 2, "both iterations");
}

#[test]
fn a_scene_run_from_before_the_domain_crates_resumes_and_reports() {
    resumes_and_reports(
        "scene",
        "python",
        "import bpy\nbpy.ops.mesh.primitive_cube_add()\n",
        "Blender scene; verifier renders",
    );
}

#[test]
fn a_slides_run_from_before_the_domain_crates_resumes_and_reports() {
    resumes_and_reports(
        "slides",
        "python",
        "import os\nfrom pptx import Presentation\nprs = Presentation()\nslide = prs.slides.add_slide(prs.slide_layouts[5])\nslide.shapes.title.text = 'Hello'\nprs.save(os.environ['VIGA_DECK_PATH'])\n",
        "slides: python-pptx programs, each slide rendered by LibreOffice",
    );
}
