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
