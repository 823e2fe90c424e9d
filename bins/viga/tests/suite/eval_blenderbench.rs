//! `viga eval blenderbench` as a user runs it, on real Blender: the agent with a scripted
//! session (labelled: no model) on one mini-suite instance of each level, judged by a scripted
//! judge whose third answer is out of range.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic: that is how tests fail

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use viga_testkit::{BLENDER_TEST_LIMIT, output_within};

const VIGA: &str = env!("CARGO_BIN_EXE_viga");

fn workspace_file(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

fn json(path: PathBuf) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
        .unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

#[test]
fn the_agent_runs_each_level_end_to_end_and_the_judge_is_labelled_and_never_guessed() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let output = output_within(
        Command::new(VIGA)
            .args(["eval", "blenderbench", "--data"])
            .arg(workspace_file("fixtures/blenderbench-mini"))
            .arg("--out")
            .arg(&out)
            .args([
                "--instances",
                "level1-camera1,level2-edit1,level3-compose1",
                "--provider",
                "scripted",
                "--script",
            ])
            .arg(workspace_file("fixtures/sessions/blenderbench_mini.json"))
            .args(["--judge-provider", "scripted", "--judge-script"])
            .arg(workspace_file("fixtures/sessions/blenderbench_judge.json"))
            .args([
                "--max-iterations",
                "1",
                "--verifier-resolution",
                "32",
                "--resolution",
                "32",
                "--samples",
                "4",
            ])
            .stdin(Stdio::null()),
        BLENDER_TEST_LIMIT,
    );
    // The report is in the output folder; a failure says why on stderr.
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );

    for instance in ["level1-camera1", "level2-edit1", "level3-compose1"] {
        let scores = json(out.join(instance).join("scores.json"));
        // The scripted programs reach each goal: the loop's final program is what is scored.
        assert_eq!(scores["executable"], true, "{scores}");
        assert_eq!(scores["pl"], 0.0, "{scores}");
        let note = scores["proposal_note"].as_str().unwrap();
        assert!(note.starts_with("1 iterations, accepted"), "{note}");
        assert!(out.join(instance).join("agent").is_dir());
    }
    // Camera adjustment: the final program moves the camera and touches nothing else.
    let program = std::fs::read_to_string(out.join("level1-camera1/proposal.py")).unwrap();
    let start = std::fs::read_to_string(workspace_file(
        "fixtures/blenderbench-mini/level1/camera1/start.py",
    ))
    .unwrap();
    assert_ne!(program, start);
    assert!(
        program
            .lines()
            .filter(|line| line.contains("= "))
            .all(|line| line.starts_with("camera")),
        "{program}"
    );

    // The judge: two valid answers (one wrapped in prose and a fence) and one out of range,
    // which is a failed judgement, not a score.
    let judged = |instance: &str| json(out.join(instance).join("scores.json"))["judge"].clone();
    assert_eq!(judged("level1-camera1")["outcome"], "judged");
    assert_eq!(judged("level1-camera1")["scores"]["task_completion"], 5);
    assert_eq!(judged("level2-edit1")["scores"]["detail_accuracy"], 3);
    let failed = judged("level3-compose1");
    assert_eq!(failed["outcome"], "failed", "{failed}");
    let error = failed["error"].as_str().unwrap();
    assert!(
        error.contains("not a valid judgement") && error.contains("/task_completion"),
        "{error}"
    );

    let summary = json(out.join("summary.json"));
    let levels = summary["judge"].as_array().unwrap();
    assert_eq!(levels.len(), 3);
    assert_eq!(levels[0]["mean"], 4.5);
    assert_eq!(levels[1]["mean"], 3.5);
    assert_eq!(
        (levels[2]["judged"].clone(), levels[2]["failed"].clone()),
        (0.into(), 1.into())
    );
    assert!(levels[2]["mean"].is_null(), "{summary}");
    assert!(
        summary["settings"]["judge"]
            .as_str()
            .unwrap()
            .starts_with("scripted")
    );
    let table = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        table.contains("L1 judge (VLM, 0-5, higher is better)")
            && table.contains("| 4.50 | 3.50 | n/a |"),
        "{table}"
    );
    assert!(
        table.contains("a vision-language model's reference-free rating"),
        "{table}"
    );
}

#[test]
fn the_search_baseline_and_a_gym_task_are_refused_before_blender_starts() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    for (flags, expected) in [
        (
            ["--baseline", "search"],
            "the search baseline is run on BlenderGym only",
        ),
        (
            ["--levels", "placement"],
            "placement is not a BlenderBench task; BlenderBench's are level1, level2, level3",
        ),
    ] {
        let mut command = Command::new(VIGA);
        command
            .args(["eval", "blenderbench", "--data"])
            .arg(workspace_file("fixtures/blenderbench-mini"))
            .arg("--out")
            .arg(&out)
            .args(flags);
        if flags[0] == "--levels" {
            command.args(["--baseline", "noop"]);
        }
        let output = output_within(&mut command, BLENDER_TEST_LIMIT);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success());
        assert!(stderr.contains(expected), "{stderr}");
        assert!(!out.exists(), "nothing is written");
    }
}
