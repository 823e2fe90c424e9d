//! Google Gemini `generateContent` and `streamGenerateContent?alt=sse`.
//!
//! The key goes in the `x-goog-api-key` header (never the URL, which error messages show).
//! Images are `inline_data` parts; tools are `functionDeclarations` with their JSON Schema in
//! `parametersJsonSchema`. Gemini names tool results by function name, not call id, so the
//! names are looked up in the conversation. Gemini 3 rejects a history whose function calls
//! lack the `thoughtSignature` they came with; our `ToolCall` has no field for it, so the
//! provider keeps the signatures itself, keyed by call id, for the life of the process.
//!
//! A response format goes as `responseJsonSchema` reduced to its documented subset by
//! [`crate::schema_adapt::for_gemini`]; if Gemini refuses it, the request goes again with the
//! schema in the system instruction ([`crate::schema_fallback`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use async_trait::async_trait;
use eventsource_stream::Event;
use reqwest::header::HeaderMap;
use serde::Deserialize;
use serde_json::{Value, json};
use viga_protocol::message::{ChatMessage, ContentPart, Role, TokenUsage, ToolCall, ToolChoice};

use crate::config::ProviderConfig;
use crate::http::{Endpoint, HttpClient, Origin, stream_error};
use crate::images::ImageLimits;
use crate::schema_adapt;
use crate::schema_fallback::{FormatDelivery, SchemaFallback};
use crate::sse::{self, Decoder, Flow, Partial};
use crate::wire;
use crate::{
    FinishReason, ModelRequest, ModelResponse, Provider, ProviderError, ResponseStream, StreamEvent,
};

/// What Gemini needs back about its function calls that our messages cannot carry.
#[derive(Debug, Default)]
struct CallBook {
    /// For ids of calls Gemini sent without one.
    next: AtomicU64,
    signatures: Mutex<HashMap<String, String>>,
}

impl CallBook {
    /// The id of a call Gemini made, remembering its signature.
    fn record(&self, id: Option<String>, signature: Option<String>) -> String {
        let id = id.filter(|id| !id.is_empty()).unwrap_or_else(|| {
            format!("gemini_call_{}", self.next.fetch_add(1, Ordering::Relaxed))
        });
        if let (Some(signature), Ok(mut signatures)) = (signature, self.signatures.lock()) {
            signatures.insert(id.clone(), signature);
        }
        id
    }

    fn signature(&self, id: &str) -> Option<String> {
        self.signatures
            .lock()
            .ok()
            .and_then(|signatures| signatures.get(id).cloned())
    }
}

#[derive(Debug)]
pub(crate) struct GeminiProvider {
    http: HttpClient,
    /// `{base_url}/models/{model}`, to which the method is appended.
    model_url: String,
    images: ImageLimits,
    book: Arc<CallBook>,
    schema_fallback: SchemaFallback,
}

impl GeminiProvider {
    pub(crate) fn new(endpoint: Endpoint, config: &ProviderConfig) -> Result<Self, ProviderError> {
        let mut headers = HeaderMap::new();
        if let Some((name, value)) = endpoint.key_header("x-goog-api-key", "")? {
            headers.insert(name, value);
        }
        // Model names are written both ways, "gemini-2.5-flash" and "models/gemini-2.5-flash".
        let model = endpoint.origin.model.trim_start_matches("models/");
        let model_url = format!("{}/models/{model}", endpoint.origin.base_url);
        let http = HttpClient::new(
            endpoint.origin,
            headers,
            config.timeouts.clone(),
            config.retry.clone(),
        )?;
        Ok(Self {
            http,
            model_url,
            images: config.images.clone(),
            book: Arc::default(),
            schema_fallback: SchemaFallback::default(),
        })
    }

