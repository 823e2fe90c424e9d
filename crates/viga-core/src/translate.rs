//! The verifier's free-form camera instructions, translated by the model into a pose that
//! is validated before use.

use std::sync::Arc;

use async_trait::async_trait;
use viga_protocol::bridge::CameraPose;
use viga_protocol::event::ModelRole;
use viga_protocol::message::ChatMessage;
use viga_provider::{ModelRequest, Provider};
use viga_skills::ToolError;
use viga_skills::camera::ViewState;
use viga_skills::context::InstructionTranslator;

use crate::prompts::fill;

pub struct ProviderTranslator {
    provider: Arc<dyn Provider>,
    template: String,
    calls: Arc<ModelCalls>,
}

/// One model call made outside the loop's own calls (a camera instruction translated inside
/// a tool), for the loop to record as its `ModelCalled` event and count in its tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelCallRecord {
    pub role: ModelRole,
    pub latency_ms: f64,
    pub usage: viga_protocol::message::TokenUsage,
}

/// The calls a translator made since the loop last took them.
#[derive(Debug, Default)]
pub struct ModelCalls(std::sync::Mutex<Vec<ModelCallRecord>>);

impl ModelCalls {
    fn record(&self, call: ModelCallRecord) {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(call);
    }

    /// The calls made since the last take.
    pub fn take(&self) -> Vec<ModelCallRecord> {
        std::mem::take(
            &mut *self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }
}

impl std::fmt::Debug for ProviderTranslator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderTranslator")
            .field("provider", &self.provider.name())
            .finish()
    }
}

impl ProviderTranslator {
    pub fn new(provider: Arc<dyn Provider>, template: String) -> Self {
        Self {
            provider,
            template,
            calls: Arc::default(),
        }
    }

    /// Where its model calls are kept for the loop to record (see [`ModelCalls`]).
    pub fn calls(&self) -> Arc<ModelCalls> {
        Arc::clone(&self.calls)
    }
}

fn format_vector(v: [f64; 3]) -> String {
    format!("[{:.3}, {:.3}, {:.3}]", v[0], v[1], v[2])
}

#[async_trait]
impl InstructionTranslator for ProviderTranslator {
    async fn translate(
        &self,
        instruction: &str,
        current: &ViewState,
    ) -> Result<CameraPose, ToolError> {
        let prompt = fill(
            &self.template,
            &[
                ("instruction", instruction.to_owned()),
                ("location", format_vector(current.location())),
                ("target", format_vector(current.target)),
                ("distance", format!("{:.3}", current.distance)),
                ("azimuth", format!("{:.1}", current.azimuth_deg)),
                ("elevation", format!("{:.1}", current.elevation_deg)),
            ],
        );
        let mut request = ModelRequest::for_role(
            ModelRole::Investigate,
            "You translate camera instructions into JSON camera poses.",
            vec![ChatMessage::user_text(prompt)],
        );
        request.max_tokens = 256;
        let started = std::time::Instant::now();
        let response = self.provider.complete(&request).await.map_err(|err| {
            ToolError::Recoverable(format!(
                "the camera instruction could not be translated: {err}"
            ))
        })?;
        self.calls.record(ModelCallRecord {
            role: ModelRole::Investigate,
            latency_ms: started.elapsed().as_secs_f64() * 1000.0,
            usage: response.usage,
        });
        let text = response.text;
        let json = text
            .find('{')
            .zip(text.rfind('}'))
            .filter(|(start, end)| start < end)
            .map(|(start, end)| &text[start..=end])
            .ok_or_else(|| {
                ToolError::Recoverable(format!(
                    "the camera translation held no JSON pose: {text:?}"
                ))
            })?;
        viga_protocol::parse_json::<CameraPose>(json).map_err(|err| {
            ToolError::Recoverable(format!("the translated camera pose is invalid: {err}"))
        })
    }
}
