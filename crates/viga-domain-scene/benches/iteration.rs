//! Blender time per iteration of a run with a target picture, at `viga run`'s defaults: the
//! offline demo's scene (`fixtures/sessions/demo_goal.py`), its target rendered from Camera1
//! as the loop renders a target's view (the default verifier render, 512x512), and N
//! iterations against one real Blender worker with an instant model whose generator answers
//! with the demo's program and whose verifier ends at once (never accepting, so every
//! iteration runs). Per iteration: the program, the scoring render, the canonical views, the
//! other calls, Blender's total and the wall time, with their medians; and the CPU time the
//! Blender process used, which depends less on what else the machine runs than time does.
//!
//! `cargo bench -p viga-core --bench iteration` (env VIGA_BENCH_ITERATIONS, default 5).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod common;

use async_trait::async_trait;
use serde_json::Value;
use viga_blender::{
    BlenderCommands as _, BlenderTransport, TransportError, Worker, WorkerConfig, locate,
};
use viga_core::{RunConfig, TargetSpec};
use viga_domain_scene::{SceneDomain, SceneSettings};
use viga_protocol::bridge::{BridgeCommand, RenderRequest, SceneReset};
use viga_protocol::event::{ModelRole, RunEvent, StopReason};

use common::{InstantModel, env_number};

const GOAL_SCENE: &str = include_str!("../../../fixtures/sessions/demo_goal.py");
const TARGET_CAMERA: &str = "Camera1";

/// What happened, in order: the loop is sequential, so the Blender calls between an
/// iteration's plan and its verifier call are that iteration's.
enum Mark {
    Planned(Instant),
    VerifierAsked(Instant),
    Called {
        command: &'static str,
        blender: Duration,
        cpu: Duration,
    },
}

type Log = Arc<Mutex<Vec<Mark>>>;

fn note(log: &Log, mark: Mark) {
    if let Ok(mut marks) = log.lock() {
        marks.push(mark);
    }
}

/// The worker, with the Blender time of every call noted by command.
struct Noted {
    worker: Arc<Worker>,
    log: Log,
}

impl Noted {
    /// CPU time the Blender process used so far, all its threads (`/proc/<pid>/stat`'s
    /// utime and stime, in USER_HZ ticks: 100 per second in Linux's ABI); zero elsewhere.
    fn blender_cpu(&self) -> Duration {
        let pid = self.worker.hello().pid;
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            return Duration::ZERO;
        };
        // The fields after the command name, which is in parentheses and may hold spaces.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.split_whitespace().collect())
            .unwrap_or_default();
        let ticks = |index: usize| {
            fields
                .get(index)
                .and_then(|field| field.parse::<u64>().ok())
                .unwrap_or(0)
        };
        // utime and stime are the 14th and 15th fields, 12th and 13th after the name.
        Duration::from_millis((ticks(11) + ticks(12)) * 10)
    }
}

#[async_trait]
impl BlenderTransport for Noted {
    async fn call(
        &self,
        command: BridgeCommand,
        timeout: Option<Duration>,
    ) -> Result<Value, TransportError> {
        let name = command.name();
        let (before, cpu_before) = (self.worker.blender_busy(), self.blender_cpu());
        let result = self.worker.call(command, timeout).await;
        note(
            &self.log,
            Mark::Called {
                command: name,
                blender: self.worker.blender_busy().saturating_sub(before),
                cpu: self.blender_cpu().saturating_sub(cpu_before),
            },
        );
        result
    }

    fn describe(&self) -> String {
        self.worker.describe()
    }

    fn shared_folder(&self) -> Option<&viga_blender::ScratchFolder> {
        self.worker.shared_folder()
    }

    async fn distrust(&self, why: &str) -> viga_blender::Recovery {
        self.worker.distrust(why).await
    }

    fn last_program_output(&self) -> Option<String> {
        self.worker.last_program_output()
    }
}

/// One iteration's Blender time by phase, and its wall time from the plan to the verifier.
#[derive(Default, Clone, Copy)]
struct IterationCost {
    program: Duration,
    scoring: Duration,
    views: Duration,
    other: Duration,
    wall: Duration,
    cpu: Duration,
}

impl IterationCost {
    fn blender(&self) -> Duration {
        self.program + self.scoring + self.views + self.other
    }
}

/// Splits the log into iterations: the calls between each plan and the verifier's call.
fn per_iteration(marks: &[Mark]) -> Vec<IterationCost> {
    let mut costs = Vec::new();
    let mut open: Option<(Instant, IterationCost)> = None;
    for mark in marks {
        match (mark, open.as_mut()) {
            (Mark::Planned(at), _) => open = Some((*at, IterationCost::default())),
            (
                Mark::Called {
                    command,
                    blender,
                    cpu,
                },
                Some((_, cost)),
            ) => {
                cost.cpu += *cpu;
                let phase = match *command {
                    "execute" => &mut cost.program,
                    "render" => &mut cost.scoring,
                    "render_framed_views" => &mut cost.views,
                    _ => &mut cost.other,
                };
                *phase += *blender;
            }
            (Mark::VerifierAsked(at), Some(_)) => {
                if let Some((started, mut cost)) = open.take() {
                    cost.wall = at.duration_since(started);
                    costs.push(cost);
                }
            }
            // Calls outside an iteration (the final scene is saved after the last one).
            _ => {}
        }
    }
    costs
}

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort_unstable();
    match values.len() {
        0 => Duration::ZERO,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2,
    }
}

