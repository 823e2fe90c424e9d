//! The agent as the system under test, driven by a scripted session (labelled: no model) on
//! one mini-suite instance. The script's "model" answers with the goal program, so the loop's
//! final program must score PL 0: this proves the agent plumbing (base scene, start program in
//! the task, Camera1 target, final program scored), not any model's skill.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::json;
use viga_blender::{WorkerConfig, WorkerPool, locate};
use viga_eval::agent::AgentProposer;
use viga_eval::{EvalConfig, RenderEngine, RenderSpec, Selection};
use viga_provider::ScriptedProvider;
use viga_provider::scripted::Script;
use viga_testkit::{BLENDER_TEST_LIMIT, within};

fn mini() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/blendergym-mini")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_edits_the_start_program_and_its_final_program_is_scored() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let goal = std::fs::read_to_string(mini().join("lighting1/goal.py")).unwrap();
        let start = std::fs::read_to_string(mini().join("lighting1/start.py")).unwrap();
        let first_line = start
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap()
            .to_owned();
        let script: Script = serde_json::from_value(json!({
            "description": "scripted stand-in for a model: answers with the goal program",
            "turns": [
                {"expect": {"system_contains": "You are the planner", "any_message_contains": first_line}, "response": {"text": "1. match the lights", "finish_reason": "stop"}},
                {"response": {"text": format!("```python\n{goal}```"), "finish_reason": "stop"}},
                {"expect": {"system_contains": "You are the verifier", "min_images": 2},
                 "response": {"text": "", "finish_reason": "tool_calls", "tool_calls": [
                    {"id": "v", "name": "end_process", "arguments": {"visual_differences": [], "suggestions": [], "accepted": true}}]}}
            ]
        }))
        .unwrap();
        let proposer = AgentProposer {
            provider: Arc::new(ScriptedProvider::new("scripted:goal", script)),
            max_iterations: 2,
            memory_window: 3,
            verifier_render: viga_protocol::bridge::RenderSpec {
                engine: RenderEngine::Workbench,
                width: 32,
                height: 32,
                samples: None,
            },
            program_timeout: None,
            time_limit: None,
            instruction_only: false,
        };
        let out = tempfile::tempdir().unwrap();
        let render = RenderSpec {
            engine: RenderEngine::Cycles,
            width: 32,
            height: 32,
            samples: Some(4),
        };
        let mut config = EvalConfig::new(mini(), out.path(), render);
        config.selection = Selection {
            tasks: None,
            instances: Some(vec!["lighting1".to_owned()]),
        };
        let pool = Arc::new(
            WorkerPool::start(1, WorkerConfig::new(locate().unwrap()))
                .await
                .unwrap(),
        );
        let summary = viga_eval::run(&config, pool, Arc::new(proposer), None)
            .await
            .unwrap();
        assert!(summary.failed.is_empty(), "{summary:?}");
        let scores: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.path().join("lighting1/scores.json")).unwrap())
                .unwrap();
        assert_eq!(scores["executable"], true, "{scores}");
        assert!(scores["pl"].as_f64().unwrap() < 1e-4, "{scores}");
        let note = scores["proposal_note"].as_str().unwrap();
        assert!(note.starts_with("1 iterations, accepted"), "{note}");
        // The instance's folder and the agent's run folder in it say what the pooled Blender
        // ran under, as any run's does.
        let recorded = files_named(&out.path().join("lighting1"), "containment.json");
        assert_eq!(recorded.len(), 2, "{recorded:?}");
        let status: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&recorded[0]).unwrap()).unwrap();
        assert!(status.get("policy").is_some(), "{status}");
    })
    .await;
}

fn files_named(folder: &std::path::Path, name: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(folder).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files_named(&path, name));
        } else if path.file_name().is_some_and(|file| file == name) {
            found.push(path);
        }
    }
    found
}

