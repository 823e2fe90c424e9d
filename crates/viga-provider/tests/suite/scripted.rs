use serde_json::json;
use viga_protocol::message::{ChatMessage, ContentPart, ImageData};
use viga_provider::scripted::{Script, ScriptedProvider};
use viga_provider::{ErrorKind, ModelRequest, Provider};

fn script(turns: serde_json::Value) -> Script {
    serde_json::from_value(json!({"description": "test", "turns": turns})).unwrap()
}

fn reply(text: &str) -> serde_json::Value {
    json!({"text": text, "finish_reason": "stop"})
}

#[tokio::test]
async fn replays_turns_in_order_then_says_it_ran_out() {
    let provider = ScriptedProvider::new(
        "scripted:t",
        script(json!([{"response": reply("one")}, {"response": reply("two")}])),
    );
    let request = ModelRequest::new("sys", vec![ChatMessage::user_text("hi")]);
    assert_eq!(provider.complete(&request).await.unwrap().text, "one");
    assert_eq!(provider.complete(&request).await.unwrap().text, "two");
    let err = provider.complete(&request).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Script);
    assert!(
        err.to_string().contains("has 2 turns and all were used"),
        "{err}"
    );
    assert_eq!(provider.name(), "scripted");
}

#[tokio::test]
async fn a_request_that_does_not_match_is_refused_and_not_consumed() {
    let provider = ScriptedProvider::new(
        "scripted:t",
        script(json!([{
            "expect": {"system_contains": "verifier", "last_message_contains": "render", "min_images": 1},
            "response": reply("looks right")
        }])),
    );
    let wrong_system = ModelRequest::new("generator", vec![ChatMessage::user_text("render")]);
    let err = provider.complete(&wrong_system).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("system prompt does not contain \"verifier\""),
        "{err}"
    );
    let no_image = ModelRequest::new("verifier", vec![ChatMessage::user_text("the render")]);
    let err = provider.complete(&no_image).await.unwrap_err();
    assert!(
        err.to_string().contains("at least 1 images, found 0"),
        "{err}"
    );
    let good = ModelRequest::new(
        "verifier",
        vec![ChatMessage::user(vec![
            ContentPart::text("the render"),
            ContentPart::Image {
                image: ImageData::png(vec![1, 2, 3]),
                label: None,
            },
        ])],
    );
    assert_eq!(provider.complete(&good).await.unwrap().text, "looks right");
    assert_eq!(provider.turns_used(), 1);
}

#[tokio::test]
async fn a_broken_script_file_names_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broken.json");
    std::fs::write(&path, "{\"turns\": [\n  {\"respons\": {}}\n]}").unwrap();
    let err = ScriptedProvider::from_file(&path).unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("broken.json") && message.contains("line 2"),
        "{message}"
    );
}

#[tokio::test]
async fn the_default_stream_replays_complete() {
    let provider = ScriptedProvider::new(
        "scripted:t",
        script(json!([{"response": reply("streamed")}])),
    );
    let mut stream = provider
        .stream(&ModelRequest::new("s", vec![]))
        .await
        .unwrap();
    let first = stream.next().await.unwrap().unwrap();
    assert_eq!(
        first,
        viga_provider::StreamEvent::TextDelta("streamed".into())
    );
    assert_eq!(stream.collect().await.unwrap().text, "streamed");
}

#[tokio::test]
async fn any_message_contains_looks_at_every_message() {
    let provider = ScriptedProvider::new(
        "scripted:t",
        script(json!([{"expect": {"any_message_contains": "start.py"}, "response": reply("ok")}])),
    );
    let without = ModelRequest::new(
        "s",
        vec![ChatMessage::user_text("a"), ChatMessage::user_text("b")],
    );
    let err = provider.complete(&without).await.unwrap_err();
    assert!(
        err.to_string().contains("no message contains \"start.py\""),
        "{err}"
    );
    let with = ModelRequest::new(
        "s",
        vec![
            ChatMessage::user_text("the start.py program"),
            ChatMessage::user_text("b"),
        ],
    );
    assert_eq!(provider.complete(&with).await.unwrap().text, "ok");
}
