//! `cargo xtask demo`: the whole loop offline on real Blender. It renders the target picture
//! from `fixtures/sessions/demo_goal.py`, then runs `viga run` with the scripted provider
//! replaying `fixtures/sessions/demo.json` (labelled as scripted everywhere it shows), which
//! leaves a run folder with its HTML report.

use std::process::Command;

use anyhow::{Context as _, Result, bail};
use viga_locate::BlenderLauncher;

use crate::blender::run_script;

const GOAL_SCENE: &str = include_str!("../../fixtures/sessions/demo_goal.py");
const TASK: &str = "a red crate on a grey floor, lit by the sun, seen by Camera1";

/// Renders the goal scene from Camera1 to the path given after `--`, as the loop's scoring
/// and verifier renders see a scene with a target (Cycles, 16 samples, denoised with the fast
/// prefilter), so the scores compare like with like.
const RENDER_GOAL: &str = "
import sys
bpy.context.scene.render.engine = 'CYCLES'
bpy.context.scene.cycles.samples = 16
bpy.context.scene.cycles.use_denoising = True
bpy.context.scene.cycles.denoising_prefilter = 'FAST'
bpy.context.scene.cycles.device = 'CPU'
bpy.context.scene.render.resolution_x = 256
bpy.context.scene.render.resolution_y = 256
bpy.context.scene.render.resolution_percentage = 100
bpy.context.scene.render.image_settings.color_mode = 'RGB'
bpy.context.scene.render.filepath = sys.argv[sys.argv.index('--') + 1]
bpy.ops.render.render(write_still=True)
";

pub fn run(launcher: BlenderLauncher) -> Result<()> {
    let root = crate::setup::workspace_root();
    let demo_dir = root.join("output").join("demo");
    std::fs::create_dir_all(&demo_dir)
        .with_context(|| format!("could not create {}", demo_dir.display()))?;
    let target = demo_dir.join("target.png");
    let script = format!(
        "import bpy\nbpy.ops.wm.read_factory_settings(use_empty=True)\n{GOAL_SCENE}\n{RENDER_GOAL}"
    );
    run_script(
        &launcher,
        &script,
        "demo_goal_scene.py",
        &[target.clone().into_os_string()],
    )?;
    println!("demo: target picture rendered to {}", target.display());
    println!("demo: running the loop with the SCRIPTED provider (replayed answers, no model)\n");

    let cargo = crate::cargo_program();
    let status = Command::new(cargo)
        .current_dir(&root)
        .args(["run", "--package", "viga", "--", "run", "--task", TASK])
        .arg("--target")
        .arg(&target)
        .args(["--provider", "scripted", "--script"])
        .arg(root.join("fixtures/sessions/demo.json"))
        .args(["--max-iterations", "3", "--resolution", "256"])
        // Scored at the target's size: the accepted program scores exactly 0.
        .args(["--score-resolution", "256", "--output"])
        .arg(demo_dir.join("runs"))
        .status()
        .context("could not run `viga run`")?;
    if !status.success() {
        bail!("the demo run failed ({status})");
    }
    println!(
        "\nWith a real model: export OPENAI_API_KEY=...; cargo run -p viga -- run --task \"{TASK}\" --target {} --provider openai --model gpt-4o",
        target.display()
    );
    Ok(())
}
