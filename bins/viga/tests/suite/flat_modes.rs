//! Slides and web pages from the command line, end to end on real LibreOffice and real
//! Chromium with the scripted sessions `fixtures/sessions/slides.json` and `page.json`: each
//! fast-retries a broken program, lets the verifier use the domain's tools, and leaves a run
//! folder with the result, the programs, the renders, the report and what containment held.
//! The page asks for an outside URL, which gets no response, and the run says so.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic: that is how tests fail

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;
use viga_testkit::{
    CONTAINMENT_HALVES, assert_succeeded, output_within, printed_run_folder, within,
};

/// A run of a few model turns with a warm renderer; generous for a busy 2-core machine.
const RUN_LIMIT: Duration = Duration::from_secs(180);

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/sessions")
        .join(name)
}

/// `viga run --mode MODE` with a scripted session, one iteration, the generator without
/// tools.
fn viga_run(mode: &str, script: &Path, extra: &[&str], output: &Path) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_viga"));
    command
        .args(["run", "--mode", mode, "--task", "the result in the picture"])
        .args(["--provider", "scripted", "--script"])
        .arg(script)
        .args(["--max-iterations", "1", "--generator-tools", "off"])
        .args(extra)
        .arg("--output")
        .arg(output)
        .env_remove("VIGA_CONTAINMENT");
    output_within(&mut command, RUN_LIMIT)
}

fn events(folder: &Path) -> Vec<Value> {
    std::fs::read_to_string(folder.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .collect()
}

fn of_kind<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

/// The run's programs ran contained, every half held, and the report says so.
fn assert_contained(folder: &Path) {
    let status: Value =
        serde_json::from_slice(&std::fs::read(folder.join("containment.json")).unwrap()).unwrap();
    assert_eq!(status["policy"], "auto", "{status}");
    for half in CONTAINMENT_HALVES {
        assert_eq!(status[half]["active"], true, "{half}: {status}");
    }
    let report = std::fs::read_to_string(folder.join("report.html")).unwrap();
    assert!(
        report.contains("<th>containment</th><td colspan=\"3\">auto: network contained"),
        "{report}"
    );
}

/// The fast retry: the first program failed with `error`, the second ran.
fn assert_fast_retry(events: &[Value], error: &str) {
    let retries = of_kind(events, "fast_retry");
    assert_eq!(retries.len(), 1, "{events:?}");
    assert!(
        retries[0]["error"].as_str().unwrap().contains(error),
        "{:?}",
        retries[0]
    );
    let executions = of_kind(events, "execution_finished");
    assert_eq!(executions.len(), 2, "{executions:?}");
    assert_eq!(executions[0]["failure"], "E1");
    assert!(
        executions[1]["result"].get("error").is_none(),
        "{:?}",
        executions[1]
    );
}

fn pngs_in(folder: &Path) -> usize {
    std::fs::read_dir(folder)
        .map(|entries| {
            entries
                .flatten()
                .filter(|entry| entry.path().extension().is_some_and(|e| e == "png"))
                .count()
        })
        .unwrap_or(0)
}

#[tokio::test]
async fn a_scripted_slides_session_runs_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    // The target: the goal program's slide, rendered by the same LibreOffice.
    let goal = std::fs::read_to_string(fixture("slides_goal.py")).unwrap();
    let target = dir.path().join("target.png");
    within(RUN_LIMIT, "the target slide", async {
        let worker = viga_slides::SlideWorker::start(viga_slides::SlidesConfig::new(
            viga_slides::SlideTools::locate().unwrap(),
        ))
        .await
        .unwrap();
        let ran = worker.run_program(&goal, None).await.unwrap();
        let deck = ran.deck.expect("the goal program saves its deck");
        let slide = worker.render_slide(&deck, 1, 320).await.unwrap();
        std::fs::write(&target, slide.png).unwrap();
        drop(deck);
        worker.shutdown().await;
    })
    .await;
    let out = dir.path().join("out");
    let target_arg = target.to_string_lossy().into_owned();
    let output = viga_run(
        "slides",
        &fixture("slides.json"),
        &["--target", &target_arg, "--resolution", "320"],
        &out,
    );
    assert_succeeded(&output);
    let folder = printed_run_folder(&output);
    assert!(
        folder.starts_with(out.join("slides")),
        "{}",
        folder.display()
    );
    let events = events(&folder);
    assert_fast_retry(&events, "NameError");
    // The verifier's tools ran and their pictures were kept.
    let tools: Vec<&str> = of_kind(&events, "tool_invoked")
        .iter()
        .map(|e| e["tool"].as_str().unwrap())
        .collect();
    assert!(
        tools.contains(&"zoom_slide") && tools.contains(&"read_slide_structure"),
        "{tools:?}"
    );
    assert!(
        pngs_in(&folder.join("renders/1")) >= 3,
        "target view, overview, zoom"
    );
    // The run reproduced the target: the slide's photometric loss is (almost) nil.
    let scores: Value =
        serde_json::from_slice(&std::fs::read(folder.join("scores.json")).unwrap()).unwrap();
    let loss = scores["iterations"][0]["views"]["slide1"].as_f64().unwrap();
    assert!(loss < 0.01, "PL {loss} in {scores}");
    // The deck, its slide pictures, the programs and the report are in the folder.
    assert!(folder.join("final.pptx").is_file());
    assert!(folder.join("final_slides/slide-1.png").is_file());
    assert!(folder.join("final.py").is_file());
    assert!(folder.join("codes/1.py").is_file());
    let args: Value =
        serde_json::from_slice(&std::fs::read(folder.join("args.json")).unwrap()).unwrap();
    assert_eq!(args["domain"]["name"], "slides", "{args}");
    assert_contained(&folder);
    let report = std::fs::read_to_string(folder.join("report.html")).unwrap();
    assert!(
        report.contains("slides: python-pptx programs"),
        "the report names the domain"
    );
}

