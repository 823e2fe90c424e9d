//! A [`BlenderTransport`] that drives an existing Blender MCP server (the popular Blender MCP
//! add-on's server, or another `viga mcp`) through the official rmcp client. Such servers
//! offer a code tool and a scene tool, not viga's full bridge, so only `execute` and `ping` are
//! carried; every other command is refused with a message naming the command, never faked.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rmcp::model::{CallToolRequestParams, ContentBlock};
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt as _};
use serde_json::{Value, json};
use viga_blender::{BlenderTransport, LostReason, Recovery, TransportError};
use viga_protocol::bridge::{BridgeCommand, FaultKind};

/// Which tool of the server runs code, and under which argument name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpToolNames {
    pub execute_tool: String,
    pub code_argument: String,
}

impl McpToolNames {
    /// The popular Blender MCP add-on's server.
    pub fn blender_mcp() -> Self {
        Self {
            execute_tool: "execute_blender_code".to_owned(),
            code_argument: "code".to_owned(),
        }
    }

    /// Another viga (`viga mcp`).
    pub fn viga() -> Self {
        Self {
            execute_tool: "execute_code".to_owned(),
            code_argument: "code".to_owned(),
        }
    }
}

pub struct McpTransport {
    client: Arc<RunningService<RoleClient, ()>>,
    names: McpToolNames,
    description: String,
    default_timeout: Duration,
}

impl std::fmt::Debug for McpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTransport")
            .field("server", &self.description)
            .finish_non_exhaustive()
    }
}

impl McpTransport {
    /// Connects over any rmcp client transport (a child process, a stream) and checks that
    /// the server offers the code tool.
    pub async fn connect<T, E, A>(transport: T, names: McpToolNames) -> Result<Self, TransportError>
    where
        T: rmcp::transport::IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let client = ().serve(transport).await.map_err(|err| {
            TransportError::Handshake(format!("MCP initialisation failed: {err}"))
        })?;
        let tools = client.list_all_tools().await.map_err(|err| {
            TransportError::Handshake(format!("the MCP server did not list its tools: {err}"))
        })?;
        if !tools.iter().any(|tool| tool.name == names.execute_tool) {
            let offered: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
            return Err(TransportError::Handshake(format!(
                "the MCP server has no {:?} tool (it offers: {}); name its code tool in McpToolNames",
                names.execute_tool,
                offered.join(", ")
            )));
        }
        let description = client
            .peer_info()
            .and_then(|info| {
                info.server_info
                    .as_ref()
                    .map(|server| format!("MCP server {} {}", server.name, server.version))
            })
            .unwrap_or_else(|| "MCP server".to_owned());
        Ok(Self {
            client: Arc::new(client),
            names,
            description,
            default_timeout: Duration::from_secs(300),
        })
    }

    fn unsupported(command: &'static str) -> TransportError {
        TransportError::Refused {
            command,
            kind: FaultKind::UnknownCommand,
            message: format!(
                "{command} is not available through an MCP server, which only runs code; use viga's own Blender worker for it"
            ),
            traceback: None,
        }
    }
}

fn text_of(content: &[ContentBlock]) -> String {
    content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text(text) => Some(text.text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[async_trait]
impl BlenderTransport for McpTransport {
    async fn call(
        &self,
        command: BridgeCommand,
        timeout: Option<Duration>,
    ) -> Result<Value, TransportError> {
        let name = command.name();
        let code = match command {
            BridgeCommand::Ping => return Ok(json!({"pong": true})),
            // A reset cannot be asked of a foreign server: refuse rather than run on a scene
            // the caller believes was reloaded.
            BridgeCommand::Execute { reset: Some(_), .. } => {
                return Err(TransportError::Refused {
                    command: name,
                    kind: FaultKind::BadRequest,
                    message: "an MCP server cannot reload a base scene; execute without a reset"
                        .to_owned(),
                    traceback: None,
                });
            }
            BridgeCommand::Execute { code, reset: None } => code,
            _ => return Err(Self::unsupported(name)),
        };
        let mut arguments = serde_json::Map::new();
        arguments.insert(self.names.code_argument.clone(), Value::String(code));
        let request =
            CallToolRequestParams::new(self.names.execute_tool.clone()).with_arguments(arguments);
        let limit = timeout.unwrap_or(self.default_timeout);
        let started = std::time::Instant::now();
        let result = match tokio::time::timeout(limit, self.client.call_tool(request)).await {
            Err(_) => {
                return Err(TransportError::Lost {
                    command: name,
                    reason: LostReason::Timeout(limit),
                    recovery: Recovery::None,
                });
            }
            Ok(Err(err)) => {
                return Err(TransportError::Lost {
                    command: name,
                    reason: LostReason::Disconnected(err.to_string()),
                    recovery: Recovery::None,
                });
            }
            Ok(Ok(result)) => result,
        };
        let text = text_of(&result.content);
        let duration_ms = started.elapsed().as_secs_f64() * 1000.0;
        // The server reports a failed program as a tool error; its text is all we know.
        let execution = if result.is_error == Some(true) {
            json!({"stdout": "", "stderr": "", "duration_ms": duration_ms,
                   "error": {"error_type": "McpToolError", "message": text, "traceback": text}})
        } else {
            json!({"stdout": text, "stderr": "", "duration_ms": duration_ms})
        };
        Ok(execution)
    }

    fn describe(&self) -> String {
        self.description.clone()
    }
}
