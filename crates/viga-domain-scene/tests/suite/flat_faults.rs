//! The 2D domains' faults go through the loop as Blender's do, on real renderers: a slide
//! renderer killed under the run is restarted, reported, and the phase redone (E0); a page
//! whose load never ends is stopped at the program timeout and fast-retried (E1).

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use viga_domain_page::{PageDomain, PageSettings};
use viga_domain_slides::{SlidesDomain, SlidesSettings};
use viga_protocol::event::{RunEvent, StopReason};
use viga_testkit::within;

use super::{config, provider, text, verdict};

const LIMIT: Duration = Duration::from_secs(120);

const DECK: &str = "import os\nfrom pptx import Presentation\nprs = Presentation()\nslide = prs.slides.add_slide(prs.slide_layouts[5])\nslide.shapes.title.text = 'Hello'\nprs.save(os.environ['VIGA_DECK_PATH'])\n";

fn fenced(language: &str, program: &str) -> Value {
    text(&format!("```{language}\n{program}```\n"))
}

async fn events_of(mut run: viga_core::RunHandle) -> (Vec<RunEvent>, viga_core::RunOutcome) {
    let mut events = Vec::new();
    while let Some(event) = run.next_event().await {
        events.push(event.event);
    }
    (events, run.wait().await.unwrap())
}

#[tokio::test]
async fn a_slide_renderer_killed_under_the_run_is_restarted_and_the_look_redone() {
    within(LIMIT, "the slides run", async {
        let worker = viga_slides::SlideWorker::start(viga_slides::SlidesConfig::new(
            viga_slides::SlideTools::locate().unwrap(),
        ))
        .await
        .unwrap();
        // The renderer dies before the verifier's first look at the deck.
        let leader = worker.renderer_pid().await.unwrap();
        let killed = std::process::Command::new("kill")
            .args(["-KILL", "--", &format!("-{leader}")])
            .status()
            .unwrap();
        assert!(killed.success());
        let domain = SlidesDomain::new(
            SlidesSettings {
                view_width: 320,
                assets: None,
            },
            Arc::new(worker),
        )
        .unwrap();
        let mut config = config(1);
        config.plan_each_iteration = false;
        let out = tempfile::tempdir().unwrap();
        let run = viga_core::start(
            config,
            provider(vec![fenced("python", DECK), verdict(true)]),
            Arc::new(domain),
            out.path(),
        )
        .unwrap();
        let (events, outcome) = events_of(run).await;
        assert_eq!(outcome.stop, StopReason::Accepted, "{events:?}");
        let restarted: Vec<&String> = events
            .iter()
            .filter_map(|event| match event {
                RunEvent::WorkerRestarted { reason } => Some(reason),
                _ => None,
            })
            .collect();
        assert!(
            restarted
                .iter()
                .any(|reason| reason.contains("the slide renderer was lost")
                    && reason.contains("restarted")),
            "{restarted:?}"
        );
        // The look was redone on the restarted renderer: the overview's slide was kept.
        assert!(outcome.folder.join("renders/1/slide1-1.png").is_file());
        assert!(outcome.folder.join("final.pptx").is_file());
    })
    .await;
}

#[tokio::test]
async fn a_page_that_never_finishes_loading_is_stopped_and_fast_retried() {
    within(LIMIT, "the page run", async {
        let worker = viga_web::WebWorker::start(viga_web::WebConfig::locate().unwrap())
            .await
            .unwrap();
        let settings = PageSettings {
            viewport: viga_web::Viewport {
                width: 200,
                height: 120,
            },
        };
        let domain = PageDomain::new(settings, Arc::new(worker)).unwrap();
        let mut config = config(1);
        config.plan_each_iteration = false;
        config.program_timeout = Duration::from_secs(2);
        let out = tempfile::tempdir().unwrap();
        let endless = "<!DOCTYPE html><html><body><script>for (;;) {}</script></body></html>\n";
        let page = "<!DOCTYPE html><html><body><h1>Hello</h1></body></html>\n";
        let run = viga_core::start(
            config,
            provider(vec![
                fenced("html", endless),
                fenced("html", page),
                verdict(true),
            ]),
            Arc::new(domain),
            out.path(),
        )
        .unwrap();
        let (events, outcome) = events_of(run).await;
        assert_eq!(outcome.stop, StopReason::Accepted, "{events:?}");
        let retry = events
            .iter()
            .find_map(|event| match event {
                RunEvent::FastRetry { error, .. } => Some(error.clone()),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no fast retry: {events:?}"));
        assert!(retry.contains("did not finish within 2 s"), "{retry}");
        assert_eq!(outcome.final_code.as_deref(), Some(page));
        assert!(outcome.folder.join("final.png").is_file());
    })
    .await;
}

/// A page whose script starts a loop that never ends right after it loaded (issue 35) is a
/// program failure said in words, fast retried within the program timeout: not minutes of
/// looks that each wait for their limit, with no pictures for the verifier.
#[tokio::test]
async fn a_page_kept_busy_after_it_loaded_is_a_failure_that_is_fast_retried() {
    within(LIMIT, "the page run", async {
        let worker = viga_web::WebWorker::start(viga_web::WebConfig::locate().unwrap())
            .await
            .unwrap();
        let settings = PageSettings {
            viewport: viga_web::Viewport {
                width: 200,
                height: 120,
            },
        };
        let domain = PageDomain::new(settings, Arc::new(worker)).unwrap();
        let mut config = config(1);
        config.plan_each_iteration = false;
        let out = tempfile::tempdir().unwrap();
        let busy = "<!DOCTYPE html><html><body><h1>Hi</h1><script>addEventListener('load', () => setTimeout(() => { for (;;) {} }, 0));</script></body></html>\n";
        let page = "<!DOCTYPE html><html><body><h1>Hello</h1></body></html>\n";
        let started = std::time::Instant::now();
        let run = viga_core::start(
            config,
            provider(vec![fenced("html", busy), fenced("html", page), verdict(true)]),
            Arc::new(domain),
            out.path(),
        )
        .unwrap();
        let (events, outcome) = events_of(run).await;
        assert_eq!(outcome.stop, StopReason::Accepted, "{events:?}");
        let retry = events
            .iter()
            .find_map(|event| match event {
                RunEvent::FastRetry { error, .. } => Some(error.clone()),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no fast retry: {events:?}"));
        assert!(retry.contains("kept the page busy"), "{retry}");
        assert_eq!(outcome.final_code.as_deref(), Some(page));
        assert!(
            started.elapsed() < Duration::from_secs(40),
            "{:?}",
            started.elapsed()
        );
    })
    .await;
}
