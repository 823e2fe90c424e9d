//! Warm worker against cold process, and render times. Prints a Markdown table.
//!
//! `cargo bench -p viga-blender --bench bridge` (needs `cargo xtask setup` or VIGA_BLENDER).
//! Environment: `VIGA_BENCH_WARM_CALLS` (default 300), `VIGA_BENCH_COLD_RUNS` (default 10).

use std::time::{Duration, Instant};

use viga_blender::oneshot::run_script;
use viga_blender::{BlenderCommands, Worker, WorkerConfig, locate};
use viga_protocol::bridge::{RenderEngine, RenderRequest, RenderSpec, SceneReset};

/// The same small piece of scene work, done warm and cold: add a mesh object, count the
/// objects, remove it again (so repeated warm runs see the same scene).
const WORK: &str = "import bpy
mesh = bpy.data.meshes.new('bench')
obj = bpy.data.objects.new('bench', mesh)
bpy.context.scene.collection.objects.link(obj)
count = len(bpy.data.objects)
bpy.data.objects.remove(obj)
bpy.data.meshes.remove(mesh)
";

const RENDER_SCENE: &str = "import bpy
bpy.ops.mesh.primitive_cube_add()
bpy.ops.object.light_add(type='SUN', location=(3, -3, 5))
bpy.ops.object.camera_add(location=(5, -5, 4), rotation=(1.1, 0, 0.785))
bpy.context.scene.camera = bpy.context.object
";

fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn percentile(samples: &mut [Duration], fraction: f64) -> Duration {
    samples.sort();
    let index = ((samples.len() as f64 - 1.0) * fraction).round() as usize;
    samples[index]
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let launcher = locate()?;
    let warm_calls = env_count("VIGA_BENCH_WARM_CALLS", 300);
    let cold_runs = env_count("VIGA_BENCH_COLD_RUNS", 10);
    let worker = Worker::start(WorkerConfig::new(launcher.clone())).await?;
    worker.execute("", Some(SceneReset::Factory), None).await?;

    let mut ping = Vec::with_capacity(warm_calls);
    for _ in 0..warm_calls {
        let started = Instant::now();
        worker.ping().await?;
        ping.push(started.elapsed());
    }
    let mut warm = Vec::with_capacity(warm_calls);
    for _ in 0..warm_calls {
        let started = Instant::now();
        let result = worker.execute(WORK, None, None).await?;
        warm.push(started.elapsed());
        assert!(result.succeeded(), "{result:?}");
    }
    let mut warm_reset = Vec::with_capacity(warm_calls / 10);
    for _ in 0..(warm_calls / 10).max(5) {
        let started = Instant::now();
        worker
            .execute(WORK, Some(SceneReset::Factory), None)
            .await?;
        warm_reset.push(started.elapsed());
    }
    let cold_script =
        format!("import json\n{WORK}print('VIGA_RESULT:' + json.dumps({{'count': count}}))\n");
    let mut cold = Vec::with_capacity(cold_runs);
    for _ in 0..cold_runs {
        let started = Instant::now();
        run_script(&launcher, &cold_script, &[], Duration::from_secs(120)).await?;
        cold.push(started.elapsed());
    }

    worker
        .execute(RENDER_SCENE, Some(SceneReset::Factory), None)
        .await?;
    let mut render_rows = Vec::new();
    for (label, engine, samples) in [
        ("Workbench", RenderEngine::Workbench, None),
        ("Cycles, 16 samples", RenderEngine::Cycles, Some(16)),
    ] {
        let mut times = Vec::new();
        for _ in 0..4 {
            let request = RenderRequest {
                camera: None,
                pose: None,
                output_path: None,
                spec: RenderSpec {
                    engine,
                    width: 256,
                    height: 256,
                    samples,
                },
            };
            let output = worker
                .render(request, Some(Duration::from_secs(600)))
                .await?;
            times.push(output.render_ms);
        }
        let first = times[0];
        let mut steady = times[1..].to_vec();
        steady.sort_by(f64::total_cmp);
        render_rows.push((label, first, steady[steady.len() / 2]));
    }
    worker.shutdown().await;

    let (warm_p50, warm_p99) = (percentile(&mut warm, 0.5), percentile(&mut warm, 0.99));
    let cold_p50 = percentile(&mut cold, 0.5);
    println!("| measurement | samples | p50 | p99 |");
    println!("|---|---|---|---|");
    println!(
        "| warm `ping` round trip | {warm_calls} | {:.3} ms | {:.3} ms |",
        ms(percentile(&mut ping, 0.5)),
        ms(percentile(&mut ping, 0.99))
    );
    println!(
        "| warm `execute` round trip (the work) | {warm_calls} | {:.3} ms | {:.3} ms |",
        ms(warm_p50),
        ms(warm_p99)
    );
    println!(
        "| warm `execute` with factory reset | {} | {:.3} ms | {:.3} ms |",
        warm_reset.len(),
        ms(percentile(&mut warm_reset, 0.5)),
        ms(percentile(&mut warm_reset, 0.99))
    );
    println!(
        "| cold process doing the work | {cold_runs} | {:.1} ms | {:.1} ms |",
        ms(cold_p50),
        ms(percentile(&mut cold, 0.99))
    );
    println!();
    println!(
        "cold p50 / warm p50 = {:.0}x",
        cold_p50.as_secs_f64() / warm_p50.as_secs_f64()
    );
    println!();
    println!("| render 256x256 | first render | steady (median of 3) |");
    println!("|---|---|---|");
    for (label, first, steady) in render_rows {
        println!("| {label} | {first:.0} ms | {steady:.0} ms |");
    }
    Ok(())
}