    async fn body(
        &self,
        request: &ModelRequest,
        delivery: FormatDelivery,
    ) -> Result<Vec<u8>, ProviderError> {
        let provider = self.http.origin().provider;
        let (request, images, book) = (request.clone(), self.images.clone(), self.book.clone());
        wire::body_off_thread(provider, move || {
            request_body(provider, &request, &images, &book, delivery)
        })
        .await
    }

    async fn complete_as(
        &self,
        request: &ModelRequest,
        delivery: FormatDelivery,
    ) -> Result<ModelResponse, ProviderError> {
        let body = self.body(request, delivery).await?;
        let url = format!("{}:generateContent", self.model_url);
        let reply = self.http.post_json(&url, &body).await?;
        let answer: Answer = wire::parse(self.http.origin().provider, &reply.body)?;
        let mut collector = self.collector();
        collector.take(answer, &mut Vec::new())?;
        // A whole answer without a finish reason is still whole.
        collector.answer.finish.get_or_insert(FinishReason::Stop);
        let mut response = collector.finish()?;
        response.request_id = reply.request_id.or(response.request_id);
        response.structured_output_fallback = delivery == FormatDelivery::InSystemPrompt;
        Ok(response)
    }

    async fn stream_as(
        &self,
        request: &ModelRequest,
        delivery: FormatDelivery,
        started: Instant,
    ) -> Result<ResponseStream, ProviderError> {
        let body = self.body(request, delivery).await?;
        let url = format!("{}:streamGenerateContent?alt=sse", self.model_url);
        let response = self.http.post_sse(&url, &body).await?;
        let mut context = self.http.stream_context(started);
        context.structured_output_fallback = delivery == FormatDelivery::InSystemPrompt;
        Ok(sse::spawn(response, context, self.collector()))
    }

    fn collector(&self) -> Collector {
        Collector {
            origin: self.http.origin().clone(),
            book: self.book.clone(),
            answer: Partial::default(),
        }
    }
}

#[async_trait]
impl Provider for GeminiProvider {
    fn name(&self) -> &str {
        self.http.origin().provider
    }

    fn model(&self) -> &str {
        &self.http.origin().model
    }

    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        let started = Instant::now();
        let provider = self.http.origin().provider;
        let mut response = self
            .schema_fallback
            .send(provider, request, |delivery| {
                self.complete_as(request, delivery)
            })
            .await?;
        response.latency = started.elapsed();
        Ok(response)
    }

    async fn stream(&self, request: &ModelRequest) -> Result<ResponseStream, ProviderError> {
        let started = Instant::now();
        let provider = self.http.origin().provider;
        self.schema_fallback
            .send(provider, request, |delivery| {
                self.stream_as(request, delivery, started)
            })
            .await
    }
}

fn request_body(
    provider: &str,
    request: &ModelRequest,
    images: &ImageLimits,
    book: &CallBook,
    delivery: FormatDelivery,
) -> Result<Value, ProviderError> {
    let names: HashMap<&str, &str> = request
        .messages
        .iter()
        .flat_map(|message| &message.content)
        .filter_map(|part| match part {
            ContentPart::ToolCall(call) => Some((call.id.as_str(), call.name.as_str())),
            _ => None,
        })
        .collect();
    let mut contents = Vec::new();
    for (index, message) in request.messages.iter().enumerate() {
        let parts = wire_parts(provider, index, message, images, book, &names)?;
        // Gemini refuses a content without parts.
        if !parts.is_empty() {
            let role = match message.role {
                Role::User => "user",
                Role::Assistant => "model",
            };
            contents.push(json!({"role": role, "parts": parts}));
        }
    }
    let mut body = json!({"contents": contents});
    let system = delivery.system_prompt(request);
    if !system.is_empty() {
        body["systemInstruction"] = json!({"parts": [{"text": system}]});
    }
    if !request.tools.is_empty() {
        let declarations: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "name": tool.name,
                    "description": tool.description,
                    // Full JSON Schema; `parameters` takes only an OpenAPI subset.
                    "parametersJsonSchema": tool.parameters,
                })
            })
            .collect();
        body["tools"] = json!([{"functionDeclarations": declarations}]);
        let calling = match &request.tool_choice {
            ToolChoice::Auto => json!({"mode": "AUTO"}),
            ToolChoice::None => json!({"mode": "NONE"}),
            ToolChoice::Required => json!({"mode": "ANY"}),
            ToolChoice::Tool { name } => json!({"mode": "ANY", "allowedFunctionNames": [name]}),
        };
        body["toolConfig"] = json!({"functionCallingConfig": calling});
    }
    let mut generation = json!({"maxOutputTokens": request.max_tokens});
    if let Some(temperature) = request.temperature {
        generation["temperature"] = wire::temperature(temperature);
    }
    if !request.stop.is_empty() {
        generation["stopSequences"] = json!(request.stop);
    }
    if let Some(format) = delivery.native_format(request) {
        generation["responseMimeType"] = json!("application/json");
        // JSON Schema, where `responseSchema` takes an OpenAPI subset without `$ref`.
        generation["responseJsonSchema"] = schema_adapt::for_gemini(&format.schema);
    }
    body["generationConfig"] = generation;
    Ok(body)
}