/// The oracle-selected figure looks past the agent's own choice: here the agent's first
/// iteration writes the goal program, the verifier wrongly rejects it, and the second (final)
/// iteration falls back to the start program. The headline scores the final program; the
/// oracle-selected figure picks iteration 1 by the ground truth, and scores start.py only once
/// because the final program is the same text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oracle_selected_picks_the_best_iteration_by_ground_truth_and_is_kept_apart() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let goal = std::fs::read_to_string(mini().join("lighting1/goal.py")).unwrap();
        let start = std::fs::read_to_string(mini().join("lighting1/start.py")).unwrap();
        let verdict = |accepted: bool| {
            json!({"expect": {"system_contains": "You are the verifier"},
                   "response": {"text": "", "finish_reason": "tool_calls", "tool_calls": [
                       {"id": "v", "name": "end_process", "arguments": {"visual_differences": [], "suggestions": [], "accepted": accepted}}]}})
        };
        let script: Script = serde_json::from_value(json!({
            "description": "scripted stand-in for a model: the goal program first, then back to start.py",
            "turns": [
                {"expect": {"system_contains": "You are the planner"}, "response": {"text": "1. match the lights", "finish_reason": "stop"}},
                {"response": {"text": format!("```python\n{goal}```"), "finish_reason": "stop"}},
                verdict(false),
                {"expect": {"system_contains": "You are the planner"}, "response": {"text": "1. undo", "finish_reason": "stop"}},
                {"response": {"text": format!("```python\n{start}```"), "finish_reason": "stop"}},
                verdict(true)
            ]
        }))
        .unwrap();
        let proposer = AgentProposer {
            provider: Arc::new(ScriptedProvider::new("scripted:regress", script)),
            max_iterations: 2,
            memory_window: 3,
            verifier_render: viga_protocol::bridge::RenderSpec {
                engine: RenderEngine::Workbench,
                width: 32,
                height: 32,
                samples: None,
            },
            program_timeout: None,
            time_limit: None,
            instruction_only: false,
        };
        let out = tempfile::tempdir().unwrap();
        // Cycles: Workbench's studio light would hide the lighting change.
        let render = RenderSpec {
            engine: RenderEngine::Cycles,
            width: 32,
            height: 32,
            samples: Some(4),
        };
        let mut config = EvalConfig::new(mini(), out.path(), render);
        config.selection = Selection {
            tasks: None,
            instances: Some(vec!["lighting1".to_owned()]),
        };
        config.oracle_selected = true;
        let pool = Arc::new(
            WorkerPool::start(1, WorkerConfig::new(locate().unwrap()))
                .await
                .unwrap(),
        );
        let summary = viga_eval::run(&config, pool, Arc::new(proposer), None)
            .await
            .unwrap();
        assert!(summary.failed.is_empty(), "{summary:?}");
        let scores: viga_eval::InstanceScores =
            serde_json::from_slice(&std::fs::read(out.path().join("lighting1/scores.json")).unwrap())
                .unwrap();
        let headline = scores.pl.unwrap();
        assert!(headline > 1e-3, "the final program is start.py: {scores:?}");
        let best = scores.oracle_selected.as_ref().unwrap();
        assert_eq!(best.chosen, "candidate 1", "{best:?}");
        assert_eq!((best.programs, best.executable), (2, 2), "{best:?}");
        assert!(best.pl.unwrap() < 1e-4, "{best:?}");
        assert!(
            out.path()
                .join("lighting1/candidates/candidate-1/render1.png")
                .is_file()
        );

        let report = viga_eval::report::write_reports(out.path()).unwrap();
        assert!((report.tasks[0].pl.unwrap() - headline).abs() < 1e-12);
        let selected = report.oracle_selected.as_ref().unwrap();
        assert!(selected[0].pl.unwrap() < 1e-4);
        let table = std::fs::read_to_string(out.path().join("report.md")).unwrap();
        let rows: Vec<&str> = table.lines().skip(2).take(3).collect();
        assert!(rows[0].contains("(ours, final)"), "{table}");
        assert!(
            rows[1].contains(viga_eval::report::ALL_INSTANCES_LABEL),
            "{table}"
        );
        assert!(
            rows[2].contains(viga_eval::report::ORACLE_SELECTED_LABEL),
            "{table}"
        );
        // The agent is given Camera1 only; the other view is held out and scored all the same.
        assert_eq!(
            scores.settings.fit_views,
            Some(viga_eval::FitViews::Only(vec!["Camera1".to_owned()]))
        );
        assert_eq!(report.views.fit_is_scored, Some(false));
        assert!(report.tasks[0].pl_held_out_views.is_some(), "{report:?}");
        assert!(table.contains("Fit views: Camera1"), "{table}");
    })
    .await;
}
