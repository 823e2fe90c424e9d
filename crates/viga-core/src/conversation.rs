//! Follow-ups: a run that continues an earlier one ("now make it redder"). It starts from the
//! result as the earlier run left it, and the model sees the earlier turns of the
//! conversation (each request, its last plan or what it left, and its verdict) in a bounded
//! block beside the task. The turns are recorded in the run's settings (a scene run's
//! `args.json`; a Geometry Nodes run's `request.json`; the add-on agent's `args.json`), each
//! with its run folder, so a resumed follow-up, and the next one, see the same history, and a
//! front end can walk a conversation back run by run. Every kind of run keeps its own
//! conversations: a follow-up continues a run of its own kind.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use viga_memory::{iterations_in, read_run_log};
use viga_protocol::event::{RunEvent, StopReason};

use crate::folder::RunFolder;
use crate::{CoreError, RunConfig};

/// How many earlier turns the model is shown (the newest ones).
pub const TURNS_KEPT: usize = 4;
/// The longest a request, a plan or a verdict of an earlier turn is shown, in characters.
const TEXT_CHARS: usize = 600;

/// One earlier turn of a conversation, as the model is reminded of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EarlierTurn {
    /// What the person asked for.
    pub request: String,
    /// The last plan of that turn's run, if it planned.
    #[serde(default)]
    pub plan: Option<String>,
    /// What the turn left, in words, for runs without a plan: a Geometry Nodes run's final
    /// message and the steps it applied, the add-on agent's answer and the commands it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// Whether its verifier accepted the result.
    pub accepted: bool,
    /// What its verifier said last: the differences and suggestions left.
    #[serde(default)]
    pub verdict: Vec<String>,
    /// How that run ended, in a word (`accepted`, `max_iterations`, `cancelled`, `failed`).
    pub ended: String,
    /// Its run folder.
    pub run: PathBuf,
}

/// The turns a follow-up of the run in `previous` carries: the ones that run carried, then
/// itself, the newest [`TURNS_KEPT`].
pub fn turns_after(previous: &Path) -> Result<Vec<EarlierTurn>, CoreError> {
    let folder = RunFolder::open(previous)?;
    let (config, _) = folder.read_args()?;
    let log = read_run_log(&folder.events_path())?;
    let records = iterations_in(&log.events);
    let last = records.last();
    let ended = ended_word(&log.events);
    let feedback = last.and_then(|r| r.feedback.clone()).unwrap_or_default();
    let mut turns = config.conversation;
    turns.push(EarlierTurn {
        request: config.task,
        plan: records.iter().rev().find_map(|r| r.plan.clone()),
        result: None,
        accepted: feedback.accepted,
        verdict: feedback
            .visual_differences
            .into_iter()
            .chain(feedback.suggestions)
            .collect(),
        ended: ended.to_owned(),
        run: previous.to_path_buf(),
    });
    Ok(newest(turns))
}

/// The newest [`TURNS_KEPT`] of `turns`, oldest first.
pub fn newest(mut turns: Vec<EarlierTurn>) -> Vec<EarlierTurn> {
    let keep_from = turns.len().saturating_sub(TURNS_KEPT);
    turns.split_off(keep_from)
}

/// How a run ended, in the word an [`EarlierTurn`] keeps; `unfinished` when its log has no
/// end (a run that was killed).
pub fn ended_word(events: &[viga_protocol::event::TimedEvent]) -> &'static str {
    events
        .iter()
        .rev()
        .find_map(|e| match &e.event {
            RunEvent::RunFinished { stop, .. } => Some(stop_word(stop)),
            _ => None,
        })
        .unwrap_or("unfinished")
}

/// Where a follow-up starts: from the result the earlier run left (`final.blend`), from the
/// scene that run itself started from, or from a scene as it is now (a person's open scene,
/// or one named for the follow-up), which may differ from both. The model is told which.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StartFrom {
    #[default]
    Result,
    Base,
    Current,
}

impl StartFrom {
    /// Where the work starts, as the model is told it.
    fn words(self) -> &'static str {
        match self {
            Self::Result => "The work starts from the result as the last turn left it",
            Self::Base => {
                "The work starts again from the scene the last turn started from: the last turn's result is not in it"
            }
            Self::Current => {
                "The work starts from the scene as it is now, which may differ from the result the last turn left (look before you change it)"
            }
        }
    }
}

