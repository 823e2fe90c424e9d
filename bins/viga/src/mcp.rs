//! `viga mcp`: one warm Blender served over MCP on stdin/stdout. Everything else this
//! process says goes to stderr, because stdout is the protocol channel.
//! `viga gateway`: add-on commands over WebSocket, one Blender per user.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context as _, Result};
use viga_blender::{Access, BlenderTransport, locate};
use viga_protocol::bridge::{RenderSpec, SceneReset};
use viga_serve::mcp::{ProgramMode, VigaMcpServer};
use viga_serve::ws::{Gateway, GatewayConfig};
use viga_skills::addons::{AddonRegistry, discover};
use viga_skills::{RenderSettings, ToolContext};

use crate::contain::Contain;

pub async fn serve(
    attach: &crate::attach::AttachArgs,
    trusted: bool,
    live: bool,
    addons: Option<&Path>,
    resolution: &str,
    contain: &Contain,
) -> Result<std::process::ExitCode> {
    let (width, height) = crate::args::parse_resolution(resolution)?;
    if trusted && !attach.wanted() {
        anyhow::bail!(
            "--trusted lets the MCP client's programs run in your own Blender and needs --attach; without --attach they run in viga's contained Blender"
        );
    }
    // Every program the client sends would run in the person's Blender, uncontained, as
    // them: only when they said so. (A copy would not do: the client edits the scene the
    // person watches, one program after another.)
    if attach.wanted() && !trusted {
        anyhow::bail!(
            "viga mcp --attach runs every program the MCP client sends in your own Blender, uncontained: as you, with your files, your network and the keys in Blender's environment. Add --trusted to allow that for this server, or drop --attach to have them run in viga's contained Blender"
        );
    }
    // A person's Blender is always live: viga never reloads the file they have open.
    let (blender, mode): (Arc<dyn BlenderTransport>, ProgramMode) = if attach.wanted() {
        (
            crate::attach::attach(attach).await?.transport,
            ProgramMode::Live,
        )
    } else {
        // Programs may write only in the worker's own scratch folder, and read the add-ons.
        let access = Access::reading(addons.map(Path::to_path_buf).into_iter().collect());
        let worker = crate::start_blender(contain, &access).await?;
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
    args: crate::args::GatewayArgs,
    contain: &Contain,
) -> Result<std::process::ExitCode> {
    use viga_serve::ws::{BlenderSessions, Credentials, GatewayLimits};
    anyhow::ensure!(
        args.max_sessions >= 1 && args.max_connections >= 1,
        "--max-sessions and --max-connections must be at least 1"
    );
    let credentials = Credentials::from_environment(args.users.as_deref())?;
    let setup_code = match &args.setup {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?,
        ),
        None => None,
    };
    let users = credentials.user_names().len();
    let config = GatewayConfig {
        credentials,
        limits: GatewayLimits {
            max_sessions: args.max_sessions,
            session_idle: std::time::Duration::from_secs(args.session_idle),
            max_connections: args.max_connections,
            connection_idle: std::time::Duration::from_secs(args.connection_idle),
            ..GatewayLimits::default()
        },
        files_root: args.files_root,
    };
    // Each user's Blender runs that user's add-on commands: contained, reading the
    // add-ons and writing only the user's own folder (the sessions add it).
    let access = Access::reading(args.addons.iter().cloned().collect());
    let sessions = BlenderSessions {
        launcher: locate()?,
        addons_folder: args.addons,
        setup_code,
        containment: contain.containment(&access)?,
    };
    let gateway = Gateway::new(config, Arc::new(sessions))?;
    let listener = Gateway::bind(args.listen).await?;
    eprintln!(
        "viga gateway: listening on ws://{} for {users} user(s), at most {} at once",
        listener.local_addr()?,
        args.max_sessions
    );
    tokio::select! {
        () = Arc::clone(&gateway).serve(listener) => {}
        stop = tokio::signal::ctrl_c() => stop.context("cannot wait for Ctrl-C")?,
    }
    eprintln!("viga gateway: stopping every user's Blender");
    gateway.stop_sessions().await;
    Ok(std::process::ExitCode::SUCCESS)
}
