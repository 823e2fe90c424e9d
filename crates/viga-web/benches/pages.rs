//! Warm page renders against a cold Chromium, in the same run. Prints a Markdown table.
//!
//! `cargo bench -p viga-web` (needs Chromium).
//! Environment: `VIGA_BENCH_WARM` (default 50 renders), `VIGA_BENCH_COLD` (default 5).

use std::time::{Duration, Instant};

use viga_web::{Shot, Viewport, WebConfig, WebWorker};

/// A small landing page: a header, three cards in a grid, a footer.
const PAGE: &str = r#"<!doctype html><html><head><style>
  body { margin: 0; font-family: "DejaVu Sans", sans-serif; background: #f4f4f8; }
  header { background: #1f77b4; color: white; padding: 24px 48px; font-size: 28px; }
  .grid { display: grid; grid-template-columns: repeat(3, 1fr); gap: 24px; padding: 48px; }
  .card { background: white; border-radius: 12px; padding: 24px; box-shadow: 0 2px 8px rgba(0,0,0,.15); }
  footer { text-align: center; color: #666; padding: 24px; }
</style></head><body>
<header>Acme analytics</header>
<div class="grid"><div class="card"><h2>Revenue</h2><p>Up 12% on last quarter.</p></div>
<div class="card"><h2>Users</h2><p>48,000 active this month.</p></div>
<div class="card"><h2>Churn</h2><p>Down to 2.1%.</p></div></div>
<footer>© Acme</footer></body></html>"#;
const VIEWPORT: Viewport = Viewport {
    width: 1280,
    height: 800,
};

fn count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn middle_and_tail(samples: &[Duration]) -> (f64, f64) {
    let mut sorted: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
    sorted.sort_by(f64::total_cmp);
    let pick = |fraction: f64| sorted[((sorted.len() - 1) as f64 * fraction).round() as usize];
    (pick(0.5), pick(0.99))
}

fn row(what: &str, samples: &[Duration]) {
    let (p50, p99) = middle_and_tail(samples);
    println!("| {what} | {} | {p50:.0} ms | {p99:.0} ms |", samples.len());
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let config = WebConfig::locate()?;
    let warm_runs = count("VIGA_BENCH_WARM", 50);
    let cold_runs = count("VIGA_BENCH_COLD", 5);

    let started = Instant::now();
    let worker = WebWorker::start(config.clone()).await?;
    let startup = started.elapsed();
    let first = Instant::now();
    worker.render(PAGE, VIEWPORT).await?;
    let first_render = first.elapsed();

    let mut warm = Vec::new();
    let mut loads = Vec::new();
    for _ in 0..warm_runs {
        let started = Instant::now();
        worker.load(PAGE, VIEWPORT).await?;
        loads.push(started.elapsed());
        worker.screenshot(Shot::default()).await?;
        warm.push(started.elapsed());
    }
    let mut resized = Vec::new();
    for _ in 0..warm_runs.div_ceil(5) {
        let started = Instant::now();
        let viewport = Viewport {
            width: 390,
            height: 844,
        };
        worker
            .screenshot(Shot {
                viewport: Some(viewport),
                ..Shot::default()
            })
            .await?;
        resized.push(started.elapsed());
        worker
            .screenshot(Shot {
                viewport: Some(VIEWPORT),
                ..Shot::default()
            })
            .await?;
    }
    let mut queries = Vec::new();
    for _ in 0..warm_runs.div_ceil(5) {
        let started = Instant::now();
        worker.element_boxes(".card").await?;
        worker.computed_styles(".card", &[]).await?;
        queries.push(started.elapsed());
    }
    worker.shutdown().await;

    let mut cold = Vec::new();
    for _ in 0..cold_runs {
        let started = Instant::now();
        let worker = WebWorker::start(config.clone()).await?;
        worker.render(PAGE, VIEWPORT).await?;
        worker.shutdown().await;
        cold.push(started.elapsed());
    }

    println!("| measurement (1280x800 window) | samples | p50 | p99 |");
    println!("|---|---|---|---|");
    row("warm: load the page and take a screenshot", &warm);
    row("warm: load only", &loads);
    row(
        "warm: screenshot at another window size (390x844)",
        &resized,
    );
    row("warm: element boxes and computed styles", &queries);
    row("cold: start Chromium, load, screenshot, stop", &cold);
    println!();
    println!(
        "start-up {:.0} ms, first render {:.0} ms; cold p50 / warm p50 = {:.1}x",
        startup.as_secs_f64() * 1000.0,
        first_render.as_secs_f64() * 1000.0,
        middle_and_tail(&cold).0 / middle_and_tail(&warm).0
    );
    Ok(())
}
