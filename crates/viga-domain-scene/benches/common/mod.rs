//! What the loop's benchmarks share: a model that answers at once, so what they time is the
//! loop and Blender.

use async_trait::async_trait;
use viga_protocol::event::ModelRole;
use viga_protocol::message::ToolCall;
use viga_provider::{FinishReason, ModelRequest, ModelResponse, Provider, ProviderError};

/// Answers every role at once: the planner with `plan`, the generator with `program` in a
/// fence, the verifier with `end_process` and `verdict` (which should not accept, so the run
/// uses every iteration). `observe` hears each call's role as it is made.
pub struct InstantModel {
    pub plan: &'static str,
    pub program: String,
    pub verdict: serde_json::Value,
    pub observe: Box<dyn Fn(Option<ModelRole>) + Send + Sync>,
}

#[async_trait]
impl Provider for InstantModel {
    fn name(&self) -> &str {
        "instant"
    }
    fn model(&self) -> &str {
        "instant"
    }
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        (self.observe)(request.role);
        match request.role {
            Some(ModelRole::Verifier) => {
                let mut response = ModelResponse::text_only("", FinishReason::ToolCalls);
                response.tool_calls = vec![ToolCall {
                    id: "v".into(),
                    name: "end_process".into(),
                    arguments: self.verdict.clone(),
                }];
                Ok(response)
            }
            Some(ModelRole::Planner) => Ok(ModelResponse::text_only(self.plan, FinishReason::Stop)),
            _ => Ok(ModelResponse::text_only(
                format!("```python\n{}```", self.program),
                FinishReason::Stop,
            )),
        }
    }
}

/// The number in the environment variable `name`, or `default` when it is unset or not one.
pub fn env_number(name: &str, default: u32) -> u32 {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}
