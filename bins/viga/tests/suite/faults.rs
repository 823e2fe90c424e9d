//! Faults through the command line: a program that never finishes is stopped at
//! `--program-timeout` and answered by a fast retry, and every kind of failure ends `viga
//! run` with its own exit code and a line saying what to do. Real Blender; the model servers
//! are a few lines of HTTP on loopback.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic: that is how tests fail

use crate::support;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};
use viga_testkit::http::{Reply, Request, TestServer};
use viga_testkit::{BLENDER_TEST_LIMIT, output_within};

const GOOD_CODE: &str = "import bpy\nbpy.ops.mesh.primitive_cube_add()\n";

fn turn(text: &str) -> Value {
    json!({"response": {"text": text, "finish_reason": "stop"}})
}

fn code_turn(code: &str) -> Value {
    turn(&format!("```python\n{code}```"))
}

fn write_script(dir: &Path, turns: Vec<Value>) -> PathBuf {
    support::script_file(dir, "script.json", Value::from(turns))
}

fn viga_run(dir: &Path, extra: &[&str]) -> Output {
    output_within(
        Command::new(env!("CARGO_BIN_EXE_viga"))
            .args(["run", "--task", "a cube", "--resolution", "32"])
            .args(["--max-iterations", "1", "--output"])
            .arg(dir.join("out"))
            .args(extra),
        BLENDER_TEST_LIMIT,
    )
}

/// The run events of a `--events jsonl` run, in order.
fn events(output: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| line["kind"] == "event")
        .map(|line| line["event"].clone())
        .collect()
}

#[test]
fn a_program_that_never_finishes_is_answered_by_a_fast_retry_within_seconds() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_script(
        dir.path(),
        vec![
            turn("1. a cube"),
            code_turn(
                "print('building the cube')\ni = 0\nwhile True:\n    i += 1\n    if i % 2000000 == 0:\n        print('still going', i)\n",
            ),
            // The model is told what the program printed before it was stopped.
            json!({"expect": {"last_message_contains": "still going"},
                   "response": {"text": format!("```python\n{GOOD_CODE}```"), "finish_reason": "stop"}}),
            json!({"response": {"text": "", "finish_reason": "tool_calls", "tool_calls": [
                {"id": "v", "name": "end_process", "arguments": {"visual_differences": [], "suggestions": [], "accepted": true}}
            ]}}),
        ],
    );
    let output = viga_run(
        dir.path(),
        &[
            "--provider",
            "scripted",
            "--script",
            script.to_str().unwrap(),
            "--program-timeout",
            "5",
            "--events",
            "jsonl",
        ],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let events = events(&output);
    let at = |kind: &str| {
        events
            .iter()
            .find(|event| event["type"] == kind)
            .unwrap_or_else(|| panic!("no {kind} event: {events:#?}"))
    };
    let looping_since = at("code_produced")["unix_ms"].as_u64().unwrap();
    let retry = at("fast_retry");
    let answered_after = retry["unix_ms"].as_u64().unwrap() - looping_since;
    assert!(
        answered_after < 15_000,
        "the fast retry came {answered_after} ms after the endless program started"
    );
    assert!(
        retry["error"]
            .as_str()
            .unwrap()
            .starts_with("The program did not finish within 5 s"),
        "{retry}"
    );
    let stopped = at("execution_finished");
    let kept = stopped["result"]["stdout"].as_str().unwrap();
    assert!(
        kept.starts_with("building the cube\nstill going"),
        "{stopped}"
    );
    assert_eq!(
        (
            &stopped["failure"],
            &stopped["result"]["error"]["error_type"]
        ),
        (&json!("E1"), &json!(viga_core::PROGRAM_TIMEOUT_ERROR))
    );
    let record = &at("iteration_finished")["record"];
    assert_eq!(record["retry_count"], 1);
    assert!(record.get("failure").is_none(), "{record}");
    assert_eq!(at("run_finished")["stop"]["reason"], "accepted");
}

/// What the stand-in model server answers, chosen by the model name a request asks for.
fn answer_for(model: &str) -> (u16, &'static str) {
    match model {
        "wrong-key" => (
            401,
            r#"{"error": {"message": "Incorrect API key provided"}}"#,
        ),
        "down" => (503, r#"{"error": {"message": "the server is overloaded"}}"#),
        "too-long" => (
            400,
            r#"{"error": {"message": "This model's maximum context length is 8192 tokens.", "code": "context_length_exceeded"}}"#,
        ),
        _ => (404, r#"{"error": "model not found"}"#),
    }
}

/// Serves [`answer_for`] on a loopback port until it is dropped; its base URL is `…/v1`.
fn model_server() -> TestServer {
    TestServer::start(|request: &Request| {
        let (status, reply) = answer_for(request.json()["model"].as_str().unwrap_or_default());
        Reply::json(status, reply)
    })
    .unwrap()
}

#[test]
fn each_kind_of_failure_has_its_own_exit_code_and_says_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let server = model_server();
    let url = format!("{}/v1", server.base());
    let config = |model: &str| {
        let path = dir.path().join(format!("{model}.json"));
        // Tool calling said, so no probe asks the server first (this is about failures).
        let settings = json!({"kind": "openai_compatible", "model": model, "base_url": url,
                              "retry": {"max_attempts": 1}, "tool_calling": false});
        std::fs::write(&path, settings.to_string()).unwrap();
        path
    };
    let cases = [
        ("wrong-key", 3, "check the API key"),
        ("down", 4, "try again later"),
        ("too-long", 5, "smaller --memory"),
        ("no-such-model", 6, "check --model"),
    ];
    for (model, code, advice) in cases {
        // A folder each: runs of the same task in the same second would share a run folder.
        let output = viga_run(
            &dir.path().join(model),
            &["--provider-config", config(model).to_str().unwrap()],
        );
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(output.status.code(), Some(code), "{model}: {stdout}");
        let resumable = model != "too-long";
        assert!(
            stdout.contains("what to do: ")
                && stdout.contains(advice)
                && stdout.contains("viga resume") == resumable,
            "{model}: {stdout}"
        );
    }

    let script = write_script(dir.path(), vec![turn("plan")]);
    let no_blender = output_within(
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
            .arg("--output")
            .arg(dir.path().join("out"))
            .env("VIGA_BLENDER", dir.path().join("no-blender-here")),
        BLENDER_TEST_LIMIT,
    );
    let stderr = String::from_utf8_lossy(&no_blender.stderr);
    assert_eq!(no_blender.status.code(), Some(7), "{stderr}");
    assert!(
        stderr.contains("what to do:") && stderr.contains("viga doctor"),
        "{stderr}"
    );
}
