//! What containment costs: a Blender worker started, asked one `execute` and shut down,
//! uncontained and through `viga contain` (user, network, mount and PID namespaces, the
//! session's socket folders hidden, Landlock over reads and writes), alternately so both
//! see the same machine. Prints a Markdown table of start-up and first-call times.
//!
//! `cargo bench -p viga --bench containment` (needs `cargo xtask setup`).
//! Environment: `VIGA_BENCH_CONTAINMENT_ROUNDS` (default 8).

use std::ffi::OsString;
use std::time::Instant;
use viga_blender::StartBlender as _;

use viga_blender::{
    Access, BlenderCommands as _, ContainedWorkers, ContainmentPolicy, Worker, WorkerConfig,
    WorkerRequest, locate,
};

const PROGRAM: &str = "import bpy\nbpy.ops.mesh.primitive_cube_add()\n";

fn median(samples: &mut [f64]) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

/// Start-up and first `execute`, in milliseconds.
async fn one_worker(config: WorkerConfig) -> Result<(f64, f64), Box<dyn std::error::Error>> {
    let started = Instant::now();
    let worker = Worker::start(config).await?;
    let startup = started.elapsed().as_secs_f64() * 1000.0;
    let called = Instant::now();
    worker.execute(PROGRAM, None, None).await?;
    let first_call = called.elapsed().as_secs_f64() * 1000.0;
    worker.shutdown().await;
    Ok((startup, first_call))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rounds: usize = std::env::var("VIGA_BENCH_CONTAINMENT_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8);
    let launcher = locate()?;
    let writable = tempfile::tempdir()?;
    // Configured as the CLI configures every worker for model-written programs, with every
    // limit; as root the process limit cannot hold without a delegated cgroup v2, so there it
    // is turned off by name, as `--process-limit none` does.
    let mut limits = viga_blender::Limits::default();
    if viga_testkit::running_as_root() {
        limits.set(viga_blender::Limit::Processes, None);
    }
    let contained = ContainedWorkers::new(
        ContainmentPolicy::Require,
        vec![OsString::from(env!("CARGO_BIN_EXE_viga")), "contain".into()],
    )
    .with_limits(limits)
    .worker_config(&WorkerRequest::new(
        launcher.clone(),
        Access::writing(vec![writable.path().to_path_buf()]),
    ))?;
    let plain = WorkerConfig::new(launcher);
    let (mut plain_start, mut plain_call, mut boxed_start, mut boxed_call) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let (start, call) = one_worker(plain.clone()).await?;
        plain_start.push(start);
        plain_call.push(call);
        let (start, call) = one_worker(contained.clone()).await?;
        boxed_start.push(start);
        boxed_call.push(call);
    }
    let (launcher, probe_args) = contained
        .containment
        .as_ref()
        .ok_or("the contained configuration has no containment")?
        .probe_command_line()?;
    let probe = Instant::now();
    let status = std::process::Command::new(launcher)
        .args(probe_args)
        .output()?;
    let probe_ms = probe.elapsed().as_secs_f64() * 1000.0;
    println!("{}", String::from_utf8_lossy(&status.stdout).trim());
    println!("\n{rounds} rounds, medians\n");
    println!("| worker | start-up (ms) | first execute (ms) |");
    println!("|---|---|---|");
    println!(
        "| uncontained | {:.0} | {:.1} |",
        median(&mut plain_start),
        median(&mut plain_call)
    );
    println!(
        "| contained (`viga contain`) | {:.0} | {:.1} |",
        median(&mut boxed_start),
        median(&mut boxed_call)
    );
    println!("\nthe launcher alone (`viga contain --probe`): {probe_ms:.1} ms");
    Ok(())
}
