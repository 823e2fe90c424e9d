use tokio::sync::mpsc;
use viga_protocol::message::ToolCall;

use crate::{ModelResponse, ProviderError};

/// One piece of a streamed response.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    TextDelta(String),
    /// A tool call whose arguments are complete.
    ToolCall(ToolCall),
    /// The whole response; always the last event of a successful stream.
    Completed(ModelResponse),
}

/// A response arriving piece by piece. Fed by a channel, so adapters parse on their own task
/// and consumers need no stream combinators.
#[derive(Debug)]
pub struct ResponseStream {
    events: mpsc::Receiver<Result<StreamEvent, ProviderError>>,
}

impl ResponseStream {
    /// A stream and the sender an adapter feeds it through.
    pub fn channel(capacity: usize) -> (mpsc::Sender<Result<StreamEvent, ProviderError>>, Self) {
        let (sender, events) = mpsc::channel(capacity.max(1));
        (sender, Self { events })
    }

    /// A stream that replays a finished response.
    pub fn from_response(response: ModelResponse) -> Self {
        let mut events = Vec::new();
        if !response.text.is_empty() {
            events.push(Ok(StreamEvent::TextDelta(response.text.clone())));
        }
        events.extend(
            response
                .tool_calls
                .iter()
                .cloned()
                .map(|call| Ok(StreamEvent::ToolCall(call))),
        );
        events.push(Ok(StreamEvent::Completed(response)));
        let (sender, stream) = Self::channel(events.len());
        for event in events {
            // The channel has room for every event, so this never waits or fails.
            let _ = sender.try_send(event);
        }
        stream
    }

    /// The next event; `None` after the last.
    pub async fn next(&mut self) -> Option<Result<StreamEvent, ProviderError>> {
        self.events.recv().await
    }

    /// Drains the stream and returns the completed response.
    pub async fn collect(mut self) -> Result<ModelResponse, ProviderError> {
        while let Some(event) = self.next().await {
            if let StreamEvent::Completed(response) = event? {
                return Ok(response);
            }
        }
        Err(ProviderError::MalformedResponse {
            provider: "stream".to_owned(),
            message: "the stream ended without a completed response".to_owned(),
        })
    }
}
