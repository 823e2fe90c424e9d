//! Pages that never finish, scripts that never end, pages that eat memory.

use std::time::{Duration, Instant};

use viga_testkit::within;
use viga_web::{LostReason, Recovery, Shot, WebConfig, WebError, WebWorker, WorkerLost};

use super::{LIMIT, SMALL, config, pixel};

async fn quick_worker() -> WebWorker {
    WebWorker::start(WebConfig {
        load_timeout: Duration::from_secs(3),
        call_timeout: Duration::from_secs(3),
        ..config()
    })
    .await
    .unwrap()
}

/// The worker serves the next page. Chromium starts a new renderer process after a page
/// that took its renderer down, which on a loaded 2-core machine can outlast the quick
/// worker's 3 s load limit once (the load is then stopped, and the process kept): the next
/// try must work.
async fn still_works(worker: &WebWorker) {
    let page = "<body style='margin:0;background:#0f0'></body>";
    let shot = match worker.render(page, SMALL).await {
        Ok((_, shot)) => shot,
        Err(WebError::Lost(WorkerLost {
            reason: LostReason::Timeout(_),
            ..
        })) => worker.render(page, SMALL).await.unwrap().1,
        Err(err) => panic!("{err}"),
    };
    assert_eq!(pixel(&shot.png, 5, 5), [0, 255, 0]);
}

#[tokio::test]
async fn a_page_that_never_finishes_loading_is_stopped_at_the_limit() {
    within(LIMIT, "the test", async {
        let worker = quick_worker().await;
        let started = Instant::now();
        let err = worker
            .load("<body><script>while (true) {}</script></body>", SMALL)
            .await
            .unwrap_err();
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "{:?}",
            started.elapsed()
        );
        let WebError::Lost(WorkerLost {
            op,
            reason,
            recovery,
            ..
        }) = &err
        else {
            panic!("{err}");
        };
        assert_eq!(*op, "load");
        assert_eq!(*reason, LostReason::Timeout(Duration::from_secs(3)));
        assert!(
            matches!(recovery, Recovery::ProcessKept | Recovery::Restarted { .. }),
            "{recovery}"
        );
        let err = worker.screenshot(Shot::default()).await.unwrap_err();
        assert!(err.to_string().contains("load the document first"), "{err}");
        still_works(&worker).await;
        worker.shutdown().await;
    })
    .await;
}

/// A script that starts a loop that never ends right after the page loaded fails the load,
/// as the page's own fault and in words, within a few seconds: not every later look at the
/// page waiting for its call limit.
#[tokio::test]
async fn a_script_that_never_ends_after_loading_fails_the_load_saying_so() {
    within(LIMIT, "the test", async {
        let worker = quick_worker().await;
        let started = Instant::now();
        let err = worker
            .load(
                "<body><script>addEventListener('load', () => setTimeout(() => { while (true) {} }, 0));</script></body>",
                SMALL,
            )
            .await
            .unwrap_err();
        assert!(
            started.elapsed() < Duration::from_secs(8),
            "{:?}",
            started.elapsed()
        );
        let WebError::PageFailed(why) = &err else {
            panic!("{err}");
        };
        assert!(why.contains("kept the page busy"), "{why}");
        let err = worker.screenshot(Shot::default()).await.unwrap_err();
        assert!(err.to_string().contains("load the document first"), "{err}");
        still_works(&worker).await;
        worker.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_page_that_eats_memory_is_stopped_and_the_next_one_works() {
    within(LIMIT, "the test", async {
        let worker = quick_worker().await;
        // Towards a gigabyte of strings, while loading.
        let hog = "<body><script>const kept = []; while (true) kept.push('x'.repeat(1 << 20) + Math.random());</script></body>";
        let err = worker.load(hog, SMALL).await.unwrap_err();
        assert!(
            matches!(err, WebError::PageFailed(_) | WebError::Lost(_)),
            "{err}"
        );
        still_works(&worker).await;
        worker.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn chromium_starts_through_the_containment_launcher() {
    within(LIMIT, "the test", async {
        let folder = tempfile::tempdir().unwrap();
        let (launcher, log) = viga_testkit::recording_launcher(folder.path());
        let readable = Some(Vec::new());
        let writable = Vec::new();
        let confinement = viga_web::Confinement {
            launcher,
            writable,
            readable,
        };
        let worker = WebWorker::start(WebConfig {
            confinement: Some(confinement),
            ..config()
        })
        .await
        .unwrap();
        still_works(&worker).await;
        let scratch = worker.scratch_folder().to_path_buf();
        viga_testkit::assert_launched(&log, &scratch, &["--remote-debugging-pipe"]);
        let report = worker.contained_report().await;
        assert_eq!(report.as_deref(), Some(viga_testkit::RECORDED_REPORT));
        worker.shutdown().await;
    })
    .await;
}