#[tokio::test]
async fn a_scripted_page_session_runs_end_to_end_with_no_network_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let goal = std::fs::read_to_string(fixture("page_goal.html")).unwrap();
    let target = dir.path().join("target.png");
    within(RUN_LIMIT, "the target screenshot", async {
        let worker = viga_web::WebWorker::start(viga_web::WebConfig::locate().unwrap())
            .await
            .unwrap();
        let viewport = viga_web::Viewport {
            width: 320,
            height: 200,
        };
        let (_, shot) = worker.render(&goal, viewport).await.unwrap();
        std::fs::write(&target, shot.png).unwrap();
        worker.shutdown().await;
    })
    .await;
    let out = dir.path().join("out");
    let target_arg = target.to_string_lossy().into_owned();
    let output = viga_run(
        "page",
        &fixture("page.json"),
        &["--target", &target_arg],
        &out,
    );
    assert_succeeded(&output);
    let folder = printed_run_folder(&output);
    let events = events(&folder);
    assert_fast_retry(&events, "drawChart is not defined");
    // The picture's outside URL was refused, and the run says so: a warning, the verdict's
    // first difference, network.jsonl and the report.
    let url = "https://cdn.example.com/chart.png";
    let warned = of_kind(&events, "warning")
        .iter()
        .any(|w| w["message"].as_str().unwrap().contains(url));
    assert!(warned, "no warning names {url}: {events:?}");
    let network = std::fs::read_to_string(folder.join("network.jsonl")).unwrap();
    assert!(
        network.contains(url) && network.contains("\"iteration\":1"),
        "{network}"
    );
    let report = std::fs::read_to_string(folder.join("report.html")).unwrap();
    assert!(
        report.contains("<h2>Network</h2>") && report.contains(url),
        "{report}"
    );
    // The window defaults to the target's size; the verifier looked at another one.
    let args: Value =
        serde_json::from_slice(&std::fs::read(folder.join("args.json")).unwrap()).unwrap();
    assert_eq!(
        args["domain"],
        serde_json::json!({"name": "page", "settings": {"viewport": {"width": 320, "height": 200}}})
    );
    let views: Vec<&str> = of_kind(&events, "render_produced")
        .iter()
        .map(|e| e["view"].as_str().unwrap())
        .collect();
    assert!(
        views.contains(&"target:320x200") && views.contains(&"window-160x240"),
        "{views:?}"
    );
    assert!(folder.join("final.html").is_file() && folder.join("final.png").is_file());
    assert_contained(&folder);

    // `viga resume` builds the page domain again from args.json and runs iteration 2.
    let script = dir.path().join("resume.json");
    let fixed = goal.replace(
        "<img src=\"https://cdn.example.com/chart.png\" alt=\"chart\" width=\"120\" height=\"40\">",
        "<svg width=\"120\" height=\"40\"><rect width=\"120\" height=\"40\" fill=\"#1f3a5f\"/></svg>",
    );
    let turns = serde_json::json!({"turns": [
        {"expect": {"any_message_contains": "draw the chart with inline SVG"},
         "response": {"text": "1. draw the chart inline", "finish_reason": "stop"}},
        {"response": {"text": format!("```html\n{fixed}```"), "finish_reason": "stop"}},
        {"expect": {"system_contains": "You are the verifier"},
         "response": {"text": "", "finish_reason": "tool_calls", "tool_calls": [{"id": "e",
            "name": "end_process", "arguments": {"visual_differences": [], "suggestions": [],
            "accepted": true}}]}}
    ]});
    std::fs::write(&script, turns.to_string()).unwrap();
    let mut resume = Command::new(env!("CARGO_BIN_EXE_viga"));
    resume
        .arg("resume")
        .arg(&folder)
        .args(["--provider", "scripted", "--script"])
        .arg(&script)
        .args(["--max-iterations", "2"])
        .env_remove("VIGA_CONTAINMENT");
    let resumed = output_within(&mut resume, RUN_LIMIT);
    assert_succeeded(&resumed);
    let events = self::events(&folder);
    let finished = of_kind(&events, "run_finished");
    assert_eq!(
        finished.last().unwrap()["stop"]["reason"],
        "accepted",
        "{finished:?}"
    );
    // The resumed page asks for nothing outside itself: no new refusal is recorded.
    let network = std::fs::read_to_string(folder.join("network.jsonl")).unwrap();
    assert_eq!(network.lines().count(), 1, "{network}");
    assert!(
        std::fs::read_to_string(folder.join("final.html"))
            .unwrap()
            .contains("<svg")
    );
}

/// The scene's flags are refused by name for a deck or a page, `--generator search` among
/// them, before any renderer or Blender starts, and nothing is written.
#[test]
fn a_slides_or_page_run_refuses_the_scenes_flags_before_anything_starts() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("unused.json");
    std::fs::write(&script, r#"{"description": "unused", "turns": []}"#).unwrap();
    let output = dir.path().join("out");
    for (mode, extra, flag) in [
        ("page", &["--generator", "search"][..], "--generator search"),
        ("slides", &["--camera", "Camera1"][..], "--camera"),
        ("page", &["--base", "scene.blend"][..], "--base"),
    ] {
        let result = viga_run(mode, &script, extra, &output);
        let stderr = String::from_utf8_lossy(&result.stderr);
        assert!(!result.status.success(), "{mode} {extra:?}: {stderr}");
        assert!(
            stderr.contains(flag) && stderr.contains("belong(s) to Blender scene runs"),
            "{mode} {extra:?}: {stderr}"
        );
    }
    assert!(!output.exists(), "nothing written");
}
