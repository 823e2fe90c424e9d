//! A [`BlenderTransport`] that reaches a person's Blender through a Blender MCP server they
//! already run (mcp-for-blender's, or another `viga mcp`), as that server's MCP client
//! (rmcp). Such a server offers a code tool, not viga's bridge: so the connection first
//! sends viga's bridge package itself through that tool (kept in that Blender under a name
//! of this build's own), and every command after is a small program that hands the bridge
//! one request and prints its one-line reply, pictures inline: nothing comes back as a file
//! for viga to read.
//!
//! What this path cannot do, said where it matters: nothing is contained (it is the
//! person's Blender: programs run as them, with their files and network; callers confirm
//! trusted mode per run); the open file is never replaced, so a run's reset goes back by
//! undo to the scene the connection found (`over_mcp.py`), and a command that would load
//! a file is refused by the bridge; a program that never ends cannot be stopped from here,
//! only given up on.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use rmcp::model::{CallToolRequestParams, ContentBlock};
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt as _};
use serde_json::Value;
use viga_blender::ContainmentStatus;
use viga_blender::{BlenderTransport, LostReason, Recovery, TransportError};
use viga_protocol::bridge::{BridgeCommand, BridgeReply, FaultKind};

/// The line a reply of the bridge starts with, among whatever else the server says.
const REPLY_MARKER: &str = "VIGA_BRIDGE_REPLY ";
/// What the per-command program prints when the bridge is gone from that Blender.
const MISSING_MARKER: &str = "viga-bridge-missing";
/// Sending and loading the bridge package (about 150 KB of Python) once.
const INSTALL_TIMEOUT: Duration = Duration::from_secs(60);
/// How much of an answer that is not a reply goes into an error message.
const SHOWN_CHARS: usize = 600;

/// Which tool of the server runs code, and under which argument name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpToolNames {
    pub execute_tool: String,
    pub code_argument: String,
}

impl McpToolNames {
    /// mcp-for-blender's server (formerly blender-mcp).
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
    /// The module name the bridge is kept under in that Blender.
    module: String,
    next_id: AtomicU64,
}

impl std::fmt::Debug for McpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTransport")
            .field("server", &self.description)
            .finish_non_exhaustive()
    }
}

impl McpTransport {
    /// Connects over any rmcp client transport (a child process, a stream), checks that the
    /// server offers the code tool, sends viga's bridge through it and records the scene
    /// as it is as the state every reset goes back to.
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
        let (_, hash) = viga_blender::bridge::bridge_package();
        let connected = Self {
            client: Arc::new(client),
            names,
            description,
            default_timeout: Duration::from_secs(300),
            module: format!("viga_bridge_over_mcp_{hash:016x}"),
            next_id: AtomicU64::new(1),
        };
        connected.install().await?;
        Ok(connected)
    }

    /// Sends the bridge package (unless that Blender has this build's already) and begins
    /// the run there.
    async fn install(&self) -> Result<(), TransportError> {
        let text = self
            .run_code(install_program(&self.module)?, "hello", INSTALL_TIMEOUT)
            .await?;
        let reply = bridge_reply("hello", &text).map_err(|err| match err {
            TransportError::MalformedReply { message, .. } => TransportError::Handshake(format!(
                "viga's bridge could not be loaded in the Blender behind the {}: {message}",
                self.description
            )),
            other => other,
        })?;
        result_of("hello", reply).map(drop)
    }

    /// Runs `code` through the server's code tool and returns all the text it answered.
    async fn run_code(
        &self,
        code: String,
        command: &'static str,
        limit: Duration,
    ) -> Result<String, TransportError> {
        let mut arguments = serde_json::Map::new();
        arguments.insert(self.names.code_argument.clone(), Value::String(code));
        let request =
            CallToolRequestParams::new(self.names.execute_tool.clone()).with_arguments(arguments);
        match tokio::time::timeout(limit, self.client.call_tool(request)).await {
            Err(_) => Err(TransportError::Lost {
                command,
                reason: LostReason::Timeout(limit),
                recovery: Recovery::None,
            }),
            Ok(Err(err)) => Err(TransportError::Lost {
                command,
                reason: LostReason::Disconnected(err.to_string()),
                recovery: Recovery::None,
            }),
            Ok(Ok(result)) => Ok(text_of(&result.content)),
        }
    }
}

