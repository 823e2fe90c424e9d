//! viga's MCP server beside mcp-for-blender 2.2.4's (the most used Blender MCP server, from
//! PyPI), both driven over stdio by the official MCP SDK (rmcp) as a desktop assistant drives
//! them, with a random think time between calls (so a request lands anywhere in a timer's
//! period, as a person's do). Prints a Markdown table of the code tool's round trip.
//!
//! - mcp-for-blender: its own add-on in a headless Blender (viga-testkit's host, which runs
//!   its timers as Blender's event loop does), at its shipped 50 ms command-queue cadence and
//!   at viga's 10 ms; its own MCP server.
//! - viga attached: the viga extension installed from its zip in the headless host (10 ms
//!   timer), `viga mcp --attach --trusted`: each program one undo step, failures undone.
//! - viga contained: `viga mcp --live`, programs in viga's own contained Blender.
//!
//! `cargo bench -p viga --bench mcp_side_by_side` (needs `cargo xtask setup --test-peers`).
//! Environment: `VIGA_BENCH_MCP_CALLS` (default 200), `VIGA_BENCH_MCP_THINK_MS` (the longest
//! think time, default 40).

use std::path::Path;
use std::time::{Duration, Instant};

use rmcp::ServiceExt as _;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use viga_blender::addon::{HostOptions, RunningHost, build_zip, start_host};
use viga_blender::locate;
use viga_testkit::mcp_for_blender::PeerBlender;

type Error = Box<dyn std::error::Error>;

/// A small edit, as an assistant sends between looks.
const PROGRAM: &str =
    "import bpy\nbpy.context.scene.frame_current = (bpy.context.scene.frame_current + 1) % 250";

struct Measured {
    name: String,
    cadence: &'static str,
    round_trips: Vec<f64>,
}

/// A xorshift generator: think times that are the same on every run of the bench.
struct Think(u64, u64);

impl Think {
    fn next(&mut self) -> Duration {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        Duration::from_micros(self.0 % (self.1 * 1000 + 1))
    }
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

/// Calls `tool` with `PROGRAM` `calls` times (after five warm-up calls), thinking between.
async fn drive(
    server: tokio::process::Command,
    tool: &str,
    calls: u64,
    think_ms: u64,
) -> Result<Vec<f64>, Error> {
    eprintln!("bench: {tool} of {:?}", server.as_std().get_program());
    let client = ().serve(TokioChildProcess::new(server)?).await?;
    let mut think = Think(0x9e37_79b9_7f4a_7c15, think_ms);
    let mut round_trips = Vec::new();
    for call in 0..calls + 5 {
        tokio::time::sleep(think.next()).await;
        let arguments = serde_json::json!({"code": PROGRAM});
        let request = CallToolRequestParams::new(tool.to_owned())
            .with_arguments(arguments.as_object().cloned().unwrap_or_default());
        let started = Instant::now();
        let result = client.call_tool(request).await?;
        let elapsed = started.elapsed().as_secs_f64() * 1000.0;
        if result.is_error == Some(true) {
            return Err(format!("{tool} failed: {:?}", result.content).into());
        }
        if call >= 5 {
            round_trips.push(elapsed);
        }
    }
    // Dropped, not cancelled: a server that lingers after its stdin closes (mcp-for-blender's
    // telemetry thread) is killed with its process.
    drop(client);
    Ok(round_trips)
}

async fn peer(interval: Option<Duration>, calls: u64, think_ms: u64) -> Result<Vec<f64>, Error> {
    let blender = PeerBlender::start(interval, None)?;
    drive(
        blender.server_process(),
        "execute_blender_code",
        calls,
        think_ms,
    )
    .await
}

async fn viga_attached(dir: &Path, calls: u64, think_ms: u64) -> Result<Vec<f64>, Error> {
    let zip = build_zip(&dir.join("dist"))?;
    let options = HostOptions {
        user_dir: dir.join("blender-user"),
        blend: None,
        stats: None,
        connection_dir: Some(dir.join("connections")),
        addons: None,
        server: None,
    };
    let RunningHost {
        child: mut host,
        connection,
    } = start_host(&locate()?, &zip, &options, Duration::from_secs(120))?;
    let mut server = tokio::process::Command::new(env!("CARGO_BIN_EXE_viga"));
    server
        .args(["mcp", "--attach", "--trusted", "--connection"])
        .arg(&connection)
        .kill_on_drop(true);
    let measured = drive(server, "execute_code", calls, think_ms).await;
    let _ = host.kill();
    let _ = host.wait();
    measured
}

async fn viga_contained(calls: u64, think_ms: u64) -> Result<Vec<f64>, Error> {
    let mut server = tokio::process::Command::new(env!("CARGO_BIN_EXE_viga"));
    server.args(["mcp", "--live"]).kill_on_drop(true);
    drive(server, "execute_code", calls, think_ms).await
}

fn percentile(samples: &mut [f64], fraction: f64) -> f64 {
    samples.sort_by(f64::total_cmp);
    let index = ((samples.len() as f64 - 1.0) * fraction).round() as usize;
    samples[index]
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let calls = env_number("VIGA_BENCH_MCP_CALLS", 200);
    let think_ms = env_number("VIGA_BENCH_MCP_THINK_MS", 40);
    let dir = tempfile::tempdir()?;
    let mut measured = vec![
        Measured {
            name: "mcp-for-blender 2.2.4".to_owned(),
            cadence: "50 ms (shipped)",
            round_trips: peer(None, calls, think_ms).await?,
        },
        Measured {
            name: "mcp-for-blender 2.2.4".to_owned(),
            cadence: "10 ms",
            round_trips: peer(Some(Duration::from_millis(10)), calls, think_ms).await?,
        },
        Measured {
            name: "viga attached (`mcp --attach --trusted`)".to_owned(),
            cadence: "10 ms (shipped)",
            round_trips: viga_attached(dir.path(), calls, think_ms).await?,
        },
        Measured {
            name: "viga contained (`mcp --live`)".to_owned(),
            cadence: "none (serves its socket)",
            round_trips: viga_contained(calls, think_ms).await?,
        },
    ];
    println!("{calls} calls each, think time 0–{think_ms} ms between them\n");
    println!("| server | main-thread cadence | p50 | p90 | p99 | mean |");
    println!("|---|---|---|---|---|---|");
    for row in &mut measured {
        let mean = row.round_trips.iter().sum::<f64>() / row.round_trips.len() as f64;
        println!(
            "| {} | {} | {:.2} ms | {:.2} ms | {:.2} ms | {mean:.2} ms |",
            row.name,
            row.cadence,
            percentile(&mut row.round_trips, 0.5),
            percentile(&mut row.round_trips, 0.9),
            percentile(&mut row.round_trips, 0.99),
        );
    }
    Ok(())
}
