//! The harness proof on real Blender: a slice of the mini-suite (one instance per task),
//! scored with `oracle` (the goal program: PL must be ~0) and `noop` (the start program: must
//! score worse), at 64x64 with Cycles, then resumed (nothing is recomputed).

use std::path::PathBuf;
use std::sync::Arc;

use viga_eval::report::write_reports;
use viga_eval::{Baseline, EvalConfig, RenderEngine, RenderSpec, Selection, Task};
use viga_testkit::{BLENDER_TEST_LIMIT, within};

fn mini() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/blendergym-mini")
}

const SLICE: [&str; 5] = [
    "placement1",
    "lighting1",
    "blendshape1",
    "material1",
    "geometry1",
];

fn slice_config(out: &std::path::Path) -> EvalConfig {
    let render = RenderSpec {
        engine: RenderEngine::Cycles,
        width: 64,
        height: 64,
        samples: Some(8),
    };
    let mut config = EvalConfig::new(mini(), out, render);
    config.selection = Selection {
        tasks: None,
        instances: Some(SLICE.iter().map(|s| (*s).to_owned()).collect()),
    };
    config.chamfer_points = 2_000;
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oracle_scores_zero_and_noop_scores_worse_on_a_slice_of_the_mini_suite() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let pool = super::warm_pool(2).await;
        let root = tempfile::tempdir().unwrap();
        let mut means = Vec::new();
        for baseline in [Baseline::Oracle, Baseline::Noop] {
            let out = root.path().join(format!("{baseline:?}"));
            let config = slice_config(&out);
            let summary = viga_eval::run(&config, pool.clone(), Arc::new(baseline), None)
                .await
                .unwrap();
            assert_eq!((summary.scored, summary.skipped), (5, 0), "{summary:?}");
            assert!(summary.failed.is_empty(), "{summary:?}");
            let report = write_reports(&out).unwrap();
            assert_eq!(report.tasks.len(), 5);
            for task in &report.tasks {
                assert_eq!(task.executable, 1, "{task:?}");
                assert_eq!(task.cd.is_some(), task.task.has_chamfer(), "{task:?}");
            }
            let pl = report.overall.pl.unwrap();
            means.push((baseline, report));
            // Resume: everything is already scored, nothing is redone.
            let again = viga_eval::run(&config, pool.clone(), Arc::new(baseline), None)
                .await
                .unwrap();
            assert_eq!((again.scored, again.skipped), (0, 5));
            assert!(pl.is_finite());
        }
        let (oracle, noop) = (&means[0].1, &means[1].1);
        let oracle_pl = oracle.overall.pl.unwrap();
        let noop_pl = noop.overall.pl.unwrap();
        assert!(oracle_pl < 1e-4, "oracle PL {oracle_pl}");
        assert!(noop_pl > oracle_pl, "noop {noop_pl} vs oracle {oracle_pl}");
        for task in &oracle.tasks {
            assert!(task.pl.unwrap() < 1e-4, "{task:?}");
            if task.task.has_chamfer() {
                // Same program, same sampling seed: the surfaces and so the points are identical.
                assert_eq!(task.cd, Some(0.0), "{task:?}");
            }
        }
        // Every task's start differs visibly from its goal.
        for task in &noop.tasks {
            assert!(task.pl.unwrap() > 1e-5, "{task:?}");
            if task.task == Task::Placement || task.task == Task::Blendshape {
                assert!(task.cd.unwrap() > 0.0, "{task:?}");
            }
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_made_with_other_settings_are_never_mixed() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let pool = super::warm_pool(1).await;
        let root = tempfile::tempdir().unwrap();
        let mut config = slice_config(root.path());
        config.selection.instances = Some(vec!["placement1".to_owned()]);
        viga_eval::run(&config, pool.clone(), Arc::new(Baseline::Noop), None)
            .await
            .unwrap();
        let before = std::fs::read(root.path().join("placement1/scores.json")).unwrap();
        config.render.width = 32;
        let err = viga_eval::run(&config, pool.clone(), Arc::new(Baseline::Noop), None)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("other settings") && err.contains("64x64"),
            "{err}"
        );
        let err = viga_eval::run(
            &slice_config(root.path()),
            pool,
            Arc::new(Baseline::Oracle),
            None,
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(err.contains("system \"noop\" vs \"oracle\""), "{err}");
        assert_eq!(
            std::fs::read(root.path().join("placement1/scores.json")).unwrap(),
            before
        );
    })
    .await;
}
