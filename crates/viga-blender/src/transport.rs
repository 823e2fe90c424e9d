//! The transport trait every way of reaching Blender implements, and the typed commands
//! built on it.

use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;
use serde::de::DeserializeOwned;
use serde_json::Value;
use viga_process::ScratchFolder;
/// A lost Blender is told in the words of every lost worker (viga-process's), so a caller
/// reads it like a lost renderer.
pub use viga_process::{LostReason, Recovery};
use viga_protocol::bridge::{
    AppliedProgram, BlendFile, BridgeCommand, CameraPose, CameraState, FaultKind, FrameRequest,
    FrameState, FramedRender, FramedViewsReply, FramedViewsRequest, Keyframes, RenderEngine,
    RenderOutput, RenderReply, RenderRequest, SceneInfo, SceneReset, VisibilityChange,
};
use viga_protocol::iteration::{ExecutionResult, FailureClass};

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
    /// A reply broke the rules of what viga asked for: it named a file viga did not name, or
    /// a size, camera or count other than the ones asked for. Only a program that rewrote
    /// the bridge makes one, so nothing it named was read, and a worker viga supervises was
    /// replaced by a fresh Blender ([`BlenderTransport::distrust`]).
    #[error(
        "Blender's reply to `{command}` was refused: {message}; nothing it named was read ({recovery})"
    )]
    Untrusted {
        command: &'static str,
        message: String,
        recovery: Recovery,
    },
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
            // A refused reply is the doing of the program that rewrote the bridge.
            Self::Refused { .. } | Self::Untrusted { .. } => FailureClass::E1,
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
    /// results (renders) are then passed as files instead of inline base64. Blender may
    /// write anything there, so it is read only through [`ScratchFolder`], and only the
    /// files viga named.
    fn shared_folder(&self) -> Option<&ScratchFolder> {
        None
    }

    /// A reply broke the rules (`why`): the program that ran may have rewritten the bridge
    /// inside Blender, so nothing it answers can be believed any more. A worker viga
    /// supervises kills that Blender and starts a fresh one (restoring its checkpoint); a
    /// Blender viga does not run (a person's) is left as it is.
    async fn distrust(&self, why: &str) -> Recovery {
        tracing::warn!(blender = %self.describe(), %why, "a reply of Blender was refused");
        Recovery::None
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

    /// Renders one view. The transport decides where the picture travels (the request's own
    /// `output_path` is replaced): a file it names in the shared folder, or inline. The
    /// reply must carry the picture asked for (size, engine, camera), or it is refused.
    async fn render(
        &self,
        mut request: RenderRequest,
        timeout: Option<Duration>,
    ) -> Result<RenderOutput, TransportError> {
        let named = self
            .shared_folder()
            .map(|folder| folder.fresh_name("render", "png"));
        request.output_path = told_path(self.shared_folder(), named.as_deref());
        let asked = Asked::of_render(&request);
        let reply: RenderReply = typed(self, BridgeCommand::Render(request), timeout).await?;
        let output = render_output(self.shared_folder(), named.as_deref(), reply, &asked);
        believed(self, "render", output).await
    }

    /// Frames the same objects from each direction and renders that view, all in one call;
    /// one view per direction, in order, each checked as [`BlenderCommands::render`] checks.
    async fn render_framed_views(
        &self,
        mut request: FramedViewsRequest,
        timeout: Option<Duration>,
    ) -> Result<Vec<FramedRender>, TransportError> {
        let names: Vec<PathBuf> = match self.shared_folder() {
            Some(folder) => request
                .directions
                .iter()
                .map(|_| folder.fresh_name("view", "png"))
                .collect(),
            None => Vec::new(),
        };
        request.output_paths = names
            .iter()
            .filter_map(|name| told_path(self.shared_folder(), Some(name)))
            .collect();
        let asked = Asked::of_views(&request);
        let wanted = request.directions.len();
        let reply: FramedViewsReply =
            typed(self, BridgeCommand::RenderFramedViews(request), timeout).await?;
        let views = framed_views(self.shared_folder(), &names, reply, wanted, &asked);
        believed(self, "render_framed_views", views).await
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

/// What a render request asked for, to hold its reply to.
struct Asked {
    width: u32,
    height: u32,
    engine: RenderEngine,
    /// The camera named, when the view is rendered from a named camera (not a pose).
    camera: Option<String>,
}

impl Asked {
    fn of_render(request: &RenderRequest) -> Self {
        Self {
            width: request.spec.width,
            height: request.spec.height,
            engine: request.spec.engine,
            camera: request.camera.clone().filter(|_| request.pose.is_none()),
        }
    }

    fn of_views(request: &FramedViewsRequest) -> Self {
        Self {
            width: request.spec.width,
            height: request.spec.height,
            engine: request.spec.engine,
            camera: None,
        }
    }
}

/// The path Blender is told to write `named` to, in the shared folder.
fn told_path(folder: Option<&ScratchFolder>, named: Option<&std::path::Path>) -> Option<String> {
    let (folder, named) = (folder?, named?);
    Some(folder.full_path(named).to_string_lossy().into_owned())
}

/// A reply's result as the caller gets it: a refusal (a broken rule, in words) becomes
/// [`TransportError::Untrusted`], after the transport has replaced its Blender.
async fn believed<T, B: BlenderTransport + ?Sized>(
    blender: &B,
    command: &'static str,
    checked: Result<T, String>,
) -> Result<T, TransportError> {
    match checked {
        Ok(value) => Ok(value),
        Err(message) => {
            let recovery = blender.distrust(&message).await;
            Err(TransportError::Untrusted {
                command,
                message,
                recovery,
            })
        }
    }
}

fn framed_views(
    folder: Option<&ScratchFolder>,
    names: &[PathBuf],
    reply: FramedViewsReply,
    wanted: usize,
    asked: &Asked,
) -> Result<Vec<FramedRender>, String> {
    let count = reply.views.len();
    let views: Result<Vec<FramedRender>, String> = if count == wanted {
        reply
            .views
            .into_iter()
            .enumerate()
            .map(|(index, view)| {
                let output = render_output(
                    folder,
                    names.get(index).map(PathBuf::as_path),
                    view.render,
                    asked,
                )?;
                Ok(FramedRender {
                    framing: view.framing,
                    output,
                })
            })
            .collect()
    } else {
        Err(format!(
            "viga asked for {wanted} views and the reply has {count}"
        ))
    };
    if views.is_err() {
        // Whatever was written under the names viga gave is not wanted any more.
        for name in names {
            if let Some(folder) = folder {
                let _ = folder.remove(name);
            }
        }
    }
    views
}

/// The picture of a render reply, held to what was asked: inline, or read from the one file
/// viga named (`named`, in `folder`), which is removed after. A reply naming any other file,
/// or a picture of another size, engine or camera, is refused (`Err`, in words).
fn render_output(
    folder: Option<&ScratchFolder>,
    named: Option<&std::path::Path>,
    reply: RenderReply,
    asked: &Asked,
) -> Result<RenderOutput, String> {
    let picture = delivered_picture(folder, named, &reply);
    if let (Some(folder), Some(named)) = (folder, named) {
        let _ = folder.remove(named);
    }
    let data = picture?;
    let shown = png_dimensions(&data).ok_or("the picture it carries is not a PNG")?;
    let checks = [
        (
            "width and height",
            (reply.width, reply.height) == (asked.width, asked.height),
        ),
        ("picture", shown == (asked.width, asked.height)),
        ("engine", reply.engine == asked.engine),
        (
            "camera",
            asked
                .camera
                .as_ref()
                .is_none_or(|camera| *camera == reply.camera),
        ),
    ];
    if let Some((what, _)) = checks.iter().find(|(_, holds)| !holds) {
        return Err(format!(
            "its {what} is not what was asked for (asked: {}x{} {:?}{}; the reply says {}x{} {:?} from {:?}, the picture is {}x{})",
            asked.width,
            asked.height,
            asked.engine,
            asked
                .camera
                .as_ref()
                .map(|c| format!(" from {c:?}"))
                .unwrap_or_default(),
            reply.width,
            reply.height,
            reply.engine,
            reply.camera,
            shown.0,
            shown.1
        ));
    }
    Ok(RenderOutput {
        image: viga_protocol::message::ImageData::png(data),
        width: reply.width,
        height: reply.height,
        engine: reply.engine,
        camera: reply.camera,
        render_ms: reply.render_ms,
    })
}

/// The PNG bytes a reply delivers: inline, or the file viga named and nothing else.
fn delivered_picture(
    folder: Option<&ScratchFolder>,
    named: Option<&std::path::Path>,
    reply: &RenderReply,
) -> Result<Vec<u8>, String> {
    match (&reply.image, &reply.path, folder.zip(named)) {
        (Some(image), None, _) => Ok(image.data.clone()),
        (None, Some(path), Some((folder, named))) if folder.is_named(named, path) => folder
            .read(named, u64::from(viga_protocol::bridge::MAX_REPLY_BYTES))
            .map_err(|err| {
                format!("the render file viga named cannot be read as a plain file ({err})")
            }),
        (None, Some(path), Some((folder, named))) => Err(format!(
            "it names the file {path:?}, not the one viga asked Blender to write ({})",
            folder.full_path(named).display()
        )),
        (None, Some(path), None) => Err(format!(
            "it names the file {path:?}, where viga asked for the picture inline"
        )),
        (Some(_), Some(path), _) => Err(format!(
            "it carries a picture and names the file {path:?} too"
        )),
        (None, None, _) => Err("it has neither a picture nor the file viga named".to_owned()),
    }
}

/// Width and height from a PNG's header (`IHDR`, the first chunk), or `None` when `png` is
/// not a PNG.
pub fn png_dimensions(png: &[u8]) -> Option<(u32, u32)> {
    const SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";
    if !png.starts_with(SIGNATURE) || png.get(12..16)? != b"IHDR" {
        return None;
    }
    let width = u32::from_be_bytes(png.get(16..20)?.try_into().ok()?);
    let height = u32::from_be_bytes(png.get(20..24)?.try_into().ok()?);
    Some((width, height))
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Mutex;

    use serde_json::json;
    use viga_protocol::bridge::RenderSpec;

    use super::*;

    /// A Blender whose bridge was rewritten: every `render` reply is `reply(told path)`, and
    /// it records whether viga distrusted it.
    struct Rewired {
        folder: ScratchFolder,
        reply: fn(&str) -> Value,
        distrusted: Mutex<Vec<String>>,
    }

    #[async_trait]
    impl BlenderTransport for Rewired {
        async fn call(
            &self,
            command: BridgeCommand,
            _timeout: Option<Duration>,
        ) -> Result<Value, TransportError> {
            let BridgeCommand::Render(request) = command else {
                panic!("only renders are asked for");
            };
            let told = request.output_path.unwrap_or_default();
            Ok((self.reply)(&told))
        }

        fn describe(&self) -> String {
            "a rewired bridge".to_owned()
        }

        fn shared_folder(&self) -> Option<&ScratchFolder> {
            Some(&self.folder)
        }

        async fn distrust(&self, why: &str) -> Recovery {
            self.distrusted.lock().unwrap().push(why.to_owned());
            Recovery::Restarted {
                restored_checkpoint: None,
            }
        }
    }

    fn request() -> RenderRequest {
        RenderRequest {
            camera: Some("Camera".to_owned()),
            pose: None,
            spec: RenderSpec {
                engine: RenderEngine::Workbench,
                width: 4,
                height: 3,
                samples: None,
            },
            output_path: Some("/etc/shadow".to_owned()),
        }
    }

    fn reply(path: &str, width: u32, camera: &str) -> Value {
        json!({"path": path, "width": width, "height": 3, "engine": "WORKBENCH", "camera": camera, "render_ms": 1.0})
    }

    async fn render_with(
        reply: fn(&str) -> Value,
        folder: &Path,
    ) -> (Result<RenderOutput, TransportError>, Vec<String>) {
        let blender = Rewired {
            folder: ScratchFolder::new(folder.to_path_buf()),
            reply,
            distrusted: Mutex::new(Vec::new()),
        };
        let output = blender.render(request(), None).await;
        (output, blender.distrusted.into_inner().unwrap())
    }

    #[tokio::test]
    async fn only_the_file_viga_named_is_read_and_anything_else_is_refused() {
        let folder = tempfile::tempdir().unwrap();
        let secret = folder.path().join("beside.png");
        std::fs::write(&secret, viga_testkit::blender::grey_png(4, 3)).unwrap();
        std::fs::write(folder.path().join("canary"), b"sk-canary").unwrap();

        // The honest reply: the picture in the file viga named, then the file is gone.
        fn honest(told: &str) -> Value {
            std::fs::write(told, viga_testkit::blender::grey_png(4, 3)).unwrap();
            reply(told, 4, "Camera")
        }
        let (output, distrusted) = render_with(honest, folder.path()).await;
        let output = output.unwrap();
        assert_eq!((output.width, output.height), (4, 3));
        assert!(distrusted.is_empty());
        let left: Vec<_> = std::fs::read_dir(folder.path()).unwrap().collect();
        assert_eq!(
            left.len(),
            2,
            "the named render file is removed after reading"
        );

        // Named files that are not the one viga named: refused, the worker replaced.
        let attacks: [fn(&str) -> Value; 5] = [
            |_| reply("/etc/shadow", 4, "Camera"),
            |_| reply("/proc/self/environ", 4, "Camera"),
            |told| {
                reply(
                    &Path::new(told)
                        .with_file_name("beside.png")
                        .to_string_lossy(),
                    4,
                    "Camera",
                )
            },
            |told| reply(&format!("{told}/../canary"), 4, "Camera"),
            |told| {
                let canary = Path::new(told).with_file_name("canary");
                std::os::unix::fs::symlink(canary, told).unwrap();
                reply(told, 4, "Camera")
            },
        ];
        for attack in attacks {
            let (output, distrusted) = render_with(attack, folder.path()).await;
            let err = output.unwrap_err();
            assert!(
                matches!(
                    err,
                    TransportError::Untrusted {
                        command: "render",
                        ..
                    }
                ),
                "{err}"
            );
            assert_eq!(err.failure_class(), FailureClass::E1);
            assert_eq!(distrusted.len(), 1, "{err}");
            assert!(!err.to_string().contains("sk-canary"));
        }
    }

    #[tokio::test]
    async fn a_picture_of_another_size_or_camera_is_refused() {
        let folder = tempfile::tempdir().unwrap();
        let wrong: [fn(&str) -> Value; 3] = [
            |told| {
                std::fs::write(told, viga_testkit::blender::grey_png(4, 3)).unwrap();
                reply(told, 5, "Camera")
            },
            |told| {
                std::fs::write(told, viga_testkit::blender::grey_png(40, 30)).unwrap();
                reply(told, 4, "Camera")
            },
            |told| {
                std::fs::write(told, viga_testkit::blender::grey_png(4, 3)).unwrap();
                reply(told, 4, "Secret camera")
            },
        ];
        for attack in wrong {
            let (output, distrusted) = render_with(attack, folder.path()).await;
            assert!(matches!(output, Err(TransportError::Untrusted { .. })));
            assert_eq!(distrusted.len(), 1);
        }
        assert_eq!(std::fs::read_dir(folder.path()).unwrap().count(), 0);
    }

    #[test]
    fn png_dimensions_read_the_header_only_of_a_png() {
        assert_eq!(
            png_dimensions(&viga_testkit::blender::grey_png(7, 5)),
            Some((7, 5))
        );
        assert_eq!(png_dimensions(b"GIF89a"), None);
        assert_eq!(png_dimensions(b"\x89PNG\r\n\x1a\n"), None);
    }
}
