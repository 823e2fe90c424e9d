//! The transport trait every way of reaching Blender implements, and the typed commands
//! built on it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use serde::de::DeserializeOwned;
use serde_json::Value;
use viga_protocol::bridge::{
    AppliedProgram, BlendFile, BridgeCommand, CameraPose, CameraState, FaultKind, FrameRequest,
    FrameState, FramedRender, FramedViewsReply, FramedViewsRequest, Keyframes, RenderOutput,
    RenderReply, RenderRequest, SceneInfo, SceneReset, VisibilityChange,
};
use viga_protocol::iteration::{ExecutionResult, FailureClass};

/// Why a worker was lost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LostReason {
    /// The call did not answer within its timeout; the process was killed.
    Timeout(Duration),
    /// The process exited (crash, `os._exit`, out of memory).
    Exited(String),
    /// The connection broke or carried something unreadable.
    Disconnected(String),
}

impl std::fmt::Display for LostReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Timeout(limit) => write!(f, "no answer within {limit:?}, process killed"),
            Self::Exited(status) => write!(f, "Blender exited ({status})"),
            Self::Disconnected(why) => write!(f, "connection lost ({why})"),
        }
    }
}

/// What the supervisor did after losing a worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recovery {
    /// Nobody recovers this transport (a plain client).
    None,
    /// A new Blender was started; the scene was restored from this checkpoint (if any).
    Restarted {
        restored_checkpoint: Option<PathBuf>,
    },
    /// Restarting failed; the next call tries again.
    RestartFailed(String),
}

impl std::fmt::Display for Recovery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::None => write!(f, "not restarted"),
            Self::Restarted {
                restored_checkpoint: Some(path),
            } => write!(f, "restarted, scene restored from {}", path.display()),
            Self::Restarted {
                restored_checkpoint: None,
            } => write!(f, "restarted with an empty scene (no checkpoint)"),
            Self::RestartFailed(why) => write!(f, "restart failed: {why}"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// The bridge answered, refusing or failing the command. The worker is fine.
    #[error("Blender refused `{command}` ({kind:?}): {message}")]
    Refused {
        command: &'static str,
        kind: FaultKind,
        message: String,
        traceback: Option<String>,
    },
    /// The worker died or hung during the call (failure class E0).
    #[error("Blender worker lost during `{command}`: {reason}; {recovery}")]
    Lost {
        command: &'static str,
        reason: LostReason,
        recovery: Recovery,
    },
    /// No Blender could be started or reached.
    #[error("could not start Blender: {0}")]
    Start(String),
    /// The handshake could not be completed (no answer, an unreadable one).
    #[error("handshake with the bridge failed: {0}")]
    Handshake(String),
    /// The bridge answered the handshake with a refusal: a wrong token, another protocol
    /// version.
    #[error("the bridge refused the handshake ({kind:?}): {message}")]
    HandshakeRefused { kind: FaultKind, message: String },
    /// A reply could not be read, or did not have the shape its command promises: a bug, in
    /// the bridge or here. The worker is fine; its connection carries on.
    #[error("malformed reply to `{command}`: {message}")]
    MalformedReply {
        command: &'static str,
        message: String,
    },
}

impl TransportError {
    /// E0 for everything that is Blender's or the machine's fault; E1 when Blender refused
    /// what it was asked to do (the caller can correct the request).
    pub fn failure_class(&self) -> FailureClass {
        match self {
            Self::Refused { .. } => FailureClass::E1,
            _ => FailureClass::E0,
        }
    }
}

/// A way to reach a Blender running viga's bridge. Object safe: layers above hold an
/// `Arc<dyn BlenderTransport>`, and other crates can add transports.
#[async_trait]
pub trait BlenderTransport: Send + Sync {
    /// Sends one command and returns its `result`. `timeout` overrides the transport's
    /// default per-call timeout.
    async fn call(
        &self,
        command: BridgeCommand,
        timeout: Option<Duration>,
    ) -> Result<Value, TransportError>;

    /// A short description for logs.
    fn describe(&self) -> String;

