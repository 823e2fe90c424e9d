//! Warm slide renders against a cold LibreOffice, in the same run. Prints a Markdown table.
//!
//! `cargo bench -p viga-slides` (needs `cargo xtask setup` and LibreOffice).
//! Environment: `VIGA_BENCH_WARM` (default 30 renders), `VIGA_BENCH_COLD` (default 5).

use std::time::{Duration, Instant};

use viga_slides::{SlideTools, SlideWorker, SlidesConfig};

/// One slide: a title, a coloured shape and a text box, 1280 pixels wide when rendered.
const ONE_SLIDE: &str = r#"
import os
from pptx import Presentation
from pptx.util import Inches, Pt
from pptx.dml.color import RGBColor
from pptx.enum.shapes import MSO_SHAPE
prs = Presentation()
prs.slide_width, prs.slide_height = Inches(13.333), Inches(7.5)
slide = prs.slides.add_slide(prs.slide_layouts[5])
slide.shapes.title.text = "Quarterly results"
shape = slide.shapes.add_shape(MSO_SHAPE.ROUNDED_RECTANGLE, Inches(1), Inches(2), Inches(5), Inches(3))
shape.fill.solid()
shape.fill.fore_color.rgb = RGBColor(0x1F, 0x77, 0xB4)
box = slide.shapes.add_textbox(Inches(7), Inches(2), Inches(5), Inches(3))
box.text_frame.text = "Revenue up 12%"
box.text_frame.paragraphs[0].runs[0].font.size = Pt(32)
prs.save(os.environ["VIGA_DECK_PATH"])
"#;
const WIDTH: u32 = 1280;

fn count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The sample at `fraction` of the sorted samples (0.5: the median).
fn quantile(samples: &[Duration], fraction: f64) -> f64 {
    let mut sorted = samples.to_vec();
    sorted.sort();
    let at = ((sorted.len() - 1) as f64 * fraction).round() as usize;
    sorted[at].as_secs_f64() * 1000.0
}

fn row(what: &str, samples: &[Duration]) {
    println!(
        "| {what} | {} | {:.0} ms | {:.0} ms |",
        samples.len(),
        quantile(samples, 0.5),
        quantile(samples, 0.99)
    );
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let tools = SlideTools::locate()?;
    let warm_runs = count("VIGA_BENCH_WARM", 30);
    let cold_runs = count("VIGA_BENCH_COLD", 5);

    let started = Instant::now();
    let worker = SlideWorker::start(SlidesConfig::new(tools.clone())).await?;
    let startup = started.elapsed();
    let first_program = Instant::now();
    let deck = worker
        .run_program(ONE_SLIDE, None)
        .await?
        .deck
        .ok_or("no deck")?;
    let program_time = first_program.elapsed();
    let first = Instant::now();
    worker.render(&deck, WIDTH).await?;
    let first_render = first.elapsed();

    let mut warm = Vec::new();
    for _ in 0..warm_runs {
        let started = Instant::now();
        let render = worker.render(&deck, WIDTH).await?;
        warm.push(started.elapsed());
        assert_eq!(render.slides.len(), 1);
    }
    let mut warm_program = Vec::new();
    for _ in 0..warm_runs.div_ceil(3) {
        let started = Instant::now();
        let result = worker.run_program(ONE_SLIDE, None).await?;
        worker.render(&result.deck.ok_or("no deck")?, WIDTH).await?;
        warm_program.push(started.elapsed());
    }
    let mut structure = Vec::new();
    for _ in 0..warm_runs.div_ceil(3) {
        let started = Instant::now();
        worker.structure(&deck).await?;
        structure.push(started.elapsed());
    }
    let kept = deck.read()?;
    worker.shutdown().await;

    // Cold: a new LibreOffice for each render, started, used once and stopped.
    let folder = tempfile::tempdir()?;
    let deck_path = folder.path().join("deck.pptx");
    std::fs::write(&deck_path, kept)?;
    let mut cold = Vec::new();
    for _ in 0..cold_runs {
        let started = Instant::now();
        let worker = SlideWorker::start(SlidesConfig::new(tools.clone())).await?;
        let deck = worker.import_deck(&deck_path)?;
        worker.render(&deck, WIDTH).await?;
        drop(deck);
        worker.shutdown().await;
        cold.push(started.elapsed());
    }
    // The usual command line, for comparison (first slide only, LibreOffice's own size).
    let soffice = tools.office_program_dir.join("soffice");
    let mut cli = Vec::new();
    for run in 0..cold_runs {
        let profile = folder.path().join(format!("profile-{run}"));
        let started = Instant::now();
        let status = std::process::Command::new(&soffice)
            .arg(format!(
                "-env:UserInstallation=file://{}",
                profile.display()
            ))
            .args(["--headless", "--convert-to", "png", "--outdir"])
            .arg(folder.path())
            .arg(&deck_path)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()?;
        cli.push(started.elapsed());
        assert!(status.success());
    }

    println!("| measurement ({WIDTH} px wide, one slide) | samples | p50 | p99 |");
    println!("|---|---|---|---|");
    row("warm: render the deck", &warm);
    row(
        "warm: run the python-pptx program, then render",
        &warm_program,
    );
    row("warm: read the structure", &structure);
    row("cold: start LibreOffice, render, stop", &cold);
    row(
        "cold: `soffice --headless --convert-to png` (fresh profile)",
        &cli,
    );
    println!();
    println!(
        "start-up {:.0} ms, first program {:.0} ms, first render {:.0} ms; cold p50 / warm p50 = {:.1}x",
        startup.as_secs_f64() * 1000.0,
        program_time.as_secs_f64() * 1000.0,
        first_render.as_secs_f64() * 1000.0,
        quantile(&cold, 0.5) / quantile(&warm, 0.5)
    );
    Ok(())
}
