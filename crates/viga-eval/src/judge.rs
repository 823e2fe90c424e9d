//! BlenderBench's reference-free judge: a vision-language model rates how well a result does
//! its task, on task completion, visual quality, spatial accuracy and detail accuracy, each an
//! integer from 0 to 5 (higher is better), looking at the task text, the picture of the goal
//! the agent was shown and the render of the result's Camera1.
//!
//! It runs only when the evaluation is given a provider for it, and its scores are labelled as
//! a judge's wherever they are shown. The answer is untrusted: it must be one JSON object that
//! [`JudgeAnswer`]'s schema accepts (checked by `viga_protocol::parse_json`); anything else is
//! recorded as a failed judgement, never read as a score.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use viga_protocol::event::ModelRole;
use viga_protocol::message::{ChatMessage, ContentPart, ImageData};
use viga_protocol::{ProtocolType, json_candidates, parse_json, schema_of};
use viga_provider::{ModelRequest, Provider, ResponseFormat};

use crate::layout::Instance;

/// The judge's instructions.
pub const JUDGE_PROMPT: &str = include_str!("../prompts/judge.md");

/// The judge's output cap: four integers and a sentence or two.
const JUDGE_MAX_TOKENS: u32 = 1024;

/// A justification is kept up to this many characters: it is the judge's text, shown in
/// reports.
const JUSTIFICATION_LIMIT: usize = 1000;

/// How much of a malformed answer a failed judgement keeps.
const ANSWER_EXCERPT: usize = 300;

/// The judge's answer, as the model must write it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JudgeAnswer {
    /// Whether the task is done, 0 to 5.
    #[schemars(range(min = 0, max = 5))]
    pub task_completion: u8,
    /// Lighting, shadows and rendering quality, 0 to 5.
    #[schemars(range(min = 0, max = 5))]
    pub visual_quality: u8,
    /// Positions, orientations, relations and viewpoint, 0 to 5.
    #[schemars(range(min = 0, max = 5))]
    pub spatial_accuracy: u8,
    /// Details, shapes, materials and colours, 0 to 5.
    #[schemars(range(min = 0, max = 5))]
    pub detail_accuracy: u8,
    /// Why, in a sentence or two.
    pub justification: String,
}

impl ProtocolType for JudgeAnswer {
    const NAME: &'static str = "JudgeAnswer";
}

/// The four ratings of one judged result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JudgeScores {
    pub task_completion: u8,
    pub visual_quality: u8,
    pub spatial_accuracy: u8,
    pub detail_accuracy: u8,
}

impl JudgeScores {
    /// The mean of the four, as VIGA's evaluator averages its criteria.
    pub fn mean(&self) -> f64 {
        f64::from(
            u16::from(self.task_completion)
                + u16::from(self.visual_quality)
                + u16::from(self.spatial_accuracy)
                + u16::from(self.detail_accuracy),
        ) / 4.0
    }
}

/// What the judge said about one result (`scores.json`'s `judge`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case", deny_unknown_fields)]
pub enum Judgement {
    Judged {
        scores: JudgeScores,
        justification: String,
    },
    /// The judge did not give a valid answer (or could not be reached): no score is recorded,
    /// and none is made up.
    Failed { error: String },
    /// There was nothing to judge: the proposal is not executable, so it has no render.
    NotJudged { reason: String },
}

impl Judgement {
    pub fn scores(&self) -> Option<&JudgeScores> {
        match self {
            Judgement::Judged { scores, .. } => Some(scores),
            _ => None,
        }
    }
}

/// A vision-language model as the judge.
#[derive(Clone)]
pub struct Judge {
    provider: Arc<dyn Provider>,
}

impl std::fmt::Debug for Judge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Judge")
            .field("model", &self.label())
            .finish()
    }
}

impl Judge {
    pub fn new(provider: Arc<dyn Provider>) -> Self {
        Self { provider }
    }

    /// The model the judge asks.
    pub fn provider(&self) -> &Arc<dyn Provider> {
        &self.provider
    }

    /// `provider/model`, recorded in `eval.json` so results judged by different models are
    /// never mixed.
    pub fn label(&self) -> String {
        format!("{}/{}", self.provider.name(), self.provider.model())
    }

    /// Rates the render of a result. `reference` is the picture of the goal the agent was
    /// shown, `render` the result's Camera1 render; both PNG.
    pub async fn judge(
        &self,
        instance: &Instance,
        reference: Vec<u8>,
        render: Vec<u8>,
    ) -> Judgement {
        let request = request(instance, reference, render);
        match self.provider.complete(&request).await {
            Ok(response) => read_answer(&response.text),
            Err(err) => Judgement::Failed {
                error: format!("the judge's model could not be asked: {err}"),
            },
        }
    }
}

/// The request the judge sends: the instructions, the task, the goal picture and the render,
/// with [`JudgeAnswer`]'s schema as the response format.
pub fn request(instance: &Instance, reference: Vec<u8>, render: Vec<u8>) -> ModelRequest {
    let level = match instance.task.level_title() {
        Some(title) => format!("{} ({title})", instance.task),
        None => instance.task.name().to_owned(),
    };
    let task = match &instance.description {
        Some(text) => text.clone(),
        None => "(the instance ships no task text: judge by the TARGET picture)".to_owned(),
    };
    let message = ChatMessage::user(vec![
        ContentPart::text(format!("Task, {level}: {task}")),
        ContentPart::Image {
            image: ImageData::png(reference),
            label: Some("TARGET: the goal the agent was shown".to_owned()),
        },
        ContentPart::Image {
            image: ImageData::png(render),
            label: Some("GENERATED: the result, seen from Camera1".to_owned()),
        },
        ContentPart::text("Rate GENERATED on the four criteria; answer with the JSON object only."),
    ]);
    let mut request = ModelRequest::for_role(ModelRole::Judge, JUDGE_PROMPT, vec![message]);
    request.max_tokens = JUDGE_MAX_TOKENS;
    request.response_format = Some(ResponseFormat {
        name: "judge_answer".to_owned(),
        schema: schema_of::<JudgeAnswer>(),
    });
    request
}

/// Reads the judge's answer: the whole text as JSON, else a fenced or embedded JSON object.
/// Every candidate goes through the schema; the first one that passes is the judgement.
pub fn read_answer(text: &str) -> Judgement {
    let whole = parse_json::<JudgeAnswer>(text.trim());
    let answer = match whole {
        Ok(answer) => Ok(answer),
        Err(first) => json_candidates(text)
            .find_map(|candidate| parse_json::<JudgeAnswer>(candidate).ok())
            .ok_or(first),
    };
    match answer {
        Ok(answer) => Judgement::Judged {
            scores: JudgeScores {
                task_completion: answer.task_completion,
                visual_quality: answer.visual_quality,
                spatial_accuracy: answer.spatial_accuracy,
                detail_accuracy: answer.detail_accuracy,
            },
            justification: cut(&answer.justification, JUSTIFICATION_LIMIT),
        },
        Err(err) => Judgement::Failed {
            error: format!(
                "the judge's answer is not a valid judgement ({err}); it began: {:?}",
                cut(text.trim(), ANSWER_EXCERPT)
            ),
        },
    }
}

/// The first `limit` characters of `text`, with an ellipsis when cut.
fn cut(text: &str, limit: usize) -> String {
    match text.char_indices().nth(limit) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}