/// The program that loads the bridge package into that Blender under `module` (written to a
/// fresh temporary folder there and imported by path, as viga's own launcher does), unless
/// it is loaded already, then records where the run starts.
fn install_program(module: &str) -> Result<String, TransportError> {
    let (files, _) = viga_blender::bridge::bridge_package();
    let files: serde_json::Map<String, Value> = files
        .iter()
        .map(|(path, text)| ((*path).to_owned(), Value::String((*text).to_owned())))
        .collect();
    let files = python_literal(&serde_json::to_string(&files).map_err(|err| {
        TransportError::Handshake(format!("the bridge package could not be encoded: {err}"))
    })?)?;
    let module = python_literal(module)?;
    Ok(format!(
        r#"import importlib.util, json, os, sys, tempfile
_name = {module}
if _name not in sys.modules:
    _root = tempfile.mkdtemp(prefix="viga-bridge-")
    for _path, _text in json.loads({files}).items():
        _file = os.path.join(_root, *_path.split("/"))
        os.makedirs(os.path.dirname(_file), exist_ok=True)
        with open(_file, "w", encoding="utf-8") as _handle:
            _handle.write(_text)
    _package = os.path.join(_root, "viga_bridge")
    _spec = importlib.util.spec_from_file_location(_name, os.path.join(_package, "__init__.py"), submodule_search_locations=[_package])
    _module = importlib.util.module_from_spec(_spec)
    sys.modules[_name] = _module
    try:
        _spec.loader.exec_module(_module)
    except BaseException:
        del sys.modules[_name]
        raise
print(sys.modules[_name].over_mcp.begin_run())
"#
    ))
}

/// The program that hands the bridge one request.
fn command_program(module: &str, request: &Value) -> Result<String, TransportError> {
    let module = python_literal(module)?;
    let request = python_literal(&request.to_string())?;
    Ok(format!(
        "import sys\n_viga = sys.modules.get({module})\nprint(_viga.over_mcp.answer({request}) if _viga is not None else {MISSING_MARKER:?})\n"
    ))
}

