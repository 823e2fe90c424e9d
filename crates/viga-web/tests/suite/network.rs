//! No page reaches the network: its own document is served from memory, everything else is
//! refused, and what was refused is reported.

use std::net::{TcpListener, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use viga_testkit::within;

use super::{LIMIT, SMALL, pixel, worker};

/// Counts TCP connections and UDP datagrams that reach a loopback port.
struct Listener {
    port: u16,
    arrivals: Arc<AtomicUsize>,
}

fn listen() -> Listener {
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = tcp.local_addr().unwrap().port();
    let udp = UdpSocket::bind(("127.0.0.1", port)).unwrap();
    let arrivals = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&arrivals);
    std::thread::spawn(move || {
        for _ in tcp.incoming() {
            counted.fetch_add(1, Ordering::SeqCst);
        }
    });
    let counted = Arc::clone(&arrivals);
    std::thread::spawn(move || {
        let mut buffer = [0u8; 2048];
        while udp.recv_from(&mut buffer).is_ok() {
            counted.fetch_add(1, Ordering::SeqCst);
        }
    });
    Listener { port, arrivals }
}

#[tokio::test]
async fn a_page_that_requests_outside_urls_gets_no_response_and_the_refusals_are_reported() {
    within(LIMIT, "the test", async {
        let listener = listen();
        let port = listener.port;
        let page = format!(
            r#"<!doctype html><html><head>
<link rel="preconnect" href="http://127.0.0.1:{port}/">
<link rel="dns-prefetch" href="//example.net">
<link rel="stylesheet" href="http://127.0.0.1:{port}/style.css">
<script src="https://example.com/lib.js"></script>
</head><body style="margin:0;background:#fff">
<img id="local" src="http://127.0.0.1:{port}/image.png" width="50" height="50">
<img id="public" src="https://example.com/image.png" width="50" height="50">
<img id="relative" src="logo.png" width="50" height="50">
<script>
  document.body.dataset.fetch = 'waiting';
  fetch('http://127.0.0.1:{port}/data.json').then(() => document.body.dataset.fetch = 'answered', () => document.body.dataset.fetch = 'failed');
  try {{ new WebSocket('ws://127.0.0.1:{port}/socket'); }} catch (e) {{}}
  try {{
    const peer = new RTCPeerConnection({{iceServers: [{{urls: 'stun:127.0.0.1:{port}'}}]}});
    peer.createDataChannel('x');
    peer.createOffer().then(offer => peer.setLocalDescription(offer));
  }} catch (e) {{}}
  navigator.sendBeacon('http://127.0.0.1:{port}/beacon', 'x');
</script></body></html>"#
        );
        let worker = worker().await;
        let loaded = worker.load(&page, SMALL).await.unwrap();
        // Give the page's late requests (fetch, socket, ICE) time to go out, if they could.
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(listener.arrivals.load(Ordering::SeqCst), 0, "something reached the loopback server");
        let styles = worker.computed_styles("body", &["--unused"]).await.unwrap();
        assert_eq!(styles.count, 1);
        let report = worker.page_report().await;
        let refused: Vec<&str> = report.refused.iter().map(|r| r.url.as_str()).collect();
        for expected in [
            format!("http://127.0.0.1:{port}/style.css"),
            "https://example.com/lib.js".to_owned(),
            format!("http://127.0.0.1:{port}/image.png"),
            "https://example.com/image.png".to_owned(),
            format!("{}logo.png", loaded.url),
            format!("http://127.0.0.1:{port}/data.json"),
            format!("ws://127.0.0.1:{port}/socket"),
        ] {
            assert!(refused.contains(&expected.as_str()), "{expected} not reported in {refused:?}");
        }
        let socket = report.refused.iter().find(|r| r.url.starts_with("ws:")).unwrap();
        assert_eq!(socket.resource_type, "WebSocket");
        assert!(!refused.iter().any(|url| url.ends_with("favicon.ico")), "the browser's favicon is not the page's: {refused:?}");
        assert_eq!(report.refused_total, report.refused.len());
        // The fetch got no response: it failed.
        let boxes = worker.element_boxes("body[data-fetch=failed]").await.unwrap();
        assert_eq!(boxes.count, 1, "the fetch was answered or still waits");
        // A broken image draws nothing red or white-on-white: the page is white.
        let shot = worker.screenshot(viga_web::Shot::default()).await.unwrap();
        assert_eq!(pixel(&shot.png, 25, 25), [255, 255, 255]);
        assert_eq!(listener.arrivals.load(Ordering::SeqCst), 0);
        worker.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn the_page_cannot_navigate_away_and_its_script_errors_are_reported() {
    within(LIMIT, "the test", async {
        let listener = listen();
        let port = listener.port;
        let page = format!(
            "<body><script>console.error('oops', 42); setTimeout(() => {{ location.href = 'http://127.0.0.1:{port}/away'; }}, 10); undefinedFunction();</script></body>"
        );
        let worker = worker().await;
        worker.load(&page, SMALL).await.unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        let report = worker.page_report().await;
        assert!(report.errors.iter().any(|e| e.contains("console.error: oops 42")), "{:?}", report.errors);
        assert!(report.errors.iter().any(|e| e.contains("undefinedFunction is not defined")), "{:?}", report.errors);
        // Only the exception is an uncaught one; the console line is not.
        assert_eq!(report.uncaught.len(), 1, "{:?}", report.uncaught);
        assert!(report.uncaught[0].contains("undefinedFunction is not defined"), "{:?}", report.uncaught);
        assert!(report.refused.iter().any(|r| r.url == format!("http://127.0.0.1:{port}/away") && r.resource_type == "Document"), "{:?}", report.refused);
        assert_eq!(listener.arrivals.load(Ordering::SeqCst), 0);
        worker.shutdown().await;
    })
    .await;
}
