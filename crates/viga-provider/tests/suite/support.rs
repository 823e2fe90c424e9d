//! Helpers shared by the adapter tests: fixtures, configs pointed at the local server, a
//! conversation with images and tools, and image checks on the bodies we send.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use image::{DynamicImage, GenericImageView, Rgba, RgbaImage};
use serde_json::{Value, json};
use viga_protocol::message::{
    ChatMessage, ContentPart, ImageData, ToolCall, ToolChoice, ToolResult, ToolSpec,
};
use viga_provider::{
    ImageLimits, ModelRequest, Provider, ProviderConfig, ProviderError, ProviderKind, RetryPolicy,
    StreamEvent, Timeouts, build_provider_with_env,
};

pub const KEY_ENV: &str = "VIGA_TEST_KEY";
pub const KEY: &str = "sk-test-0123456789";

pub fn fixture(path: &str) -> String {
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/providers")
        .join(path);
    std::fs::read_to_string(&file).unwrap_or_else(|err| panic!("{}: {err}", file.display()))
}

/// A config for `kind` at the test server, with millisecond retries and short timeouts.
pub fn config(kind: ProviderKind, server_url: &str) -> ProviderConfig {
    let version = match kind {
        ProviderKind::Gemini => "v1beta",
        _ => "v1",
    };
    ProviderConfig {
        base_url: Some(format!("{server_url}/{version}")),
        api_key_env: Some(KEY_ENV.to_owned()),
        timeouts: Timeouts {
            connect: Duration::from_secs(5),
            request: Duration::from_secs(20),
            stream_idle: Duration::from_secs(5),
            stream_total: Duration::from_secs(20),
        },
        retry: RetryPolicy {
            max_attempts: 3,
            initial_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(5),
            max_total_wait: Duration::from_secs(5),
        },
        images: ImageLimits {
            max_side: 256,
            ..ImageLimits::default()
        },
        ..ProviderConfig::new(kind, model_for(kind))
    }
}

pub fn model_for(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::OpenAi => "gpt-4o",
        ProviderKind::Anthropic => "claude-sonnet-4-5",
        ProviderKind::Gemini => "gemini-2.5-flash",
        ProviderKind::OpenAiCompatible => "qwen2.5vl:7b",
        ProviderKind::Scripted => "script",
    }
}

pub fn build(config: &ProviderConfig) -> Arc<dyn Provider> {
    build_provider_with_env(config, |name| (name == KEY_ENV).then(|| KEY.to_owned())).unwrap()
}

/// A PNG of the given size: a colour gradient, so it is not trivially compressible.
pub fn png(width: u32, height: u32) -> ImageData {
    let image = RgbaImage::from_fn(width, height, |x, y| {
        Rgba([(x % 256) as u8, (y % 256) as u8, ((x + y) % 256) as u8, 255])
    });
    let mut data = Vec::new();
    DynamicImage::ImageRgba8(image)
        .write_to(
            &mut std::io::Cursor::new(&mut data),
            image::ImageFormat::Png,
        )
        .unwrap();
    ImageData::png(data)
}

/// The conversation every adapter is snapshot with: a target image, a tool call, a tool
/// result carrying a render, and a tool to call.
pub fn conversation() -> ModelRequest {
    let mut request = ModelRequest::new(
        "You write Blender Python.",
        vec![
            ChatMessage::user(vec![
                ContentPart::text("Make the scene match the target."),
                ContentPart::Image {
                    image: png(1024, 512),
                    label: Some("target".to_owned()),
                },
            ]),
            ChatMessage::assistant(vec![
                ContentPart::text("Adding a cube."),
                ContentPart::ToolCall(ToolCall {
                    id: "call_1".to_owned(),
                    name: "run_script".to_owned(),
                    arguments: json!({"code": "import bpy\nbpy.ops.mesh.primitive_cube_add()"}),
                }),
            ]),
            ChatMessage::user(vec![
                ContentPart::ToolResult(ToolResult {
                    call_id: "call_1".to_owned(),
                    text: "ran in 0.2 s".to_owned(),
                    images: vec![png(300, 300)],
                    is_error: false,
                }),
                ContentPart::text("Compare the render with the target."),
            ]),
        ],
    );
    request.tools = vec![ToolSpec {
        name: "run_script".to_owned(),
        description: "Run Python in Blender and render the scene.".to_owned(),
        parameters: json!({
            "type": "object",
            "properties": {"code": {"type": "string"}},
            "required": ["code"],
            "additionalProperties": false
        }),
    }];
    request.tool_choice = ToolChoice::Auto;
    request.max_tokens = 1024;
    request.temperature = Some(0.2);
    request.stop = vec!["</done>".to_owned()];
    request
}

pub fn hello() -> ModelRequest {
    ModelRequest::new("sys", vec![ChatMessage::user_text("hello")])
}

/// Replaces every base64 image in a request body by `<media/type WxH>` and returns the
/// sizes, in order: the snapshot stays readable and the test sees what was really sent.
pub fn redact_images(body: &mut Value) -> Vec<(u32, u32)> {
    let mut sizes = Vec::new();
    redact(body, &mut sizes);
    sizes
}

fn describe(media_type: &str, base64: &str, sizes: &mut Vec<(u32, u32)>) -> String {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(base64)
        .unwrap();
    let (width, height) = image::load_from_memory(&bytes).unwrap().dimensions();
    sizes.push((width, height));
    format!("<{media_type} {width}x{height}>")
}

fn redact(value: &mut Value, sizes: &mut Vec<(u32, u32)>) {
    match value {
        Value::String(text) if text.starts_with("data:image/") => {
            let (head, data) = text.split_once(";base64,").unwrap();
            let media_type = head.trim_start_matches("data:").to_owned();
            *text = format!(
                "data:{media_type};base64,{}",
                describe(&media_type, data, sizes)
            );
        }
        Value::Object(map) => {
            let media_type = map
                .get("media_type")
                .or_else(|| map.get("mime_type"))
                .and_then(Value::as_str)
                .map(str::to_owned);
            if let (Some(media_type), Some(Value::String(data))) = (media_type, map.get_mut("data"))
            {
                *data = describe(&media_type, data, sizes);
            }
            for child in map.values_mut() {
                redact(child, sizes);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| redact(item, sizes)),
        _ => {}
    }
}

/// Every event of a stream, the error (if any) last.
pub async fn drain(
    provider: &dyn Provider,
    request: &ModelRequest,
) -> (Vec<StreamEvent>, Option<ProviderError>) {
    let mut stream = provider.stream(request).await.unwrap();
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        match event {
            Ok(event) => events.push(event),
            Err(err) => return (events, Some(err)),
        }
    }
    (events, None)
}

pub fn text_of(events: &[StreamEvent]) -> String {
    events
        .iter()
        .filter_map(|event| match event {
            StreamEvent::TextDelta(text) => Some(text.as_str()),
            _ => None,
        })
        .collect()
}
