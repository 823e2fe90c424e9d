//! The search baseline on real Blender: with a small budget it must beat doing nothing on a
//! placement instance of the mini-suite, scored by the same harness.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use viga_blender::{WorkerConfig, WorkerPool, locate};
use viga_eval::search::SearchProposer;
use viga_eval::{Baseline, EvalConfig, RenderEngine, RenderSpec, Selection};
use viga_testkit::{BLENDER_TEST_LIMIT, within};

fn mini() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/blendergym-mini")
}

fn pl_of(out: &std::path::Path) -> f64 {
    let scores: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("placement1/scores.json")).unwrap())
            .unwrap();
    scores["pl"].as_f64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_search_beats_doing_nothing() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let render = RenderSpec {
            engine: RenderEngine::Cycles,
            width: 32,
            height: 32,
            samples: Some(4),
        };
        let pool = Arc::new(
            WorkerPool::start(1, WorkerConfig::new(locate().unwrap()))
                .await
                .unwrap(),
        );
        let root = tempfile::tempdir().unwrap();
        let config_for = |name: &str| {
            let mut config = EvalConfig::new(mini(), root.path().join(name), render);
            config.selection = Selection {
                tasks: None,
                instances: Some(vec!["placement1".to_owned()]),
            };
            config.chamfer_points = 500;
            config
        };
        let noop = config_for("noop");
        viga_eval::run(&noop, pool.clone(), Arc::new(Baseline::Noop), None)
            .await
            .unwrap();
        let searched = config_for("search");
        let proposer = SearchProposer {
            budget: 40,
            render,
            timeout: Duration::from_secs(120),
        };
        let summary = viga_eval::run(&searched, pool, Arc::new(proposer), None)
            .await
            .unwrap();
        assert!(summary.failed.is_empty(), "{summary:?}");
        let (before, after) = (
            pl_of(&root.path().join("noop")),
            pl_of(&root.path().join("search")),
        );
        assert!(
            after < before,
            "search PL {after} is not below noop PL {before}"
        );
    })
    .await;
}
