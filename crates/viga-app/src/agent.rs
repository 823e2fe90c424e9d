//! The add-on agent's set-up: its run folder first (its results folder is the one place its
//! Blender may write), then the scene it works on (the person's open scene, or a contained
//! Blender of viga's own with a scene opened), then the run.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use viga_blender::{Access, BlenderCommands as _, BlenderTransport, ContainedWorkers};
use viga_domain_scene::addon_agent::{AgentConfig, AgentFolder, AgentHandle, prepare, start};
use viga_provider::Provider;

use crate::attach::UserBlender;
use crate::{AppError, Tell};

/// The scene the agent works on.
#[derive(Debug)]
pub enum AgentScene {
    /// The scene open in the person's Blender: each command one undo step there.
    Attached(UserBlender),
    /// The scene open in the person's Blender reached through their Blender MCP server
    /// ([`crate::through_mcp`]): each command one undo step there.
    ThroughMcp(Arc<viga_serve::mcp_client::McpTransport>),
    /// A Blender of viga's own, contained, with this scene opened (else empty).
    Own { blend: Option<PathBuf> },
}

/// Starts the agent run `config` in a new folder under `output`.
pub async fn run(
    config: AgentConfig,
    scene: AgentScene,
    provider: Arc<dyn Provider>,
    output: &Path,
    contained: &ContainedWorkers,
    tell: &dyn Tell,
) -> Result<AgentHandle, AppError> {
    let prepared = prepare(config, output)?;
    let blender: Result<Arc<dyn BlenderTransport>, AppError> = match scene {
        AgentScene::Attached(user) => Ok(user.transport),
        AgentScene::ThroughMcp(transport) => Ok(transport),
        AgentScene::Own { blend } => own_blender(&prepared, blend, contained, tell).await,
    };
    // A run that never started leaves no folder behind.
    let blender = blender.inspect_err(|_| viga_core::folder::discard_unstarted(prepared.root()))?;
    Ok(start(prepared, provider, blender).await?)
}

/// A contained Blender of viga's own whose add-on commands write their results (exports,
/// renders) in the run's results folder and nowhere else; the add-ons and the opened scene
/// are read.
async fn own_blender(
    prepared: &AgentFolder,
    blend: Option<PathBuf>,
    contained: &ContainedWorkers,
    tell: &dyn Tell,
) -> Result<Arc<dyn BlenderTransport>, AppError> {
    let blend = blend
        .map(|path| std::path::absolute(&path).map_err(|err| AppError::io(&path, err)))
        .transpose()?;
    let access = Access {
        readable: prepared
            .config()
            .addons_folder
            .iter()
            .cloned()
            .chain(blend.clone())
            .collect(),
        writable: vec![prepared.results().to_path_buf()],
    };
    let blender = crate::workers::start_blender(contained, None, access, None, tell).await?;
    if let Some(path) = &blend {
        blender
            .load_blend(&path.to_string_lossy())
            .await
            .map_err(|err| AppError::open_scene(path, err))?;
    }
    Ok(blender)
}
