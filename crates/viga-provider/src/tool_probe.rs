//! Whether a model behind an OpenAI-compatible server calls tools, found out with one small
//! call instead of assumed: llama.cpp (`--jinja`), vLLM (`--enable-auto-tool-choice`) and
//! Ollama call tools with the right model and flags, and refuse them, or answer in prose,
//! without. The call offers one tool with the tool choice the runs use (`auto`), so a server
//! that takes only `required` is not mistaken for one that works.

use viga_protocol::message::{ChatMessage, ToolSpec};

use crate::{ModelRequest, Provider, ProviderError};

/// What the small call found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolProbe {
    /// The model called the tool through the tool-calling interface.
    Calls,
    /// The server refused the tools, or the model answered without calling it; why, in
    /// words.
    DoesNotCall(String),
}

/// The tool the model is asked to call.
const PROBE_TOOL: &str = "report_ready";

/// Asks `provider` once to call a tool. A refusal of the request (HTTP 4xx or 5xx) means the
/// server does not take tools; a failure to reach the server, a key refused or a rate limit
/// is returned as the error it is, since it says nothing about tools.
pub async fn probe_tool_calling(provider: &dyn Provider) -> Result<ToolProbe, ProviderError> {
    let mut request = ModelRequest::new(
        "You check that tools work. Answer only by calling the tool you are given.",
        vec![ChatMessage::user_text(format!(
            "Call the tool {PROBE_TOOL} with ready set to true."
        ))],
    );
    request.max_tokens = 128;
    request.tools = vec![ToolSpec {
        name: PROBE_TOOL.to_owned(),
        description: "Says that the caller is ready.".to_owned(),
        parameters: serde_json::json!({
            "type": "object",
            "properties": {"ready": {"type": "boolean"}},
            "required": ["ready"]
        }),
    }];
    match provider.complete(&request).await {
        Ok(response) if response.tool_calls.is_empty() => Ok(ToolProbe::DoesNotCall(
            "the model answered without calling the tool it was given".to_owned(),
        )),
        Ok(_) => Ok(ToolProbe::Calls),
        Err(ProviderError::BadRequest {
            status, message, ..
        })
        | Err(ProviderError::Server {
            status, message, ..
        }) => Ok(ToolProbe::DoesNotCall(format!(
            "the server refused a request with tools (HTTP {status}: {message})"
        ))),
        Err(ProviderError::MalformedResponse { message, .. }) => Ok(ToolProbe::DoesNotCall(
            format!("the server's answer to a request with tools could not be read ({message})"),
        )),
        Err(other) => Err(other),
    }
}
