//! `viga eval bench` (or `cargo xtask eval bench`): instances per hour with 1 and 2 workers on the mini-suite, for
//! two kinds of system:
//!
//! - the `oracle` baseline, which is all Blender (run the goal program, render every camera,
//!   score): its speed-up is bounded by the cores one worker leaves idle, which the table
//!   shows as the machine's CPU use;
//! - the agent loop with a stand-in model that answers after a fixed latency, because an
//!   agent evaluation spends most of its time waiting on a hosted model. The stand-in echoes
//!   start.py as its program and accepts after one iteration, so the whole loop runs (plan,
//!   program on the base scene, scoring render, four verifier views and a montage) without a
//!   network. It is labelled as a stand-in wherever it shows.
//!
//! Every row evaluates into a fresh folder, so every instance is really evaluated.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use async_trait::async_trait;
use viga_blender::{WorkerConfig, WorkerPool};
use viga_eval::agent::AgentProposer;
use viga_eval::{Baseline, EvalConfig, Proposer, RenderSpec};
use viga_protocol::event::ModelRole;
use viga_protocol::message::{ContentPart, ToolCall};
use viga_provider::{FinishReason, ModelRequest, ModelResponse, Provider, ProviderError};

/// A model stand-in for throughput measurements: a fixed latency per call, then the answer
/// a cautious model would give to a task it cannot improve (the start program unchanged,
/// accepted by the verifier).
#[derive(Debug)]
struct LatencyStandIn {
    latency: Duration,
}

#[async_trait]
impl Provider for LatencyStandIn {
    fn name(&self) -> &str {
        "stand-in"
    }

    fn model(&self) -> &str {
        "echo-start-program"
    }

    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        tokio::time::sleep(self.latency).await;
        match request.role {
            Some(ModelRole::Verifier) => {
                let mut response = ModelResponse::text_only("", FinishReason::ToolCalls);
                response.tool_calls = vec![ToolCall {
                    id: "verdict".into(),
                    name: "end_process".into(),
                    arguments: serde_json::json!({
                        "visual_differences": [],
                        "suggestions": [],
                        "accepted": true
                    }),
                }];
                return Ok(response);
            }
            Some(ModelRole::Planner) => {
                return Ok(ModelResponse::text_only(
                    "1. keep the start program",
                    FinishReason::Stop,
                ));
            }
            _ => {}
        }
        // The task text holds start.py in a fenced block (viga_eval::agent::task_text).
        let program = request
            .messages
            .iter()
            .flat_map(|message| &message.content)
            .find_map(|part| match part {
                ContentPart::Text { text } => viga_core::first_python_block(text),
                _ => None,
            })
            .ok_or_else(|| ProviderError::InvalidRequest {
                provider: self.name().to_owned(),
                message: "the task text holds no start program to echo".to_owned(),
            })?;
        Ok(ModelResponse::text_only(
            format!("```python\n{program}```"),
            FinishReason::Stop,
        ))
    }
}

/// Busy and total jiffies of all CPUs since boot (Linux `/proc/stat`); `None` elsewhere.
fn cpu_jiffies() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let fields: Vec<u64> = stat
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    let total: u64 = fields.iter().sum();
    // idle and iowait are the 4th and 5th fields.
    let idle = fields.get(3)? + fields.get(4).copied().unwrap_or(0);
    Some((total - idle, total))
}

struct Row {
    system: String,
    workers: usize,
    scored: usize,
    seconds: f64,
    /// Share of the whole machine's CPU time that was busy during the row.
    cpu_busy: Option<f64>,
}

async fn measure(
    data: &Path,
    out: &Path,
    worker: &WorkerConfig,
    render: RenderSpec,
    workers: usize,
    proposer: Arc<dyn Proposer>,
) -> Result<Row> {
    let pool = Arc::new(WorkerPool::start(workers, worker.clone()).await?);
    let config = EvalConfig::new(data, out, render);
    let jiffies_before = cpu_jiffies();
    let started = Instant::now();
    let summary = viga_eval::run(&config, pool, Arc::clone(&proposer), None).await?;
    let seconds = started.elapsed().as_secs_f64();
    if !summary.failed.is_empty() {
        bail!(
            "{} instance(s) failed during the benchmark: {:?}",
            summary.failed.len(),
            summary.failed
        );
    }
    let cpu_busy = cpu_jiffies()
        .zip(jiffies_before)
        .map(|((busy, total), (busy_0, total_0))| {
            (busy - busy_0) as f64 / (total - total_0).max(1) as f64
        });
    Ok(Row {
        system: proposer.system(),
        workers,
        scored: summary.scored,
        seconds,
        cpu_busy,
    })
}

/// Runs the oracle baseline and the agent with the latency stand-in, each on 1 and on 2
/// workers started as `worker` says (contained, as every evaluation's), and prints one table.
pub async fn bench(
    data: &Path,
    worker: WorkerConfig,
    render: RenderSpec,
    model_latency: Duration,
) -> Result<()> {
    let scratch = tempfile::tempdir().context("could not create a scratch folder")?;
    let agent: Arc<dyn Proposer> = Arc::new(AgentProposer::new(
        Arc::new(LatencyStandIn {
            latency: model_latency,
        }),
        1,
    ));
    let systems: [(&str, Arc<dyn Proposer>); 2] =
        [("oracle", Arc::new(Baseline::Oracle)), ("agent", agent)];
    let mut rows = Vec::new();
    for (label, proposer) in systems {
        for workers in [1usize, 2] {
            let out = scratch.path().join(format!("{label}-w{workers}"));
            rows.push(measure(data, &out, &worker, render, workers, Arc::clone(&proposer)).await?);
        }
    }
    let containment = worker
        .containment
        .as_ref()
        .map_or("uncontained".to_owned(), |containment| {
            format!("contained ({})", containment.policy)
        });
    println!(
        "\n{render} on {}, workers {containment}; the agent's model is a stand-in answering after {} ms per call:",
        data.display(),
        model_latency.as_millis()
    );
    println!(
        "| system | workers | instances | seconds | instances/hour | speed-up | machine CPU busy |"
    );
    println!("|---|---|---|---|---|---|---|");
    let mut base = 1.0;
    for row in rows {
        let rate = row.scored as f64 / row.seconds;
        if row.workers == 1 {
            base = rate;
        }
        let cpu = row.cpu_busy.map_or_else(
            || "n/a".to_owned(),
            |share| format!("{:.0}%", share * 100.0),
        );
        println!(
            "| {} | {} | {} | {:.1} | {:.0} | {:.2}x | {cpu} |",
            row.system,
            row.workers,
            row.scored,
            row.seconds,
            rate * 3600.0,
            rate / base
        );
    }
    Ok(())
}
