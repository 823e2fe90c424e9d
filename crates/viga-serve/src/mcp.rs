//! viga's Blender over the Model Context Protocol, so desktop assistants and editors can use
//! it directly.
//!
//! [`VigaMcpServer`] is an MCP server (the official `rmcp` SDK) that offers the skill
//! library's scene tools — execute code, scene info, canonical views as one montage, camera
//! moves, visibility, keyframes, assets — plus the tools of every registered Blender add-on,
//! with renders returned inline as images.
//!
//! `rmcp` types stay in this module: the tools are `viga_skills::Tool`s, and this module only
//! translates between them and MCP.
//!
//! The add-on tools follow the running Blender: the add-ons are rediscovered when the client
//! lists the tools, after a tool call that may have enabled or disabled one (every call, or
//! with an [`AddonChangeWatch`] only those that may have: one main-thread trip per
//! `execute_code` in a person's Blender) and every few seconds while the session lasts (a person may do it in their Blender), and the client
//! gets `notifications/tools/list_changed` whenever the set changed.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool as McpTool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, Peer, RoleServer, ServerHandler};
use serde_json::Value;
use tokio::sync::{Mutex, RwLock};
use viga_skills::addons::{AddonRegistry, AddonScan, AddonSetChange};
use viga_skills::generator::{ExecuteCodeLive, generator_tools};
use viga_skills::verifier::verifier_tools;
use viga_skills::{ToolContext, ToolError, ToolOutput, ToolRegistry};

use base64::Engine as _;

use crate::addon_watch::AddonChangeWatch;

/// Loop-control tools that mean nothing outside the agent loop.
const LOOP_ONLY: [&str; 2] = ["make_plan", "end_process"];

/// How often the add-ons are rediscovered while a client is connected, to notice ones a
/// person enabled or disabled in their Blender between the client's requests. A listing is
/// one cheap call (about a millisecond of Blender's time).
const ADDON_WATCH_INTERVAL: Duration = Duration::from_secs(2);

/// Where an MCP client's programs run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgramMode {
    /// Each program starts from the fresh base scene: it must build the whole scene.
    Reset,
    /// Each program edits the current scene further, as one undo step (what MCP clients of
    /// a person's Blender expect).
    Live,
}

/// The scene tools an MCP client is offered: the generator's and the verifier's, without the
/// loop's own control tools; `execute_code` as `mode` says.
pub fn scene_tools(mode: ProgramMode) -> Result<ToolRegistry, String> {
    let mut tools = generator_tools().map_err(|err| err.to_string())?;
    for name in LOOP_ONLY {
        tools.unregister(name);
    }
    if mode == ProgramMode::Live {
        tools.unregister("execute_code");
        tools
            .register(Arc::new(ExecuteCodeLive))
            .map_err(|err| err.to_string())?;
    }
    let verifier = verifier_tools().map_err(|err| err.to_string())?;
    for name in verifier.names() {
        if LOOP_ONLY.contains(&name) || tools.get(name).is_some() {
            continue;
        }
        if let Some(tool) = verifier.get(name) {
            tools
                .register(Arc::clone(tool))
                .map_err(|err| err.to_string())?;
        }
    }
    Ok(tools)
}

/// Serves the scene tools and add-on tools of one Blender.
pub struct VigaMcpServer {
    context: Arc<ToolContext>,
    base: ToolRegistry,
    addons: Arc<AddonSync>,
    /// Whether the task that watches Blender's add-ons for this session runs yet.
    watching: AtomicBool,
    /// What says whether a call may have changed the add-ons; without one, every call may.
    addon_watch: Option<Arc<AddonChangeWatch>>,
}

impl std::fmt::Debug for VigaMcpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VigaMcpServer")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

impl VigaMcpServer {
    /// `addons` is rediscovered from `context`'s Blender during the session (add-on folders
    /// given to an earlier discovery included); add-ons registered by hand stay as they are.
    pub fn new(
        context: Arc<ToolContext>,
        addons: Arc<RwLock<AddonRegistry>>,
        mode: ProgramMode,
    ) -> Result<Self, String> {
        let base = scene_tools(mode)?;
        let builtin_names: Vec<String> = base.names().into_iter().map(str::to_owned).collect();
        // Claimed now, so a clashing add-on is refused before any client sees a listing;
        // every refresh claims them again, for a registry that was locked at this moment.
        if let Ok(mut registry) = addons.try_write() {
            registry.reserve_tool_names(builtin_names.iter().cloned());
        }
        let addons = Arc::new(AddonSync {
            context: Arc::clone(&context),
            registry: addons,
            builtin_names,
            refreshing: Mutex::new(()),
        });
        Ok(Self {
            context,
            base,
            addons,
            watching: AtomicBool::new(false),
            addon_watch: None,
        })
    }

    /// Lists the add-ons again after a call only when `watch` (the transport `context`'s
    /// tools call through) says it may have changed them.
    #[must_use]
    pub fn with_addon_watch(mut self, watch: Arc<AddonChangeWatch>) -> Self {
        self.addon_watch = Some(watch);
        self
    }

    /// The tools right now: add-ons may have come or gone since the last call.
    async fn current_tools(&self) -> Result<ToolRegistry, McpError> {
        self.addons
            .registry
            .read()
            .await
            .extend(&self.base)
            .map_err(|err| McpError::internal_error(err.to_string(), None))
    }

    /// Starts watching Blender's add-ons for this session, once. Started from the first
    /// request rather than from `initialized`, which newer protocol versions do without.
    fn watch_addons(&self, peer: &Peer<RoleServer>) {
        if !self.watching.swap(true, Ordering::SeqCst) {
            tokio::spawn(watch_addons(Arc::downgrade(&self.addons), peer.clone()));
        }
    }
}

