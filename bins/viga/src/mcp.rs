//! `viga mcp`: one warm Blender served over MCP on stdin/stdout. Everything else this
//! process says goes to stderr, because stdout is the protocol channel.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context as _, Result};
use rmcp::ServiceExt as _;
use viga_blender::{Worker, WorkerConfig, locate};
use viga_mcp::VigaMcpServer;
use viga_protocol::bridge::SceneReset;
use viga_skills::addons::{AddonRegistry, discover};
use viga_skills::{RenderSettings, ToolContext};

pub async fn serve(addons: Option<&Path>, resolution: &str) -> Result<std::process::ExitCode> {
    let (width, height) = crate::args::parse_resolution(resolution)?;
    let worker = Worker::start(WorkerConfig::new(locate()?)).await?;
    let mut registry = AddonRegistry::new();
    for problem in discover(&worker, addons, &mut registry).await? {
        eprintln!("viga mcp: add-on skipped: {problem}");
    }
    eprintln!("viga mcp: Blender {} ready; add-ons: {}", worker.hello().blender_version, registry.ids().join(", "));
    let render = RenderSettings { width, height, ..RenderSettings::default() };
    let context = Arc::new(ToolContext::new(Arc::new(worker), render, SceneReset::Factory));
    let server = VigaMcpServer::new(context, Arc::new(tokio::sync::RwLock::new(registry))).map_err(anyhow::Error::msg)?;
    let running = server.serve(rmcp::transport::stdio()).await.context("the MCP handshake failed")?;
    running.waiting().await.context("the MCP session ended with an error")?;
    Ok(std::process::ExitCode::SUCCESS)
}
