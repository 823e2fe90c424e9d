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

use std::borrow::Cow;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool as McpTool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::Value;
use viga_skills::addons::AddonRegistry;
use viga_skills::generator::{ExecuteCodeLive, generator_tools};
use viga_skills::verifier::verifier_tools;
use viga_skills::{ToolContext, ToolError, ToolOutput, ToolRegistry};

use base64::Engine as _;

/// Loop-control tools that mean nothing outside the agent loop.
const LOOP_ONLY: [&str; 2] = ["make_plan", "end_process"];

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
    addons: Arc<tokio::sync::RwLock<AddonRegistry>>,
}

impl std::fmt::Debug for VigaMcpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VigaMcpServer")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

impl VigaMcpServer {
    pub fn new(
        context: Arc<ToolContext>,
        addons: Arc<tokio::sync::RwLock<AddonRegistry>>,
        mode: ProgramMode,
    ) -> Result<Self, String> {
        Ok(Self {
            context,
            base: scene_tools(mode)?,
            addons,
        })
    }

    /// The tools right now: add-ons may have come or gone since the last call.
    async fn current_tools(&self) -> Result<ToolRegistry, McpError> {
        self.addons
            .read()
            .await
            .extend(&self.base)
            .map_err(|err| McpError::internal_error(err.to_string(), None))
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
        let mut config = ServerConfig::new(ServerCapabilities::builder().enable_tools().build());
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
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let tools = self.current_tools().await?;
        Ok(ListToolsResult::with_all_items(
            tools.specs().into_iter().map(to_mcp_tool).collect(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let tools = self.current_tools().await?;
        let arguments = request.arguments.map(Value::Object).unwrap_or(Value::Null);
        match tools.invoke(&self.context, &request.name, arguments).await {
            Ok(output) => Ok(to_result(output).into()),
            // The client's model can correct these, so they are tool results, not failures.
            Err(ToolError::Recoverable(message)) => {
                Ok(CallToolResult::error(vec![ContentBlock::text(message)]).into())
            }
            Err(ToolError::Fatal(message)) => Err(McpError::internal_error(message, None)),
        }
    }
}
