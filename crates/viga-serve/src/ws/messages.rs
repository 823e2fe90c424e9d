//! The gateway's messages and what it does with each: hello, list_tools and seed 004's
//! addon_command.

use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use viga_blender::BlenderCommands as _;
use viga_protocol::Secret;
use viga_protocol::gateway::{GatewayIn, GatewayOut};
use viga_skills::ToolError;

use super::Gateway;
use super::replay::MAX_MESSAGE_ID_BYTES;
use super::sessions::{Lease, Session, SessionRefused};

/// Objects of the scene summary a command's reply carries.
const SCENE_OBJECTS: u32 = 200;

/// One answer for an unknown user and for a wrong token, so a client learns nothing about
/// which user names exist.
pub(super) const REFUSED_HELLO: &str = "unknown user or wrong token";

pub(super) fn respond(message_id: Option<&str>, outcome: Result<Value, String>) -> Message {
    let message_id = message_id.map(str::to_owned);
    let response = match outcome {
        Ok(result) => GatewayOut::Response {
            message_id,
            ok: true,
            result: Some(result),
            error: None,
        },
        Err(error) => GatewayOut::Response {
            message_id,
            ok: false,
            result: None,
            error: Some(error),
        },
    };
    // Through a JSON value, whose keys are sorted: the bytes the gateway always sent. Only a
    // map with keys that are no strings fails to convert, and no response holds one.
    let body = serde_json::to_value(response)
        .unwrap_or_else(|err| json!({"type": "response", "ok": false, "error": err.to_string()}));
    Message::text(body.to_string())
}

/// Ids are remembered to refuse replays, so they are bounded like the window that keeps them.
pub(super) fn check_message_id(message_id: &str) -> Result<(), String> {
    if message_id.trim().is_empty() {
        return Err("every message needs a non-empty message_id".to_owned());
    }
    if message_id.len() > MAX_MESSAGE_ID_BYTES {
        return Err(format!(
            "a message_id has at most {MAX_MESSAGE_ID_BYTES} bytes"
        ));
    }
    Ok(())
}

impl Gateway {
    /// The reply to one text message. `greeted` is the connection's session once it has
    /// said hello.
    pub(super) async fn reply_to(
        &self,
        text: &str,
        greeted: &mut Option<Lease>,
        ticket: &super::admission::Ticket,
    ) -> Message {
        let incoming: GatewayIn = match serde_json::from_str(text) {
            Ok(incoming) => incoming,
            Err(err) => return respond(None, Err(format!("unreadable message: {err}"))),
        };
        let message_id = incoming.message_id().to_owned();
        let outcome = self.handle(incoming, greeted, ticket).await;
        respond(Some(&message_id), outcome)
    }

    async fn handle(
        &self,
        incoming: GatewayIn,
        greeted: &mut Option<Lease>,
        ticket: &super::admission::Ticket,
    ) -> Result<Value, String> {
        check_message_id(incoming.message_id())?;
        if let GatewayIn::Hello {
            message_id,
            user,
            token,
        } = &incoming
        {
            return self.hello(message_id, user, token, greeted, ticket).await;
        }
        let Some(lease) = greeted.as_ref() else {
            return Err("say hello (with your user and your token) first".to_owned());
        };
        let session = lease.session().await.map_err(|err| err.to_string())?;
        if let GatewayIn::AddonCommand {
            username: Some(claimed),
            ..
        } = &incoming
            && claimed != session.user.as_str()
        {
            return Err(format!(
                "username {claimed:?} is not the user this connection said hello as ({:?}); one connection speaks for one user",
                session.user.as_str()
            ));
        }
        session.admit(incoming.message_id())?;
        match incoming {
            GatewayIn::Hello { .. } => Err("already greeted".to_owned()),
            GatewayIn::ListTools { .. } => {
                let tools = session.addons.tools().map_err(|err| err.to_string())?;
                Ok(json!(tools.iter().map(|t| t.spec()).collect::<Vec<_>>()))
            }
            GatewayIn::AddonCommand {
                addon_id,
                command,
                params,
                ..
            } => addon_command(session, &addon_id, &command, params).await,
        }
    }

    /// Checks `token` is `user`'s, then opens (or joins) the user's session: refused when
    /// the gateway already serves as many users as it may.
    async fn hello(
        &self,
        message_id: &str,
        user: &str,
        token: &Secret,
        greeted: &mut Option<Lease>,
        ticket: &super::admission::Ticket,
    ) -> Result<Value, String> {
        if let Some(lease) = greeted {
            return Err(format!(
                "already greeted as {}; one connection speaks for one user",
                lease.user()
            ));
        }
        let Some(user) = self.credentials.authenticate(user, token) else {
            return Err(REFUSED_HELLO.to_owned());
        };
        // A person with a token takes a slot of the greeted before a Blender is leased.
        if !ticket.admit() {
            return Err(super::connection::FULL.to_owned());
        }
        let lease = self.sessions.lease(&user).map_err(|err| err.to_string())?;
        {
            let session = lease
                .session()
                .await
                .map_err(|err| SessionRefused::from(err).to_string())?;
            session.admit(message_id)?;
        }
        *greeted = Some(lease);
        Ok(json!({"user": user.as_str()}))
    }
}

/// Runs a registered add-on's command with its path parameters confined to the user's
/// folder, and returns its result beside the scene after it.
async fn addon_command(
    session: &Session,
    addon_id: &str,
    command: &str,
    params: Value,
) -> Result<Value, String> {
    let Some(tool) = session.addons.tool(addon_id, command) else {
        return Err(format!(
            "add-on {addon_id:?} is not registered or has no command {command:?} (registered add-ons: {})",
            session.addons.ids().join(", ")
        ));
    };
    let params = tool
        .confine_paths(params, session.folder.confined())
        .map_err(|err| err.to_string())?;
    let blender = session.blender();
    let answer = tool.run(blender, params).await.map_err(|err| match err {
        ToolError::Recoverable(message) | ToolError::Fatal(message) => message,
    })?;
    // The scene as objects (names, types, transforms, sizes), not the lines a model reads:
    // a client acts on it.
    let scene = blender
        .scene_info(0, SCENE_OBJECTS)
        .await
        .map_err(|err| err.to_string())?;
    Ok(json!({"result": answer.result, "scene": scene}))
}