/// What keeps the add-on tools in step with Blender; shared with the watch task.
struct AddonSync {
    context: Arc<ToolContext>,
    registry: Arc<RwLock<AddonRegistry>>,
    /// The scene tools' names, which no add-on tool may take.
    builtin_names: Vec<String>,
    /// One rediscovery at a time, so an older listing never overwrites a newer one.
    refreshing: Mutex<()>,
}

impl AddonSync {
    /// Rediscovers the add-ons and tells the client when the set changed. Blender is asked
    /// without the registry locked, so a slow call never holds up a listing. A failure keeps
    /// the add-ons known so far: the tool listing never breaks over add-ons.
    async fn refresh(&self, peer: &Peer<RoleServer>) {
        let _one_at_a_time = self.refreshing.lock().await;
        let scan = match AddonScan::fetch(self.context.blender.as_ref(), None).await {
            Ok(scan) => scan,
            Err(err) => {
                tracing::warn!(error = %err, "add-ons could not be rediscovered; offering the ones known so far");
                return;
            }
        };
        let change = {
            let mut registry = self.registry.write().await;
            registry.reserve_tool_names(self.builtin_names.iter().cloned());
            registry.apply_scan(scan)
        };
        if change == AddonSetChange::Changed
            && let Err(err) = peer.notify_tool_list_changed().await
        {
            tracing::debug!(error = %err, "the client could not be told the tool list changed");
        }
    }
}

/// Rediscovers the add-ons every [`ADDON_WATCH_INTERVAL`] until the session ends (the client
/// left or the server is gone).
async fn watch_addons(addons: Weak<AddonSync>, peer: Peer<RoleServer>) {
    let mut ticks = tokio::time::interval(ADDON_WATCH_INTERVAL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(addons) = addons.upgrade() else {
            return;
        };
        if peer.is_transport_closed() {
            return;
        }
        addons.refresh(&peer).await;
    }
}

fn to_mcp_tool(spec: viga_protocol::message::ToolSpec) -> McpTool {
    let schema = match spec.parameters {
        Value::Object(map) => map,
        _ => serde_json::Map::new(),
    };
    McpTool::new(
        Cow::Owned(spec.name),
        Cow::Owned(spec.description),
        Arc::new(schema),
    )
}

fn to_result(output: ToolOutput) -> CallToolResult {
    let mut content = vec![ContentBlock::text(output.text)];
    for image in output.images {
        let encoded = base64::engine::general_purpose::STANDARD.encode(&image.data);
        content.push(ContentBlock::image(encoded, image.media_type));
    }
    CallToolResult::success(content)
}

/// Why serving MCP ended badly.
#[derive(Debug, thiserror::Error)]
pub enum McpServeError {
    #[error("the MCP handshake failed: {0}")]
    Handshake(String),
    #[error("the MCP session ended with an error: {0}")]
    Session(String),
}

impl VigaMcpServer {
    /// Serves one MCP client on this process's stdin and stdout until it leaves.
    pub async fn serve_stdio(self) -> Result<(), McpServeError> {
        use rmcp::ServiceExt as _;
        let running = self
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|err| McpServeError::Handshake(err.to_string()))?;
        running
            .waiting()
            .await
            .map_err(|err| McpServeError::Session(err.to_string()))?;
        Ok(())
    }
}

impl ServerHandler for VigaMcpServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        let mut config = ServerConfig::new(capabilities);
        config.server_info = Implementation::new("viga", env!("CARGO_PKG_VERSION"));
        config.instructions = Some(
            "Blender scene tools: run Blender Python (execute_code), read the scene (get_scene_info), \
             look at it (initialize_viewpoint returns a montage of canonical views; set_camera and \
             investigate move the inspection camera), plus the tools of installed add-ons."
                .to_owned(),
        );
        config
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        self.watch_addons(&context.peer);
        self.addons.refresh(&context.peer).await;
        let tools = self.current_tools().await?;
        Ok(ListToolsResult::with_all_items(
            tools.specs().into_iter().map(to_mcp_tool).collect(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        self.watch_addons(&context.peer);
        // An add-on tool must be called on the add-ons as they are now; the scene tools
        // need no listing first.
        if self.base.get(&request.name).is_none() {
            self.addons.refresh(&context.peer).await;
        }
        let tools = self.current_tools().await?;
        let arguments = request.arguments.map(Value::Object).unwrap_or(Value::Null);
        let outcome = tools.invoke(&self.context, &request.name, arguments).await;
        // The call itself may have enabled or disabled an add-on (a program can).
        if self
            .addon_watch
            .as_ref()
            .is_none_or(|watch| watch.take_maybe_changed())
        {
            self.addons.refresh(&context.peer).await;
        }
        match outcome {
            Ok(output) => Ok(to_result(output).into()),
            // The client's model can correct these, so they are tool results, not failures.
            Err(ToolError::Recoverable(message)) => {
                Ok(CallToolResult::error(vec![ContentBlock::text(message)]).into())
            }
            Err(ToolError::Fatal(message)) => Err(McpError::internal_error(message, None)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every text of `execute_code` is true to its mode (issue 36): live, the program runs
    /// on the scene as it is, never "a freshly reloaded base scene".
    #[test]
    fn execute_codes_texts_are_true_to_the_mode() {
        let text_of = |mode| {
            let tools = scene_tools(mode).unwrap();
            let tool = tools.get("execute_code").unwrap();
            format!("{} {}", tool.description(), tool.parameters())
        };
        let live = text_of(ProgramMode::Live);
        assert!(!live.contains("freshly reloaded"), "{live}");
        assert!(live.contains("runs on the current scene"), "{live}");
        let fresh = text_of(ProgramMode::Reset);
        assert!(fresh.contains("freshly reloaded base scene"), "{fresh}");
    }
}
