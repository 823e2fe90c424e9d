//! Throughput of an evaluation (`viga eval bench`): instances per hour with 1 and 2 workers
//! on a suite, for two kinds of system:
//!
//! - the `oracle` baseline, which is all Blender (run the goal program, render every camera,
//!   score): its speed-up is bounded by the cores one worker leaves idle, which each row
//!   gives as the machine's CPU use;
//! - the agent loop with a stand-in model that answers after a fixed latency, because an
//!   agent evaluation spends most of its time waiting on a hosted model. The stand-in echoes
//!   start.py as its program and accepts after one iteration, so the whole loop runs (plan,
//!   program on the base scene, scoring render, four verifier views and a montage) without a
//!   network. Its system name says it is a stand-in.
//!
//! Every row evaluates into a fresh folder, so every instance is really evaluated.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use viga_blender::{WorkerConfig, WorkerPool};
use viga_protocol::event::ModelRole;
use viga_protocol::message::{ContentPart, ToolCall};
use viga_provider::{FinishReason, ModelRequest, ModelResponse, Provider, ProviderError};

use crate::agent::AgentProposer;
use crate::{Baseline, EvalConfig, EvalError, Proposer, RenderSpec, SceneBenchmark};

/// One measured row: a system evaluated with a number of workers.
#[derive(Debug, Clone, PartialEq)]
pub struct ThroughputRow {
    /// The system as its proposer names it.
    pub system: String,
    pub workers: usize,
    /// Instances scored.
    pub scored: usize,
    pub seconds: f64,
    /// Share of the whole machine's CPU time that was busy during the row (Linux only).
    pub cpu_busy: Option<f64>,
}

impl ThroughputRow {
    pub fn instances_per_hour(&self) -> f64 {
        self.scored as f64 / self.seconds * 3600.0
    }
}

/// Evaluates `data` with the oracle baseline and with the agent behind a stand-in model that
/// answers after `model_latency`, each on 1 and on 2 workers started as `worker` says, in a
/// fresh scratch folder per row.
pub async fn throughput(
    data: &Path,
    worker: &WorkerConfig,
    render: RenderSpec,
    model_latency: Duration,
) -> Result<Vec<ThroughputRow>, EvalError> {
    let scratch = tempfile::tempdir().map_err(|err| EvalError::Io {
        path: std::env::temp_dir(),
        message: format!("cannot create a scratch folder: {err}"),
    })?;
    let agent: Arc<dyn Proposer<SceneBenchmark>> = Arc::new(AgentProposer::new(
        Arc::new(LatencyStandIn {
            latency: model_latency,
        }),
        1,
    ));
    let systems: [(&str, Arc<dyn Proposer<SceneBenchmark>>); 2] =
        [("oracle", Arc::new(Baseline::Oracle)), ("agent", agent)];
    let mut rows = Vec::new();
    for (label, proposer) in systems {
        for workers in [1usize, 2] {
            let out = scratch.path().join(format!("{label}-w{workers}"));
            let pool = Arc::new(WorkerPool::start(workers, worker.clone()).await?);
            rows.push(measure(data, &out, pool, render, workers, Arc::clone(&proposer)).await?);
        }
    }
    Ok(rows)
}

async fn measure(
    data: &Path,
    out: &Path,
    pool: Arc<WorkerPool>,
    render: RenderSpec,
    workers: usize,
    proposer: Arc<dyn Proposer<SceneBenchmark>>,
) -> Result<ThroughputRow, EvalError> {
    let config = EvalConfig::new(data, out, render);
    let jiffies_before = cpu_jiffies();
    let started = Instant::now();
    let summary = crate::run(&config, pool, Arc::clone(&proposer), None).await?;
    let seconds = started.elapsed().as_secs_f64();
    if let Some((instance, message)) = summary.failed.first() {
        return Err(EvalError::Harness {
            instance: instance.clone(),
            message: format!(
                "{message} ({} instance(s) failed during the throughput run)",
                summary.failed.len()
            ),
        });
    }
    let cpu_busy = cpu_jiffies()
        .zip(jiffies_before)
        .map(|((busy, total), (busy_0, total_0))| {
            (busy - busy_0) as f64 / (total - total_0).max(1) as f64
        });
    Ok(ThroughputRow {
        system: proposer.system(),
        workers,
        scored: summary.scored,
        seconds,
        cpu_busy,
    })
}

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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use viga_protocol::message::{ChatMessage, ToolChoice};

    use super::*;

    fn request(role: ModelRole, text: &str) -> ModelRequest {
        ModelRequest {
            role: Some(role),
            system: String::new(),
            messages: vec![ChatMessage::user_text(text)],
            tools: Vec::new(),
            tool_choice: ToolChoice::Auto,
            response_format: None,
            max_tokens: 100,
            temperature: None,
            stop: Vec::new(),
        }
    }

    fn stand_in() -> LatencyStandIn {
        LatencyStandIn {
            latency: Duration::ZERO,
        }
    }

    #[tokio::test]
    async fn the_stand_in_echoes_the_start_program_and_accepts_it() {
        let task = "Edit the scene.\n```python\nimport bpy\nbpy.ops.mesh.primitive_cube_add()\n```";
        let program = stand_in()
            .complete(&request(ModelRole::Generator, task))
            .await
            .unwrap();
        assert_eq!(
            program.text,
            "```python\nimport bpy\nbpy.ops.mesh.primitive_cube_add()\n```"
        );
        let verdict = stand_in()
            .complete(&request(ModelRole::Verifier, "look"))
            .await
            .unwrap();
        assert_eq!(verdict.tool_calls[0].name, "end_process");
        assert_eq!(verdict.tool_calls[0].arguments["accepted"], true);
    }

    #[tokio::test]
    async fn a_task_without_a_start_program_is_an_invalid_request() {
        let err = stand_in()
            .complete(&request(ModelRole::Generator, "no program here"))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("no start program"), "{err}");
    }

    #[test]
    fn instances_per_hour_scales_the_row() {
        let row = ThroughputRow {
            system: "oracle".to_owned(),
            workers: 1,
            scored: 9,
            seconds: 36.0,
            cpu_busy: None,
        };
        assert!((row.instances_per_hour() - 900.0).abs() < 1e-9);
    }
}
