//! Anthropic Messages.
//!
//! The system prompt is a top-level field; images are base64 `image` blocks; tool calls and
//! results are `tool_use` and `tool_result` blocks (a result may hold images). Messages has no
//! JSON-schema response mode for every model, so a requested response format becomes an
//! instruction in the system prompt. Streamed tool arguments arrive as `input_json_delta`
//! fragments keyed by content block index.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use eventsource_stream::Event;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde::Deserialize;
use serde_json::{Value, json};
use viga_protocol::message::{ChatMessage, ContentPart, Role, TokenUsage, ToolCall, ToolChoice};

use crate::assemble::ToolCallParts;
use crate::config::ProviderConfig;
use crate::http::{Endpoint, HttpClient, Origin, stream_error};
use crate::images::ImageLimits;
use crate::schema_adapt;
use crate::sse::{self, Decoder, Flow, Partial};
use crate::wire;
use crate::{
    FinishReason, ModelRequest, ModelResponse, Provider, ProviderError, ResponseStream, StreamEvent,
};

/// The API version this adapter speaks (the `anthropic-version` header).
const API_VERSION: &str = "2023-06-01";

#[derive(Debug)]
pub(crate) struct AnthropicProvider {
    http: HttpClient,
    url: String,
    images: ImageLimits,
}

impl AnthropicProvider {
    pub(crate) fn new(endpoint: Endpoint, config: &ProviderConfig) -> Result<Self, ProviderError> {
        let mut headers = HeaderMap::new();
        if let Some((name, value)) = endpoint.key_header("x-api-key", "")? {
            headers.insert(name, value);
        }
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(API_VERSION),
        );
        let url = format!("{}/messages", endpoint.origin.base_url);
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
        })
    }

    async fn body(&self, request: &ModelRequest, stream: bool) -> Result<Vec<u8>, ProviderError> {
        let origin = self.http.origin();
        let (provider, model) = (origin.provider, origin.model.clone());
        let (request, images) = (request.clone(), self.images.clone());
        wire::body_off_thread(provider, move || {
            request_body(provider, &model, &request, &images, stream)
        })
        .await
    }
}

#[async_trait]
impl Provider for AnthropicProvider {
    fn name(&self) -> &str {
        self.http.origin().provider
    }

    fn model(&self) -> &str {
        &self.http.origin().model
    }

    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        let started = Instant::now();
        let body = self.body(request, false).await?;
        let reply = self.http.post_json(&self.url, &body).await?;
        let message: Message = wire::parse(self.http.origin().provider, &reply.body)?;
        let mut response = message.into_response();
        response.latency = started.elapsed();
        response.request_id = reply.request_id.or(response.request_id);
        Ok(response)
    }

    async fn stream(&self, request: &ModelRequest) -> Result<ResponseStream, ProviderError> {
        let started = Instant::now();
        let body = self.body(request, true).await?;
        let response = self.http.post_sse(&self.url, &body).await?;
        let decoder = EventDecoder::new(self.http.origin().clone());
        Ok(sse::spawn(
            response,
            self.http.stream_context(started),
            decoder,
        ))
    }
}

fn request_body(
    provider: &str,
    model: &str,
    request: &ModelRequest,
    images: &ImageLimits,
    stream: bool,
) -> Result<Value, ProviderError> {
    let system = match &request.response_format {
        Some(format) => schema_adapt::system_with_json_instruction(&request.system, format),
        None => request.system.clone(),
    };
    let messages = request
        .messages
        .iter()
        .enumerate()
        .map(|(index, message)| wire_message(provider, index, message, images))
        .collect::<Result<Vec<_>, _>>()?;
    let mut body = json!({
        "model": model,
        "max_tokens": request.max_tokens,
        "messages": messages,
    });
    if !system.is_empty() {
        body["system"] = json!(system);
    }
    if let Some(temperature) = request.temperature {
        body["temperature"] = wire::temperature(temperature);
    }
    if !request.stop.is_empty() {
        body["stop_sequences"] = json!(request.stop);
    }
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": tool.parameters,
                })
            })
            .collect();
        body["tools"] = json!(tools);
        body["tool_choice"] = match &request.tool_choice {
            ToolChoice::Auto => json!({"type": "auto"}),
            ToolChoice::None => json!({"type": "none"}),
            ToolChoice::Required => json!({"type": "any"}),
            ToolChoice::Tool { name } => json!({"type": "tool", "name": name}),
        };
    }
    if stream {
        body["stream"] = json!(true);
    }
    Ok(body)
}

