//! viga attached to a person's Blender: the extension installed from its zip in the
//! headless host, whose loop runs the add-on's timers as Blender's event loop would. Prints
//! a Markdown table: the `execute` round trip through the timer queue, and how long each
//! timer callback held Blender's main thread during a run (the UI needs it back within one
//! frame, 16 ms at 60 fps).
//!
//! `cargo bench -p viga-blender --bench attached` (needs `cargo xtask setup`).
//! Environment: `VIGA_BENCH_ATTACHED_CALLS` (default 300).

use std::time::{Duration, Instant};

use viga_blender::addon::{HostOptions, RunningHost, build_zip, start_host};
use viga_blender::attach::{Connection, attach};
use viga_blender::{BlenderCommands as _, locate};

/// One program of a run's size, as the scene agent applies it: a floor, an object with a
/// material, a light and a camera. Run in a fresh scene each time (it makes new objects).
const SCENE_PROGRAM: &str = "import bpy
for obj in list(bpy.data.objects):
    bpy.data.objects.remove(obj)
material = bpy.data.materials.new('Crate')
material.diffuse_color = (0.8, 0.1, 0.05, 1.0)
bpy.ops.mesh.primitive_plane_add(size=10)
bpy.ops.mesh.primitive_cube_add(size=1.6, location=(0, 0, 0.8))
bpy.context.object.data.materials.append(material)
bpy.ops.object.light_add(type='SUN', location=(4, -4, 6))
bpy.ops.object.camera_add(location=(6, -6, 4.5), rotation=(1.1, 0, 0.785))
";

fn percentile(samples: &mut [f64], fraction: f64) -> f64 {
    samples.sort_by(f64::total_cmp);
    let index = ((samples.len() as f64 - 1.0) * fraction).round() as usize;
    samples[index]
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let calls: usize = std::env::var("VIGA_BENCH_ATTACHED_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let dir = tempfile::tempdir()?;
    let zip = build_zip(&dir.path().join("dist"))?;
    let stats = dir.path().join("ticks.json");
    let options = HostOptions {
        user_dir: dir.path().join("blender-user"),
        blend: None,
        stats: Some(stats.clone()),
        connection_dir: Some(dir.path().join("connections")),
        addons: None,
        server: None,
    };
    let RunningHost {
        child: mut host,
        connection: connection_file,
    } = start_host(&locate()?, &zip, &options, Duration::from_secs(120))?;
    let connection = Connection::read(&connection_file)?;
    let client = attach(&connection, Duration::from_secs(60)).await?;

    let mut round_trips = Vec::with_capacity(calls);
    for _ in 0..calls {
        let started = Instant::now();
        client.execute("pass", None, None).await?;
        round_trips.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    // A run's worth of main-thread work: applied scene programs (each one undo step), scene
    // summaries and small edits, as the scene agent, the GN assistant and MCP clients send.
    let run_started = Instant::now();
    for round in 0..10 {
        client
            .apply_program(SCENE_PROGRAM, "viga: bench", None)
            .await?;
        for _ in 0..10 {
            client.scene_info(0, 100).await?;
            client
                .execute(
                    "import bpy\nbpy.data.objects['Cube'].location.x += 0.01",
                    None,
                    None,
                )
                .await?;
        }
        if round % 3 == 0 {
            client.undo().await?;
        }
    }
    let run_seconds = run_started.elapsed().as_secs_f64();
    drop(client);
    std::process::Command::new("kill")
        .args(["-TERM", &host.id().to_string()])
        .status()?;
    host.wait()?;
    let ticks: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&stats)?)?;
    let mut tick_ms: Vec<f64> = ticks["callback_ms"]
        .as_array()
        .ok_or("no callback times")?
        .iter()
        .filter_map(serde_json::Value::as_f64)
        .collect();
    let busy: Vec<f64> = tick_ms.iter().copied().filter(|ms| *ms > 0.05).collect();
    println!("| measure | p50 | p99 | max | samples |");
    println!("|---|---|---|---|---|");
    let row = |name: &str, samples: &mut Vec<f64>| {
        let max = samples.iter().copied().fold(0.0, f64::max);
        println!(
            "| {name} | {:.2} ms | {:.2} ms | {max:.2} ms | {} |",
            percentile(samples, 0.5),
            percentile(samples, 0.99),
            samples.len()
        );
    };
    row(
        "attached `execute` round trip (timer queue)",
        &mut round_trips,
    );
    row("main-thread time per timer callback (all)", &mut tick_ms);
    row(
        "main-thread time per timer callback (busy ones)",
        &mut busy.clone(),
    );
    println!(
        "\nrun phase: {run_seconds:.2} s; {} busy callbacks",
        busy.len()
    );
    Ok(())
}
