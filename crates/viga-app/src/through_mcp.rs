//! A person's Blender reached through a Blender MCP server they already run (mcp-for-blender's,
//! or another `viga mcp`): the server is started as their MCP clients start it, a command
//! line speaking MCP on stdio, and driven through [`McpTransport`], which sends viga's bridge
//! through the server's code tool.
//!
//! Nothing contains what runs there: it is the person's Blender, so a run through it is
//! trusted mode, which the person confirms for each run
//! ([`crate::trust::through_mcp_question`]).

use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use rmcp::transport::TokioChildProcess;
use tokio::io::{AsyncBufReadExt as _, BufReader};
use viga_blender::TransportError;
use viga_serve::mcp_client::{McpToolNames, McpTransport};

use crate::{AppError, Tell};

/// The server's last lines on stderr kept to explain a failed start.
const STDERR_LINES: usize = 12;

/// How to start the MCP server and which of its tools runs code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServerCommand {
    pub program: String,
    pub args: Vec<String>,
    pub tools: McpToolNames,
}

impl McpServerCommand {
    /// `line` as a shell would split it (`uvx mcp-for-blender`, `mcp-for-blender --port
    /// 9876`); `code_tool` names the server's code tool (mcp-for-blender's by default).
    pub fn parse(line: &str, code_tool: Option<&str>) -> Result<Self, AppError> {
        let words = shlex::split(line).ok_or_else(|| {
            AppError::Config(format!(
                "the MCP server command {line:?} has an unclosed quote or a trailing backslash"
            ))
        })?;
        let Some((program, args)) = words.split_first() else {
            return Err(AppError::Config(
                "the MCP server command is empty; give the command your MCP client starts, for example \"uvx mcp-for-blender\"".to_owned(),
            ));
        };
        let mut tools = McpToolNames::blender_mcp();
        if let Some(name) = code_tool {
            name.clone_into(&mut tools.execute_tool);
        }
        Ok(Self {
            program: program.clone(),
            args: args.to_vec(),
            tools,
        })
    }

    /// Starts the server and connects to it; what it said on stderr goes with a failure.
    pub async fn connect(&self, tell: &dyn Tell) -> Result<Arc<McpTransport>, AppError> {
        let mut command = tokio::process::Command::new(&self.program);
        command.args(&self.args);
        let (process, stderr) = TokioChildProcess::builder(command)
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|err| {
                AppError::Config(format!(
                    "the MCP server command {:?} could not be started: {err}; is it installed (for mcp-for-blender: `pip install mcp-for-blender`, or `uvx mcp-for-blender`)?",
                    self.program
                ))
            })?;
        let said = Arc::new(Mutex::new(VecDeque::new()));
        if let Some(stderr) = stderr {
            tokio::spawn(keep_tail(stderr, Arc::clone(&said)));
        }
        tell.say(&format!(
            "connecting to your Blender through the MCP server `{}`...",
            self.program
        ));
        match McpTransport::connect(process, self.tools.clone()).await {
            Ok(transport) => Ok(Arc::new(transport)),
            Err(err) => Err(failed_start(err, &said)),
        }
    }
}

/// Reads the server's stderr to its end, keeping the last lines (and logging them all).
async fn keep_tail(stderr: tokio::process::ChildStderr, said: Arc<Mutex<VecDeque<String>>>) {
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::debug!(target: "viga::mcp_server", "{line}");
        if let Ok(mut kept) = said.lock() {
            if kept.len() == STDERR_LINES {
                kept.pop_front();
            }
            kept.push_back(line);
        }
    }
}

fn failed_start(err: TransportError, said: &Mutex<VecDeque<String>>) -> AppError {
    let tail = said
        .lock()
        .map(|kept| kept.iter().cloned().collect::<Vec<_>>().join("\n"))
        .unwrap_or_default();
    if tail.is_empty() {
        return AppError::from(err);
    }
    AppError::Config(format!(
        "{err}\nthe MCP server said on stderr:\n{tail}\n(is Blender running with the server's add-on started?)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_line_is_split_as_a_shell_would() {
        let command = McpServerCommand::parse("uvx 'mcp-for-blender' --port 9876", None).unwrap();
        assert_eq!(command.program, "uvx");
        assert_eq!(command.args, ["mcp-for-blender", "--port", "9876"]);
        assert_eq!(command.tools.execute_tool, "execute_blender_code");
        let named = McpServerCommand::parse("viga mcp", Some("execute_code")).unwrap();
        assert_eq!(named.tools.execute_tool, "execute_code");
    }

    #[test]
    fn an_empty_or_unclosed_command_says_what_to_give() {
        let empty = McpServerCommand::parse("  ", None).unwrap_err().to_string();
        assert!(empty.contains("uvx mcp-for-blender"), "{empty}");
        let unclosed = McpServerCommand::parse("mcp-for-blender 'x", None)
            .unwrap_err()
            .to_string();
        assert!(unclosed.contains("unclosed quote"), "{unclosed}");
    }
}