    /// A folder this process and Blender both see, when Blender runs on this machine: large
    /// results (renders) are then passed as files instead of inline base64.
    fn shared_folder(&self) -> Option<&Path> {
        None
    }

    /// The end of what the last program printed (stdout and stderr as they interleaved),
    /// when the transport keeps it where it outlives Blender: a program stopped at its time
    /// limit has no reply to carry its output.
    fn last_program_output(&self) -> Option<String> {
        None
    }

    /// What containment the Blender behind this transport runs under, when it is one of
    /// viga's own workers (a run folder records it); `None` for a Blender viga did not start
    /// (a person's), and for transports that do not know.
    fn containment(&self) -> Option<viga_sandbox::ContainmentStatus> {
        None
    }
}

fn decode<T: DeserializeOwned>(command: &'static str, value: Value) -> Result<T, TransportError> {
    serde_json::from_value(value).map_err(|err| TransportError::MalformedReply {
        command,
        message: err.to_string(),
    })
}

async fn typed<T: DeserializeOwned, B: BlenderTransport + ?Sized>(
    blender: &B,
    command: BridgeCommand,
    timeout: Option<Duration>,
) -> Result<T, TransportError> {
    let name = command.name();
    decode(name, blender.call(command, timeout).await?)
}

/// The bridge's commands with typed results, for every transport.
#[async_trait]
pub trait BlenderCommands: BlenderTransport {
    async fn ping(&self) -> Result<(), TransportError> {
        self.call(BridgeCommand::Ping, None).await.map(|_| ())
    }

    /// Runs a program; with `reset`, on a freshly reloaded base scene.
    async fn execute(
        &self,
        code: &str,
        reset: Option<SceneReset>,
        timeout: Option<Duration>,
    ) -> Result<ExecutionResult, TransportError> {
        let command = BridgeCommand::Execute {
            code: code.to_owned(),
            reset,
        };
        typed(self, command, timeout).await
    }

    async fn scene_info(&self, offset: u32, limit: u32) -> Result<SceneInfo, TransportError> {
        typed(self, BridgeCommand::SceneInfo { offset, limit }, None).await
    }

    async fn render(
        &self,
        mut request: RenderRequest,
        timeout: Option<Duration>,
    ) -> Result<RenderOutput, TransportError> {
        // A scratch file only when the caller named no destination of its own.
        let scratch = match (&request.output_path, self.shared_folder()) {
            (None, Some(folder)) => Some(scratch_render_file(folder)),
            _ => None,
        };
        if let Some(path) = &scratch {
            request.output_path = Some(path.to_string_lossy().into_owned());
        }
        let reply: RenderReply = typed(self, BridgeCommand::Render(request), timeout).await?;
        render_output("render", reply, scratch.as_deref())
    }

    /// Frames the same objects from each direction and renders that view, all in one call;
    /// one view per direction, in order.
    async fn render_framed_views(
        &self,
        mut request: FramedViewsRequest,
        timeout: Option<Duration>,
    ) -> Result<Vec<FramedRender>, TransportError> {
        let files: Vec<PathBuf> = match self.shared_folder() {
            Some(folder) if request.output_paths.is_empty() => request
                .directions
                .iter()
                .map(|_| scratch_render_file(folder))
                .collect(),
            _ => Vec::new(),
        };
        if !files.is_empty() {
            request.output_paths = files
                .iter()
                .map(|path| path.to_string_lossy().into_owned())
                .collect();
        }
        let wanted = request.directions.len();
        let reply: FramedViewsReply =
            typed(self, BridgeCommand::RenderFramedViews(request), timeout).await?;
        if reply.views.len() != wanted {
            return Err(TransportError::MalformedReply {
                command: "render_framed_views",
                message: format!(
                    "asked for {wanted} views, the reply has {}",
                    reply.views.len()
                ),
            });
        }
        reply
            .views
            .into_iter()
            .enumerate()
            .map(|(index, view)| {
                Ok(FramedRender {
                    framing: view.framing,
                    output: render_output(
                        "render_framed_views",
                        view.render,
                        files.get(index).map(PathBuf::as_path),
                    )?,
                })
            })
            .collect()
    }

