//! `cargo xtask demo`: build a small scene in real Blender and render it.

use std::time::Duration;

use anyhow::{Context as _, Result};
use viga_blender::BlenderLauncher;
use viga_blender::oneshot::run_script;

const SCENE_SCRIPT: &str = include_str!("demo_scene.py");

pub fn run(launcher: BlenderLauncher) -> Result<()> {
    let out_dir = crate::setup::workspace_root().join("output").join("demo");
    std::fs::create_dir_all(&out_dir)
        .with_context(|| format!("could not create {}", out_dir.display()))?;
    let image = out_dir.join("scene.png");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("could not start the async runtime")?;
    let result = runtime.block_on(run_script(
        &launcher,
        SCENE_SCRIPT,
        &[image.clone().into_os_string()],
        Duration::from_secs(300),
    ))?;
    println!(
        "demo: Blender {} built {} and rendered {}",
        result["blender"].as_str().unwrap_or("?"),
        result["objects"],
        image.display()
    );
    Ok(())
}
