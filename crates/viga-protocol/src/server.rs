//! The messages of the viga server's two doors besides the gateway's own (`/`): `/blender`,
//! where a person's Blender (the viga add-on) dials in, and `/chat`, where the web page (or any
//! other front end) sends a user's requests to the agent and watches them being carried out.
//! Every message is one JSON text frame with a `type` and a `message_id`; a message id is used
//! once (a message sent again with the same id is answered, never run again).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::bridge::{BridgeCommand, BridgeReply};
use crate::secret::Secret;
use crate::stream::StreamRecord;

/// Where a person's Blender connects.
pub const BLENDER_PATH: &str = "/blender";
/// Where the chat page connects.
pub const CHAT_PATH: &str = "/chat";
/// The longest message id accepted.
pub const MAX_MESSAGE_ID_CHARS: usize = 128;
/// Close code: another Blender of the same user connected; the replaced one should not dial
/// again by itself.
pub const CLOSE_REPLACED: u16 = 4001;
/// Close code: the hello was refused for good (an unknown user or a wrong token).
pub const CLOSE_REFUSED: u16 = 4003;

/// What a dialled-in Blender sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum FromBlender {
    /// The first message: whose Blender this is. `instance` names this session of the add-on;
    /// a message the server sent before a reconnect is sent again only to the same instance.
    Hello {
        message_id: String,
        username: String,
        token: Secret,
        instance: String,
        blender_version: String,
    },
    /// The add-ons enabled in this Blender, as the bridge's `list_addons` lists them: sent
    /// once connected and again whenever an add-on is enabled or disabled.
    Registry { message_id: String, listing: Value },
    /// The answer to the server's message of this id: the bridge's own reply.
    Response {
        message_id: String,
        reply: BridgeReply,
    },
}

/// What the server sends a dialled-in Blender.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ToBlender {
    /// The hello was accepted: this Blender now serves `user`'s requests.
    Welcome { message_id: String, user: String },
    /// The hello was refused; with `retry` false the add-on stops dialling (a wrong token).
    Refused {
        message_id: String,
        message: String,
        retry: bool,
    },
    /// Run one command of an enabled add-on on Blender's main thread as one undo step
    /// (`undo_step` names it). The seed's own message: `username` is the user whose agent
    /// sends it.
    AddonCommand {
        message_id: String,
        addon_id: String,
        command: String,
        params: Value,
        username: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        undo_step: Option<String>,
    },
    /// One of the bridge's reading and looking commands (the add-on refuses any other).
    Request {
        message_id: String,
        request: BridgeCommand,
    },
}

/// What the chat page sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ChatIn {
    /// The first message: the user and their token.
    Hello {
        message_id: String,
        username: String,
        token: Secret,
    },
    /// A request in the user's words, for the agent. `username`, when given, must be the
    /// user of the hello.
    Query {
        message_id: String,
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        username: Option<String>,
    },
    /// Stop the request `query_id` (the message id of its query).
    Cancel {
        message_id: String,
        query_id: String,
    },
    /// The person chooses a Blender the server runs for them, while their own is gone.
    UseServerBlender { message_id: String },
    /// After reconnecting: how the request `query_id` went. The answer's `state` is
    /// `running` (its progress goes on), `finished` (its recorded lines follow, the last a
    /// `finished` line; one the server stopped in the middle of is ended as failed) or
    /// `unknown` (the server has no record of it).
    Recover {
        message_id: String,
        query_id: String,
    },
}

/// What the server sends the chat page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ChatOut {
    /// The answer to the page's message of this id (`None` when it could not be read).
    Response {
        message_id: Option<String>,
        ok: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// Which Blender the user's requests go to and what it offers: after the hello, and
    /// whenever it changes.
    Blender { status: BlenderStatus },
    /// How a request goes: the agent's run as the lines of its event stream (tool calls with
    /// their arguments and results, warnings), ending with a `finished` line whose message
    /// is the answer.
    Progress {
        query_id: String,
        record: StreamRecord,
    },
    /// A request of the user's was started (from this page or another): its text, so every
    /// page shows what is being carried out.
    Request { query_id: String, text: String },
    /// A look at the user's scene after a step that changed it, as a PNG.
    View {
        query_id: String,
        step: u32,
        width: u32,
        height: u32,
        png_base64: String,
    },
}

/// Which kind of Blender serves a user.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum BlenderKind {
    /// The user's own Blender, dialled in through the viga add-on.
    Desktop,
    /// A Blender the server starts for the user (contained), when theirs is not connected.
    Server,
    /// None: the user's Blender is not connected and the server starts none.
    None,
}

/// A user's Blender as the page shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BlenderStatus {
    pub kind: BlenderKind,
    /// Blender's version, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blender_version: Option<String>,
    /// The add-on tools the agent is offered there (known once the Blender listed them).
    pub tools: Vec<OfferedTool>,
    /// Add-ons that are there but not offered, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
    /// A sentence for the person: what is connected, or what to do.
    pub note: String,
    /// The person's own Blender was connected and is gone, and the server can run one for
    /// them instead: the page offers the choice (`use_server_blender`); until it is made,
    /// requests wait for their own.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub server_blender_offered: bool,
}

/// One add-on tool as the page lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OfferedTool {
    pub addon: String,
    pub name: String,
    pub description: String,
    /// Its parameters, each as `name: type` (`?` after the name when optional).
    pub parameters: Vec<String>,
}

crate::validate::plain_protocol_types!(FromBlender, ToBlender, ChatIn, ChatOut);

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::parse_json;

    #[test]
    fn the_seed_addon_command_is_the_wire_form() {
        let command = ToBlender::AddonCommand {
            message_id: "m1".into(),
            addon_id: "object_placer".into(),
            command: "place_object_relative".into(),
            params: json!({"object1_name": "Chair"}),
            username: "alice".into(),
            undo_step: None,
        };
        assert_eq!(
            serde_json::to_value(&command).unwrap(),
            json!({"type": "addon_command", "message_id": "m1", "addon_id": "object_placer",
                   "command": "place_object_relative", "params": {"object1_name": "Chair"},
                   "username": "alice"})
        );
        let request = ToBlender::Request {
            message_id: "m2".into(),
            request: BridgeCommand::SceneInfo {
                offset: 0,
                limit: 10,
            },
        };
        let wire = serde_json::to_value(&request).unwrap();
        assert_eq!(wire["request"]["command"], "scene_info");
        assert_eq!(parse_json::<ToBlender>(&wire.to_string()).unwrap(), request);
    }

    #[test]
    fn a_query_is_read_and_a_hello_without_a_token_is_not() {
        let query: ChatIn =
            parse_json(r#"{"type": "query", "message_id": "q1", "text": "put the lamp left"}"#)
                .unwrap();
        assert!(matches!(query, ChatIn::Query { ref text, .. } if text == "put the lamp left"));
        let err = parse_json::<ChatIn>(r#"{"type": "hello", "message_id": "h", "username": "a"}"#)
            .unwrap_err();
        assert!(err.to_string().contains("token"), "{err}");
    }
}
