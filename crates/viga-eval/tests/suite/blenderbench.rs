//! BlenderBench on real Blender, on our mini-suite (two instances per level): the harness
//! proof per level (oracle, the goal program, scores PL 0; noop, the start program, scores
//! worse), the answer-leakage check (exactly the instance made to leak is flagged, in
//! scores.json, summary.json and the report), and no judge anywhere without a judge.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use viga_eval::leak::LeakStatus;
use viga_eval::report::{JUDGE_COLUMN, write_reports};
use viga_eval::{Baseline, EvalConfig, InstanceScores, RenderEngine, RenderSpec, Suite, Task};
use viga_testkit::{BLENDER_TEST_LIMIT, within};

fn mini() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/blenderbench-mini")
}

const INSTANCES: [&str; 6] = [
    "level1-camera1",
    "level1-camera2",
    "level2-edit1",
    "level2-edit2",
    "level3-compose1",
    "level3-compose2",
];

fn config(out: &Path) -> EvalConfig {
    let render = RenderSpec {
        engine: RenderEngine::Cycles,
        width: 48,
        height: 48,
        samples: Some(8),
    };
    let mut config = EvalConfig::new(mini(), out, render);
    config.suite = Suite::BlenderBench;
    config
}

fn scores(out: &Path, instance: &str) -> InstanceScores {
    serde_json::from_slice(&std::fs::read(out.join(instance).join("scores.json")).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oracle_scores_zero_per_level_noop_worse_and_the_leaking_instance_is_flagged() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let pool = super::warm_pool(2).await;
        let root = tempfile::tempdir().unwrap();
        let mut reports = Vec::new();
        for baseline in [Baseline::Oracle, Baseline::Noop] {
            let out = root.path().join(format!("{baseline:?}"));
            let summary = viga_eval::run(&config(&out), pool.clone(), Arc::new(baseline), None)
                .await
                .unwrap();
            assert_eq!(
                (summary.scored, summary.failed.len()),
                (6, 0),
                "{summary:?}"
            );
            let report = write_reports(&out).unwrap();
            let levels: Vec<Task> = report.tasks.iter().map(|t| t.task).collect();
            assert_eq!(levels, Task::LEVELS);
            for level in &report.tasks {
                assert_eq!((level.scored, level.executable), (2, 2), "{level:?}");
                assert_eq!(level.cd, None, "BlenderBench has no Chamfer distance");
            }

            // The leak check, per instance.
            for instance in INSTANCES {
                let check = scores(&out, instance).answer_leak.unwrap();
                let expected = match instance {
                    "level1-camera2" => LeakStatus::Leaks,
                    "level2-edit1" | "level2-edit2" => LeakStatus::NoCameraChange,
                    _ => LeakStatus::Clean,
                };
                assert_eq!(check.status, expected, "{instance}: {check:?}");
            }
            let leaks = report.answer_leaks.as_ref().unwrap();
            assert_eq!(leaks.len(), 6);
            let flagged: Vec<&str> = leaks
                .iter()
                .filter(|entry| entry.status == LeakStatus::Leaks)
                .map(|entry| entry.instance.as_str())
                .collect();
            assert_eq!(flagged, ["level1-camera2"]);
            let table = std::fs::read_to_string(out.join("report.md")).unwrap();
            assert!(
                table.contains("1 of 6 scored instance(s) leak")
                    && table.contains(
                        "level1-camera2: LEAKS (answer leak: Camera1 is already at its goal pose"
                    ),
                "{table}"
            );

            // No judge was given: no judge column, no judge figure, no judgement recorded.
            assert!(!table.contains(JUDGE_COLUMN), "{table}");
            assert!(table.contains("No judge"), "{table}");
            let summary_json = std::fs::read_to_string(out.join("summary.json")).unwrap();
            assert!(!summary_json.contains("\"judge\""), "{summary_json}");
            assert!(scores(&out, "level1-camera1").judge.is_none());
            reports.push(report);
        }

        let (oracle, noop) = (&reports[0], &reports[1]);
        for (oracle, noop) in oracle.tasks.iter().zip(&noop.tasks) {
            // Same program, same Blender, deterministic Cycles: exactly the goal's pixels.
            assert_eq!(oracle.pl, Some(0.0), "{oracle:?}");
            assert!(noop.pl.unwrap() > 1e-4, "{noop:?}");
        }
    })
    .await;
}
