//! The orchestrator's own cost. 100 iterations against real Blender with an instant model:
//! wall time minus the model's time minus the time Blender reports working is what the loop
//! itself costs (prompts, memory, event log, files, montages, scoring). Also peak RSS.
//!
//! `cargo bench -p viga-core --bench loop_overhead` (env VIGA_BENCH_ITERATIONS, default 100;
//! VIGA_BENCH_RESOLUTION, default 512, the render size `viga run` uses).

use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;

use viga_blender::{BlenderTransport, Worker, WorkerConfig, locate};
use viga_core::RunConfig;
use viga_domain_scene::{SceneDomain, SceneSettings};
use viga_protocol::bridge::RenderEngine;
use viga_protocol::bridge::RenderSpec;
use viga_protocol::event::RunEvent;

use common::{InstantModel, env_number};

const PROGRAM: &str = "import bpy
for i in range(5):
    bpy.ops.mesh.primitive_cube_add(size=0.5 + 0.1 * i, location=(i - 2.0, 0.0, 0.5))
    bpy.context.object.name = f'Box{i}'
bpy.ops.mesh.primitive_plane_add(size=10)
bpy.ops.object.light_add(type='SUN', location=(3, -3, 5))
";

fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let iterations = env_number("VIGA_BENCH_ITERATIONS", 100);
    let side = env_number("VIGA_BENCH_RESOLUTION", 512);
    let worker = Arc::new(Worker::start(WorkerConfig::new(locate()?)).await?);
    let blender: Arc<dyn BlenderTransport> = worker.clone();
    let output = tempfile::tempdir()?;
    let mut config = RunConfig::new("five boxes on a floor");
    config.max_iterations = iterations;
    config.provider = "instant".into();
    let scene = SceneSettings {
        render: RenderSpec {
            engine: RenderEngine::Workbench,
            width: side,
            height: side,
            samples: None,
        },
        // The canonical views at the same size, as these figures were first measured.
        overview_size: Some((side, side)),
        ..SceneSettings::default()
    };
    let domain = Arc::new(SceneDomain::new(scene, blender, false)?);
    let busy_before = worker.blender_busy();
    let started = Instant::now();
    let model = InstantModel {
        plan: "1. five boxes\n2. a floor\n3. a sun",
        program: PROGRAM.to_owned(),
        verdict: serde_json::json!({"visual_differences": ["the boxes are too far apart"], "suggestions": ["move Box4 to x = 1.5"], "accepted": false}),
        observe: Box::new(|_| {}),
    };
    let mut handle = viga_core::start(config, Arc::new(model), domain, output.path())?;
    let mut model = Duration::ZERO;
    while let Some(event) = handle.next_event().await {
        if let RunEvent::ModelCalled { latency_ms, .. } = event.event {
            model += Duration::from_secs_f64(latency_ms / 1000.0);
        }
    }
    let outcome = handle.wait().await?;
    let wall = started.elapsed();
    if !matches!(
        outcome.stop,
        viga_protocol::event::StopReason::MaxIterations
    ) {
        return Err(format!("the run stopped early: {:?}", outcome.stop).into());
    }
    let blender_work = worker.blender_busy() - busy_before;
    let overhead = wall.saturating_sub(model).saturating_sub(blender_work);
    println!(
        "| measurement ({} iterations, Workbench {side}x{side}, 4 views + montage each) | value |",
        outcome.iterations
    );
    println!("|---|---|");
    println!("| wall time | {:.2} s |", wall.as_secs_f64());
    println!(
        "| Blender's own reported work | {:.2} s |",
        blender_work.as_secs_f64()
    );
    println!(
        "| model time (instant provider) | {:.3} s |",
        model.as_secs_f64()
    );
    println!(
        "| orchestrator overhead (the rest) | {:.3} s |",
        overhead.as_secs_f64()
    );
    println!(
        "| overhead share of wall time (target < 2%) | {:.2}% |",
        100.0 * overhead.as_secs_f64() / wall.as_secs_f64()
    );
    println!(
        "| overhead per iteration | {:.1} ms |",
        overhead.as_secs_f64() * 1000.0 / f64::from(outcome.iterations.max(1))
    );
    match peak_rss_mb() {
        Some(mb) => {
            println!("| peak RSS of the orchestrator process (target < 64 MB) | {mb:.1} MB |")
        }
        None => println!("| peak RSS | unavailable (no /proc) |"),
    }
    Ok(())
}
