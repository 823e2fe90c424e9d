//! `viga run --generator-tools on` with a provider whose config says it cannot call tools
//! stops before anything starts, saying what to change. (An OpenAI-compatible server's
//! default does not stop it: llama.cpp, vLLM and Ollama call tools.)
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic: that is how tests fail

use std::process::Command;

use viga_testkit::{BLENDER_TEST_LIMIT, output_within};

#[test]
fn tools_asked_of_a_model_that_cannot_call_them_is_a_config_error() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("provider.json");
    std::fs::write(
        &config,
        r#"{"kind": "openai_compatible", "model": "local", "base_url": "http://127.0.0.1:9/v1", "tool_calling": false}"#,
    )
    .unwrap();
    let output_root = dir.path().join("out");
    let mut command = Command::new(env!("CARGO_BIN_EXE_viga"));
    command
        .args(["run", "--task", "a crate", "--provider-config"])
        .arg(&config)
        .args(["--generator-tools", "on", "--output"])
        .arg(&output_root);
    let output = output_within(&mut command, BLENDER_TEST_LIMIT);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--generator-tools on needs a model that can call tools")
            && stderr.contains("\"tool_calling\": true"),
        "{stderr}"
    );
    assert!(!output_root.exists(), "no run folder was created");
}

/// `--generator-tools auto` (the default) with an OpenAI-compatible server asks it once
/// whether its model calls tools: this one does, so the generator gets its tools, and
/// provider.json, args.json and the report say which mode was used and how it was found.
#[test]
fn auto_asks_an_openai_compatible_server_and_records_what_it_found() {
    use serde_json::json;
    let call = |id: &str, name: &str, arguments: serde_json::Value| json!({"tool_calls": [{"id": id, "name": name, "arguments": arguments}]});
    let server = viga_testkit::openai::replay_server(vec![
        call("probe", "report_ready", json!({"ready": true})),
        call(
            "g1",
            "execute_code",
            json!({"code": "import bpy\nbpy.ops.mesh.primitive_cube_add()\n"}),
        ),
        call("g2", "end_process", json!({"reason": "the cube is there"})),
        call(
            "v1",
            "end_process",
            json!({"visual_differences": [], "suggestions": [], "accepted": true}),
        ),
    ])
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let output_root = dir.path().join("out");
    let mut command = Command::new(env!("CARGO_BIN_EXE_viga"));
    command
        .args([
            "run",
            "--task",
            "a cube",
            "--provider",
            "openai_compatible",
            "--model",
            "replay",
        ])
        .arg("--base-url")
        .arg(format!("{}/v1", server.base()))
        .args([
            "--no-plan",
            "--max-iterations",
            "1",
            "--resolution",
            "32",
            "--output",
        ])
        .arg(&output_root)
        .env("XDG_CACHE_HOME", dir.path().join("cache"));
    let output = output_within(&mut command, BLENDER_TEST_LIMIT);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("tool calling on: found by asking"),
        "{stdout}"
    );
    let folder = stdout
        .lines()
        .find_map(|line| line.strip_prefix("run folder: "))
        .map(std::path::PathBuf::from)
        .unwrap();
    let read = |name: &str| std::fs::read_to_string(folder.join(name)).unwrap();
    let provider: serde_json::Value = serde_json::from_str(&read("provider.json")).unwrap();
    assert_eq!(provider["tool_calling"], true, "{provider}");
    let args: serde_json::Value = serde_json::from_str(&read("args.json")).unwrap();
    assert_eq!(args["generator_tools"], true, "{args}");
    assert!(
        read("report.html").contains("tool calling on: found by asking"),
        "the report says how tool calling was found"
    );
    assert!(dir.path().join("cache/viga/tool-calling.json").is_file());
}
