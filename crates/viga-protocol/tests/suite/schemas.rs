//! Every public schema is a snapshot: any change to the wire shows up in review.

use viga_protocol::bridge::{BridgeReply, BridgeRequest};
use viga_protocol::event::{RunEvent, TimedEvent};
use viga_protocol::gateway::{GatewayIn, GatewayOut};
use viga_protocol::gn::{GateReport, GnResponse};
use viga_protocol::iteration::IterationRecord;
use viga_protocol::manifest::AddonManifest;
use viga_protocol::message::{ChatMessage, ToolChoice, ToolSpec};
use viga_protocol::schema_of;
use viga_protocol::server::{ChatIn, ChatOut, FromBlender, ToBlender};
use viga_protocol::stream::StreamRecord;

macro_rules! snapshot_schemas {
    ($($name:ident => $ty:ty),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                insta::assert_json_snapshot!(stringify!($name), schema_of::<$ty>());
            }
        )*
    };
}

snapshot_schemas! {
    chat_message => ChatMessage,
    tool_spec => ToolSpec,
    tool_choice => ToolChoice,
    iteration_record => IterationRecord,
    run_event => RunEvent,
    timed_event => TimedEvent,
    gn_response => GnResponse,
    gate_report => GateReport,
    addon_manifest => AddonManifest,
    bridge_request => BridgeRequest,
    bridge_reply => BridgeReply,
    stream_record => StreamRecord,
    from_blender => FromBlender,
    to_blender => ToBlender,
    chat_in => ChatIn,
    chat_out => ChatOut,
    gateway_in => GatewayIn,
    gateway_out => GatewayOut,
}

#[test]
fn every_schema_is_draft_2020_12() {
    for schema in [
        schema_of::<GnResponse>(),
        schema_of::<AddonManifest>(),
        schema_of::<RunEvent>(),
    ] {
        assert_eq!(
            schema["$schema"],
            "https://json-schema.org/draft/2020-12/schema"
        );
    }
}
