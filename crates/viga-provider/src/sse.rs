//! Streaming responses: server-sent events parsed by `eventsource-stream` from the HTTP body,
//! handed to a per-provider [`Decoder`], and forwarded to a [`ResponseStream`] from a task of
//! their own. The pump is generic over the byte stream, so decoders can be driven from
//! fixture bytes as well as from reqwest. Every stream is bounded: in silence
//! (`stream_idle`), in time (`stream_total`), in size per event and in size over all.

use std::time::{Duration, Instant};

use eventsource_stream::{Event, EventStreamError, Eventsource as _};
use futures_util::{Stream, StreamExt as _};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc::Sender;

use crate::http::{MAX_RESPONSE_BYTES, request_id};
use crate::{ModelResponse, ProviderError, ResponseStream, StreamEvent};
use viga_io::net::error_chain;

/// The largest single event accepted. An event is held until it ends, so a server that
/// never ends one would otherwise fill memory; real events are kilobytes.
const MAX_EVENT_BYTES: usize = 16 << 20;

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
    /// The longest the whole stream may take.
    pub(crate) total: Duration,
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
    let mut lines = BoundedLines::default();
    let bytes = bytes.map(move |chunk| lines.admit(chunk.map_err(Cut::Transport)?.as_ref()));
    let events = bytes.eventsource();
    futures_util::pin_mut!(events);
    let mut out = Vec::new();
    // None when the limit is too far away for the clock to say: then only silence ends it.
    let deadline = tokio::time::Instant::now().checked_add(context.total);
    loop {
        let left = deadline.map_or(context.idle, |deadline| {
            deadline.saturating_duration_since(tokio::time::Instant::now())
        });
        let wait = context.idle.min(left);
        let next = tokio::time::timeout(wait, events.next())
            .await
            .map_err(|_| timed_out(context, wait < context.idle))?;
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

fn timed_out(context: &StreamContext, past_total: bool) -> ProviderError {
    let (what, after) = if past_total {
        (
            "the response stream (it went on past its overall limit)",
            context.total,
        )
    } else {
        ("the response stream (no data arrived)", context.idle)
    };
    ProviderError::Timeout {
        provider: context.provider.to_owned(),
        what: what.to_owned(),
        after,
    }
}

/// Why the bytes of a stream stopped: the transport's error, or a bound it passed.
#[derive(Debug, thiserror::Error)]
enum Cut<E: std::error::Error> {
    #[error(transparent)]
    Transport(E),
    #[error("an event is larger than {} MiB", MAX_EVENT_BYTES >> 20)]
    EventTooLarge,
    #[error("the stream is larger than {} MiB", MAX_RESPONSE_BYTES >> 20)]
    StreamTooLarge,
}

/// A stream's bytes on their way to the event parser: counted as they arrive, in all and in
/// the event under way (an event ends at a blank line: two line breaks in a row, each `\n`,
/// `\r` or `\r\n`), and handed on in whole lines only. The parser reads an unfinished line
/// again from its start whenever more bytes come, so a long line fed in small pieces would
/// cost time quadratic in its length; here the unfinished line waits instead. (A line left
/// unfinished when the stream ends would end no event, so nothing is lost by holding it.)
#[derive(Debug)]
struct BoundedLines {
    total: usize,
    in_event: usize,
    /// Nothing but a line break since the last line break (a blank line ends the event).
    line_empty: bool,
    /// The last byte was `\r`, so a `\n` now completes the same line break.
    after_cr: bool,
    /// The unfinished line.
    unfinished: Vec<u8>,
}

impl Default for BoundedLines {
    fn default() -> Self {
        Self {
            total: 0,
            in_event: 0,
            line_empty: true,
            after_cr: false,
            unfinished: Vec::new(),
        }
    }
}

impl BoundedLines {
    /// The whole lines `bytes` completes (possibly none), or the bound they pass.
    fn admit<E: std::error::Error>(&mut self, bytes: &[u8]) -> Result<Vec<u8>, Cut<E>> {
        self.total = self.total.saturating_add(bytes.len());
        if self.total > MAX_RESPONSE_BYTES {
            return Err(Cut::StreamTooLarge);
        }
        for &byte in bytes {
            let crlf_end = byte == b'\n' && self.after_cr;
            self.after_cr = byte == b'\r';
            match byte {
                _ if crlf_end => continue,
                b'\n' | b'\r' if self.line_empty => self.in_event = 0,
                b'\n' | b'\r' => self.line_empty = true,
                _ => {
                    self.line_empty = false;
                    self.in_event += 1;
                }
            }
            if self.in_event > MAX_EVENT_BYTES {
                return Err(Cut::EventTooLarge);
            }
        }
        // Only the new bytes are searched, so a long unfinished line is not scanned again.
        let Some(last_break) = bytes.iter().rposition(|b| matches!(b, b'\n' | b'\r')) else {
            self.unfinished.extend_from_slice(bytes);
            return Ok(Vec::new());
        };
        let mut lines = std::mem::take(&mut self.unfinished);
        lines.extend_from_slice(&bytes[..=last_break]);
        self.unfinished.extend_from_slice(&bytes[last_break + 1..]);
        Ok(lines)
    }
}

fn broken<E: std::error::Error>(provider: &str, err: EventStreamError<Cut<E>>) -> ProviderError {
    match err {
        EventStreamError::Transport(Cut::Transport(err)) => ProviderError::Network {
            provider: provider.to_owned(),
            message: format!("the response stream broke off: {}", error_chain(&err)),
        },
        EventStreamError::Transport(bound) => ProviderError::MalformedResponse {
            provider: provider.to_owned(),
            message: format!("{bound}; viga stopped reading the stream"),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn admit(lines: &mut BoundedLines, bytes: &[u8]) -> Result<Vec<u8>, Cut<std::io::Error>> {
        lines.admit(bytes)
    }

    #[test]
    fn only_whole_lines_are_handed_on() {
        let mut lines = BoundedLines::default();
        assert_eq!(admit(&mut lines, b"data: hel").unwrap(), b"");
        assert_eq!(
            admit(&mut lines, b"lo\r\n\r\nda").unwrap(),
            b"data: hello\r\n\r\n"
        );
        assert_eq!(admit(&mut lines, b"ta: x\n").unwrap(), b"data: x\n");
    }

    #[test]
    fn events_are_bounded_one_by_one_and_the_stream_in_all() {
        let mut lines = BoundedLines::default();
        let line = vec![b'x'; 1 << 20];
        // Many events, each far below the limit, whatever their line breaks.
        for separator in [&b"\n\n"[..], b"\r\r", b"\r\n\r\n"] {
            for _ in 0..10 {
                admit(&mut lines, &line).unwrap();
                admit(&mut lines, separator).unwrap();
            }
        }
        let mut lines = BoundedLines::default();
        let endless = (0..17).try_for_each(|_| admit(&mut lines, &line).map(drop));
        assert!(matches!(endless, Err(Cut::EventTooLarge)), "{endless:?}");

        let mut lines = BoundedLines::default();
        let event = [&line[..], b"\n\n"].concat();
        let total = (0..70).try_for_each(|_| admit(&mut lines, &event).map(drop));
        assert!(matches!(total, Err(Cut::StreamTooLarge)), "{total:?}");
    }
}
