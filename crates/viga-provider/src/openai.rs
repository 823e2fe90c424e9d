//! OpenAI Chat Completions, and every server that speaks it (Ollama, vLLM, llama.cpp server,
//! LM Studio, OpenRouter, Qwen's compatible mode).
//!
//! Images go as data URLs in `image_url` parts, tools as `function` tools. Tool results are
//! `tool` messages, which can hold only text: images a tool returned follow in a user message.
//! Streamed tool calls arrive as argument fragments keyed by `tool_calls[].index`.
//!
//! A response format goes as a `json_schema` response format, adapted by
//! [`crate::schema_adapt`] (strict for OpenAI when the schema allows it); a server that
//! refuses it gets the request again with the schema in the system prompt
//! ([`crate::schema_fallback`]).

use std::time::{Duration, Instant};

use async_trait::async_trait;
use eventsource_stream::Event;
use reqwest::header::HeaderMap;
use serde::Deserialize;
use serde_json::{Value, json};
use viga_protocol::message::{
    ChatMessage, ContentPart, ImageData, Role, TokenUsage, ToolCall, ToolChoice,
};

use crate::assemble::{ToolCallParts, arguments_text, parse_arguments};
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

/// OpenAI itself, or a server that copies its API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flavour {
    OpenAi,
    /// Sends `max_tokens`, which these servers know, where OpenAI now wants
    /// `max_completion_tokens` (its reasoning models refuse `max_tokens`).
    Compatible,
}

#[derive(Debug)]
pub(crate) struct OpenAiProvider {
    http: HttpClient,
    url: String,
    images: ImageLimits,
    flavour: Flavour,
    schema_fallback: SchemaFallback,
}

impl OpenAiProvider {
    pub(crate) fn new(
        endpoint: Endpoint,
        config: &ProviderConfig,
        flavour: Flavour,
    ) -> Result<Self, ProviderError> {
        let mut headers = HeaderMap::new();
        if let Some((name, value)) = endpoint.key_header("authorization", "Bearer ")? {
            headers.insert(name, value);
        }
        let url = format!("{}/chat/completions", endpoint.origin.base_url);
        let http = HttpClient::new(
            endpoint.origin,
            headers,
            config.timeouts.clone(),
            config.retry.clone(),
        )?;
        Ok(Self {
            http,
            url,
            images: config.images.clone(),
            flavour,
            schema_fallback: SchemaFallback::default(),
        })
    }

    async fn body(
        &self,
        request: &ModelRequest,
        stream: bool,
        delivery: FormatDelivery,
    ) -> Result<Vec<u8>, ProviderError> {
        let origin = self.http.origin();
        let (provider, model) = (origin.provider, origin.model.clone());
        let (request, images, flavour) = (request.clone(), self.images.clone(), self.flavour);
        wire::body_off_thread(provider, move || {
            request_body(
                provider, &model, &request, &images, flavour, stream, delivery,
            )
        })
        .await
    }

    async fn complete_as(
        &self,
        request: &ModelRequest,
        delivery: FormatDelivery,
    ) -> Result<ModelResponse, ProviderError> {
        let body = self.body(request, false, delivery).await?;
        let reply = self.http.post_json(&self.url, &body).await?;
        let provider = self.http.origin().provider;
        let completion: Completion = wire::parse(provider, &reply.body)?;
        let mut response = completion.into_response(provider)?;
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
        let body = self.body(request, true, delivery).await?;
        let response = self.http.post_sse(&self.url, &body).await?;
        let decoder = ChunkDecoder::new(self.http.origin().clone());
        let mut context = self.http.stream_context(started);
        context.structured_output_fallback = delivery == FormatDelivery::InSystemPrompt;
        Ok(sse::spawn(response, context, decoder))
    }
}

