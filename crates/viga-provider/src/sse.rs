//! Streaming responses: server-sent events parsed by `eventsource-stream` from the HTTP body,
//! handed to a per-provider [`Decoder`], and forwarded to a [`ResponseStream`] from a task of
//! their own. The pump is generic over the byte stream, so decoders can be driven from
//! fixture bytes as well as from reqwest.

use std::time::{Duration, Instant};

use eventsource_stream::{Event, EventStreamError, Eventsource as _};
use futures_util::{Stream, StreamExt as _};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc::Sender;

use crate::http::{chain, request_id};
use crate::{ModelResponse, ProviderError, ResponseStream, StreamEvent};

/// Whether the stream goes on after an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flow {
    Continue,
    /// The provider's end marker (`[DONE]`, `message_stop`): stop reading.
    End,
}

/// Turns one provider's events into ours.
pub(crate) trait Decoder: Send + 'static {
    /// Handles one event; what the consumer should see now goes into `out`.
    fn event(&mut self, event: &Event, out: &mut Vec<StreamEvent>) -> Result<Flow, ProviderError>;

    /// The whole response once the body has ended, or an error if it ended too early.
    fn finish(self) -> Result<ModelResponse, ProviderError>;
}

/// Events buffered between the pump and a slow consumer.
const CAPACITY: usize = 64;

/// What the pump needs besides the bytes and the decoder.
#[derive(Debug, Clone)]
pub(crate) struct StreamContext {
    pub(crate) provider: &'static str,
    /// The longest silence accepted between two chunks.
    pub(crate) idle: Duration,
    /// When the call began, retries included, for the response's latency.
    pub(crate) started: Instant,
    pub(crate) request_id: Option<String>,
    /// Copied to the response's `structured_output_fallback`.
    pub(crate) structured_output_fallback: bool,
}

/// Streams a successful response's events to a new [`ResponseStream`].
pub(crate) fn spawn(
    response: reqwest::Response,
    mut context: StreamContext,
    decoder: impl Decoder,
) -> ResponseStream {
    context.request_id = request_id(response.headers());
    let (sender, stream) = ResponseStream::channel(CAPACITY);
    tokio::spawn(pump(response.bytes_stream(), context, decoder, sender));
    stream
}

/// Feeds `bytes` through `decoder` into `sender`, ending with `Completed` or an error.
async fn pump<S, B, E>(
    bytes: S,
    context: StreamContext,
    decoder: impl Decoder,
    sender: Sender<Result<StreamEvent, ProviderError>>,
) where
    S: Stream<Item = Result<B, E>>,
    B: AsRef<[u8]>,
    E: std::error::Error,
{
    let last = decode(bytes, &context, decoder, &sender)
        .await
        .map(StreamEvent::Completed);
    // Fails only when the consumer dropped the stream, and then no one is left to tell.
    let _ = sender.send(last).await;
}

async fn decode<S, B, E>(
    bytes: S,
    context: &StreamContext,
    mut decoder: impl Decoder,
    sender: &Sender<Result<StreamEvent, ProviderError>>,
) -> Result<ModelResponse, ProviderError>
where
    S: Stream<Item = Result<B, E>>,
    B: AsRef<[u8]>,
    E: std::error::Error,
{
    let provider = context.provider;
    let events = bytes.eventsource();
    futures_util::pin_mut!(events);
    let mut out = Vec::new();
    loop {
        let next = tokio::time::timeout(context.idle, events.next())
            .await
            .map_err(|_| ProviderError::Timeout {
                provider: provider.to_owned(),
                what: "the response stream (no data arrived)".to_owned(),
                after: context.idle,
            })?;
        let Some(event) = next else { break };
        let event = event.map_err(|err| broken(provider, err))?;
        let flow = decoder.event(&event, &mut out)?;
        for item in out.drain(..) {
            sender
                .send(Ok(item))
                .await
                .map_err(|_| ProviderError::Network {
                    provider: provider.to_owned(),
                    message: "the consumer stopped reading the stream".to_owned(),
                })?;
        }
        if flow == Flow::End {
            break;
        }
    }
    let mut response = decoder.finish()?;
    response.latency = context.started.elapsed();
    response.request_id = context.request_id.clone().or(response.request_id);
    response.structured_output_fallback = context.structured_output_fallback;
    Ok(response)
}

fn broken<E: std::error::Error>(provider: &str, err: EventStreamError<E>) -> ProviderError {
    match err {
        EventStreamError::Transport(err) => ProviderError::Network {
            provider: provider.to_owned(),
            message: format!("the response stream broke off: {}", chain(&err)),
        },
        EventStreamError::Utf8(err) => ProviderError::MalformedResponse {
            provider: provider.to_owned(),
            message: format!("the event stream is not UTF-8: {err}"),
        },
        EventStreamError::Parser(err) => ProviderError::MalformedResponse {
            provider: provider.to_owned(),
            message: format!("the event stream does not parse: {err}"),
        },
    }
}

/// The JSON payload of an event.
pub(crate) fn data<T: DeserializeOwned>(provider: &str, event: &Event) -> Result<T, ProviderError> {
    serde_json::from_str(&event.data).map_err(|err| ProviderError::MalformedResponse {
        provider: provider.to_owned(),
        message: format!(
            "a `{}` event does not hold the expected JSON ({err}): {}",
            event.event,
            event.data.chars().take(200).collect::<String>()
        ),
    })
}

/// The error for a stream that ended before the provider said the response was complete.
pub(crate) fn cut_short(provider: &str, missing: &str) -> ProviderError {
    ProviderError::Network {
        provider: provider.to_owned(),
        message: format!(
            "the response stream ended before {missing}; the connection was probably cut, \
             try again"
        ),
    }
}

/// What a stream has delivered so far. Every decoder collects into one, and the same rule
/// ends them all: a stream the provider never declared finished is an error, never a silently
/// partial answer.
#[derive(Debug, Default)]
pub(crate) struct Partial {
    pub text: String,
    pub calls: Vec<viga_protocol::message::ToolCall>,
    pub finish: Option<crate::FinishReason>,
    pub usage: viga_protocol::message::TokenUsage,
    pub id: Option<String>,
}

impl Partial {
    pub fn into_response(self, provider: &str) -> Result<crate::ModelResponse, ProviderError> {
        let reason = self
            .finish
            .ok_or_else(|| cut_short(provider, "the model finished"))?;
        Ok(crate::ModelResponse {
            finish_reason: crate::wire::settle(reason, !self.calls.is_empty()),
            text: self.text,
            tool_calls: self.calls,
            usage: self.usage,
            latency: std::time::Duration::ZERO,
            request_id: self.id,
            structured_output_fallback: false,
        })
    }
}
