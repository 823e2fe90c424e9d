//! Follow-ups of Geometry Nodes runs ("now make the cubes smaller"): a run that continues an
//! earlier one carries the conversation's earlier turns (each request, what it left: the
//! final message and the steps it applied, and how it ended) in its `request.json`, and the
//! model reads them, bounded, before the new request. It starts from the scene as it is now
//! (attached: the person's scene, whatever they kept of the earlier result) or, in viga's own
//! Blender, from the earlier run's result ([`start_scene`]).

use std::path::{Path, PathBuf};

use serde_json::Value;
use viga_core::conversation::{EarlierTurn, StartFrom, newest, stop_word};
use viga_protocol::event::StopReason;

use crate::GnError;
use crate::run::{FINAL_BLEND, GnOutcome, OUTCOME_FILE, REQUEST_FILE};

/// What a follow-up takes from the earlier run in its folder.
#[derive(Debug, Clone, PartialEq)]
pub struct FollowUp {
    /// The earlier turns, the earlier run last, the newest few
    /// ([`viga_core::conversation::TURNS_KEPT`]).
    pub turns: Vec<EarlierTurn>,
    /// The object the earlier run worked on, when it named one.
    pub object: Option<String>,
}

/// Reads the Geometry Nodes run in `previous` as the last turn of a conversation.
pub fn follow_up(previous: &Path) -> Result<FollowUp, GnError> {
    let request = read_request(previous)?;
    let mut turns: Vec<EarlierTurn> = request
        .get("conversation")
        .cloned()
        .map(serde_json::from_value)
        .transpose()
        .map_err(|err| {
            refused(
                previous,
                format!("its {REQUEST_FILE} has no valid conversation: {err}"),
            )
        })?
        .unwrap_or_default();
    let outcome = read_outcome(previous)?;
    let (result, accepted, verdict, ended) = match &outcome {
        Some(outcome) => {
            let steps: Vec<String> = outcome
                .applied
                .iter()
                .map(|step| step.id().to_owned())
                .collect();
            let mut result = outcome.final_message.clone();
            if !steps.is_empty() {
                result.push_str(&format!("; steps applied: {}", steps.join(", ")));
            }
            let verdict = match (&outcome.stop, &outcome.last_report) {
                (StopReason::Failed { message, .. }, _) => vec![message.clone()],
                (_, Some(report)) if !report.success => report.messages.clone(),
                _ => Vec::new(),
            };
            (
                result,
                outcome.stop == StopReason::Accepted,
                verdict,
                stop_word(&outcome.stop),
            )
        }
        None => (String::new(), false, Vec::new(), "unfinished"),
    };
    turns.push(EarlierTurn {
        request: text_field(&request, "request").unwrap_or_default(),
        plan: None,
        result: (!result.is_empty()).then_some(result),
        accepted,
        verdict,
        ended: ended.to_owned(),
        run: previous.to_path_buf(),
    });
    Ok(FollowUp {
        turns: newest(turns),
        object: text_field(&request, "object"),
    })
}

/// The scene a follow-up in viga's own Blender starts from: the earlier run's result
/// (`final.blend`, saved when it was done), or the .blend that run itself opened (`None`: it
/// started from an empty scene).
pub fn start_scene(previous: &Path, from: StartFrom) -> Result<Option<PathBuf>, GnError> {
    match from {
        StartFrom::Result => {
            let result = previous.join(FINAL_BLEND);
            if result.is_file() {
                Ok(Some(result))
            } else {
                Err(refused(
                    previous,
                    format!(
                        "it left no result to continue from (no {FINAL_BLEND}: the run was not done); continue from its starting scene instead (--from base)"
                    ),
                ))
            }
        }
        StartFrom::Base => Ok(text_field(&read_request(previous)?, "blend").map(PathBuf::from)),
        // The scene as it is now is not the earlier run's to give.
        StartFrom::Current => Ok(None),
    }
}

fn read_request(folder: &Path) -> Result<Value, GnError> {
    let path = folder.join(REQUEST_FILE);
    let text = std::fs::read_to_string(&path).map_err(|err| {
        refused(
            folder,
            format!("it is not a Geometry Nodes run folder ({REQUEST_FILE}: {err}); a follow-up continues a run of its own kind"),
        )
    })?;
    serde_json::from_str(&text).map_err(|err| {
        refused(
            folder,
            format!("its {REQUEST_FILE} is not valid JSON: {err}"),
        )
    })
}

/// The run's outcome; `None` for a run that was killed before it ended.
fn read_outcome(folder: &Path) -> Result<Option<GnOutcome>, GnError> {
    let path = folder.join(OUTCOME_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|err| refused(folder, format!("its {OUTCOME_FILE} is not valid: {err}"))),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(GnError::file(path, err)),
    }
}

fn text_field(value: &Value, field: &str) -> Option<String> {
    value.get(field).and_then(Value::as_str).map(str::to_owned)
}

fn refused(folder: &Path, message: String) -> GnError {
    GnError::FollowUp {
        path: folder.to_path_buf(),
        message,
    }
}
