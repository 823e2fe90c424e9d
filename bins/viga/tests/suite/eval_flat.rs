//! `viga eval slidebench` and `viga eval pages` on the mini-suites (`fixtures/slidebench-mini`,
//! made by `fixtures/make_slidebench_mini.py`, and `fixtures/pages-mini`), on real LibreOffice
//! and real Chromium: the oracle scores best, noop worse, the execution rate is reported, the
//! agent runs as a system, and the judge scores only with a provider, labelled as the judge,
//! with AutoPresent's overall score beside the one weighed by the execution rate.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic: that is how tests fail

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use viga_testkit::output_within;

const EVAL_LIMIT: Duration = Duration::from_secs(240);

fn fixtures(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(name)
}

/// `viga eval SUITE --data DATA --out OUT ARGS…`, which must succeed; its summary.json.
fn eval(suite: &str, data: &str, out: &Path, args: &[&str]) -> Value {
    let mut command = Command::new(env!("CARGO_BIN_EXE_viga"));
    command
        .args(["eval", suite, "--data"])
        .arg(fixtures(data))
        .arg("--out")
        .arg(out)
        .args(args)
        .env_remove("VIGA_CONTAINMENT");
    let output = output_within(&mut command, EVAL_LIMIT);
    assert!(
        output.status.success(),
        "viga eval {suite} {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap()
}

/// The figure of the summary's column `name` (null when it has none).
fn column(summary: &Value, name: &str) -> Value {
    summary["columns"]
        .as_array()
        .unwrap()
        .iter()
        .find(|column| column["name"] == name)
        .map_or(Value::Null, |column| column["value"].clone())
}

fn script(dir: &Path, name: &str, turns: Value) -> String {
    let path = dir.join(name);
    std::fs::write(&path, json!({ "turns": turns }).to_string()).unwrap();
    path.to_string_lossy().into_owned()
}

#[test]
fn slidebench_oracle_scores_best_noop_worse_and_the_judge_needs_a_provider() {
    let dir = tempfile::tempdir().unwrap();
    let oracle = eval(
        "slidebench",
        "slidebench-mini",
        &dir.path().join("oracle"),
        &["--baseline", "oracle"],
    );
    let noop = eval(
        "slidebench",
        "slidebench-mini",
        &dir.path().join("noop"),
        &["--baseline", "noop"],
    );
    for summary in [&oracle, &noop] {
        assert_eq!(summary["instances"], 4, "{summary}");
        assert_eq!(summary["execution_rate"], 100.0, "{summary}");
        assert_eq!(summary["judge"], Value::Null, "no provider, no judge");
        for overall in ["overall", "overall_executed"] {
            assert_eq!(
                column(summary, overall),
                Value::Null,
                "no judge, no {overall}"
            );
        }
    }
    for metric in ["match", "text", "position"] {
        assert_eq!(column(&oracle, metric), 100.0, "{metric}: {oracle}");
    }
    // Colour counts an inherited fill or background 0 (AutoPresent's get_shape_fill_similarity
    // and background rule), the reference's own included: lecture/slide_1 is built on the
    // template's placeholders, and only its picture pair of six comparisons counts, 100/6.
    // The other slides' fills and backgrounds are their own: 100.
    let colour = column(&oracle, "color").as_f64().unwrap();
    assert!(
        (colour - (300.0 + 100.0 / 6.0) / 4.0).abs() < 1e-9,
        "{oracle}"
    );
    let lecture: Value = serde_json::from_slice(
        &std::fs::read(dir.path().join("oracle/lecture/slide_1/scores.json")).unwrap(),
    )
    .unwrap();
    let lecture = lecture["reference"]["color"].as_f64().unwrap();
    assert!((lecture - 100.0 / 6.0).abs() < 1e-9, "{lecture}");
    // A blank slide has no pair to compare: 100 on colour, above the oracle.
    assert_eq!(column(&noop, "color"), 100.0, "{noop}");
    // A blank slide pairs no block with the reference's: match 0 (the other three have no
    // pair to average, which the evaluator counts as 100).
    assert_eq!(column(&noop, "match"), 0.0, "{noop}");
    let mean = |summary: &Value| {
        ["match", "text", "color", "position"]
            .iter()
            .map(|m| column(summary, m).as_f64().unwrap())
            .sum::<f64>()
            / 4.0
    };
    assert!(mean(&oracle) > mean(&noop), "{oracle}\n{noop}");
    let report = std::fs::read_to_string(dir.path().join("noop/report.md")).unwrap();
    assert!(report.contains("execution rate 100.0%"), "{report}");

    // With a (scripted) judge: four criteria on the slide with a picture, then the overall.
    let rating = |score: u8| {
        json!({"expect": {"system_contains": "You rate the design", "min_images": 1},
               "response": {"text": json!({"score": score, "justification": "fine"}).to_string(),
                            "finish_reason": "stop"}})
    };
    let judge = script(
        dir.path(),
        "judge.json",
        json!([rating(5), rating(4), rating(3), rating(4)]),
    );
    let judged = eval(
        "slidebench",
        "slidebench-mini",
        &dir.path().join("judged"),
        &[
            "--baseline",
            "oracle",
            "--instances",
            "quarterly/slide_2",
            "--judge-provider",
            "scripted",
            "--judge-script",
            &judge,
        ],
    );
    assert!(
        judged["judge"].as_str().unwrap().starts_with("scripted/"),
        "{judged}"
    );
    // AutoPresent's: (4 x 100 + 100 + 80 + 60 + 80) / 8 = 90; times an execution rate of 100%,
    // the same.
    for overall in ["overall", "overall_executed"] {
        let value = column(&judged, overall).as_f64().unwrap();
        assert!((value - 90.0).abs() < 1e-9, "{overall}: {judged}");
    }
}

#[test]
fn slidebench_runs_the_agent_as_a_system() {
    let dir = tempfile::tempdir().unwrap();
    let program = r#"import os
from pptx import Presentation
from pptx.util import Inches, Pt
from pptx.dml.color import RGBColor

prs = Presentation()
prs.slide_width = Inches(13.333)
prs.slide_height = Inches(7.5)
slide = prs.slides.add_slide(prs.slide_layouts[6])
slide.background.fill.solid()
slide.background.fill.fore_color.rgb = RGBColor(0xFF, 0xFF, 0xFF)

def box(text, left, top, width, height, size, colour, fill=None, bold=False):
    shape = slide.shapes.add_textbox(Inches(left), Inches(top), Inches(width), Inches(height))
    paragraph = shape.text_frame.paragraphs[0]
    paragraph.text = text
    font = paragraph.runs[0].font
    font.size = Pt(size)
    font.bold = bold
    font.color.rgb = RGBColor(*colour)
    if fill:
        shape.fill.solid()
        shape.fill.fore_color.rgb = RGBColor(*fill)

box("Planting calendar", 0.7, 0.5, 12.0, 1.0, 36, (0x2E, 0x6B, 0x30), bold=True)
box("Spring: peas, lettuce", 0.7, 2.0, 5.6, 1.2, 24, (0xFF, 0xFF, 0xFF), (0x4C, 0x9A, 0x2A))
box("Autumn: garlic, onions", 7.0, 2.0, 5.6, 1.2, 24, (0xFF, 0xFF, 0xFF), (0xB5, 0x6A, 0x1B))
prs.save(os.environ["VIGA_DECK_PATH"])
"#;
    let agent = script(
        dir.path(),
        "agent.json",
        json!([
            {"expect": {"any_message_contains": "Planting calendar", "min_images": 1},
             "response": {"text": "1. title and two coloured boxes", "finish_reason": "stop"}},
            {"response": {"text": format!("```python\n{program}```"), "finish_reason": "stop"}},
            {"expect": {"system_contains": "You are the verifier"},
             "response": {"text": "", "finish_reason": "tool_calls", "tool_calls": [{"id": "e",
                "name": "end_process", "arguments": {"visual_differences": [], "suggestions": [],
                "accepted": true}}]}}
        ]),
    );
    let out = dir.path().join("agent");
    let summary = eval(
        "slidebench",
        "slidebench-mini",
        &out,
        &[
            "--provider",
            "scripted",
            "--script",
            &agent,
            "--instances",
            "garden/slide_1",
            "--max-iterations",
            "1",
        ],
    );
    assert!(
        summary["system"]
            .as_str()
            .unwrap()
            .starts_with("agent (scripted/"),
        "{summary}"
    );
    assert_eq!(summary["execution_rate"], 100.0, "{summary}");
    assert_eq!(
        column(&summary, "match"),
        100.0,
        "every block paired: {summary}"
    );
    assert!(
        column(&summary, "text").as_f64().unwrap() > 99.0,
        "{summary}"
    );
    // The agent's own run folder is kept beside its result.
    let instance = out.join("garden/slide_1");
    assert!(instance.join("program.py").is_file() && instance.join("generated.png").is_file());
    assert!(instance.join("system/runs").is_dir());
}

#[test]
fn pages_oracle_has_no_loss_and_noop_does() {
    let dir = tempfile::tempdir().unwrap();
    let oracle = eval(
        "pages",
        "pages-mini",
        &dir.path().join("oracle"),
        &["--baseline", "oracle"],
    );
    let noop = eval(
        "pages",
        "pages-mini",
        &dir.path().join("noop"),
        &["--baseline", "noop"],
    );
    assert_eq!(oracle["instances"], 2, "{oracle}");
    assert_eq!(oracle["execution_rate"], 100.0);
    assert_eq!(
        column(&oracle, "PL"),
        0.0,
        "the goal page against its own screenshot: {oracle}"
    );
    assert!(column(&noop, "PL").as_f64().unwrap() > 0.01, "{noop}");
    let n_clip = &oracle["columns"][1];
    assert_eq!(n_clip["name"], "N-CLIP", "{oracle}");
    assert_eq!(
        n_clip["value"],
        Value::Null,
        "no weights, no N-CLIP: {oracle}"
    );
    assert_eq!(n_clip["unavailable"], "no --clip-weights", "{oracle}");
    let report = std::fs::read_to_string(dir.path().join("oracle/report.md")).unwrap();
    assert!(
        report.contains("unavailable (no --clip-weights)"),
        "{report}"
    );
}

#[test]
fn slidebench_shards_fill_one_folder_and_a_rerun_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("noop");
    let first = eval(
        "slidebench",
        "slidebench-mini",
        &out,
        &["--baseline", "noop", "--shard", "0/2"],
    );
    // Four slides: shard 0/2 takes the first and the third.
    assert_eq!(first["selected"], 4, "{first}");
    assert_eq!(first["instances"], 2, "{first}");
    let second = eval(
        "slidebench",
        "slidebench-mini",
        &out,
        &["--baseline", "noop", "--shard", "1/2", "--workers", "2"],
    );
    assert_eq!(second["instances"], 4, "{second}");
    let scores: Vec<PathBuf> = std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .filter(|deck| deck.path().is_dir())
        .flat_map(|deck| std::fs::read_dir(deck.path()).unwrap().flatten())
        .map(|slide| slide.path())
        .filter(|slide| slide.join("scores.json").is_file())
        .collect();
    assert_eq!(scores.len(), 4, "{scores:?}");
    for slide in &scores {
        assert!(
            slide.join("containment.json").is_file(),
            "{}",
            slide.display()
        );
    }
    // Everything scored: the whole selection again makes nothing anew.
    let written = |slide: &PathBuf| {
        std::fs::metadata(slide.join("scores.json"))
            .unwrap()
            .modified()
            .unwrap()
    };
    let before: Vec<_> = scores.iter().map(written).collect();
    let again = eval(
        "slidebench",
        "slidebench-mini",
        &out,
        &["--baseline", "noop"],
    );
    let after: Vec<_> = scores.iter().map(written).collect();
    assert_eq!(before, after, "a finished slide is not made again");
    assert_eq!(column(&again, "match"), column(&second, "match"));
}
