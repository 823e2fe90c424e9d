//! Keys stay put: a model program that prints its whole environment (what a prompt-injected
//! model writes) finds no API key or gateway token in Blender, so none reaches the run folder,
//! the next prompt (built from that folder's records) or viga's output.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic: that is how tests fail

use std::path::Path;
use std::process::Command;

use serde_json::json;

use crate::support;

use support::assert_the_key_reached_the_server_alone;

const CANARIES: [(&str, &str); 4] = [
    ("OPENAI_API_KEY", "sk-canary-openai-7c41"),
    ("ANTHROPIC_API_KEY", "sk-ant-canary-93d2"),
    ("GEMINI_API_KEY", "canary-gemini-5e08"),
    ("VIGA_GATEWAY_TOKEN", "canary-gateway-token-1f6a"),
];

fn turn(text: &str) -> serde_json::Value {
    json!({"response": {"text": text, "finish_reason": "stop"}})
}

fn files_below(dir: &Path, found: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().filter_map(Result::ok) {
        let path = entry.path();
        if path.is_dir() {
            files_below(&path, found);
        } else {
            found.push(path);
        }
    }
}

#[test]
fn a_program_printing_its_environment_finds_no_secret() {
    let dir = tempfile::tempdir().unwrap();
    let program =
        "import os\nfor name, value in sorted(os.environ.items()):\n    print(name, '=', value)\n";
    let verdict = json!({"response": {"text": "", "finish_reason": "tool_calls", "tool_calls": [
        {"id": "v", "name": "end_process", "arguments": {"visual_differences": [], "suggestions": [], "accepted": true}}
    ]}});
    let script = dir.path().join("environ.json");
    let turns = json!([
        turn("1. print the environment"),
        turn(&format!("```python\n{program}```")),
        verdict
    ]);
    std::fs::write(
        &script,
        json!({"description": "environ", "turns": turns}).to_string(),
    )
    .unwrap();
    let out = dir.path().join("out");
    let mut command = Command::new(env!("CARGO_BIN_EXE_viga"));
    command
        .args([
            "run",
            "--task",
            "print the environment",
            "--provider",
            "scripted",
            "--script",
        ])
        .arg(&script)
        .args(["--max-iterations", "1", "--resolution", "32", "--output"])
        .arg(&out)
        .env("VIGA_LOG", "debug");
    for (name, value) in CANARIES {
        command.env(name, value);
    }
    let output = viga_testkit::output_within(&mut command, viga_testkit::BLENDER_TEST_LIMIT);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "{said}");

    let mut files = Vec::new();
    files_below(&out, &mut files);
    let everything: Vec<(String, String)> = files
        .iter()
        .map(|path| {
            let bytes = std::fs::read(path).unwrap();
            (
                path.display().to_string(),
                String::from_utf8_lossy(&bytes).into_owned(),
            )
        })
        .chain([("viga's output".to_owned(), said)])
        .collect();
    // The program did print its environment into the run folder, so the check below looks
    // at what a key would have been printed with.
    assert!(
        everything.iter().any(|(_, text)| text.contains("PATH =")),
        "the environment was not printed anywhere"
    );
    for (name, value) in CANARIES {
        for (place, text) in &everything {
            assert!(!text.contains(value), "{name} reached {place}");
        }
    }
}

/// Every process's command line, read from `/proc`.
fn command_lines() -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| std::fs::read(entry.path().join("cmdline")).ok())
        .map(|bytes| String::from_utf8_lossy(&bytes).replace('\0', " "))
        .collect()
}

