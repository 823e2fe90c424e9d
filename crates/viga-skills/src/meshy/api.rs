//! Meshy's REST API as viga uses it: the endpoints of each task stage, their documented
//! prices, and the answers (a created task's id; a task's state) read as untrusted JSON.

use reqwest::Url;
use serde::Deserialize;
use serde_json::Value;

use super::MeshyConfig;
use crate::registry::ToolError;

/// A task a request may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stage {
    /// `POST /v2/text-to-3d` with `mode: preview`: an untextured mesh from words.
    TextPreview,
    /// `POST /v2/text-to-3d` with `mode: refine`: the preview textured.
    TextRefine,
    /// `POST /v1/image-to-3d`: a model from a picture.
    ImageTo3d,
    /// `POST /v1/rigging`: a skeleton bound to the model.
    Rigging,
    /// `POST /v1/animations`: an action of the animation library applied to the rig.
    Animation,
}

impl Stage {
    /// The API path of the stage's tasks (a task is `<path>/<id>`).
    pub(super) fn path(self) -> &'static [&'static str] {
        match self {
            Self::TextPreview | Self::TextRefine => &["v2", "text-to-3d"],
            Self::ImageTo3d => &["v1", "image-to-3d"],
            Self::Rigging => &["v1", "rigging"],
            Self::Animation => &["v1", "animations"],
        }
    }

    /// How the stage is noted in a request's folder.
    pub(super) fn key(self) -> &'static str {
        match self {
            Self::TextPreview => "text_preview",
            Self::TextRefine => "text_refine",
            Self::ImageTo3d => "image_to_3d",
            Self::Rigging => "rigging",
            Self::Animation => "animation",
        }
    }

    pub(super) fn describe(self) -> &'static str {
        match self {
            Self::TextPreview => "text-to-3d preview",
            Self::TextRefine => "text-to-3d refine",
            Self::ImageTo3d => "image-to-3d",
            Self::Rigging => "rigging",
            Self::Animation => "animation",
        }
    }

    /// The credits Meshy's API reference gives for the stage (Meshy 6 is `latest`), for tasks
    /// whose answer does not say what they consumed.
    pub(super) fn documented_credits(self, config: &MeshyConfig) -> f64 {
        let meshy_6 = matches!(config.ai_model.as_str(), "latest" | "meshy-6");
        match self {
            Self::TextPreview if meshy_6 => 20.0,
            Self::TextPreview => 5.0,
            Self::TextRefine => 10.0,
            Self::ImageTo3d => match (meshy_6, config.texture) {
                (true, true) => 30.0,
                (true, false) => 20.0,
                (false, true) => 15.0,
                (false, false) => 5.0,
            },
            Self::Rigging => 5.0,
            Self::Animation => 3.0,
        }
    }
}

/// The longest task id taken (Meshy's are UUIDs).
const MAX_TASK_ID: usize = 128;
/// The longest failure message quoted.
const MAX_MESSAGE: usize = 300;

/// The id in the answer to a task's creation (`{"result": "<id>"}`).
pub(super) fn created_task_id(answer: &[u8]) -> Result<String, String> {
    let value: Value =
        serde_json::from_slice(answer).map_err(|err| format!("it is not JSON ({err})"))?;
    let id = value
        .get("result")
        .and_then(Value::as_str)
        .ok_or("it names no task (no \"result\" string)")?;
    checked_id(id)
}

fn checked_id(id: &str) -> Result<String, String> {
    let plain = !id.is_empty()
        && id.len() <= MAX_TASK_ID
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if plain {
        Ok(id.to_owned())
    } else {
        let shown: String = id.chars().take(40).collect();
        Err(format!("the task id {shown:?} is not a plain id"))
    }
}

/// A task as its state says, once it succeeded.
#[derive(Debug, Clone, Deserialize)]
pub(super) struct Task {
    pub(super) id: String,
    #[serde(default)]
    model_urls: Option<ModelUrls>,
    #[serde(default)]
    result: Option<Value>,
    /// What the task cost, where Meshy says.
    #[serde(default)]
    pub(super) consumed_credits: Option<f64>,
}

#[derive(Debug, Clone, Deserialize)]
struct ModelUrls {
    #[serde(default)]
    glb: Option<String>,
}

/// How a task ended.
#[derive(Debug)]
pub(super) enum TaskOutcome {
    Succeeded(Task),
    /// `FAILED` or `CANCELED`, with Meshy's `task_error.message`.
    Failed {
        status: String,
        message: String,
    },
}

/// What one look at a task found.
#[derive(Debug)]
pub(super) enum Polled {
    Done(TaskOutcome),
    /// `PENDING` or `IN_PROGRESS`.
    Running {
        status: String,
        progress: Option<f64>,
    },
}