/// Makes `config` a follow-up of the run in `previous`: it carries the conversation's
/// earlier turns, and the earlier run's targets when it names none of its own. Returns the
/// scene to start from (`None`: an empty scene), which a scene domain takes as its base.
pub fn follow_up(
    previous: &Path,
    config: &mut RunConfig,
    from: StartFrom,
) -> Result<Option<PathBuf>, CoreError> {
    config.conversation = turns_after(previous)?;
    let folder = RunFolder::open(previous)?;
    let (earlier, domain) = folder.read_args()?;
    if config.targets.is_empty() {
        let copies = folder.target_copies(&earlier.targets);
        config.targets = earlier
            .targets
            .iter()
            .zip(copies)
            .map(|(spec, copy)| crate::TargetSpec {
                path: copy,
                ..spec.clone()
            })
            .collect();
    }
    config.starts_from = from;
    let result = folder.final_blend_path();
    Ok(match from {
        StartFrom::Result if result.is_file() => Some(result),
        StartFrom::Result => {
            return Err(CoreError::Config(format!(
                "{} left no result to continue from (no {}): its programs never ran to the end; continue from its starting scene instead (--from base)",
                previous.display(),
                crate::folder::FINAL_BLEND
            )));
        }
        StartFrom::Base => domain
            .settings
            .get("base_blend")
            .and_then(|base| base.as_str())
            .map(PathBuf::from),
        StartFrom::Current => None,
    })
}

/// How a run that stopped for `stop` ended, in a word.
pub fn stop_word(stop: &StopReason) -> &'static str {
    match stop {
        StopReason::Accepted => "accepted",
        StopReason::MaxIterations => "max_iterations",
        StopReason::GeneratorEnded { .. } => "generator_ended",
        StopReason::Cancelled => "cancelled",
        StopReason::TimeLimit { .. } => "time_limit",
        StopReason::Failed { .. } => "failed",
    }
}

/// The earlier turns as the model reads them; `None` for a run that starts a conversation.
/// Bounded: at most [`TURNS_KEPT`] turns are kept, and each text is cut to a few hundred
/// characters on one line.
pub fn earlier_turns_text(turns: &[EarlierTurn], from: StartFrom) -> Option<String> {
    if turns.is_empty() {
        return None;
    }
    let mut text = format!(
        "This request continues a conversation. {}; change what the new request asks for and keep the rest. Earlier turns, oldest first:",
        from.words()
    );
    for (number, turn) in turns.iter().enumerate() {
        let _ = write!(text, "\n{}. Request: {}", number + 1, cut(&turn.request));
        if let Some(plan) = &turn.plan {
            let _ = write!(text, "\n   Plan: {}", cut(plan));
        }
        if let Some(result) = &turn.result {
            let _ = write!(text, "\n   Result: {}", cut(result));
        }
        let verdict = if turn.accepted {
            "accepted".to_owned()
        } else if turn.verdict.is_empty() {
            format!("not accepted ({})", turn.ended)
        } else {
            format!("not accepted; {}", cut(&turn.verdict.join("; ")))
        };
        let _ = write!(text, "\n   Verdict: {verdict}");
    }
    Some(text)
}

/// `text` on one line, cut to [`TEXT_CHARS`] characters.
pub fn cut(text: &str) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= TEXT_CHARS {
        return one_line;
    }
    let mut short: String = one_line.chars().take(TEXT_CHARS - 3).collect();
    short.push_str("...");
    short
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earlier_turns_read_in_order_and_are_bounded() {
        let mut config = RunConfig::new("now make it redder");
        assert_eq!(
            earlier_turns_text(&config.conversation, StartFrom::Result),
            None
        );
        config.conversation = (0..2)
            .map(|n| EarlierTurn {
                request: format!("request {n}"),
                plan: Some("a plan\nwith lines".to_owned()),
                result: (n == 1).then(|| "points on the plane".to_owned()),
                accepted: n == 1,
                verdict: vec!["too small".to_owned(), "make it bigger".to_owned()],
                ended: "max_iterations".to_owned(),
                run: PathBuf::from(format!("runs/{n}")),
            })
            .collect();
        config.conversation[0].request = "x".repeat(2000);
        let text = earlier_turns_text(&config.conversation, StartFrom::Result).unwrap();
        assert!(
            text.contains("starts from the result as the last turn left it"),
            "{text}"
        );
        assert!(text.contains("1. Request: xxx"), "{text}");
        assert!(text.contains("...\n   Plan: a plan with lines"), "{text}");
        assert!(
            text.contains("Verdict: not accepted; too small; make it bigger"),
            "{text}"
        );
        assert!(
            text.contains(
                "2. Request: request 1\n   Plan: a plan with lines\n   Result: points on the plane\n   Verdict: accepted"
            )
        );
        assert!(text.len() < 2000, "each text is cut");
        let again = earlier_turns_text(&config.conversation, StartFrom::Base).unwrap();
        assert!(
            again.contains("starts again from the scene the last turn started from"),
            "{again}"
        );
        assert!(!again.contains("as the last turn left it"), "{again}");
    }
}
