//! `viga mcp`'s server: the Blender it serves (a contained one of viga's own, or the person's
//! own when they trust the client with it), the add-on tools found there, and the MCP server
//! over them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use viga_blender::{Access, BlenderTransport, ContainedWorkers};
use viga_protocol::bridge::{RenderSpec, SceneReset};
use viga_serve::addon_watch::AddonChangeWatch;
use viga_serve::mcp::{ProgramMode, VigaMcpServer};
use viga_skills::addons::{AddonRegistry, discover};
use viga_skills::{RenderSettings, ToolContext};

use crate::attach::UserBlender;
use crate::{AppError, Tell};

/// The Blender an MCP server drives.
#[derive(Debug)]
pub enum McpBlender {
    /// The person's own Blender, trusted with every program the client sends (always live:
    /// viga never reloads the file they have open).
    Trusted(UserBlender),
    /// A contained Blender of viga's own; `live` keeps the scene between programs instead of
    /// starting each from a fresh one.
    Own { live: bool },
}

/// What the server is set up with.
#[derive(Debug)]
pub struct McpSettings {
    pub blender: McpBlender,
    /// A folder of add-on packages with manifests to load as well.
    pub addons: Option<PathBuf>,
    /// The verifier tools' render size.
    pub render: (u32, u32),
}

/// The MCP server `settings` describe, with a line saying what it serves; add-ons skipped
/// are said through `tell`.
pub async fn mcp_server(
    settings: McpSettings,
    contained: &ContainedWorkers,
    tell: &dyn Tell,
) -> Result<(VigaMcpServer, String), AppError> {
    let addons = settings.addons.as_deref();
    let (blender, mode): (Arc<dyn BlenderTransport>, ProgramMode) = match settings.blender {
        McpBlender::Trusted(user) => (user.transport, ProgramMode::Live),
        McpBlender::Own { live } => {
            // Programs may write only in the worker's own scratch folder, and read the add-ons.
            let access = Access::reading(addons.map(Path::to_path_buf).into_iter().collect());
            let worker = crate::workers::start_blender(contained, None, access, None, tell).await?;
            let mode = if live {
                ProgramMode::Live
            } else {
                ProgramMode::Reset
            };
            (worker, mode)
        }
    };
    let mut registry = AddonRegistry::new();
    for problem in discover(blender.as_ref(), addons, &mut registry).await? {
        tell.warn(&format!("add-on skipped: {problem}"));
    }
    let ready = format!(
        "{} ready ({} programs); add-ons: {}",
        blender.describe(),
        match mode {
            ProgramMode::Live => "live",
            ProgramMode::Reset => "fresh-scene",
        },
        registry.ids().join(", ")
    );
    let (width, height) = settings.render;
    let render = RenderSettings::new(RenderSpec {
        width,
        height,
        ..RenderSettings::default().spec
    });
    let watch = Arc::new(AddonChangeWatch::new(blender));
    let context = Arc::new(ToolContext::new(
        Arc::clone(&watch) as Arc<dyn BlenderTransport>,
        render,
        SceneReset::Factory,
    ));
    let server = VigaMcpServer::new(context, Arc::new(tokio::sync::RwLock::new(registry)), mode)
        .map_err(AppError::Config)?
        .with_addon_watch(watch);
    Ok((server, ready))
}