/// A key kept with `viga key set` (a file store here; the keyring is tested in viga-keys)
/// reaches the model server, and no file of the run folder, no process's command line and no
/// model program's environment has it. The server streams, so model text streams too.
#[test]
fn a_kept_key_reaches_the_provider_and_nothing_else() {
    const KEY: &str = "sk-kept-canary-40a9";
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys");
    let viga = |args: &[&str]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_viga"));
        command
            .args(args)
            .env("VIGA_KEY_STORE", "file")
            .env("VIGA_KEY_DIR", &keys)
            .env_remove("VIGA_TEST_KEY");
        command
    };
    let mut set = viga(&["key", "set", "VIGA_TEST_KEY"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    set.stdin
        .take()
        .unwrap()
        .write_all(format!("{KEY}\n").as_bytes())
        .unwrap();
    let kept = set.wait_with_output().unwrap();
    assert!(kept.status.success());
    let said = String::from_utf8_lossy(&kept.stdout);
    assert!(
        said.contains("VIGA_TEST_KEY: kept in") && !said.contains(KEY),
        "{said}"
    );
    let status = viga(&["key", "status", "VIGA_TEST_KEY"]).output().unwrap();
    assert!(status.status.success());

    // The program shows the model its whole environment in the error it raises.
    let program = "import os\nraise RuntimeError(repr(sorted(os.environ.items())))\n";
    let fixed = "import bpy\nbpy.ops.mesh.primitive_cube_add()\n";
    let server = viga_testkit::openai::replay_server(vec![
        json!({"text": format!("```python\n{program}```")}),
        json!({"text": format!("```python\n{fixed}```")}),
        json!({"tool_calls": [{"name": "end_process", "arguments": {"visual_differences": [], "suggestions": [], "accepted": true}}]}),
    ])
    .unwrap();
    let out = dir.path().join("out");
    let base = format!("{}/v1", server.base());
    let mut run = viga(&[
        "run",
        "--task",
        "a cube",
        "--provider",
        "openai_compatible",
        "--model",
        "replay",
        "--base-url",
        &base,
        "--api-key-env",
        "VIGA_TEST_KEY",
        "--generator-tools",
        "off",
        "--no-plan",
        "--max-iterations",
        "1",
        "--resolution",
        "32",
        "--events",
        "jsonl",
    ]);
    run.arg("--output")
        .arg(&out)
        .stdout(std::process::Stdio::piped());
    let child = run.spawn().unwrap();
    let watchdog = viga_testkit::kill_after(&child, viga_testkit::BLENDER_TEST_LIMIT, "viga run");
    let mut seen_on_command_lines = false;
    let mut child = child;
    while child.try_wait().unwrap().is_none() {
        seen_on_command_lines |= command_lines().iter().any(|line| line.contains(KEY));
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let output = child.wait_with_output().unwrap();
    drop(watchdog);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert!(!seen_on_command_lines, "the key was on a command line");
    assert!(
        stdout.contains("\"kind\":\"model_text\""),
        "no model text streamed: {stdout}"
    );
    assert!(!stdout.contains(KEY));

    assert_the_key_reached_the_server_alone(&server, KEY);

    let mut files = Vec::new();
    files_below(&out, &mut files);
    for path in files {
        let bytes = std::fs::read(&path).unwrap();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(KEY),
            "the key is in {}",
            path.display()
        );
    }
}

/// `viga gateway` builds its chat agent's model through the same factory as every command:
/// a key kept with `viga key set` (and not in the environment) is found, so the server
/// starts instead of telling the operator to do what they already did.
#[test]
fn the_gateway_finds_a_key_kept_with_viga_key_set() {
    use std::io::{BufRead as _, Write as _};
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys");
    let viga = |args: &[&str]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_viga"));
        command
            .args(args)
            .env("VIGA_KEY_STORE", "file")
            .env("VIGA_KEY_DIR", &keys)
            .env_remove("VIGA_GATEWAY_TEST_KEY");
        command
    };
    let mut set = viga(&["key", "set", "VIGA_GATEWAY_TEST_KEY"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    set.stdin
        .take()
        .unwrap()
        .write_all(b"sk-kept-for-the-gateway\n")
        .unwrap();
    assert!(set.wait().unwrap().success());
    let users = dir.path().join("users.txt");
    std::fs::write(&users, "alice: alice-token-0123456789\n").unwrap();
    std::fs::set_permissions(&users, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mut gateway = viga(&[
        "gateway",
        "--listen",
        "127.0.0.1:0",
        "--provider",
        "openai",
        "--model",
        "gpt-test",
        "--api-key-env",
        "VIGA_GATEWAY_TEST_KEY",
        "--users",
    ])
    .arg(&users)
    .stdin(std::process::Stdio::null())
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    let watchdog =
        viga_testkit::kill_after(&gateway, viga_testkit::BLENDER_TEST_LIMIT, "viga gateway");
    let mut said = String::new();
    for line in std::io::BufReader::new(gateway.stderr.take().unwrap()).lines() {
        let line = line.unwrap();
        said.push_str(&line);
        said.push('\n');
        if line.contains("listening on") {
            break;
        }
    }
    let _ = gateway.kill();
    let _ = gateway.wait();
    drop(watchdog);
    assert!(
        said.contains("listening on") && said.contains("the agent (gpt-test)"),
        "the gateway did not start with the kept key:\n{said}"
    );
}