#[async_trait]
impl Provider for OpenAiProvider {
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
    model: &str,
    request: &ModelRequest,
    images: &ImageLimits,
    flavour: Flavour,
    stream: bool,
    delivery: FormatDelivery,
) -> Result<Value, ProviderError> {
    let mut messages = Vec::new();
    let system = delivery.system_prompt(request);
    if !system.is_empty() {
        messages.push(json!({"role": "system", "content": system}));
    }
    for (index, message) in request.messages.iter().enumerate() {
        push_message(provider, &mut messages, index, message, images)?;
    }
    let mut body = json!({"model": model, "messages": messages});
    let max_tokens = match flavour {
        Flavour::OpenAi => "max_completion_tokens",
        Flavour::Compatible => "max_tokens",
    };
    body[max_tokens] = json!(request.max_tokens);
    if let Some(temperature) = request.temperature {
        body["temperature"] = wire::temperature(temperature);
    }
    if !request.stop.is_empty() {
        body["stop"] = json!(request.stop);
    }
    // Servers reject `tool_choice` without `tools`.
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| {
                json!({"type": "function", "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                }})
            })
            .collect();
        body["tools"] = json!(tools);
        body["tool_choice"] = match &request.tool_choice {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::None => json!("none"),
            ToolChoice::Required => json!("required"),
            ToolChoice::Tool { name } => json!({"type": "function", "function": {"name": name}}),
        };
    }
    if let Some(format) = delivery.native_format(request) {
        let mut json_schema = json!({"name": format.name});
        match flavour {
            Flavour::OpenAi => {
                let adapted = schema_adapt::for_openai(&format.schema);
                json_schema["schema"] = adapted.schema;
                // Left out rather than `false` when the schema cannot be strict: the API's
                // default, and what every compatible server accepts.
                if adapted.strict {
                    json_schema["strict"] = json!(true);
                }
            }
            Flavour::Compatible => {
                json_schema["schema"] = schema_adapt::for_compatible_server(&format.schema);
            }
        }
        body["response_format"] = json!({"type": "json_schema", "json_schema": json_schema});
    }
    if stream {
        body["stream"] = json!(true);
        // Without this the stream carries no token counts.
        body["stream_options"] = json!({"include_usage": true});
    }
    Ok(body)
}

/// Appends `message` (number `index` in the request) to `out` as Chat Completions messages:
/// one assistant message, or for a user message its tool results followed by one user
/// message with the rest.
fn push_message(
    provider: &str,
    out: &mut Vec<Value>,
    index: usize,
    message: &ChatMessage,
    limits: &ImageLimits,
) -> Result<(), ProviderError> {
    match message.role {
        Role::Assistant => out.push(assistant_message(index, message)),
        Role::User => push_user_message(provider, out, index, message, limits)?,
    }
    Ok(())
}

/// The assistant's text and tool calls as one message; its content is null when it only
/// calls tools.
fn assistant_message(index: usize, message: &ChatMessage) -> Value {
    let mut text = String::new();
    let mut calls = Vec::new();
    for part in &message.content {
        match part {
            ContentPart::Text { text: t } => text.push_str(t),
            ContentPart::ToolCall(call) => calls.push(json!({
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": arguments_text(&call.arguments)},
            })),
            ContentPart::Image { .. } | ContentPart::ToolResult(_) => {
                tracing::warn!(
                    message = index,
                    "an assistant message carries an image or tool result; Chat Completions cannot send it"
                );
            }
        }
    }
    let content = if text.is_empty() && !calls.is_empty() {
        Value::Null
    } else {
        json!(text)
    };
    let mut assistant = json!({"role": "assistant", "content": content});
    if !calls.is_empty() {
        assistant["tool_calls"] = json!(calls);
    }
    assistant
}

