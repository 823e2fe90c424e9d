//! SlideBench's reference-free scores: a vision-language model rates one picture of the
//! result (a slide, or a page's screenshot) on four criteria, text, image, layout and colour,
//! each an integer from 0 to 5, one request per criterion, as AutoPresent's evaluator asks
//! (`evaluate/reference_free_eval.py`; the text criterion also gets the result's texts). The
//! image criterion is left out where the reference shows no picture.
//!
//! It runs only when the evaluation is given a provider ([`crate::judge::Judge`], the same
//! one BlenderBench's judge is), and its scores are labelled as a judge's. Each answer must
//! be one JSON object that [`CriterionAnswer`]'s schema accepts; anything else is a failed
//! judgement of that criterion, never a score (AutoPresent reads an unparsable answer as 0;
//! see docs/eval.md).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use viga_protocol::event::ModelRole;
use viga_protocol::message::{ChatMessage, ContentPart, ImageData};
use viga_protocol::{ProtocolType, json_candidates, parse_json, schema_of};
use viga_provider::{ModelRequest, ResponseFormat};

use crate::judge::Judge;

/// The criteria, in the order AutoPresent lists them, with what each asks (in our words).
pub const CRITERIA: [(&str, &str); 4] = [
    (
        "text",
        "The title is short and clear about the main point; the body text is brief and concise, not crowded; font sizes, styles and colours are consistent and easy to read.",
    ),
    (
        "image",
        "Pictures are of good quality and sized in reasonable proportion. A result without pictures is not penalised for it.",
    ),
    (
        "layout",
        "Elements are aligned, do not overlap, keep enough space between them, and stay inside the slide or page.",
    ),
    (
        "color",
        "Colours contrast well, above all text against its background, and none is glaringly bright.",
    ),
];

const SYSTEM: &str = "You rate the design of one presentation slide or web page, shown as a picture, on one criterion. Give an integer from 0 to 5 (higher: the criterion is better met), using the whole range rather than only the good end, and judge only that criterion. Answer with one JSON object: {\"score\": <0-5>, \"justification\": \"<one or two sentences>\"}.";

/// The output cap of one answer: an integer and a sentence or two.
const MAX_TOKENS: u32 = 300;

/// One criterion's answer, as the model must write it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CriterionAnswer {
    /// 0 to 5, higher is better.
    #[schemars(range(min = 0, max = 5))]
    pub score: u8,
    pub justification: String,
}

impl ProtocolType for CriterionAnswer {
    const NAME: &'static str = "CriterionAnswer";
}

/// What the judge said about one criterion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum CriterionJudgement {
    Judged {
        score: u8,
        justification: String,
    },
    /// No valid answer (or the model could not be asked): no score, none made up.
    Failed {
        error: String,
    },
}

/// The four criteria's judgements of one result; `image` is `None` when it was left out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DesignJudgement {
    pub text: CriterionJudgement,
    pub image: Option<CriterionJudgement>,
    pub layout: CriterionJudgement,
    pub color: CriterionJudgement,
}

impl DesignJudgement {
    /// The criterion's score on AutoPresent's 0-100 scale (5 is 100), when it was judged.
    pub fn percent(&self, criterion: &str) -> Option<f64> {
        let judged = match criterion {
            "text" => Some(&self.text),
            "image" => self.image.as_ref(),
            "layout" => Some(&self.layout),
            "color" => Some(&self.color),
            _ => None,
        }?;
        match judged {
            CriterionJudgement::Judged { score, .. } => Some(f64::from(*score) * 20.0),
            CriterionJudgement::Failed { .. } => None,
        }
    }
}

/// Rates `picture` (PNG) of a result on every criterion; `texts` are the result's texts (for
/// the text criterion), `with_image` whether the image criterion applies.
pub async fn judge_design(
    judge: &Judge,
    what: &str,
    picture: &[u8],
    texts: &[String],
    with_image: bool,
) -> DesignJudgement {
    let mut judged = Vec::new();
    for (name, criterion) in CRITERIA {
        if name == "image" && !with_image {
            judged.push(None);
            continue;
        }
        let request = criterion_request(what, name, criterion, picture, texts);
        let answer = match judge.provider().complete(&request).await {
            Ok(response) => read_answer(&response.text),
            Err(err) => CriterionJudgement::Failed {
                error: format!("the judge's model could not be asked: {err}"),
            },
        };
        judged.push(Some(answer));
    }
    let mut judged = judged.into_iter();
    let mut next = || judged.next().flatten();
    let failed = || CriterionJudgement::Failed {
        error: "not asked".to_owned(),
    };
    let text = next().unwrap_or_else(failed);
    let image = next();
    let layout = next().unwrap_or_else(failed);
    let color = next().unwrap_or_else(failed);
    DesignJudgement {
        text,
        image,
        layout,
        color,
    }
}

/// The request for one criterion.
pub fn criterion_request(
    what: &str,
    name: &str,
    criterion: &str,
    picture: &[u8],
    texts: &[String],
) -> ModelRequest {
    let mut prompt = format!("Rate this {what} on the criterion \"{name}\": {criterion}");
    if name == "text" && !texts.is_empty() {
        prompt.push_str(&format!("\n\nThe texts in it:\n{}", texts.join("\n")));
    }
    let message = ChatMessage::user(vec![
        ContentPart::text(prompt),
        ContentPart::Image {
            image: ImageData::png(picture.to_vec()),
            label: Some(format!("the {what}")),
        },
    ]);
    let mut request = ModelRequest::for_role(ModelRole::Judge, SYSTEM, vec![message]);
    request.max_tokens = MAX_TOKENS;
    request.response_format = Some(ResponseFormat {
        name: "criterion_answer".to_owned(),
        schema: schema_of::<CriterionAnswer>(),
    });
    request
}

/// The whole text as the answer, else a fenced or embedded JSON object that passes the
/// schema.
pub fn read_answer(text: &str) -> CriterionJudgement {
    let answer = parse_json::<CriterionAnswer>(text.trim()).or_else(|first| {
        json_candidates(text)
            .find_map(|candidate| parse_json::<CriterionAnswer>(candidate).ok())
            .ok_or(first)
    });
    match answer {
        Ok(answer) => CriterionJudgement::Judged {
            score: answer.score,
            justification: answer.justification.chars().take(1000).collect(),
        },
        Err(err) => CriterionJudgement::Failed {
            error: format!(
                "the judge's answer is not a valid rating ({err}); it began: {:?}",
                text.trim().chars().take(300).collect::<String>()
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_checked_against_the_schema() {
        assert_eq!(
            read_answer("```json\n{\"score\": 4, \"justification\": \"clear\"}\n```"),
            CriterionJudgement::Judged {
                score: 4,
                justification: "clear".to_owned()
            }
        );
        for bad in [
            "4. The slide is clear.",
            "{\"score\": 9, \"justification\": \"x\"}",
        ] {
            assert!(
                matches!(read_answer(bad), CriterionJudgement::Failed { .. }),
                "{bad}"
            );
        }
    }
}