    async fn set_camera(&self, pose: CameraPose) -> Result<CameraState, TransportError> {
        typed(self, BridgeCommand::SetCamera(pose), None).await
    }

    async fn frame_objects(&self, request: FrameRequest) -> Result<CameraState, TransportError> {
        typed(self, BridgeCommand::FrameObjects(request), None).await
    }

    async fn set_visibility(
        &self,
        objects: Vec<String>,
        visible: bool,
    ) -> Result<VisibilityChange, TransportError> {
        typed(
            self,
            BridgeCommand::SetVisibility { objects, visible },
            None,
        )
        .await
    }

    async fn set_frame(&self, frame: i32) -> Result<FrameState, TransportError> {
        typed(self, BridgeCommand::SetFrame { frame }, None).await
    }

    async fn list_keyframes(&self) -> Result<Keyframes, TransportError> {
        typed(self, BridgeCommand::ListKeyframes, None).await
    }

    async fn save_blend(&self, path: &str) -> Result<BlendFile, TransportError> {
        let path = path.to_owned();
        typed(self, BridgeCommand::SaveBlend { path }, None).await
    }

    async fn load_blend(&self, path: &str) -> Result<BlendFile, TransportError> {
        let path = path.to_owned();
        typed(self, BridgeCommand::LoadBlend { path }, None).await
    }

    /// Runs `code` on the open scene as one undo step named `message`; a failing program is
    /// undone at once (the reply says so). Meant for a person's Blender (attached).
    async fn apply_program(
        &self,
        code: &str,
        message: &str,
        timeout: Option<Duration>,
    ) -> Result<AppliedProgram, TransportError> {
        let command = BridgeCommand::ApplyProgram {
            code: code.to_owned(),
            message: message.to_owned(),
        };
        typed(self, command, timeout).await
    }

    /// Records the scene as an undo step named `message`.
    async fn undo_push(&self, message: &str) -> Result<(), TransportError> {
        let command = BridgeCommand::UndoPush {
            message: message.to_owned(),
        };
        self.call(command, None).await.map(drop)
    }

    /// Goes back one undo step.
    async fn undo(&self) -> Result<(), TransportError> {
        self.call(BridgeCommand::Undo, None).await.map(drop)
    }
}

impl<T: BlenderTransport + ?Sized> BlenderCommands for T {}

/// A fresh file name in the folder shared with Blender, for one render.
fn scratch_render_file(folder: &Path) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    folder.join(format!(
        "render-{}.png",
        NEXT.fetch_add(1, Ordering::Relaxed)
    ))
}

/// The image of a render reply: inline, or read from the file it names (and that file
/// removed when it is our `scratch` file).
fn render_output(
    command: &'static str,
    reply: RenderReply,
    scratch: Option<&Path>,
) -> Result<RenderOutput, TransportError> {
    let image = match (reply.image, reply.path) {
        (Some(image), _) => image,
        (None, Some(path)) => {
            // Not followed if a program swapped the file for a link to one of viga's.
            let data = crate::scratch::read_regular(
                Path::new(&path),
                u64::from(viga_protocol::bridge::MAX_REPLY_BYTES),
            )
            .map_err(|err| TransportError::MalformedReply {
                command,
                message: format!("the render file {path} cannot be read: {err}"),
            })?;
            if scratch == Some(Path::new(&path)) {
                // Our scratch file: read once, then gone.
                let _ = std::fs::remove_file(&path);
            }
            viga_protocol::message::ImageData::png(data)
        }
        (None, None) => {
            return Err(TransportError::MalformedReply {
                command,
                message: "the reply has neither an image nor a path".to_owned(),
            });
        }
    };
    Ok(RenderOutput {
        image,
        width: reply.width,
        height: reply.height,
        engine: reply.engine,
        camera: reply.camera,
        render_ms: reply.render_ms,
    })
}
