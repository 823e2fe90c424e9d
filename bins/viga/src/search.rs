//! `viga run --generator search`: inverse graphics without a model. The numbers of a start
//! program are searched with renders in the loop until its view from the target's camera
//! matches the target picture as closely as the budget allows.

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use async_trait::async_trait;
use viga_blender::{BlenderCommands as _, BlenderTransport, Worker, WorkerConfig, locate};
use viga_eval::search::{Objective, SceneObjective, search};
use viga_eval::{EvalError, RenderEngine, RenderSpec};
use viga_protocol::bridge::{RenderRequest, SceneReset};
use viga_skills::metrics::image_size;

use crate::args::RunArgs;

/// Prints each improvement as the search finds it.
struct Reporting {
    inner: SceneObjective,
    budget: u32,
    scored: AtomicU32,
    best: Mutex<f64>,
}

#[async_trait]
impl Objective for Reporting {
    async fn score(&self, code: &str) -> Result<Option<f64>, EvalError> {
        let loss = self.inner.score(code).await?;
        let count = self.scored.fetch_add(1, Ordering::Relaxed) + 1;
        if let (Some(loss), Ok(mut best)) = (loss, self.best.lock())
            && loss < *best
        {
            *best = loss;
            println!("  program {count}/{}: PL {loss:.6}", self.budget);
        }
        Ok(loss)
    }
}

pub async fn run(args: RunArgs) -> Result<ExitCode> {
    let config = args.run_config()?;
    let Some(start_path) = &args.start else {
        bail!("--generator search needs --start PROGRAM.py: the program whose numbers it searches");
    };
    let Some(target_path) = &config.target else {
        bail!("--generator search needs --target IMAGE: the picture the render should match");
    };
    if args.search_budget < 2 {
        bail!("--search-budget must be at least 2 (the start program and one move)");
    }
    let start = std::fs::read_to_string(start_path)
        .with_context(|| format!("cannot read {}", start_path.display()))?;
    let target = std::fs::read(target_path)
        .with_context(|| format!("cannot read {}", target_path.display()))?;
    let (width, height) = image_size(&target).map_err(|err| anyhow::anyhow!("--target: {err}"))?;
    let base = match &config.base_blend {
        Some(path) => SceneReset::Blend {
            path: path.to_string_lossy().into_owned(),
        },
        None => SceneReset::Factory,
    };
    let worker: Arc<dyn BlenderTransport> =
        Arc::new(Worker::start(WorkerConfig::new(locate()?)).await?);
    let timeout = Duration::from_secs(600);
    let camera = match &config.target_camera {
        Some(camera) => camera.clone(),
        None => {
            let ran = worker
                .execute(&start, Some(base.clone()), Some(timeout))
                .await?;
            if let Some(error) = ran.error {
                bail!("the start program fails: {error}");
            }
            match worker.scene_info(0, 1).await?.active_camera {
                Some(camera) => camera,
                None => bail!(
                    "the start program's scene has no camera; name the target's camera with --camera"
                ),
            }
        }
    };
    let render = RenderSpec {
        engine: config.render.engine,
        width,
        height,
        samples: config
            .render
            .samples
            .or((config.render.engine == RenderEngine::Cycles).then_some(16)),
    };
    println!(
        "search: from {}, at most {} programs, {:?} {width}x{height} seen from {camera}",
        start_path.display(),
        args.search_budget,
        render.engine
    );
    let objective = Reporting {
        inner: SceneObjective {
            blender: Arc::clone(&worker),
            base: base.clone(),
            cameras: vec![camera.clone()],
            targets: vec![target.clone()],
            render,
            timeout,
        },
        budget: args.search_budget,
        scored: AtomicU32::new(0),
        best: Mutex::new(f64::INFINITY),
    };
    let outcome = search(&start, &objective, args.search_budget).await?;

    let folder = args
        .output
        .join("search")
        .join(viga_core::folder::timestamp())
        .join(&config.task_name);
    std::fs::create_dir_all(&folder)
        .with_context(|| format!("cannot create {}", folder.display()))?;
    std::fs::write(folder.join("start.py"), &start)?;
    std::fs::write(folder.join("best.py"), &outcome.code)?;
    std::fs::write(folder.join("target.png"), &target)?;
    let ran = worker
        .execute(&outcome.code, Some(base), Some(timeout))
        .await?;
    if ran.error.is_none() {
        let request = RenderRequest {
            camera: Some(camera.clone()),
            pose: None,
            engine: render.engine,
            width,
            height,
            samples: render.samples,
            output_path: None,
        };
        std::fs::write(
            folder.join("best.png"),
            worker.render(request, Some(timeout)).await?.image.data,
        )?;
    }
    let result = serde_json::json!({
        "generator": "search",
        "camera": camera,
        "literals": outcome.literals,
        "programs_scored": outcome.evaluations,
        "start_photometric_loss": outcome.start_loss,
        "best_photometric_loss": outcome.best_loss,
    });
    std::fs::write(
        folder.join("result.json"),
        serde_json::to_string_pretty(&result)?,
    )?;
    println!(
        "search: {} literals, {} programs scored, PL {} -> {}\nbest program: {}",
        outcome.literals,
        outcome.evaluations,
        outcome
            .start_loss
            .map_or("n/a (the start program fails)".to_owned(), |l| format!(
                "{l:.6}"
            )),
        outcome
            .best_loss
            .map_or("n/a".to_owned(), |l| format!("{l:.6}")),
        folder.join("best.py").display()
    );
    Ok(ExitCode::SUCCESS)
}
