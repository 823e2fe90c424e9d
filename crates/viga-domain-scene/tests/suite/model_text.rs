//! Model text as it arrives: a front end that asks for it gets each piece of a streamed
//! reply before the event that records the whole reply, and the run's log keeps only the
//! events. On the fake Blender, with a model that streams its replies in pieces.

use std::sync::Arc;

use async_trait::async_trait;
use viga_core::{RunUpdate, start};
use viga_protocol::event::{ModelRole, RunEvent, StopReason};
use viga_provider::{
    ModelRequest, ModelResponse, Provider, ProviderError, ResponseStream, ScriptedProvider,
    StreamEvent,
};
use viga_testkit::within;

use super::{GOOD_CODE, code, config, provider, scene, text, verdict};
use viga_testkit::blender::FakeBlender;

/// The scripted model, streaming each reply's text in pieces of at most `PIECE` characters.
#[derive(Debug)]
struct InPieces(Arc<ScriptedProvider>);

const PIECE: usize = 4;

#[async_trait]
impl Provider for InPieces {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn model(&self) -> &str {
        self.0.model()
    }
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        self.0.complete(request).await
    }
    async fn stream(&self, request: &ModelRequest) -> Result<ResponseStream, ProviderError> {
        let response = self.0.complete(request).await?;
        let chars: Vec<char> = response.text.chars().collect();
        let pieces: Vec<String> = chars.chunks(PIECE).map(|c| c.iter().collect()).collect();
        let (sender, stream) = ResponseStream::channel(pieces.len() + 1);
        for piece in pieces {
            sender.try_send(Ok(StreamEvent::TextDelta(piece))).unwrap();
        }
        sender
            .try_send(Ok(StreamEvent::Completed(response)))
            .unwrap();
        Ok(stream)
    }
}

#[tokio::test]
async fn a_front_end_that_asks_gets_model_text_before_the_event_that_records_it() {
    within(std::time::Duration::from_secs(10), "the run", async {
        let output = tempfile::tempdir().unwrap();
        let blender = Arc::new(FakeBlender::new());
        let model = provider(vec![
            text("1. a crate on the floor"),
            code(GOOD_CODE),
            verdict(true),
        ]);
        let mut run = start(
            config(1),
            Arc::new(InPieces(model)),
            scene(blender),
            output.path(),
        )
        .unwrap();
        run.stream_model_text();
        let mut updates = Vec::new();
        while let Some(update) = run.next_update().await {
            updates.push(update);
        }
        let outcome = run.wait().await.unwrap();
        assert_eq!(outcome.stop, StopReason::Accepted);

        // The plan arrives in pieces, all of them before the planner's ModelCalled.
        let planner_called = updates
            .iter()
            .position(|u| {
                matches!(u, RunUpdate::Event(e) if matches!(e.event, RunEvent::ModelCalled { role: ModelRole::Planner, .. }))
            })
            .unwrap();
        let plan_pieces: Vec<(usize, &str)> = updates
            .iter()
            .enumerate()
            .filter_map(|(at, u)| match u {
                RunUpdate::ModelText(t) if t.role == ModelRole::Planner => {
                    assert_eq!(t.index, 1);
                    Some((at, t.delta.as_str()))
                }
                _ => None,
            })
            .collect();
        assert!(plan_pieces.len() > 1, "{plan_pieces:?}");
        assert!(plan_pieces.iter().all(|(at, _)| *at < planner_called));
        let plan: String = plan_pieces.iter().map(|(_, piece)| *piece).collect();
        assert_eq!(plan, "1. a crate on the floor");
        assert!(
            updates.iter().any(
                |u| matches!(u, RunUpdate::ModelText(t) if t.role == ModelRole::Generator && t.delta.contains("Here"))
            ),
            "the program streams too"
        );

        // The log keeps the events alone.
        let log = std::fs::read_to_string(outcome.folder.join("events.jsonl")).unwrap();
        let events = updates
            .iter()
            .filter(|u| matches!(u, RunUpdate::Event(_)))
            .count();
        assert_eq!(log.lines().count(), events, "{log}");
        assert!(!log.contains("model_text") && !log.contains("\"delta\""));
    })
    .await;
}

#[tokio::test]
async fn without_asking_there_is_no_model_text() {
    within(std::time::Duration::from_secs(10), "the run", async {
        let output = tempfile::tempdir().unwrap();
        let model = provider(vec![text("1. a crate"), code(GOOD_CODE), verdict(true)]);
        let mut run = start(
            config(1),
            Arc::new(InPieces(model)),
            scene(Arc::new(FakeBlender::new())),
            output.path(),
        )
        .unwrap();
        while let Some(update) = run.next_update().await {
            assert!(matches!(update, RunUpdate::Event(_)), "{update:?}");
        }
        assert_eq!(run.wait().await.unwrap().stop, StopReason::Accepted);
    })
    .await;
}