fn wire_message(
    provider: &str,
    index: usize,
    message: &ChatMessage,
    limits: &ImageLimits,
) -> Result<Value, ProviderError> {
    let image = |image, which: String| -> Result<Value, ProviderError> {
        let wire = wire::image(provider, image, limits, &which)?;
        Ok(json!({"type": "image", "source": {
            "type": "base64",
            "media_type": wire.media_type,
            "data": wire.base64,
        }}))
    };
    // Tool results must open the user message that answers the calls.
    let mut results = Vec::new();
    let mut blocks = Vec::new();
    for (part_index, part) in message.content.iter().enumerate() {
        let which = format!("message {index}, part {part_index}");
        match part {
            // The API refuses empty text blocks.
            ContentPart::Text { text } if text.is_empty() => {}
            ContentPart::Text { text } => blocks.push(json!({"type": "text", "text": text})),
            ContentPart::Image { image: data, label } => {
                if let Some(label) = label {
                    blocks.push(json!({"type": "text", "text": label}));
                }
                blocks.push(image(data, which)?);
            }
            ContentPart::ToolCall(call) => blocks.push(json!({
                "type": "tool_use",
                "id": call.id,
                "name": call.name,
                // `input` must be an object; arguments kept as unparsed text are wrapped.
                "input": if call.arguments.is_object() {
                    call.arguments.clone()
                } else {
                    json!({"value": call.arguments})
                },
            })),
            ContentPart::ToolResult(result) => {
                let mut content = Vec::new();
                if !result.text.is_empty() {
                    content.push(json!({"type": "text", "text": result.text}));
                }
                for (n, data) in result.images.iter().enumerate() {
                    content.push(image(data, format!("{which}, tool image {n}"))?);
                }
                let mut block = json!({"type": "tool_result", "tool_use_id": result.call_id});
                // `content` is optional; an empty list is better left out.
                if !content.is_empty() {
                    block["content"] = json!(content);
                }
                if result.is_error {
                    block["is_error"] = json!(true);
                }
                results.push(block);
            }
        }
    }
    results.extend(blocks);
    let role = match message.role {
        Role::User => "user",
        Role::Assistant => "assistant",
    };
    Ok(json!({"role": role, "content": results}))
}

fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
        "tool_use" => FinishReason::ToolCalls,
        "refusal" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_owned()),
    }
}

/// Token counts; the stream sends them in parts (input at the start, output at the end).
#[derive(Debug, Default, Deserialize)]
struct Usage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
}

impl Usage {
    /// Folds these counts into `total`. Cached prompt tokens are reported apart from
    /// `input_tokens` but are input all the same.
    fn apply(&self, total: &mut TokenUsage) {
        let input = [
            self.input_tokens,
            self.cache_creation_input_tokens,
            self.cache_read_input_tokens,
        ];
        if input.iter().any(Option::is_some) {
            total.input_tokens = input.iter().flatten().sum();
        }
        if let Some(output) = self.output_tokens {
            total.output_tokens = output;
        }
    }
}