/// `text` as a Python string literal: a JSON string is one (its escapes are Python's too).
fn python_literal(text: &str) -> Result<String, TransportError> {
    serde_json::to_string(text).map_err(|err| TransportError::MalformedReply {
        command: "execute",
        message: format!("a request could not be encoded: {err}"),
    })
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

/// The bridge's reply in what the server answered: the one line after the marker (servers
/// put words of their own before it: "Code executed successfully: ").
fn bridge_reply(command: &'static str, text: &str) -> Result<BridgeReply, TransportError> {
    if text.contains(MISSING_MARKER) && !text.contains(REPLY_MARKER) {
        return Err(TransportError::Lost {
            command,
            reason: LostReason::Disconnected(
                "viga's bridge is gone from the Blender behind the MCP server (was Blender restarted?)"
                    .to_owned(),
            ),
            recovery: Recovery::None,
        });
    }
    let Some((_, after)) = text.split_once(REPLY_MARKER) else {
        let shown: String = text.chars().take(SHOWN_CHARS).collect();
        return Err(TransportError::MalformedReply {
            command,
            message: format!("the MCP server answered without a reply of viga's bridge: {shown}"),
        });
    };
    let line = after.lines().next().unwrap_or_default();
    serde_json::from_str(line).map_err(|err| TransportError::MalformedReply {
        command,
        message: format!("the bridge's reply could not be read: {err}"),
    })
}

fn result_of(command: &'static str, reply: BridgeReply) -> Result<Value, TransportError> {
    match (reply.ok, reply.result, reply.error) {
        (true, Some(result), _) => Ok(result),
        (false, _, Some(fault)) => Err(TransportError::Refused {
            command,
            kind: fault.kind,
            message: fault.message,
            traceback: fault.traceback,
        }),
        _ => Err(TransportError::MalformedReply {
            command,
            message: "a reply with neither a result nor an error".to_owned(),
        }),
    }
}

#[async_trait]
impl BlenderTransport for McpTransport {
    async fn call(
        &self,
        command: BridgeCommand,
        timeout: Option<Duration>,
    ) -> Result<Value, TransportError> {
        let name = command.name();
        if matches!(
            command,
            BridgeCommand::Hello { .. } | BridgeCommand::Shutdown
        ) {
            return Err(TransportError::Refused {
                command: name,
                kind: FaultKind::UserScene,
                message: format!(
                    "{name} is not sent to a Blender reached through an MCP server: it is the person's, and stays open"
                ),
                traceback: None,
            });
        }
        let mut request =
            serde_json::to_value(&command).map_err(|err| TransportError::MalformedReply {
                command: name,
                message: format!("the command could not be encoded: {err}"),
            })?;
        if let Value::Object(fields) = &mut request {
            let id = self.next_id.fetch_add(1, Ordering::Relaxed);
            fields.insert("id".to_owned(), Value::from(id));
        }
        let code = command_program(&self.module, &request)?;
        let limit = timeout.unwrap_or(self.default_timeout);
        let text = self.run_code(code, name, limit).await?;
        result_of(name, bridge_reply(name, &text)?)
    }

    fn describe(&self) -> String {
        format!("a Blender reached through the {}", self.description)
    }

    fn containment(&self) -> Option<ContainmentStatus> {
        Some(ContainmentStatus::uncontained(&format!(
            "uncontained: a person's Blender reached through the {}, where programs run as that person, with their files and network",
            self.description
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_is_found_after_the_servers_own_words() {
        let text = "Code executed successfully: VIGA_BRIDGE_REPLY {\"id\": 3, \"ok\": true, \"result\": {\"pong\": true}}\n";
        let reply = bridge_reply("ping", text).unwrap();
        assert_eq!(
            result_of("ping", reply).unwrap(),
            serde_json::json!({"pong": true})
        );
    }

    #[test]
    fn an_answer_without_a_reply_is_malformed_and_shows_what_was_said() {
        let err = bridge_reply("render", "Error executing code: NameError: name 'x'").unwrap_err();
        assert!(
            matches!(&err, TransportError::MalformedReply { message, .. } if message.contains("NameError")),
            "{err}"
        );
    }

    #[test]
    fn a_blender_that_lost_the_bridge_is_lost_not_malformed() {
        let err = bridge_reply(
            "execute",
            "Code executed successfully: viga-bridge-missing\n",
        )
        .unwrap_err();
        assert!(matches!(err, TransportError::Lost { .. }), "{err}");
    }

    #[test]
    fn a_refusal_keeps_its_kind() {
        let text = "VIGA_BRIDGE_REPLY {\"id\": 1, \"ok\": false, \"error\": {\"kind\": \"user_scene\", \"message\": \"no\"}}";
        let err = result_of("load_blend", bridge_reply("load_blend", text).unwrap()).unwrap_err();
        assert!(
            matches!(
                err,
                TransportError::Refused {
                    kind: FaultKind::UserScene,
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn requests_become_python_string_literals() {
        let request = serde_json::json!({"command": "execute", "code": "print(\"é\\n\")\n"});
        let program = command_program("viga_bridge_over_mcp_1", &request).unwrap();
        assert!(program.contains("sys.modules.get(\"viga_bridge_over_mcp_1\")"));
        assert!(program.contains(r#"answer("{\"code\":"#), "{program}");
    }
}
