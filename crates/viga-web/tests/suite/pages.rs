//! Showing pages and looking at them, in real Chromium.

use viga_testkit::within;
use viga_web::{Shot, Viewport, WebError};

use super::{BOXES, LIMIT, SMALL, pixel, worker};

#[tokio::test]
async fn a_page_renders_at_two_viewports_scrolled_and_whole() {
    within(LIMIT, "the test", async {
        let worker = worker().await;
        let (report, shot) = worker.render(BOXES, SMALL).await.unwrap();
        assert!(
            report.url.starts_with("https://viga-page-"),
            "{}",
            report.url
        );
        assert_eq!(report.report.refused_total, 0, "{:?}", report.report);
        assert_eq!((shot.width, shot.height), (320, 240));
        assert_eq!(pixel(&shot.png, 5, 5), [255, 0, 0]);
        assert_eq!(pixel(&shot.png, 60, 30), [0, 0, 255]);

        let wide = Viewport {
            width: 640,
            height: 480,
        };
        let shot = worker
            .screenshot(Shot {
                viewport: Some(wide),
                ..Shot::default()
            })
            .await
            .unwrap();
        assert_eq!((shot.width, shot.height), (640, 480));
        assert_eq!(pixel(&shot.png, 600, 400), [255, 0, 0]);
        assert_eq!(pixel(&shot.png, 60, 30), [0, 0, 255]);

        // Scrolled down 700 px: the green band (1000 to 1100 px) is 300 to 400 px down.
        let shot = worker
            .screenshot(Shot {
                scroll: Some((0.0, 700.0)),
                ..Shot::default()
            })
            .await
            .unwrap();
        assert_eq!(pixel(&shot.png, 100, 250), [255, 0, 0]);
        assert_eq!(pixel(&shot.png, 100, 350), [0, 255, 0]);

        let whole = worker
            .screenshot(Shot {
                full_page: true,
                ..Shot::default()
            })
            .await
            .unwrap();
        assert_eq!((whole.width, whole.height), (640, 1200));
        assert_eq!(pixel(&whole.png, 60, 30), [0, 0, 255]);
        assert_eq!(pixel(&whole.png, 300, 1050), [0, 255, 0]);

        // The next page replaces this one, warm.
        let (_, shot) = worker
            .render("<body style='margin:0;background:#00f'></body>", SMALL)
            .await
            .unwrap();
        assert_eq!(pixel(&shot.png, 5, 5), [0, 0, 255]);
        assert_eq!(worker.restarts(), 0);
        worker.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn element_boxes_and_computed_styles_are_read() {
    within(LIMIT, "the test", async {
        let worker = worker().await;
        // The page tries to lie about itself; the queries run in a world of their own.
        let liar = BOXES.replace(
            "</body>",
            "<script>document.querySelectorAll = () => []; window.getComputedStyle = () => ({getPropertyValue: () => 'lie'});</script></body>",
        );
        worker.load(&liar, SMALL).await.unwrap();
        let boxes = worker.element_boxes("#box").await.unwrap();
        assert_eq!(boxes.count, 1);
        let found = &boxes.elements[0];
        assert_eq!((found.x, found.y, found.width, found.height), (10.0, 20.0, 100.0, 50.0));
        assert_eq!(found.tag, "div");
        assert_eq!(found.id.as_deref(), Some("box"));
        assert_eq!(found.classes.as_deref(), Some("card wide"));
        assert_eq!(found.text, "Box");

        let styles = worker.computed_styles("h1, #box", &[]).await.unwrap();
        assert_eq!(styles.count, 2);
        let box_style = styles.elements.iter().find(|e| e.tag == "div").unwrap();
        assert_eq!(box_style.styles["background-color"], "rgb(0, 0, 255)");
        assert_eq!(box_style.styles["position"], "absolute");
        let heading = styles.elements.iter().find(|e| e.tag == "h1").unwrap();
        assert_eq!(heading.styles["color"], "rgb(255, 255, 0)");
        assert_eq!(heading.styles["font-size"], "24px");
        assert_eq!(heading.styles["font-weight"], "700");
        let named = worker.computed_styles("h1", &["left"]).await.unwrap();
        assert_eq!(named.elements[0].styles.len(), 1);
        assert_eq!(named.elements[0].styles["left"], "150px");

        let err = worker.element_boxes("div[").await.unwrap_err();
        assert!(matches!(&err, WebError::BadRequest(m) if m.contains("not valid CSS")), "{err}");
        assert_eq!(worker.element_boxes("table").await.unwrap().count, 0);
        worker.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn bad_requests_say_what_is_wrong() {
    within(LIMIT, "the test", async {
        let worker = worker().await;
        let err = worker.screenshot(Shot::default()).await.unwrap_err();
        assert!(err.to_string().contains("load the document first"), "{err}");
        let err = worker
            .load(
                "<p>hi</p>",
                Viewport {
                    width: 0,
                    height: 10,
                },
            )
            .await
            .unwrap_err();
        assert!(err.to_string().contains("1 to 4096 pixels a side"), "{err}");
        let huge = "x".repeat(9 * 1024 * 1024);
        let err = worker.load(&huge, SMALL).await.unwrap_err();
        assert!(
            err.to_string().contains("at most 8388608 are shown"),
            "{err}"
        );
        worker.shutdown().await;
    })
    .await;
}
