//! Untrusted JSON never panics a parser: `parse_json` of every protocol type (model replies,
//! bridge frames, run logs, add-on manifests, connection files) over arbitrary text and over
//! arbitrary JSON values, deep nesting included. Each property runs a bounded number of cases,
//! so the suite's time stays fixed.

use proptest::prelude::*;
use serde_json::Value;
use viga_protocol::bridge::{BridgeReply, BridgeRequest, CameraPose, ConnectionInfo};
use viga_protocol::event::{RunEvent, TimedEvent};
use viga_protocol::gn::{GateReport, GnResponse};
use viga_protocol::iteration::{ExecutionResult, Feedback, IterationRecord};
use viga_protocol::manifest::AddonManifest;
use viga_protocol::message::{ChatMessage, ToolCall, ToolChoice, ToolResult, ToolSpec};
use viga_protocol::parse_json;

const CASES: u32 = 256;

/// Parses `text` as every protocol type; any outcome but a panic is fine.
fn parse_as_everything(text: &str) {
    let _ = parse_json::<BridgeRequest>(text);
    let _ = parse_json::<BridgeReply>(text);
    let _ = parse_json::<ConnectionInfo>(text);
    let _ = parse_json::<CameraPose>(text);
    let _ = parse_json::<RunEvent>(text);
    let _ = parse_json::<TimedEvent>(text);
    let _ = parse_json::<GnResponse>(text);
    let _ = parse_json::<GateReport>(text);
    let _ = parse_json::<ExecutionResult>(text);
    let _ = parse_json::<Feedback>(text);
    let _ = parse_json::<IterationRecord>(text);
    let _ = parse_json::<AddonManifest>(text);
    let _ = parse_json::<ChatMessage>(text);
    let _ = parse_json::<ToolSpec>(text);
    let _ = parse_json::<ToolCall>(text);
    let _ = parse_json::<ToolResult>(text);
    let _ = parse_json::<ToolChoice>(text);
}

/// Any JSON value, a few levels deep, with the field names the protocol uses mixed in, so
/// values reach past the first check into the schemas and the types' own invariants.
fn json_value() -> impl Strategy<Value = Value> {
    let names = prop_oneof![
        Just("version".to_owned()),
        Just("protocol_version".to_owned()),
        Just("type".to_owned()),
        Just("command".to_owned()),
        Just("kind".to_owned()),
        Just("steps".to_owned()),
        Just("id".to_owned()),
        Just("payload".to_owned()),
        Just("ops".to_owned()),
        Just("tools".to_owned()),
        Just("addon_info".to_owned()),
        Just("ai_integration".to_owned()),
        "[a-z_]{1,8}",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("JSON has no NaN", |f| f.is_finite())
            .prop_map(Value::from),
        Just(Value::from(1)),
        "[ -~]{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 64, 8, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((names.clone(), inner), 0..6)
                .prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn arbitrary_text_never_panics(text in any::<String>()) {
        parse_as_everything(&text);
    }

    #[test]
    fn arbitrary_json_never_panics(value in json_value()) {
        parse_as_everything(&value.to_string());
    }
}

#[test]
fn deep_nesting_is_refused_not_a_crash() {
    for depth in [64, 1_000, 100_000] {
        let text = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        parse_as_everything(&text);
        let objects = format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth));
        parse_as_everything(&objects);
    }
}