/// A user message's tool results as `tool` messages, then everything else (text, images,
/// and the images the tools returned, which a `tool` message cannot hold) as one user message.
fn push_user_message(
    provider: &str,
    out: &mut Vec<Value>,
    index: usize,
    message: &ChatMessage,
    limits: &ImageLimits,
) -> Result<(), ProviderError> {
    // Tool messages must directly follow the assistant message that made the calls,
    // so they go out first and everything else follows in one user message.
    let mut parts = Vec::new();
    for (part_index, part) in message.content.iter().enumerate() {
        let which = format!("message {index}, part {part_index}");
        match part {
            ContentPart::Text { text } => parts.push(json!({"type": "text", "text": text})),
            ContentPart::Image { image: data, label } => {
                if let Some(label) = label {
                    parts.push(json!({"type": "text", "text": label}));
                }
                parts.push(image_part(provider, data, limits, &which)?);
            }
            ContentPart::ToolResult(result) => {
                out.push(json!({
                    "role": "tool",
                    "tool_call_id": result.call_id,
                    "content": wire::error_text(&result.text, result.is_error),
                }));
                if !result.images.is_empty() {
                    parts.push(json!({"type": "text", "text": format!(
                        "Images returned by tool call {}:", result.call_id
                    )}));
                }
                for (n, data) in result.images.iter().enumerate() {
                    let which = format!("{which}, tool image {n}");
                    parts.push(image_part(provider, data, limits, &which)?);
                }
            }
            ContentPart::ToolCall(_) => {
                tracing::warn!(
                    message = index,
                    "a user message carries a tool call; Chat Completions cannot send it"
                );
            }
        }
    }
    if !parts.is_empty() {
        out.push(json!({"role": "user", "content": parts}));
    }
    Ok(())
}

/// An image as an `image_url` part holding a data URL; `which` names it in errors.
fn image_part(
    provider: &str,
    image: &ImageData,
    limits: &ImageLimits,
    which: &str,
) -> Result<Value, ProviderError> {
    let wire = wire::image(provider, image, limits, which)?;
    Ok(json!({"type": "image_url", "image_url": {"url": wire.data_url()}}))
}

fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "stop" => FinishReason::Stop,
        "length" => FinishReason::Length,
        "tool_calls" | "function_call" => FinishReason::ToolCalls,
        "content_filter" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_owned()),
    }
}

#[derive(Debug, Default, Deserialize)]
struct Usage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}

impl From<Usage> for TokenUsage {
    fn from(usage: Usage) -> Self {
        Self {
            input_tokens: usage.prompt_tokens,
            output_tokens: usage.completion_tokens,
        }
    }
}

#[derive(Debug, Deserialize)]
struct Completion {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    choices: Option<Vec<Choice>>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Debug, Deserialize)]
struct Choice {
    message: AssistantMessage,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct AssistantMessage {
    #[serde(default)]
    content: Option<Value>,
    #[serde(default)]
    refusal: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<WireToolCall>>,
}

#[derive(Debug, Deserialize)]
struct WireToolCall {
    #[serde(default)]
    id: String,
    function: WireFunction,
}

#[derive(Debug, Deserialize)]
struct WireFunction {
    #[serde(default)]
    name: String,
    /// A JSON string by the spec; some compatible servers send the object itself.
    #[serde(default)]
    arguments: Value,
}

/// Message content: a string, or (from some compatible servers) an array of text parts.
fn content_text(content: Option<Value>) -> String {
    match content {
        Some(Value::String(text)) => text,
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    }
}

impl Completion {
    fn into_response(self, provider: &str) -> Result<ModelResponse, ProviderError> {
        let choice = self
            .choices
            .and_then(|choices| choices.into_iter().next())
            .ok_or_else(|| ProviderError::MalformedResponse {
                provider: provider.to_owned(),
                message: "the response has no choices".to_owned(),
            })?;
        let message = choice.message;
        let mut text = content_text(message.content);
        if text.is_empty() {
            text = message.refusal.unwrap_or_default();
        }
        let tool_calls: Vec<ToolCall> = message
            .tool_calls
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .map(|(index, call)| ToolCall {
                id: if call.id.is_empty() {
                    format!("call_{index}")
                } else {
                    call.id
                },
                name: call.function.name,
                arguments: match call.function.arguments {
                    Value::String(raw) => parse_arguments(&raw),
                    Value::Null => json!({}),
                    object => object,
                },
            })
            .collect();
        let reason = choice
            .finish_reason
            .as_deref()
            .map_or(FinishReason::Stop, finish_reason);
        Ok(ModelResponse {
            finish_reason: wire::settle(reason, !tool_calls.is_empty()),
            text,
            tool_calls,
            usage: self.usage.map(TokenUsage::from).unwrap_or_default(),
            latency: Duration::ZERO,
            request_id: self.id,
            structured_output_fallback: false,
        })
    }
}

#[derive(Debug, Deserialize)]
struct Chunk {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    choices: Option<Vec<ChunkChoice>>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct ChunkChoice {
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    refusal: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<DeltaToolCall>>,
}

#[derive(Debug, Deserialize)]
struct DeltaToolCall {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<DeltaFunction>,
}

#[derive(Debug, Deserialize)]
struct DeltaFunction {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

/// Reads `chat.completion.chunk` events up to `[DONE]`.
struct ChunkDecoder {
    origin: Origin,
    answer: Partial,
    open: ToolCallParts,
    /// For servers that omit `index`: the slot of the last call, and the next free one.
    unindexed: Option<u64>,
    next_unindexed: u64,
}

impl ChunkDecoder {
    fn new(origin: Origin) -> Self {
        Self {
            origin,
            answer: Partial::default(),
            open: ToolCallParts::default(),
            unindexed: None,
            next_unindexed: 0,
        }
    }

