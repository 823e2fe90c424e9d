//! On real Blender: an instance whose goal renders do not match its scene's cameras is a
//! recorded harness failure (and is scored once fixed); a proposal that does not run is
//! scored as start.py in the all-instances figure, beside the executable-only one.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use viga_blender::{BlenderTransport, WorkerConfig, WorkerPool, locate};
use viga_eval::report::write_reports;
use viga_eval::{
    Baseline, Context, EvalConfig, EvalError, Instance, InstanceScores, Proposal, Proposer,
    RenderEngine, RenderSpec, SceneBenchmark, Selection,
};
use viga_testkit::{BLENDER_TEST_LIMIT, within};

fn mini() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/blendergym-mini")
}

const RENDER: RenderSpec = RenderSpec {
    engine: RenderEngine::Cycles,
    width: 32,
    height: 32,
    samples: Some(4),
};

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &to.join(entry.file_name()));
        } else {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

fn scores(out: &Path, instance: &str) -> InstanceScores {
    serde_json::from_slice(&std::fs::read(out.join(instance).join("scores.json")).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn views_that_do_not_match_the_cameras_are_a_recorded_harness_failure() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let data = tempfile::tempdir().unwrap();
        for name in ["placement1", "placement2"] {
            copy_dir(&mini().join(name), &data.path().join(name));
        }
        // placement1's scene has Camera1 and Camera2, but only one goal render now.
        let render2 = data.path().join("placement1/renders/goal/render2.png");
        let kept = std::fs::read(&render2).unwrap();
        std::fs::remove_file(&render2).unwrap();

        let out = tempfile::tempdir().unwrap();
        let mut config = EvalConfig::new(data.path(), out.path(), RENDER);
        config.chamfer_points = 200;
        let pool = Arc::new(
            WorkerPool::start(1, WorkerConfig::new(locate().unwrap()))
                .await
                .unwrap(),
        );
        let summary = viga_eval::run(&config, pool.clone(), Arc::new(Baseline::Noop), None)
            .await
            .unwrap();
        assert_eq!(summary.scored, 1, "{summary:?}");
        let [(instance, error)] = summary.failed.as_slice() else {
            panic!("{summary:?}")
        };
        assert_eq!(instance, "placement1");
        assert!(
            error.contains("renders/goal holds 1 render(s) (views Camera1), but the scene has 2 camera(s) named Camera<k> (Camera1, Camera2); no goal render for Camera2"),
            "{error}"
        );
        let failure = out.path().join("placement1/harness-failure.json");
        assert!(failure.is_file());
        assert!(!out.path().join("placement1/scores.json").exists());
        let report = write_reports(out.path()).unwrap();
        let placement = &report.tasks[0];
        assert_eq!(
            (
                placement.selected,
                placement.scored,
                placement.executable,
                placement.harness_failed,
                placement.pending
            ),
            (2, 1, 1, 1, 0)
        );
        let table = std::fs::read_to_string(out.path().join("report.md")).unwrap();
        assert!(
            table.contains("placement: 2 selected; 1 scored (1 executable, 0 not executable); 1 harness-failed; 0 pending"),
            "{table}"
        );

        // Fixed data: the next run retries the instance, and the failure is gone.
        std::fs::write(&render2, kept).unwrap();
        let again = viga_eval::run(&config, pool, Arc::new(Baseline::Noop), None)
            .await
            .unwrap();
        assert_eq!((again.scored, again.skipped), (1, 1), "{again:?}");
        assert!(again.failed.is_empty(), "{again:?}");
        assert!(!failure.exists());
        let report = write_reports(out.path()).unwrap();
        assert_eq!(
            (report.tasks[0].scored, report.tasks[0].harness_failed),
            (2, 0)
        );
        assert_eq!(scores(out.path(), "placement1").cameras, ["Camera1", "Camera2"]);
    })
    .await;
}

/// A system whose program always raises.
struct Raises;

#[async_trait]
impl Proposer<SceneBenchmark> for Raises {
    fn system(&self) -> String {
        "raises".to_owned()
    }

    async fn propose(
        &self,
        _instance: &Instance,
        _context: Context<Arc<dyn BlenderTransport>>,
    ) -> Result<Proposal, EvalError> {
        Ok(Proposal {
            code: Some("raise RuntimeError('this proposal does not run')\n".to_owned()),
            note: None,
            candidates: Vec::new(),
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proposal_that_does_not_run_scores_as_start_py_in_the_all_instances_figure() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let root = tempfile::tempdir().unwrap();
        let config_for = |name: &str| {
            let mut config = EvalConfig::new(mini(), root.path().join(name), RENDER);
            config.selection = Selection {
                tasks: None,
                instances: Some(vec!["blendshape1".to_owned()]),
            };
            config.chamfer_points = 300;
            config
        };
        let pool = Arc::new(
            WorkerPool::start(1, WorkerConfig::new(locate().unwrap()))
                .await
                .unwrap(),
        );
        viga_eval::run(&config_for("noop"), pool.clone(), Arc::new(Baseline::Noop), None)
            .await
            .unwrap();
        let mut raises = config_for("raises");
        raises.oracle_selected = true;
        let summary = viga_eval::run(&raises, pool, Arc::new(Raises), None)
            .await
            .unwrap();
        assert!(summary.failed.is_empty(), "{summary:?}");

        let noop = scores(&root.path().join("noop"), "blendshape1");
        let failed = scores(&root.path().join("raises"), "blendshape1");
        assert!(!failed.executable && failed.pl.is_none(), "{failed:?}");
        assert!(noop.start_program.is_none(), "an executable proposal needs no fallback");
        let start = failed.start_program.clone().unwrap();
        assert!(start.executable, "{start:?}");
        // The same program, renderer and settings: start.py scores exactly as noop.
        assert_eq!((start.pl, start.cd), (noop.pl, noop.cd));
        assert!(noop.cd.unwrap() > 0.0);
        // The oracle-selected figure reused it rather than running start.py again.
        let best = failed.oracle_selected.clone().unwrap();
        assert_eq!((best.chosen.as_str(), best.pl), ("start.py", noop.pl));
        assert!(root.path().join("raises/blendshape1/start/render1.png").is_file());
        assert!(!root.path().join("raises/blendshape1/candidates").exists());

        let report = write_reports(&root.path().join("raises")).unwrap();
        let headline = &report.tasks[0];
        assert_eq!((headline.executable, headline.shown), (0, false));
        let all = &report.all_instances[0];
        assert_eq!((all.instances, all.as_start, all.left_out), (1, 1, 0));
        assert_eq!((all.pl, all.cd), (noop.pl, noop.cd));
        let table = std::fs::read_to_string(root.path().join("raises/report.md")).unwrap();
        let rows: Vec<&str> = table.lines().skip(2).take(2).collect();
        assert!(rows[0].starts_with("| raises (ours, final) | -- | -- | -- |"), "{table}");
        let shown = format!("{:.4}", noop.pl.unwrap() / 1e-3);
        assert!(
            rows[1].starts_with(&format!("| raises (ours, all instances: a non-executable proposal scores as start.py) | {shown} |")),
            "{table}"
        );
    })
    .await;
}