fn wire_parts(
    provider: &str,
    index: usize,
    message: &ChatMessage,
    limits: &ImageLimits,
    book: &CallBook,
    names: &HashMap<&str, &str>,
) -> Result<Vec<Value>, ProviderError> {
    // Written `inline_data`/`mime_type` as in Google's REST examples; the API reads both the
    // snake_case and camelCase spellings of every field.
    let image = |image, which: String| -> Result<Value, ProviderError> {
        let wire = wire::image(provider, image, limits, &which)?;
        Ok(json!({"inline_data": {"mime_type": wire.media_type, "data": wire.base64}}))
    };
    // Function responses open the turn that answers the calls, like the calls they answer.
    let mut responses = Vec::new();
    let mut parts = Vec::new();
    for (part_index, part) in message.content.iter().enumerate() {
        let which = format!("message {index}, part {part_index}");
        match part {
            ContentPart::Text { text } if text.is_empty() => {}
            ContentPart::Text { text } => parts.push(json!({"text": text})),
            ContentPart::Image { image: data, label } => {
                if let Some(label) = label {
                    parts.push(json!({"text": label}));
                }
                parts.push(image(data, which)?);
            }
            ContentPart::ToolCall(call) => {
                let mut part = json!({"functionCall": {
                    "name": call.name,
                    // `args` is a Struct: arguments kept as unparsed text are wrapped.
                    "args": if call.arguments.is_object() {
                        call.arguments.clone()
                    } else {
                        json!({"value": call.arguments})
                    },
                }});
                if let Some(signature) = book.signature(&call.id) {
                    part["thoughtSignature"] = json!(signature);
                }
                parts.push(part);
            }
            ContentPart::ToolResult(result) => {
                let name = names.get(result.call_id.as_str()).ok_or_else(|| {
                    ProviderError::InvalidRequest {
                        provider: provider.to_owned(),
                        message: format!(
                            "{which}: the tool result for call {:?} answers no tool call earlier \
                             in the conversation, and Gemini needs the function's name",
                            result.call_id
                        ),
                    }
                })?;
                // Gemini's documented keys: `output` for a result, `error` for a failure.
                let key = if result.is_error { "error" } else { "output" };
                responses.push(json!({"functionResponse": {
                    "name": name,
                    "response": {key: result.text},
                }}));
                for (n, data) in result.images.iter().enumerate() {
                    parts.push(image(data, format!("{which}, tool image {n}"))?);
                }
            }
        }
    }
    responses.extend(parts);
    Ok(responses)
}

fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "STOP" => FinishReason::Stop,
        "MAX_TOKENS" => FinishReason::Length,
        "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII" | "IMAGE_SAFETY" => {
            FinishReason::ContentFilter
        }
        other => FinishReason::Other(other.to_ascii_lowercase()),
    }
}

