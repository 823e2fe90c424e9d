mod hostile;
mod programs;
mod rendering;

use std::time::Duration;

use viga_slides::{Deck, SlideTools, SlideWorker, SlidesConfig};

/// One test's budget: LibreOffice starts in about 1.5 s, a render takes a fraction of one.
pub const LIMIT: Duration = Duration::from_secs(120);

/// Real tools, or a failure that says what to install: these tests never skip.
pub fn config() -> SlidesConfig {
    let tools = SlideTools::locate().unwrap_or_else(|err| panic!("{err}"));
    SlidesConfig::new(tools)
}

pub async fn worker() -> SlideWorker {
    SlideWorker::start(config()).await.unwrap()
}

/// Runs `program`, which must save a deck.
pub async fn deck(worker: &SlideWorker, program: &str) -> Deck {
    let result = worker.run_program(program, None).await.unwrap();
    result.deck.unwrap_or_else(|| {
        panic!(
            "no deck: {:?}\nstdout: {}\nstderr: {}",
            result.run.status, result.run.stdout.text, result.run.stderr.text
        )
    })
}

/// The colour at (x, y) of a PNG.
pub fn pixel(png: &[u8], x: u32, y: u32) -> [u8; 3] {
    let picture = image::load_from_memory(png).unwrap().to_rgb8();
    picture.get_pixel(x, y).0
}

/// Two slides: red with a white square at (1 in, 1 in), 2 in wide; blue with a title text box.
pub const TWO_SLIDES: &str = r#"
import os
from pptx import Presentation
from pptx.util import Inches, Pt
from pptx.dml.color import RGBColor
from pptx.enum.shapes import MSO_SHAPE

prs = Presentation()
prs.slide_width = Inches(10)
prs.slide_height = Inches(7.5)
red = prs.slides.add_slide(prs.slide_layouts[6])
red.background.fill.solid()
red.background.fill.fore_color.rgb = RGBColor(0xFF, 0x00, 0x00)
square = red.shapes.add_shape(MSO_SHAPE.RECTANGLE, Inches(1), Inches(1), Inches(2), Inches(2))
square.name = "White square"
square.fill.solid()
square.fill.fore_color.rgb = RGBColor(0xFF, 0xFF, 0xFF)
square.line.fill.background()
blue = prs.slides.add_slide(prs.slide_layouts[6])
blue.background.fill.solid()
blue.background.fill.fore_color.rgb = RGBColor(0x00, 0x00, 0xFF)
box = blue.shapes.add_textbox(Inches(0.5), Inches(6), Inches(9), Inches(1))
box.name = "Caption"
run = box.text_frame.paragraphs[0].add_run()
run.text = "Quarterly results"
run.font.name = "DejaVu Sans"
run.font.size = Pt(28)
run.font.bold = True
run.font.color.rgb = RGBColor(0xFF, 0xFF, 0x00)
print("saving to", os.path.basename(os.environ["VIGA_DECK_PATH"]))
prs.save(os.environ["VIGA_DECK_PATH"])
"#;
