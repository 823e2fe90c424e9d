//! Kill `viga run` with SIGKILL in the middle of a run, then `viga resume` it: nothing the
//! killed process had recorded is lost, and the run continues at the next iteration.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic: that is how tests fail

use crate::support;
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::json;
use viga_testkit::{BLENDER_TEST_LIMIT, kill_after, output_within};

const CODE: &str = "import bpy\nbpy.ops.mesh.primitive_cube_add()\n";

fn turn(text: &str) -> serde_json::Value {
    json!({"response": {"text": text, "finish_reason": "stop"}})
}

fn verdict(accepted: bool) -> serde_json::Value {
    json!({"response": {"text": "", "finish_reason": "tool_calls", "tool_calls": [
        {"id": "v", "name": "end_process", "arguments": {"visual_differences": [], "suggestions": ["more"], "accepted": accepted}}
    ]}})
}

fn write_script(dir: &Path, name: &str, turns: Vec<serde_json::Value>) -> PathBuf {
    support::script_file(dir, name, serde_json::Value::from(turns))
}

/// `viga run` of a cube with the scripted model `script`, its progress on a pipe.
fn spawn_run(script: &Path, max_iterations: u32, output: &Path) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_viga"))
        .args([
            "run",
            "--task",
            "a cube",
            "--provider",
            "scripted",
            "--script",
        ])
        .arg(script)
        .arg("--max-iterations")
        .arg(max_iterations.to_string())
        .args(["--resolution", "32", "--output"])
        .arg(output)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn code_turn() -> serde_json::Value {
    turn(&format!("```python\n{CODE}```"))
}

#[test]
fn a_killed_run_resumes_at_the_next_iteration_with_nothing_lost() {
    let dir = tempfile::tempdir().unwrap();
    // Iteration 1 completes; iteration 2's code turn is missing, so the process would stop
    // there with an error, but it is killed before, as soon as iteration 2 starts.
    let first = write_script(
        dir.path(),
        "first.json",
        vec![turn("plan 1"), code_turn(), verdict(false), turn("plan 2")],
    );
    let mut child = spawn_run(&first, 3, &dir.path().join("out"));
    let watchdog = kill_after(&child, BLENDER_TEST_LIMIT, "viga run");
    let mut folder = None;
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        if let Some(path) = line.strip_prefix("run folder: ") {
            folder = Some(PathBuf::from(path));
        }
        if line.starts_with("iteration 2/") {
            child.kill().unwrap();
            break;
        }
    }
    child.wait().unwrap();
    drop(watchdog);
    let folder = folder.expect("viga printed its run folder");
    let events = std::fs::read_to_string(folder.join("events.jsonl")).unwrap();
    assert!(
        events.contains("\"iteration_finished\""),
        "iteration 1 was recorded"
    );
    assert!(
        !events.contains("\"run_finished\""),
        "the killed run never finished"
    );
    assert!(folder.join("codes/1.py").is_file());

    let second = write_script(
        dir.path(),
        "second.json",
        vec![turn("plan 2 again"), code_turn(), verdict(true)],
    );
    let output = output_within(
        Command::new(env!("CARGO_BIN_EXE_viga"))
            .arg("resume")
            .arg(&folder)
            .arg("--script")
            .arg(&second),
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
        stdout.contains("stopped after 2 iterations: the verifier accepted the result"),
        "{stdout}"
    );
    assert!(folder.join("codes/2.py").is_file() && folder.join("report.html").is_file());
    let events = std::fs::read_to_string(folder.join("events.jsonl")).unwrap();
    assert_eq!(events.matches("\"iteration_finished\"").count(), 2);
}

#[test]
fn bad_input_gets_a_clear_error_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (
            &["run", "--task", "x", "--provider", "telepathy"],
            "unknown provider \"telepathy\"",
        ),
        (
            &[
                "run",
                "--task",
                "x",
                "--provider",
                "scripted",
                "--resolution",
                "0",
            ],
            "resolution \"0\"",
        ),
        (
            &[
                "run",
                "--task",
                "x",
                "--provider",
                "scripted",
                "--engine",
                "povray",
            ],
            "unknown engine",
        ),
        (
            &[
                "run",
                "--task",
                "x",
                "--provider",
                "scripted",
                "--script",
                "/nonexistent.json",
            ],
            "/nonexistent.json",
        ),
        (&["resume", "/nonexistent-run"], "not a viga run folder"),
    ];
    for (args, expected) in cases {
        let mut command = Command::new(env!("CARGO_BIN_EXE_viga"));
        command.args(*args);
        if args[0] == "run" {
            command.arg("--output").arg(dir.path());
        }
        let output = output_within(&mut command, BLENDER_TEST_LIMIT);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "no run folder was created"
    );
}

