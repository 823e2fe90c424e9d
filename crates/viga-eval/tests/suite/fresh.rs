//! `make_fresh.py` (what `cargo xtask eval make-fresh` runs) on real Blender: it writes one
//! instance per task in BlenderGym's layout with four cameras, the same seed writes the same
//! programs, and the harness scores them (the goal program exactly 0, the start worse) and
//! the gap between them is what `viga eval gap` reads.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

use viga_eval::{Baseline, EvalConfig, RenderEngine, RenderSpec};
use viga_testkit::{BLENDER_TEST_LIMIT, within};

/// Runs the generator into `out`: instances of `size` pixels, one per task.
fn make_fresh(work: &Path, out: &Path, seed: u32, size: u32) {
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let script = work.join("make_fresh.py");
    let text = std::fs::read_to_string(fixtures.join("mini_scenes.py")).unwrap()
        + "\n"
        + &std::fs::read_to_string(fixtures.join("blendergym-fresh/make_fresh.py")).unwrap();
    std::fs::write(&script, text).unwrap();
    let launcher = viga_blender::locate().unwrap();
    let args: Vec<std::ffi::OsString> = vec![
        out.into(),
        size.to_string().into(),
        "2".into(),
        seed.to_string().into(),
        "1".into(),
    ];
    let (program, program_args) = launcher.command_line(&script, &args);
    let status = Command::new(program)
        .args(program_args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "make_fresh.py failed: {status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fresh_instances_have_four_cameras_and_score_like_the_mini_suite() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let work = tempfile::tempdir().unwrap();
        let data = work.path().join("fresh");
        make_fresh(work.path(), &data, 5, 32);
        let tasks = [
            "placement",
            "geometry",
            "lighting",
            "material",
            "blendshape",
        ];
        for task in tasks {
            let instance = data.join(format!("{task}1"));
            for file in ["blender_file.blend", "start.py", "goal.py"] {
                assert!(instance.join(file).is_file(), "{task}1 lacks {file}");
            }
            for k in 1..=4 {
                assert!(
                    instance
                        .join(format!("renders/goal/render{k}.png"))
                        .is_file()
                );
            }
            assert!(!instance.join("renders/goal/render5.png").exists());
        }
        // The same seed writes the same programs.
        let again = work.path().join("again");
        make_fresh(work.path(), &again, 5, 32);
        for task in tasks {
            let read = |root: &Path| std::fs::read_to_string(root.join(format!("{task}1/goal.py")));
            assert_eq!(read(&data).unwrap(), read(&again).unwrap(), "{task}");
        }

        let pool = super::warm_pool(2).await;
        let render = RenderSpec {
            engine: RenderEngine::Cycles,
            width: 32,
            height: 32,
            samples: Some(2),
        };
        for baseline in [Baseline::Oracle, Baseline::Noop] {
            let out = work.path().join(format!("{baseline:?}"));
            let mut config = EvalConfig::new(data.clone(), out.clone(), render);
            config.chamfer_points = 500;
            let summary = viga_eval::run(&config, pool.clone(), Arc::new(baseline), None)
                .await
                .unwrap();
            assert_eq!(summary.scored, 5, "{summary:?}");
            assert!(summary.failed.is_empty(), "{summary:?}");
        }
        let noop = work.path().join("Noop");
        let oracle = work.path().join("Oracle");
        let scores = |root: &Path, instance: &str| -> viga_eval::InstanceScores {
            serde_json::from_slice(&std::fs::read(root.join(instance).join("scores.json")).unwrap())
                .unwrap()
        };
        for task in tasks {
            let instance = format!("{task}1");
            let (goal, start) = (scores(&oracle, &instance), scores(&noop, &instance));
            assert_eq!(goal.views.len(), 4, "{instance}: four cameras scored");
            assert!(goal.pl.unwrap() < 1e-9, "{instance}: {:?}", goal.views);
            assert!(
                start.pl.unwrap() > goal.pl.unwrap(),
                "{instance}: {:?}",
                start.views
            );
        }
        // The goal program closes the whole gap; noop's own folder is what --noop reads.
        let closed = viga_eval::gap::gap(&noop, &oracle).unwrap();
        assert_eq!(closed.rows.len(), 5);
        assert!(
            closed.rows.iter().all(|row| row.share() == Some(1.0)),
            "{closed:?}"
        );
        let swapped = viga_eval::gap::gap(&oracle, &noop).unwrap_err().to_string();
        assert!(swapped.contains("--noop must be"), "{swapped}");
    })
    .await;
}