fn seconds(value: Duration) -> String {
    format!("{:.2} s", value.as_secs_f64())
}

/// The 1-minute load average, to say how busy the shared machine was.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|line| line.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "unknown".to_owned())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let iterations = env_number("VIGA_BENCH_ITERATIONS", 5);
    let load_before = load_average();
    let worker = Arc::new(Worker::start(WorkerConfig::new(locate()?)).await?);
    let scene = SceneSettings::default();
    let target_spec = scene.verifier_render(true);

    // The target picture, rendered as the loop renders the target's view of a result.
    let output = tempfile::tempdir()?;
    let built = worker
        .execute(GOAL_SCENE, Some(SceneReset::Factory), None)
        .await?;
    if !built.succeeded() {
        return Err(format!("the demo's goal scene did not build: {:?}", built.error).into());
    }
    let target = worker
        .render(
            RenderRequest {
                camera: Some(TARGET_CAMERA.to_owned()),
                pose: None,
                spec: target_spec,
                output_path: None,
            },
            None,
        )
        .await?;
    let target_path = output.path().join("target.png");
    std::fs::write(&target_path, &target.image.data)?;

    let log: Log = Arc::new(Mutex::new(Vec::new()));
    let blender: Arc<dyn BlenderTransport> = Arc::new(Noted {
        worker: Arc::clone(&worker),
        log: Arc::clone(&log),
    });
    let mut config = RunConfig::new("a red crate on a grey floor, lit by the sun, seen by Camera1");
    config.max_iterations = iterations;
    config.provider = "instant".into();
    config.plan_each_iteration = true;
    config.targets = vec![TargetSpec::picture(&target_path)];
    let domain = Arc::new(SceneDomain::new(scene, blender, true)?);
    let noted = Arc::clone(&log);
    let provider = Arc::new(InstantModel {
        plan: "1. a grey floor\n2. a red crate\n3. a sun\n4. Camera1",
        program: GOAL_SCENE.to_owned(),
        verdict: serde_json::json!({"visual_differences": ["the crate is a little too far left"], "suggestions": ["move the crate to x = 0.2"], "accepted": false}),
        observe: Box::new(move |role| match role {
            Some(ModelRole::Planner) => note(&noted, Mark::Planned(Instant::now())),
            Some(ModelRole::Verifier) => note(&noted, Mark::VerifierAsked(Instant::now())),
            _ => {}
        }),
    });
    let mut handle = viga_core::start(config, provider, domain, &output.path().join("runs"))?;
    // The sizes of one iteration's renders, to show what was measured.
    let mut first_iteration_renders = Vec::new();
    while let Some(event) = handle.next_event().await {
        if let RunEvent::RenderProduced {
            index: 1,
            view,
            width,
            height,
            ..
        } = event.event
        {
            first_iteration_renders.push(format!("{view} {width}x{height}"));
        }
    }
    let outcome = handle.wait().await?;
    if !matches!(outcome.stop, StopReason::MaxIterations) {
        return Err(format!("the run stopped early: {:?}", outcome.stop).into());
    }
    let costs = match log.lock() {
        Ok(marks) => per_iteration(&marks),
        Err(_) => return Err("the call log was poisoned".into()),
    };

    println!(
        "Demo scene with a target, {} iterations; target picture rendered in {target_spec}; renders of iteration 1: {}; load average {load_before} before, {} after.\n",
        costs.len(),
        first_iteration_renders.join(", "),
        load_average()
    );
    println!(
        "| iteration | program | scoring render | canonical views | other calls | Blender total | wall (plan to verifier) | Blender CPU time |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let row = |label: &str, cost: &IterationCost| {
        println!(
            "| {label} | {} | {} | {} | {} | {} | {} | {} |",
            seconds(cost.program),
            seconds(cost.scoring),
            seconds(cost.views),
            seconds(cost.other),
            seconds(cost.blender()),
            seconds(cost.wall),
            seconds(cost.cpu)
        );
    };
    for (index, cost) in costs.iter().enumerate() {
        row(&(index + 1).to_string(), cost);
    }
    let medians = IterationCost {
        program: median(costs.iter().map(|c| c.program).collect()),
        scoring: median(costs.iter().map(|c| c.scoring).collect()),
        views: median(costs.iter().map(|c| c.views).collect()),
        other: median(costs.iter().map(|c| c.other).collect()),
        wall: median(costs.iter().map(|c| c.wall).collect()),
        cpu: median(costs.iter().map(|c| c.cpu).collect()),
    };
    println!(
        "| **median** | {} | {} | {} | {} | **{}** | {} | {} |",
        seconds(medians.program),
        seconds(medians.scoring),
        seconds(medians.views),
        seconds(medians.other),
        seconds(median(costs.iter().map(IterationCost::blender).collect())),
        seconds(medians.wall),
        seconds(medians.cpu)
    );
    Ok(())
}