/// SIGTERM (what a batch system or `kill` sends) stops a run as Ctrl-C does: the model call
/// in flight is abandoned, and the run folder's event log ends with `run_finished` saying it
/// was cancelled.
#[test]
fn sigterm_stops_a_run_and_its_folder_says_how_it_ended() {
    let dir = tempfile::tempdir().unwrap();
    let slow_code =
        json!({"delay_ms": 60_000, "response": {"text": "too late", "finish_reason": "stop"}});
    let script = write_script(dir.path(), "slow.json", vec![turn("plan 1"), slow_code]);
    let mut child = spawn_run(&script, 2, &dir.path().join("out"));
    let watchdog = kill_after(&child, BLENDER_TEST_LIMIT, "viga run");
    let mut folder = None;
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Some(path) = line.strip_prefix("run folder: ") {
            folder = Some(PathBuf::from(path));
        }
        // The plan is shown; the run now waits in its (slow) call for the program.
        if line.starts_with("  plan:") {
            break;
        }
    }
    let stopped_at = std::time::Instant::now();
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let status = child.wait().unwrap();
    drop(watchdog);
    assert!(stopped_at.elapsed() < std::time::Duration::from_secs(10));
    assert_eq!(status.code(), Some(130), "cancelled");
    let events = std::fs::read_to_string(folder.unwrap().join("events.jsonl")).unwrap();
    let last = events.lines().last().unwrap();
    assert!(
        last.contains("\"run_finished\"") && last.contains("cancelled"),
        "{last}"
    );
}

/// `--time-limit` stops a run whose model takes too long: exit code 0, the line says the
/// time limit passed, and the folder's last event is `run_finished` with `time_limit`.
#[test]
fn a_run_past_its_time_limit_ends_and_its_folder_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let slow_code =
        json!({"delay_ms": 60_000, "response": {"text": "too late", "finish_reason": "stop"}});
    let script = write_script(dir.path(), "slow.json", vec![turn("plan 1"), slow_code]);
    let output = dir.path().join("out");
    let ran = output_within(
        Command::new(env!("CARGO_BIN_EXE_viga"))
            .args([
                "run",
                "--task",
                "a cube",
                "--provider",
                "scripted",
                "--script",
            ])
            .arg(&script)
            .args(["--time-limit", "3s", "--resolution", "32", "--output"])
            .arg(&output),
        BLENDER_TEST_LIMIT,
    );
    let stdout = String::from_utf8_lossy(&ran.stdout);
    assert_eq!(ran.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("the time limit (3 s) passed"), "{stdout}");
    let folder = stdout
        .lines()
        .find_map(|line| line.strip_prefix("run folder: "))
        .map(PathBuf::from)
        .unwrap();
    let events = std::fs::read_to_string(folder.join("events.jsonl")).unwrap();
    let last: serde_json::Value = serde_json::from_str(events.lines().last().unwrap()).unwrap();
    assert_eq!(last["type"], "run_finished", "{last}");
    assert_eq!(last["stop"], json!({"reason": "time_limit", "seconds": 3}));
}

/// A target picture that is not a whole picture is refused before anything starts, in every
/// mode (issue 35): the script has no turn, so a model call would fail the run another way,
/// and no run folder is left.
#[test]
fn a_corrupt_target_is_refused_before_any_model_call() {
    let dir = tempfile::tempdir().unwrap();
    let mut png = viga_testkit::picture::halves_png(32, 32);
    png.truncate(png.len() / 2);
    let corrupt = dir.path().join("goal.png");
    std::fs::write(&corrupt, &png).unwrap();
    let script = write_script(dir.path(), "none.json", Vec::new());
    let output = dir.path().join("out");
    for mode in [
        &["--mode", "scene"][..],
        &["--mode", "slides"][..],
        &["--mode", "page", "--viewport", "320x240"][..],
    ] {
        let mut command = Command::new(env!("CARGO_BIN_EXE_viga"));
        command
            .args(["run", "--task", "x", "--provider", "scripted", "--script"])
            .arg(&script)
            .args(mode)
            .arg("--target")
            .arg(&corrupt)
            .arg("--output")
            .arg(&output);
        let ran = output_within(&mut command, BLENDER_TEST_LIMIT);
        let stderr = String::from_utf8_lossy(&ran.stderr);
        assert_eq!(ran.status.code(), Some(2), "{mode:?}: {stderr}");
        assert!(
            stderr.contains("cannot be read as a picture") && stderr.contains("goal.png"),
            "{mode:?}: {stderr}"
        );
    }
    assert!(!output.exists(), "no run folder was created");
}
