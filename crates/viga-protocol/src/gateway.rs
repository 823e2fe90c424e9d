//! The messages of the viga server's own door (`/`), seed 004's message flow for programs:
//! a client says who it is (its user and that user's token), then lists the add-on tools and
//! sends add-on commands, each answered by one response. Every message is one JSON text frame
//! with a `type` and a `message_id`, used once.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::secret::Secret;

/// What a client sends the gateway.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum GatewayIn {
    /// The first message: whose requests these are.
    Hello {
        message_id: String,
        /// Seed 004's clients call it `username`.
        #[serde(alias = "username")]
        user: String,
        token: Secret,
    },
    /// The add-on tools this user's Blender offers.
    ListTools { message_id: String },
    /// Run one command of a registered add-on on the user's Blender.
    AddonCommand {
        message_id: String,
        addon_id: String,
        command: String,
        params: Value,
        /// Seed 004 tags every command with its user; when given, it must be the user this
        /// connection said hello as.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        username: Option<String>,
    },
}

impl GatewayIn {
    pub fn message_id(&self) -> &str {
        match self {
            Self::Hello { message_id, .. }
            | Self::ListTools { message_id }
            | Self::AddonCommand { message_id, .. } => message_id,
        }
    }
}

/// What the gateway sends a client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum GatewayOut {
    /// The answer to the client's message of this id (`None` when it could not be read): a
    /// `result` when `ok`, else an `error`. An add-on command's result is
    /// `{"result": <what the command returned>, "scene": <the scene summary, as objects>}`.
    Response {
        message_id: Option<String>,
        ok: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
}

crate::validate::plain_protocol_types!(GatewayIn, GatewayOut);

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn seed_004s_hello_is_read_and_its_token_never_prints() {
        let hello: GatewayIn = serde_json::from_value(json!({"type": "hello", "message_id": "h1",
            "username": "alice", "token": "tok-alice"}))
        .unwrap();
        let GatewayIn::Hello { user, token, .. } = &hello else {
            panic!("{hello:?}");
        };
        assert_eq!((user.as_str(), token.expose()), ("alice", "tok-alice"));
        assert!(!format!("{hello:?}").contains("tok-alice"), "{hello:?}");
        assert_eq!(
            serde_json::to_value(&hello).unwrap(),
            json!({"type": "hello", "message_id": "h1", "user": "alice", "token": "tok-alice"})
        );
        assert_eq!(hello.message_id(), "h1");
    }

    #[test]
    fn a_response_is_the_wire_form() {
        let refused = GatewayOut::Response {
            message_id: None,
            ok: false,
            error: Some("unreadable message".to_owned()),
            result: None,
        };
        assert_eq!(
            serde_json::to_string(&serde_json::to_value(&refused).unwrap()).unwrap(),
            r#"{"error":"unreadable message","message_id":null,"ok":false,"type":"response"}"#
        );
    }
}
