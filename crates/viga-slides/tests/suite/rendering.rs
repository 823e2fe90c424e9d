//! Rendering decks and reading their structure, in real LibreOffice.

use viga_slides::{Region, SlidesError};
use viga_testkit::within;

use super::{LIMIT, TWO_SLIDES, deck, pixel, worker};

#[tokio::test]
async fn a_two_slide_deck_renders_to_two_pictures_of_the_right_size_and_colours() {
    within(LIMIT, "the test", async {
        let worker = worker().await;
        let result = worker.run_program(TWO_SLIDES, None).await.unwrap();
        assert_eq!(result.run.stdout.text, "saving to deck.pptx\n");
        let deck = result.deck.unwrap();
        assert!(deck.size() > 1000, "{}", deck.size());
        let render = worker.render(&deck, 400).await.unwrap();
        assert_eq!(render.slide_count, 2);
        assert_eq!(render.slides.len(), 2);
        for (slide, number) in render.slides.iter().zip(1..) {
            assert_eq!(slide.number, number);
            // 10 x 7.5 in at 400 pixels wide.
            assert_eq!((slide.width, slide.height), (400, 300));
            assert_eq!(
                image::guess_format(&slide.png).unwrap(),
                image::ImageFormat::Png
            );
        }
        let (red, blue) = (&render.slides[0].png, &render.slides[1].png);
        // 40 pixels an inch: the square covers (40..120, 40..120).
        assert_eq!(pixel(red, 10, 10), [255, 0, 0]);
        assert_eq!(pixel(red, 80, 80), [255, 255, 255]);
        assert_eq!(pixel(red, 200, 200), [255, 0, 0]);
        assert_eq!(pixel(blue, 10, 10), [0, 0, 255]);
        assert_eq!(pixel(blue, 390, 100), [0, 0, 255]);
        // The worker stays warm: a second render of one slide works and costs no restart.
        let one = worker.render_slide(&deck, 2, 160).await.unwrap();
        assert_eq!((one.number, one.width, one.height), (2, 160, 120));
        assert_eq!(worker.restarts(), 0);
        worker.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_zoomed_region_shows_what_is_there() {
    within(LIMIT, "the test", async {
        let worker = worker().await;
        let deck = deck(&worker, TWO_SLIDES).await;
        // The white square is 0.1..0.3 of the width, 0.1333..0.4 of the height.
        let inside = Region { x: 0.12, y: 0.15, width: 0.16, height: 0.2 };
        let zoom = worker.render_region(&deck, 1, inside, 200).await.unwrap();
        assert_eq!(zoom.width, 200);
        assert_eq!(zoom.height, 188);
        for (x, y) in [(0, 0), (100, 90), (199, zoom.height - 1)] {
            assert_eq!(pixel(&zoom.png, x, y), [255, 255, 255], "at ({x}, {y})");
        }
        // Half over the square's right edge (at 0.3): white on the left, red on the right.
        let edge = Region { x: 0.2, y: 0.2, width: 0.2, height: 0.1 };
        let zoom = worker.render_region(&deck, 1, edge, 100).await.unwrap();
        assert_eq!(pixel(&zoom.png, 10, 10), [255, 255, 255]);
        assert_eq!(pixel(&zoom.png, 90, 10), [255, 0, 0]);

        let outside = Region { x: 0.9, y: 0.0, width: 0.2, height: 0.5 };
        let err = worker.render_region(&deck, 1, outside, 100).await.unwrap_err();
        assert!(matches!(err, SlidesError::BadRequest(_)), "{err}");
        assert!(err.to_string().contains("x + width"), "{err}");
        let err = worker.render_slide(&deck, 3, 100).await.unwrap_err();
        assert!(
            matches!(&err, SlidesError::Refused { message, .. } if message.contains("no slide 3: the deck has 2")),
            "{err}"
        );
        assert_eq!(worker.restarts(), 0, "a refusal leaves the renderer alone");
        worker.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn the_structure_is_read_back_with_text_fonts_colours_and_positions() {
    within(LIMIT, "the test", async {
        let worker = worker().await;
        let deck = deck(&worker, TWO_SLIDES).await;
        let structure = worker.structure(&deck).await.unwrap();
        assert_eq!(structure.slide_count, 2);
        assert_eq!((structure.slide_width, structure.slide_height), (9_144_000, 6_858_000));
        let first = &structure.slides[0];
        assert_eq!(first.background.as_deref(), Some("#FF0000"));
        let square = &first.shapes[0];
        assert_eq!(square.name.as_deref(), Some("White square"));
        assert_eq!(square.kind, "AUTO_SHAPE");
        assert_eq!((square.left, square.top), (Some(914_400), Some(914_400)));
        assert_eq!(square.fill.as_deref(), Some("#FFFFFF"));
        let caption = &structure.slides[1].shapes[0];
        let run = &caption.text[0].runs[0];
        assert_eq!(run.text, "Quarterly results");
        assert_eq!(run.font.as_deref(), Some("DejaVu Sans"));
        assert_eq!(run.size_pt, Some(28.0));
        assert_eq!(run.bold, Some(true));
        assert_eq!(run.color.as_deref(), Some("#FFFF00"));

        let text = structure.to_text();
        for expected in [
            "Deck: 2 slide(s), 10.00 x 7.50 in",
            "Slide 1 (layout \"Blank\"), background #FF0000",
            "- AUTO_SHAPE \"White square\" at (1.00, 1.00) in, size 2.00 x 2.00 in (10%, 13% of the slide; 20% x 27%), fill #FFFFFF",
            "text \"Quarterly results\"",
            "run \"Quarterly results\": DejaVu Sans, 28 pt, bold, #FFFF00",
        ] {
            assert!(text.contains(expected), "{expected:?} not in:\n{text}");
        }
        worker.shutdown().await;
    })
    .await;
}
