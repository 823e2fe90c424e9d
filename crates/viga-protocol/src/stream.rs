//! What `viga <command> --events jsonl` prints: one [`StreamLine`] per line, each with the
//! stream's version, for programs that follow a run (the Blender add-on's panel). Every kind
//! of run (a scene run, a Geometry Nodes run, the add-on agent) prints the same lines and ends
//! with one `finished` line whose [`StopReason`] is the run's own.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::event::{ModelRole, StopReason, TimedEvent};

/// The version of the stream's lines; a reader refuses lines of another.
pub const STREAM_VERSION: u32 = 1;

/// One line of the stream: its version and what it says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StreamRecord {
    /// [`STREAM_VERSION`] of the program that wrote it.
    pub v: u32,
    #[serde(flatten)]
    pub line: StreamLine,
}

impl StreamRecord {
    pub fn new(line: StreamLine) -> Self {
        Self {
            v: STREAM_VERSION,
            line,
        }
    }
}

/// What a line of the stream says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StreamLine {
    /// The run's folder, as soon as it exists.
    RunFolder { path: PathBuf },
    /// One of the run's events, as its log records it.
    Event { event: TimedEvent },
    /// Model text as it arrives (streaming providers), before the event that records the
    /// whole reply; not in the run's log.
    ModelText {
        /// The iteration (the agent's step) it belongs to.
        index: u32,
        role: ModelRole,
        /// The next piece of the reply.
        delta: String,
    },
    /// The run's HTML report.
    Report { path: PathBuf },
    /// A message for the person that is not an event (a warning before the run starts, what
    /// to do after a failure).
    Notice { message: String },
    /// An error that ended the command before or outside its run.
    Error { message: String },
    /// The last line: how the run ended, what to apply, and the command's exit code.
    Finished {
        stop: StopReason,
        /// More words about the end: the agent's answer, a Geometry Nodes run's last message,
        /// what to do after a failure.
        #[serde(default)]
        message: String,
        /// The program a person can apply to their scene, when the run left one.
        #[serde(default)]
        final_program: Option<PathBuf>,
        exit_code: u8,
    },
}

crate::validate::plain_protocol_types!(StreamRecord);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::FailureKind;

    #[test]
    fn lines_carry_their_version_and_kind() {
        let finished = StreamRecord::new(StreamLine::Finished {
            stop: StopReason::failed("no key", FailureKind::ProviderAuth),
            message: "what to do: set OPENAI_API_KEY".to_owned(),
            final_program: None,
            exit_code: 3,
        });
        let json = serde_json::to_value(&finished).unwrap();
        assert_eq!(json["v"], 1);
        assert_eq!(json["kind"], "finished");
        assert_eq!(json["stop"]["reason"], "failed");
        assert_eq!(json["stop"]["kind"], "provider_auth");
        let read: StreamRecord = crate::parse_json(&json.to_string()).unwrap();
        assert_eq!(read, finished);
        let delta = r#"{"v": 1, "kind": "model_text", "index": 2, "role": "verifier", "delta": "The crate"}"#;
        assert!(matches!(
            crate::parse_json::<StreamRecord>(delta).unwrap().line,
            StreamLine::ModelText { index: 2, .. }
        ));
        assert!(
            crate::parse_json::<StreamRecord>(r#"{"kind": "notice", "message": "x"}"#).is_err(),
            "a line without its version"
        );
    }
}
