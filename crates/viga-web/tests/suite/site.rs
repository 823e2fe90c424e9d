//! Visiting a site on this machine (a front end under test): its own requests go through,
//! and the page is driven as a person would, by clicks and typing; every other request is
//! still refused.

use std::time::Duration;

use viga_testkit::http::{Reply, TestServer};
use viga_testkit::within;
use viga_web::{Viewport, WebConfig, WebError, WebWorker};

use super::{LIMIT, config};

/// A form whose button fetches `/echo?text=<typed>` from its own site and shows the answer,
/// and fetches another server too.
fn form(elsewhere: &str) -> String {
    format!(
        r#"<!doctype html><html><body>
<input id="words"><button id="go">Go</button><p id="answer"></p>
<script>
document.getElementById("go").addEventListener("click", async () => {{
  const typed = document.getElementById("words").value;
  const reply = await fetch("/echo?text=" + encodeURIComponent(typed));
  document.getElementById("answer").textContent = await reply.text();
  fetch("{elsewhere}/steal").catch(() => {{}});
}});
</script></body></html>"#
    )
}

#[tokio::test]
async fn a_site_on_loopback_is_visited_clicked_and_typed_into() {
    within(LIMIT, "the test", async {
        let elsewhere = TestServer::start(|_| Reply::bytes(200, "stolen")).unwrap();
        let page = form(elsewhere.base());
        let site = TestServer::start(move |request| match request.path() {
            "/" => Reply::bytes(200, page.clone()).with_header("Content-Type", "text/html"),
            "/echo" => Reply::bytes(
                200,
                format!(
                    "echo {}",
                    request.target.split("text=").nth(1).unwrap_or("")
                ),
            ),
            _ => Reply::bytes(404, ""),
        })
        .unwrap();
        let worker = WebWorker::start(WebConfig {
            site: Some(site.base().to_owned()),
            ..config()
        })
        .await
        .unwrap();
        let viewport = Viewport {
            width: 400,
            height: 300,
        };
        worker.visit("/", viewport).await.unwrap();
        worker.type_into("#words", "lamp").await.unwrap();
        worker.click("#go").await.unwrap();
        let mut answer = String::new();
        for _ in 0..100 {
            answer = worker
                .evaluate("document.getElementById('answer').textContent")
                .await
                .unwrap()
                .as_str()
                .unwrap_or_default()
                .to_owned();
            if !answer.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(answer, "echo lamp");
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(elsewhere.requests().is_empty(), "{:?}", elsewhere.lines());
        let report = worker.page_report().await;
        assert!(
            report.refused.iter().any(|r| r.url.ends_with("/steal")),
            "{report:?}"
        );
        let missing = worker.click("#nothing-here").await.unwrap_err();
        assert!(missing.to_string().contains("#nothing-here"), "{missing}");
        worker.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn only_a_loopback_site_may_be_visited() {
    for site in [
        "http://example.org:80",
        "http://127.0.0.1",
        "http://127.0.0.1:80/path",
        "ftp://127.0.0.1:21",
    ] {
        let err = WebWorker::start(WebConfig {
            site: Some(site.to_owned()),
            ..config()
        })
        .await
        .unwrap_err();
        assert!(matches!(err, WebError::BadRequest(_)), "{site}: {err}");
    }
    let worker = WebWorker::start(config()).await.unwrap();
    let unset = worker
        .visit(
            "/",
            Viewport {
                width: 10,
                height: 10,
            },
        )
        .await
        .unwrap_err();
    assert!(unset.to_string().contains("no site"), "{unset}");
    worker.shutdown().await;
}
