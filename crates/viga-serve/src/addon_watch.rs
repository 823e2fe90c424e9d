//! Whether a call may have changed Blender's add-ons, read off the replies that pass by, so
//! the MCP server lists the add-ons again only when one may have come or gone: in a person's
//! Blender each listing is one more trip through its main-thread timer, which would double
//! the time of every `execute_code`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use viga_blender::{BlenderTransport, ContainmentStatus, Recovery, ScratchFolder, TransportError};
use viga_protocol::bridge::BridgeCommand;

/// A transport that passes every call through and remembers whether one may have enabled or
/// disabled an add-on: an applied program says so itself (`addons_changed`, measured by the
/// bridge around the program); any other program, and any add-on command, may have.
pub struct AddonChangeWatch {
    inner: Arc<dyn BlenderTransport>,
    maybe_changed: AtomicBool,
}

impl std::fmt::Debug for AddonChangeWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AddonChangeWatch")
            .field("blender", &self.inner.describe())
            .finish_non_exhaustive()
    }
}

impl AddonChangeWatch {
    pub fn new(inner: Arc<dyn BlenderTransport>) -> Self {
        Self {
            inner,
            maybe_changed: AtomicBool::new(false),
        }
    }

    /// Whether a call since the last question may have changed the add-ons (and forgets it).
    pub fn take_maybe_changed(&self) -> bool {
        self.maybe_changed.swap(false, Ordering::SeqCst)
    }

    fn note(&self, effect: AddonEffect, reply: Option<&Value>) {
        let maybe = match effect {
            // A bridge too old to say is taken to have changed them.
            AddonEffect::SaidInReply => reply
                .and_then(|reply| reply.get("addons_changed"))
                .and_then(Value::as_bool)
                .unwrap_or(true),
            AddonEffect::Possible => true,
            AddonEffect::Impossible => false,
        };
        if maybe {
            self.maybe_changed.store(true, Ordering::SeqCst);
        }
    }
}

/// What a command says about the add-ons, told before the command is sent on.
#[derive(Debug, Clone, Copy)]
enum AddonEffect {
    /// An applied program: its reply says whether it changed them.
    SaidInReply,
    /// Any other program, an add-on command: they may have.
    Possible,
    /// Nothing else runs code that could.
    Impossible,
}

impl AddonEffect {
    fn of(command: &BridgeCommand) -> Self {
        match command {
            BridgeCommand::ApplyProgram { .. } => Self::SaidInReply,
            BridgeCommand::Execute { .. } | BridgeCommand::AddonCommand { .. } => Self::Possible,
            _ => Self::Impossible,
        }
    }
}

#[async_trait]
impl BlenderTransport for AddonChangeWatch {
    async fn call(
        &self,
        command: BridgeCommand,
        timeout: Option<Duration>,
    ) -> Result<Value, TransportError> {
        let effect = AddonEffect::of(&command);
        let reply = self.inner.call(command, timeout).await;
        self.note(effect, reply.as_ref().ok());
        reply
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn shared_folder(&self) -> Option<&ScratchFolder> {
        self.inner.shared_folder()
    }

    async fn distrust(&self, why: &str) -> Recovery {
        self.inner.distrust(why).await
    }

    fn last_program_output(&self) -> Option<String> {
        self.inner.last_program_output()
    }

    fn containment(&self) -> Option<ContainmentStatus> {
        self.inner.containment()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use viga_testkit::blender::FakeBlender;

    use super::*;

    #[tokio::test]
    async fn only_calls_that_may_change_add_ons_are_remembered() {
        let fake = Arc::new(FakeBlender::new());
        let watch = AddonChangeWatch::new(Arc::clone(&fake) as Arc<dyn BlenderTransport>);
        watch
            .call(
                BridgeCommand::SceneInfo {
                    offset: 0,
                    limit: 1,
                },
                None,
            )
            .await
            .ok();
        assert!(
            !watch.take_maybe_changed(),
            "a scene summary changes nothing"
        );
        fake.answer(
            "apply_program",
            json!({"execution": {"stdout": "", "stderr": "", "duration_ms": 1.0},
                   "reverted": false, "addons_changed": false}),
        );
        let apply = || BridgeCommand::ApplyProgram {
            code: "pass".to_owned(),
            message: "m".to_owned(),
        };
        watch.call(apply(), None).await.unwrap();
        assert!(!watch.take_maybe_changed(), "the program said it did not");
        fake.answer(
            "apply_program",
            json!({"execution": {"stdout": "", "stderr": "", "duration_ms": 1.0},
                   "reverted": false, "addons_changed": true}),
        );
        watch.call(apply(), None).await.unwrap();
        assert!(watch.take_maybe_changed());
        assert!(!watch.take_maybe_changed(), "asked once, forgotten");
        watch
            .call(
                BridgeCommand::Execute {
                    code: "pass".to_owned(),
                    reset: None,
                },
                None,
            )
            .await
            .ok();
        assert!(watch.take_maybe_changed(), "any other program may have");
    }
}
