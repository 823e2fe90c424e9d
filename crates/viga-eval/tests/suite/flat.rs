//! The one runner on a flat benchmark (pages, on real Chromium): shards are disjoint and fill
//! one output folder between them, a rerun resumes (nothing is made again), another system's
//! results are made again for the new one, every instance records its renderer's
//! containment, and the benchmark's summary columns come through to summary.json and the
//! report.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use viga_blender::ContainmentStatus;
use viga_eval::pages::PageBench;
use viga_eval::runner::{self, EvalEvent, RunConfig, RunSummary};
use viga_eval::summary::Summary;
use viga_eval::{Baseline, Proposer, Shard, Shelf};
use viga_testkit::within;
use viga_web::{WebConfig, WebWorker};

const LIMIT: Duration = Duration::from_secs(240);

fn pages_mini() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/pages-mini")
}

fn summary(out: &Path) -> Summary {
    serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap()
}

fn scored(out: &Path) -> Vec<String> {
    ["pricing", "profile"]
        .into_iter()
        .filter(|name| out.join(name).join("scores.json").is_file())
        .map(str::to_owned)
        .collect()
}

async fn run(
    bench: &Arc<PageBench>,
    out: &Path,
    shard: &str,
    system: Baseline,
) -> (RunSummary, Vec<EvalEvent<viga_eval::pages::PageScores>>) {
    let config = RunConfig {
        out: out.to_path_buf(),
        shard: shard.parse::<Shard>().unwrap(),
    };
    let (events, mut received) = tokio::sync::mpsc::unbounded_channel();
    let proposer: Arc<dyn Proposer<PageBench>> = Arc::new(system);
    let summary = runner::run(Arc::clone(bench), &config, proposer, Some(events))
        .await
        .unwrap();
    let mut seen = Vec::new();
    while let Ok(event) = received.try_recv() {
        seen.push(event);
    }
    (summary, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_shard_resume_and_show_their_columns_on_the_one_runner() {
    within(LIMIT, "the test", async {
        let mut web = WebConfig::locate().unwrap();
        web.load_timeout = Duration::from_secs(30);
        let worker = Arc::new(WebWorker::start(web).await.unwrap());
        let shelf = Shelf::new(vec![(Arc::clone(&worker), Some(ContainmentStatus::off()))]);
        let bench = Arc::new(PageBench {
            data: pages_mini(),
            instances: None,
            judge: None,
            clip: None,
            program_timeout: Duration::from_secs(30),
            workers: Arc::clone(&shelf),
        });
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("oracle");

        // Shard 0/2 takes the first instance only; the summary counts what the folder holds.
        let (first, events) = run(&bench, &out, "0/2", Baseline::Oracle).await;
        assert_eq!((first.total, first.skipped, first.scored), (1, 0, 1));
        assert!(matches!(
            events[0],
            EvalEvent::Started {
                total: 1,
                skipped: 0
            }
        ));
        assert_eq!(scored(&out), ["pricing"]);
        let half = summary(&out);
        assert_eq!((half.selected, half.instances), (2, 1), "{half:?}");
        assert!(
            half.notes
                .iter()
                .any(|note| note.contains("1 selected instance(s) have no result"))
        );

        // Shard 1/2 into the same folder takes the other; together they cover the selection.
        let (second, _) = run(&bench, &out, "1/2", Baseline::Oracle).await;
        assert_eq!((second.total, second.scored), (1, 1));
        assert_eq!(scored(&out), ["pricing", "profile"]);

        // The whole selection again: both were scored, so both are skipped and kept.
        let written = std::fs::metadata(out.join("pricing/scores.json"))
            .unwrap()
            .modified()
            .unwrap();
        let (again, events) = run(&bench, &out, "0/1", Baseline::Oracle).await;
        assert_eq!((again.total, again.skipped, again.scored), (2, 2, 0));
        assert_eq!(
            events,
            [EvalEvent::Started {
                total: 2,
                skipped: 2
            }]
        );
        let kept = std::fs::metadata(out.join("pricing/scores.json"))
            .unwrap()
            .modified()
            .unwrap();
        assert_eq!(written, kept, "a finished instance is not made again");

        // Every instance records what its renderer ran under.
        for name in ["pricing", "profile"] {
            let status: ContainmentStatus = serde_json::from_str(
                &std::fs::read_to_string(out.join(name).join("containment.json")).unwrap(),
            )
            .unwrap();
            assert_eq!(status, ContainmentStatus::off());
        }

        // The benchmark's columns, in summary.json and in the report.
        let oracle = summary(&out);
        let names: Vec<&str> = oracle.columns.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["PL", "N-CLIP", "refused requests"]);
        assert_eq!((oracle.instances, oracle.executed), (2, 2));
        assert_eq!(oracle.value("PL"), Some(0.0), "the goal against itself");
        assert_eq!(oracle.value("N-CLIP"), None, "no weights, no N-CLIP");
        assert!(oracle.columns[1].unavailable.is_some());
        assert_eq!(
            again.report.summary,
            std::fs::read_to_string(out.join("summary.json")).unwrap()
        );
        let report = std::fs::read_to_string(out.join("report.md")).unwrap();
        assert!(
            report.contains("| system | PL | N-CLIP | refused requests |")
                && report.contains("| 0.000000 | unavailable (no --clip-weights) | 0 |"),
            "{report}"
        );
        assert!(out.join("report.html").is_file());

        // Another system in the same folder: its results are made anew, not taken as its own.
        let (noop, _) = run(&bench, &out, "0/1", Baseline::Noop).await;
        assert_eq!((noop.skipped, noop.scored), (0, 2));
        let noop_summary = summary(&out);
        assert_eq!(noop_summary.system, "noop");
        assert!(noop_summary.value("PL").unwrap() > 0.01, "{noop_summary:?}");

        drop(bench);
        for worker in shelf.take_all() {
            drop(worker);
        }
        if let Ok(worker) = Arc::try_unwrap(worker) {
            worker.shutdown().await;
        }
    })
    .await;
}
