//! Keys stay put: a model program that prints its whole environment (what a prompt-injected
//! model writes) finds no API key or gateway token in Blender, so none reaches the run folder,
//! the next prompt (built from that folder's records) or viga's output.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic: that is how tests fail

use std::path::Path;
use std::process::Command;

use serde_json::json;

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
