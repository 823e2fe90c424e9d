//! The reference-free judge with the scripted provider (no model, no Blender): the request it
//! sends (snapshotted), the schema its answer must meet (snapshotted), and what it makes of
//! answers good and bad. A bad answer is a failed judgement, never a score.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::json;
use viga_eval::judge::{Judge, JudgeAnswer, JudgeScores, Judgement};
use viga_eval::{Instance, Task};
use viga_protocol::event::ModelRole;
use viga_protocol::schema_of;
use viga_provider::scripted::Script;
use viga_provider::{ModelRequest, ModelResponse, Provider, ProviderError, ScriptedProvider};

/// The scripted provider, keeping every request it was sent.
struct Recording {
    inner: ScriptedProvider,
    requests: Mutex<Vec<ModelRequest>>,
}

#[async_trait]
impl Provider for Recording {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn model(&self) -> &str {
        self.inner.model()
    }

    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        self.requests.lock().unwrap().push(request.clone());
        self.inner.complete(request).await
    }
}

fn instance() -> Instance {
    Instance {
        name: "level1-camera1".to_owned(),
        task: Task::Level1,
        number: 1,
        dir: PathBuf::new(),
        blend: PathBuf::new(),
        start_py: PathBuf::new(),
        goal_py: PathBuf::new(),
        views: 1,
        description: Some("Move Camera1 to the target's viewpoint.".to_owned()),
        visual_prompt: None,
    }
}

/// A judge whose model answers `texts` in turn, each request required to carry the judge's
/// instructions and both pictures.
fn judge(texts: &[&str]) -> (Judge, Arc<Recording>) {
    let turns: Vec<_> = texts
        .iter()
        .map(|text| {
            json!({"expect": {"system_contains": "judge of a 3D scene-editing benchmark", "min_images": 2},
                   "response": {"text": text, "finish_reason": "stop"}})
        })
        .collect();
    let script: Script = serde_json::from_value(json!({
        "description": "scripted stand-in for a judge",
        "turns": turns
    }))
    .unwrap();
    let recording = Arc::new(Recording {
        inner: ScriptedProvider::new("scripted:judge", script),
        requests: Mutex::new(Vec::new()),
    });
    (Judge::new(recording.clone()), recording)
}

fn answer(task_completion: serde_json::Value) -> String {
    json!({"task_completion": task_completion, "visual_quality": 4, "spatial_accuracy": 3,
           "detail_accuracy": 2, "justification": "The viewpoint is close."})
    .to_string()
}

#[tokio::test]
async fn the_judge_sends_both_pictures_and_the_task_with_its_answer_schema() {
    let (judge, recording) = judge(&[&answer(json!(5))]);
    let judgement = judge
        .judge(
            &instance(),
            b"reference png".to_vec(),
            b"render png".to_vec(),
        )
        .await;
    assert_eq!(
        judgement,
        Judgement::Judged {
            scores: JudgeScores {
                task_completion: 5,
                visual_quality: 4,
                spatial_accuracy: 3,
                detail_accuracy: 2
            },
            justification: "The viewpoint is close.".to_owned()
        }
    );
    assert_eq!(judgement.scores().unwrap().mean(), 3.5);
    let requests = recording.requests.lock().unwrap();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].role, Some(ModelRole::Judge));
    insta::assert_json_snapshot!("judge_request", requests[0]);
    insta::assert_json_snapshot!("judge_answer_schema", schema_of::<JudgeAnswer>());
}

#[tokio::test]
async fn bad_answers_are_failed_judgements_and_fenced_ones_are_read() {
    let fenced = format!(
        "My rating:\n```json\n{}\n```\nThat is all.",
        answer(json!(4))
    );
    let missing = json!({"task_completion": 4, "visual_quality": 4, "spatial_accuracy": 3,
                         "justification": "no detail score"})
    .to_string();
    let extra = json!({"task_completion": 4, "visual_quality": 4, "spatial_accuracy": 3,
                       "detail_accuracy": 2, "justification": "x", "overall": 5})
    .to_string();
    let texts = [
        fenced.as_str(),
        &answer(json!(6)),
        &answer(json!(-1)),
        &answer(json!(4.5)),
        &answer(json!("4")),
        &missing,
        &extra,
        "4. The cabinet is where the task wants it.",
        "",
    ];
    let (judge, _) = judge(&texts);
    let mut outcomes = Vec::new();
    for _ in texts {
        outcomes.push(judge.judge(&instance(), vec![1], vec![2]).await);
    }
    assert_eq!(outcomes[0].scores().unwrap().task_completion, 4);
    // VIGA's own evaluator reads "4. The cabinet..." as a 4 and anything else as 0; here
    // neither is a score.
    let expected_paths = [
        "/task_completion",
        "/task_completion",
        "/task_completion",
        "/task_completion",
        "detail_accuracy",
        "overall",
        "malformed JSON",
        "malformed JSON",
    ];
    for (outcome, path) in outcomes[1..].iter().zip(expected_paths) {
        let Judgement::Failed { error } = outcome else {
            panic!("not a failed judgement: {outcome:?}");
        };
        assert!(
            error.starts_with("the judge's answer is not a valid judgement")
                && error.contains(path),
            "{path}: {error}"
        );
    }

    // A model that cannot be asked (here: the script has run out) is a failed judgement too.
    let Judgement::Failed { error } = judge.judge(&instance(), vec![1], vec![2]).await else {
        panic!("a provider error must be a failed judgement");
    };
    assert!(error.contains("could not be asked"), "{error}");
}

#[test]
fn a_long_justification_is_cut_and_a_long_bad_answer_is_quoted_in_part() {
    let long = "x".repeat(5000);
    let judged = viga_eval::judge::read_answer(
        &json!({"task_completion": 1, "visual_quality": 1, "spatial_accuracy": 1,
                "detail_accuracy": 1, "justification": long})
        .to_string(),
    );
    let Judgement::Judged { justification, .. } = judged else {
        panic!("{judged:?}");
    };
    assert_eq!(justification.chars().count(), 1001);
    let Judgement::Failed { error } = viga_eval::judge::read_answer(&long) else {
        panic!("prose is no judgement");
    };
    assert!(error.len() < 800, "{}", error.len());
}
