//! The JSON-in-text fallback for servers that refuse structured output.
//!
//! A server may speak the structured-output API and still refuse a schema it cannot compile
//! (llama.cpp's grammar converter, vLLM's guided decoding, Ollama), or not implement the field
//! at all; either way it answers HTTP 400. The adapters that send the schema in the API's own
//! field (OpenAI, OpenAI-compatible servers, Gemini) then send the same request once more
//! without the field, with the schema and an instruction to answer with one JSON object
//! appended to the system prompt ([`crate::schema_adapt::system_with_json_instruction`]). The
//! provider remembers it: its later requests go out in that form at once. A warning is logged
//! when it happens, and every response obtained that way has
//! [`crate::ModelResponse::structured_output_fallback`] set. The caller validates the answer
//! against the schema as it always does; only the model's compliance is no longer enforced.

use std::borrow::Cow;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::schema_adapt::system_with_json_instruction;
use crate::{ModelRequest, ProviderError, ResponseFormat};

/// How a request's response format goes out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FormatDelivery {
    /// In the API's structured-output field, adapted to the backend.
    Native,
    /// As an instruction and the schema in the system prompt, with the field left out.
    InSystemPrompt,
}

impl FormatDelivery {
    /// The format for the API's structured-output field, if the request has one and it goes
    /// there.
    pub(crate) fn native_format(self, request: &ModelRequest) -> Option<&ResponseFormat> {
        match self {
            Self::Native => request.response_format.as_ref(),
            Self::InSystemPrompt => None,
        }
    }

    /// The system prompt to send: the request's own, plus the JSON instruction when the
    /// format goes in the prompt.
    pub(crate) fn system_prompt(self, request: &ModelRequest) -> Cow<'_, str> {
        match (self, &request.response_format) {
            (Self::InSystemPrompt, Some(format)) => {
                Cow::Owned(system_with_json_instruction(&request.system, format))
            }
            _ => Cow::Borrowed(&request.system),
        }
    }
}

/// One provider's memory of whether its server refused structured output.
#[derive(Debug, Default)]
pub(crate) struct SchemaFallback {
    refused: AtomicBool,
}

impl SchemaFallback {
    /// Sends `request` with `send`, which builds the body for a delivery and sends it. A
    /// request with a response format goes natively until the server has refused a schema;
    /// on that refusal it is sent once more with the schema in the prompt, and if that
    /// succeeds the provider keeps to the prompt form.
    pub(crate) async fn send<T, Sent>(
        &self,
        provider: &str,
        request: &ModelRequest,
        mut send: impl FnMut(FormatDelivery) -> Sent,
    ) -> Result<T, ProviderError>
    where
        Sent: Future<Output = Result<T, ProviderError>>,
    {
        if request.response_format.is_none() {
            return send(FormatDelivery::Native).await;
        }
        if self.refused.load(Ordering::Relaxed) {
            return send(FormatDelivery::InSystemPrompt).await;
        }
        match send(FormatDelivery::Native).await {
            Err(error) if refuses_structured_output(&error) => {
                tracing::warn!(
                    provider,
                    %error,
                    "the server refused structured output; asking for the JSON in the text \
                     instead, now and for this provider's later requests"
                );
                let answer = send(FormatDelivery::InSystemPrompt).await?;
                // Only now: had the plain request failed as well, the schema was not the
                // problem, and the next request should try the field again.
                self.refused.store(true, Ordering::Relaxed);
                Ok(answer)
            }
            other => other,
        }
    }
}

/// Words of a structured-output refusal, lower case: the API fields in their spellings
/// (OpenAI's `response_format`/`json_schema`, Gemini's `response_schema`,
/// `responseJsonSchema` and response MIME type), and what servers that compile schemas into
/// grammars say (llama.cpp's "grammar", vLLM's "guided decoding").
const STRUCTURED_OUTPUT_TERMS: &[&str] = &[
    "response_format",
    "json_schema",
    "response_schema",
    "responseschema",
    "response_json_schema",
    "responsejsonschema",
    "response_mime_type",
    "responsemimetype",
    "response mime type",
    "grammar",
    "guided",
    "structured output",
];