/// One `GenerateContentResponse`: the whole answer, or one chunk of a stream.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Answer {
    #[serde(default)]
    candidates: Vec<Candidate>,
    #[serde(default)]
    usage_metadata: Option<UsageMetadata>,
    #[serde(default)]
    prompt_feedback: Option<PromptFeedback>,
    #[serde(default)]
    response_id: Option<String>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate {
    #[serde(default)]
    content: Option<Content>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Content {
    #[serde(default)]
    parts: Vec<Part>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Part {
    #[serde(default)]
    text: Option<String>,
    /// Marks a thought summary, which is not part of the answer.
    #[serde(default)]
    thought: Option<bool>,
    #[serde(default)]
    function_call: Option<FunctionCall>,
    #[serde(default)]
    thought_signature: Option<String>,
}

#[derive(Debug, Deserialize)]
struct FunctionCall {
    #[serde(default)]
    id: Option<String>,
    name: String,
    #[serde(default)]
    args: Value,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct UsageMetadata {
    #[serde(default)]
    prompt_token_count: u64,
    #[serde(default)]
    candidates_token_count: u64,
    /// Thinking tokens, billed as output.
    #[serde(default)]
    thoughts_token_count: u64,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PromptFeedback {
    #[serde(default)]
    block_reason: Option<String>,
}

/// Gathers answers: the one of `generateContent`, or the chunks of a stream (which has no
/// end marker; the last chunk carries the finish reason).
struct Collector {
    origin: Origin,
    answer: Partial,
    book: Arc<CallBook>,
}

impl Collector {
    fn take(&mut self, answer: Answer, out: &mut Vec<StreamEvent>) -> Result<(), ProviderError> {
        if let Some(error) = answer.error {
            return Err(stream_error(&self.origin, &error));
        }
        if self.answer.id.is_none() {
            self.answer.id = answer.response_id;
        }
        if let Some(usage) = answer.usage_metadata {
            self.answer.usage = TokenUsage {
                input_tokens: usage.prompt_token_count,
                output_tokens: usage.candidates_token_count + usage.thoughts_token_count,
            };
        }
        // A blocked prompt gets no candidates at all, only the reason.
        if answer.candidates.is_empty()
            && answer
                .prompt_feedback
                .is_some_and(|feedback| feedback.block_reason.is_some())
        {
            self.answer.finish = Some(FinishReason::ContentFilter);
        }
        // We ask for one candidate.
        for candidate in answer.candidates.into_iter().take(1) {
            let parts = candidate.content.map(|content| content.parts);
            for part in parts.into_iter().flatten() {
                if let Some(call) = part.function_call {
                    let call = ToolCall {
                        id: self.book.record(call.id, part.thought_signature),
                        name: call.name,
                        arguments: if call.args.is_null() {
                            json!({})
                        } else {
                            call.args
                        },
                    };
                    out.push(StreamEvent::ToolCall(call.clone()));
                    self.answer.calls.push(call);
                } else if let Some(text) = part.text
                    && part.thought != Some(true)
                    && !text.is_empty()
                {
                    self.answer.text.push_str(&text);
                    out.push(StreamEvent::TextDelta(text));
                }
            }
            if let Some(reason) = candidate.finish_reason {
                self.answer.finish = Some(finish_reason(&reason));
            }
        }
        Ok(())
    }
}

impl Decoder for Collector {
    fn event(&mut self, event: &Event, out: &mut Vec<StreamEvent>) -> Result<Flow, ProviderError> {
        let answer: Answer = sse::data(self.origin.provider, event)?;
        self.take(answer, out)?;
        Ok(Flow::Continue)
    }

    fn finish(self) -> Result<ModelResponse, ProviderError> {
        self.answer.into_response(self.origin.provider)
    }
}
