//! `viga run --generator search`: inverse graphics without a model (viga-eval's scene
//! search). Thin: it reads the flags' files, starts a worker and prints.

use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};
use viga_blender::Access;
use viga_eval::scene_search::{SceneSearch, run_scene_search};

use crate::args::RunArgs;
use viga_blender::ContainedWorkers;

pub async fn run(args: RunArgs, contained: &ContainedWorkers) -> Result<ExitCode> {
    let frames = tempfile::tempdir().context("no temporary folder for the target's frames")?;
    let (config, scene) = args.run_config(frames.path())?;
    let Some(start_path) = &args.start else {
        bail!("--generator search needs --start PROGRAM.py: the program whose numbers it searches");
    };
    let [target] = config.targets.as_slice() else {
        bail!("--generator search needs one --target IMAGE: the picture the render should match");
    };
    let target_path = &target.path;
    let spec = SceneSearch {
        start: std::fs::read_to_string(start_path)
            .with_context(|| format!("cannot read {}", start_path.display()))?,
        target: std::fs::read(target_path)
            .with_context(|| format!("cannot read {}", target_path.display()))?,
        base: scene.base_scene(),
        camera: target.view.clone(),
        // Scored like the loop's renders: --verifier-engine, else Cycles (a target is given).
        render: scene.verifier_render(true),
        budget: args.search_budget,
    };
    let folder = viga_core::folder::new_run_root(&args.output, "search", &config.task_name)?;
    println!(
        "search: from {}, at most {} programs, {}",
        start_path.display(),
        args.search_budget,
        spec.render
    );
    // The programs it scores are the start program with other numbers: model-written, in
    // the sense that matters (nobody checked them), so they run contained too.
    let access = Access::reading(scene.prepare_blender_reads()?);
    let worker = crate::start_blender(contained, None, access, None).await?;
    let budget = args.search_budget;
    let show =
        move |count: u32, loss: f64| println!("  program {count}/{budget}: objective {loss:.6}");
    let report = run_scene_search(&spec, worker, &folder, &show).await?;
    let outcome = &report.outcome;
    println!(
        "search: {} literals, {} programs scored, seen from {}, objective (PL at the search's size, plus its penalty for leaving the scene's structure) {} -> {}\nbest program: {}",
        outcome.literals,
        outcome.rendered(),
        report.camera,
        outcome
            .start_loss
            .map_or("n/a (the start program fails)".to_owned(), |l| format!(
                "{l:.6}"
            )),
        outcome
            .best_loss
            .map_or("n/a".to_owned(), |l| format!("{l:.6}")),
        report.folder.join("best.py").display()
    );
    Ok(ExitCode::SUCCESS)
}