    /// The slot a fragment belongs to. Without an index, a fragment with an id starts a new
    /// call and one without continues the last.
    fn slot(&mut self, call: &DeltaToolCall) -> u64 {
        if let Some(index) = call.index {
            return index;
        }
        match (&call.id, self.unindexed) {
            (None, Some(slot)) => slot,
            _ => {
                let slot = self.next_unindexed;
                self.next_unindexed += 1;
                self.unindexed = Some(slot);
                slot
            }
        }
    }

    fn delta(&mut self, delta: Delta, out: &mut Vec<StreamEvent>) {
        for text in [delta.content, delta.refusal].into_iter().flatten() {
            if !text.is_empty() {
                self.answer.text.push_str(&text);
                out.push(StreamEvent::TextDelta(text));
            }
        }
        for call in delta.tool_calls.unwrap_or_default() {
            let slot = self.slot(&call);
            let function = call.function.as_ref();
            self.open.start(
                slot,
                call.id.as_deref(),
                function.and_then(|f| f.name.as_deref()),
            );
            if let Some(arguments) = function.and_then(|f| f.arguments.as_deref()) {
                self.open.push_arguments(slot, arguments);
            }
        }
    }
}

impl Decoder for ChunkDecoder {
    fn event(&mut self, event: &Event, out: &mut Vec<StreamEvent>) -> Result<Flow, ProviderError> {
        if event.data.trim() == "[DONE]" {
            return Ok(Flow::End);
        }
        let chunk: Chunk = sse::data(self.origin.provider, event)?;
        if let Some(error) = chunk.error {
            return Err(stream_error(&self.origin, &error));
        }
        if self.answer.id.is_none() {
            self.answer.id = chunk.id;
        }
        for choice in chunk.choices.unwrap_or_default() {
            if let Some(delta) = choice.delta {
                self.delta(delta, out);
            }
            if let Some(reason) = choice.finish_reason {
                self.answer.finish = Some(finish_reason(&reason));
                let calls = self.open.finish_all();
                out.extend(calls.iter().cloned().map(StreamEvent::ToolCall));
                self.answer.calls.extend(calls);
            }
        }
        if let Some(usage) = chunk.usage {
            self.answer.usage = usage.into();
        }
        Ok(Flow::Continue)
    }

    fn finish(self) -> Result<ModelResponse, ProviderError> {
        self.answer.into_response(self.origin.provider)
    }
}