/// Whether `error` is a server refusing the structured-output part of a request: HTTP 400
/// (or 422, for servers that validate requests with FastAPI) whose message names the
/// structured-output field or a schema. Examples: llama.cpp's "Unrecognized schema: true",
/// vLLM's "The provided JSON schema contains features not supported by xgrammar.", OpenAI's
/// "Invalid schema for response_format 'x': ...", Gemini's "Unknown name
/// \"responseJsonSchema\"". A schema refusal that names a function or tool is about a tool's
/// parameters, which leaving the response format out would not cure.
pub(crate) fn refuses_structured_output(error: &ProviderError) -> bool {
    let ProviderError::BadRequest {
        status: 400 | 422,
        message,
        ..
    } = error
    else {
        return false;
    };
    let message = message.to_lowercase();
    if STRUCTURED_OUTPUT_TERMS
        .iter()
        .any(|term| message.contains(term))
    {
        return true;
    }
    message.contains("schema")
        && !["function", "tool"]
            .iter()
            .any(|word| message.contains(word))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bad_request(status: u16, message: &str) -> ProviderError {
        ProviderError::BadRequest {
            provider: "test".to_owned(),
            status,
            message: message.to_owned(),
        }
    }

    #[test]
    fn refusals_of_the_schema_are_recognised_across_servers() {
        for message in [
            // llama.cpp server
            "Unrecognized schema: true",
            "JSON schema conversion failed:\nUnrecognized schema: true",
            // vLLM
            "The provided JSON schema contains features not supported by xgrammar.",
            "Error in guided decoding: unsupported construct",
            // OpenAI
            "Invalid schema for response_format 'GnResponse': In context=(), 'oneOf' is not permitted.",
            // Ollama
            "invalid format: expected \"json\" or a valid JSON schema",
            // LM Studio
            "'response_format.type' must be 'json_schema' or 'text'",
            // Gemini
            "Invalid JSON payload received. Unknown name \"responseJsonSchema\" at 'generation_config': Cannot find field.",
            "* GenerateContentRequest.generation_config.response_schema.properties[\"steps\"].items: missing field.",
            "Function calling with a response mime type: 'application/json' is unsupported",
        ] {
            assert!(
                refuses_structured_output(&bad_request(400, message)),
                "{message}"
            );
        }
        assert!(refuses_structured_output(&bad_request(
            422,
            "response_format: value is not a valid dict"
        )));
    }

    #[test]
    fn other_failures_are_not_taken_for_a_refused_schema() {
        for error in [
            bad_request(400, "Invalid value for 'tool_choice'"),
            bad_request(
                400,
                "Invalid schema for function 'run_script': 'additionalProperties' is required",
            ),
            bad_request(404, "model 'json_schema' not found"),
            bad_request(429, "response_format quota exceeded"),
            ProviderError::Server {
                provider: "test".to_owned(),
                status: 500,
                message: "grammar sampler crashed".to_owned(),
            },
            ProviderError::ContextTooLong {
                provider: "test".to_owned(),
                message: "the schema and prompt exceed the context window".to_owned(),
            },
        ] {
            assert!(!refuses_structured_output(&error), "{error}");
        }
    }

    #[test]
    fn the_format_goes_either_in_the_field_or_in_the_system_prompt() {
        let mut request = ModelRequest::new("You build node trees.", Vec::new());
        assert_eq!(
            FormatDelivery::InSystemPrompt.system_prompt(&request),
            "You build node trees."
        );
        request.response_format = Some(ResponseFormat {
            name: "Reply".to_owned(),
            schema: serde_json::json!({"type": "object"}),
        });
        assert!(FormatDelivery::Native.native_format(&request).is_some());
        assert_eq!(
            FormatDelivery::Native.system_prompt(&request),
            "You build node trees."
        );
        assert!(
            FormatDelivery::InSystemPrompt
                .native_format(&request)
                .is_none()
        );
        assert_eq!(
            FormatDelivery::InSystemPrompt.system_prompt(&request),
            "You build node trees.\n\nAnswer with one JSON object and nothing else (no prose, no \
             code fence). It must match this JSON Schema, named \"Reply\":\n{\"type\":\"object\"}"
        );
    }
}