/// A task's state from Meshy's answer to `GET <path>/<id>`.
pub(super) fn task_state(answer: &[u8]) -> Result<Polled, String> {
    let value: Value =
        serde_json::from_slice(answer).map_err(|err| format!("it is not JSON ({err})"))?;
    let status = value
        .get("status")
        .and_then(Value::as_str)
        .ok_or("it has no \"status\"")?
        .to_owned();
    match status.as_str() {
        "PENDING" | "IN_PROGRESS" => Ok(Polled::Running {
            status,
            progress: value.get("progress").and_then(Value::as_f64),
        }),
        "SUCCEEDED" => {
            let task: Task = serde_json::from_value(value)
                .map_err(|err| format!("its task is not the documented object ({err})"))?;
            checked_id(&task.id)?;
            Ok(Polled::Done(TaskOutcome::Succeeded(task)))
        }
        "FAILED" | "CANCELED" => {
            let message = value
                .pointer("/task_error/message")
                .and_then(Value::as_str)
                .map(|message| {
                    message
                        .chars()
                        .filter(|c| !c.is_control())
                        .take(MAX_MESSAGE)
                        .collect::<String>()
                })
                .filter(|message| !message.trim().is_empty())
                .unwrap_or_else(|| "Meshy gives no reason".to_owned());
            Ok(Polled::Done(TaskOutcome::Failed { status, message }))
        }
        other => {
            let shown: String = other.chars().take(40).collect();
            Err(format!("its status {shown:?} is none Meshy documents"))
        }
    }
}

impl Task {
    /// The GLB of a text or image task.
    pub(super) fn model_glb(&self, stage: Stage) -> Result<Url, ToolError> {
        let url = self
            .model_urls
            .as_ref()
            .and_then(|urls| urls.glb.as_deref())
            .ok_or_else(|| {
                ToolError::Recoverable(format!(
                    "Meshy's {} task {} succeeded but offers no GLB; ask again, or model the object with Blender Python",
                    stage.describe(),
                    self.id
                ))
            })?;
        parse_url(url, &self.id)
    }

    /// A URL in the task's `result` (rigging and animation tasks), at `path`.
    pub(super) fn result_url(&self, path: &[&str]) -> Result<Url, ToolError> {
        let mut value = self.result.as_ref();
        for key in path {
            value = value.and_then(|v| v.get(key));
        }
        let url = value.and_then(Value::as_str).ok_or_else(|| {
            ToolError::Recoverable(format!(
                "Meshy's task {} succeeded but its result has no {}; ask again, or model the object with Blender Python",
                self.id,
                path.join(".")
            ))
        })?;
        parse_url(url, &self.id)
    }
}

fn parse_url(url: &str, id: &str) -> Result<Url, ToolError> {
    Url::parse(url).map_err(|err| {
        let shown: String = url.chars().take(80).collect();
        ToolError::Recoverable(format!(
            "Meshy's task {id} gives the model URL {shown:?}, which is not a URL ({err})"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_ids_are_plain() {
        assert_eq!(
            created_task_id(br#"{"result": "018a210d-8ba4-705c-b111-1f1776f7f578"}"#).unwrap(),
            "018a210d-8ba4-705c-b111-1f1776f7f578"
        );
        for bad in [
            &br#"{"result": "../../balance"}"#[..],
            br#"{"result": ""}"#,
            br#"{"id": "x"}"#,
            b"<html>",
        ] {
            assert!(
                created_task_id(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn task_states_are_read_as_documented() {
        assert!(matches!(
            task_state(br#"{"id": "a", "status": "IN_PROGRESS", "progress": 40}"#).unwrap(),
            Polled::Running { progress: Some(p), .. } if p == 40.0
        ));
        let Polled::Done(TaskOutcome::Failed { status, message }) = task_state(
            br#"{"id": "a", "status": "FAILED", "task_error": {"message": "The server is busy.\u001b[31m"}}"#,
        )
        .unwrap() else {
            panic!("a failed task");
        };
        assert_eq!(
            (status.as_str(), message.as_str()),
            ("FAILED", "The server is busy.[31m")
        );
        assert!(task_state(br#"{"id": "a", "status": "EXPLODED"}"#).is_err());
        let Polled::Done(TaskOutcome::Succeeded(task)) = task_state(
            br#"{"id": "a", "status": "SUCCEEDED", "model_urls": {"glb": "https://assets.meshy.ai/a/model.glb"}, "consumed_credits": 20}"#,
        )
        .unwrap() else {
            panic!("a task that succeeded");
        };
        assert_eq!(task.consumed_credits, Some(20.0));
        assert_eq!(
            task.model_glb(Stage::TextPreview).unwrap().as_str(),
            "https://assets.meshy.ai/a/model.glb"
        );
    }

    #[test]
    fn documented_prices_follow_the_model_and_texture() {
        let config = MeshyConfig::default();
        assert_eq!(Stage::TextPreview.documented_credits(&config), 20.0);
        assert_eq!(Stage::ImageTo3d.documented_credits(&config), 30.0);
        let older = MeshyConfig {
            ai_model: "meshy-5".to_owned(),
            texture: false,
            ..MeshyConfig::default()
        };
        assert_eq!(Stage::TextPreview.documented_credits(&older), 5.0);
        assert_eq!(Stage::ImageTo3d.documented_credits(&older), 5.0);
    }
}