#[derive(Debug, Deserialize)]
struct Message {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    content: Vec<Block>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block {
    Text {
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Value,
    },
    /// Thinking and server-tool blocks: nothing the loop uses.
    #[serde(other)]
    Other,
}

impl Message {
    fn into_response(self) -> ModelResponse {
        let mut text = String::new();
        let mut tool_calls = Vec::new();
        for block in self.content {
            match block {
                Block::Text { text: t } => text.push_str(&t),
                Block::ToolUse { id, name, input } => tool_calls.push(ToolCall {
                    id,
                    name,
                    arguments: if input.is_null() { json!({}) } else { input },
                }),
                Block::Other => {}
            }
        }
        let mut usage = TokenUsage::default();
        if let Some(wire) = &self.usage {
            wire.apply(&mut usage);
        }
        let reason = self
            .stop_reason
            .as_deref()
            .map_or(FinishReason::Stop, finish_reason);
        ModelResponse {
            finish_reason: wire::settle(reason, !tool_calls.is_empty()),
            text,
            tool_calls,
            usage,
            latency: Duration::ZERO,
            request_id: self.id,
            structured_output_fallback: false,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum StreamData {
    MessageStart {
        message: StartedMessage,
    },
    ContentBlockStart {
        index: u64,
        content_block: StartedBlock,
    },
    ContentBlockDelta {
        index: u64,
        delta: BlockDelta,
    },
    ContentBlockStop {
        index: u64,
    },
    MessageDelta {
        delta: MessageDelta,
        #[serde(default)]
        usage: Option<Usage>,
    },
    MessageStop,
    Error {
        error: Value,
    },
    /// `ping` and event types added after this adapter was written.
    #[serde(other)]
    Other,
}

#[derive(Debug, Deserialize)]
struct StartedMessage {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum StartedBlock {
    Text {
        #[serde(default)]
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
    },
    #[serde(other)]
    Other,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum BlockDelta {
    TextDelta {
        text: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    /// Thinking and signature deltas.
    #[serde(other)]
    Other,
}

#[derive(Debug, Deserialize)]
struct MessageDelta {
    #[serde(default)]
    stop_reason: Option<String>,
}

/// Reads Messages stream events up to `message_stop`.
struct EventDecoder {
    origin: Origin,
    answer: Partial,
    open: ToolCallParts,
}

impl EventDecoder {
    fn new(origin: Origin) -> Self {
        Self {
            origin,
            answer: Partial::default(),
            open: ToolCallParts::default(),
        }
    }

    fn text(&mut self, text: String, out: &mut Vec<StreamEvent>) {
        if !text.is_empty() {
            self.answer.text.push_str(&text);
            out.push(StreamEvent::TextDelta(text));
        }
    }
}

impl Decoder for EventDecoder {
    fn event(&mut self, event: &Event, out: &mut Vec<StreamEvent>) -> Result<Flow, ProviderError> {
        match sse::data::<StreamData>(self.origin.provider, event)? {
            StreamData::MessageStart { message } => {
                self.answer.id = message.id;
                if let Some(usage) = message.usage {
                    usage.apply(&mut self.answer.usage);
                }
            }
            StreamData::ContentBlockStart {
                index,
                content_block,
            } => match content_block {
                StartedBlock::Text { text } => self.text(text, out),
                StartedBlock::ToolUse { id, name } => {
                    self.open.start(index, Some(&id), Some(&name));
                }
                StartedBlock::Other => {}
            },
            StreamData::ContentBlockDelta { index, delta } => match delta {
                BlockDelta::TextDelta { text } => self.text(text, out),
                BlockDelta::InputJsonDelta { partial_json } => {
                    self.open.push_arguments(index, &partial_json);
                }
                BlockDelta::Other => {}
            },
            StreamData::ContentBlockStop { index } => {
                if let Some(call) = self.open.finish(index) {
                    out.push(StreamEvent::ToolCall(call.clone()));
                    self.answer.calls.push(call);
                }
            }
            StreamData::MessageDelta { delta, usage } => {
                if let Some(reason) = delta.stop_reason {
                    self.answer.finish = Some(finish_reason(&reason));
                }
                if let Some(usage) = usage {
                    usage.apply(&mut self.answer.usage);
                }
            }
            StreamData::MessageStop => return Ok(Flow::End),
            StreamData::Error { error } => return Err(stream_error(&self.origin, &error)),
            StreamData::Other => {}
        }
        Ok(Flow::Continue)
    }

    fn finish(self) -> Result<ModelResponse, ProviderError> {
        self.answer.into_response(self.origin.provider)
    }
}
