//! `viga mcp`: one warm Blender served over MCP on stdin/stdout. Everything else this
//! process says goes to stderr, because stdout is the protocol channel.
//! `viga gateway`: add-on commands over WebSocket, one Blender per user.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context as _, Result};
use viga_blender::BlenderTransport;
use viga_blender::{Worker, WorkerConfig, locate};
use viga_protocol::bridge::{RenderSpec, SceneReset};
use viga_serve::mcp::{ProgramMode, VigaMcpServer};
use viga_serve::ws::{Gateway, GatewayConfig};
use viga_skills::addons::{AddonRegistry, discover};
use viga_skills::{RenderSettings, ToolContext};

pub async fn serve(
    attach: &crate::attach::AttachArgs,
    live: bool,
    addons: Option<&Path>,
    resolution: &str,
) -> Result<std::process::ExitCode> {
    let (width, height) = crate::args::parse_resolution(resolution)?;
    // A person's Blender is always live: viga never reloads the file they have open.
    let (blender, mode): (Arc<dyn BlenderTransport>, ProgramMode) = if attach.wanted() {
        (
            crate::attach::attach(attach).await?.transport,
            ProgramMode::Live,
        )
    } else {
        let worker = Arc::new(Worker::start(WorkerConfig::new(locate()?)).await?);
        let mode = if live {
            ProgramMode::Live
        } else {
            ProgramMode::Reset
        };
        (worker, mode)
    };
    let mut registry = AddonRegistry::new();
    for problem in discover(blender.as_ref(), addons, &mut registry).await? {
        eprintln!("viga mcp: add-on skipped: {problem}");
    }
    eprintln!(
        "viga mcp: {} ready ({} programs); add-ons: {}",
        blender.describe(),
        match mode {
            ProgramMode::Live => "live",
            ProgramMode::Reset => "fresh-scene",
        },
        registry.ids().join(", ")
    );
    let render = RenderSettings::new(RenderSpec {
        width,
        height,
        ..RenderSettings::default().spec
    });
    let context = Arc::new(ToolContext::new(blender, render, SceneReset::Factory));
    let server = VigaMcpServer::new(context, Arc::new(tokio::sync::RwLock::new(registry)), mode)
        .map_err(anyhow::Error::msg)?;
    server.serve_stdio().await?;
    Ok(std::process::ExitCode::SUCCESS)
}

pub async fn gateway(
    listen: SocketAddr,
    addons: Option<PathBuf>,
    setup: Option<PathBuf>,
) -> Result<std::process::ExitCode> {
    let token = viga_serve::ws::token_from_env().map_err(anyhow::Error::msg)?;
    let setup_code = match &setup {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?,
        ),
        None => None,
    };
    let config = GatewayConfig {
        token,
        launcher: locate()?,
        addons_folder: addons,
        setup_code,
    };
    let listener = Gateway::bind(listen).await?;
    eprintln!("viga gateway: listening on ws://{}", listener.local_addr()?);
    Gateway::new(config).serve(listener).await;
    Ok(std::process::ExitCode::SUCCESS)
}
