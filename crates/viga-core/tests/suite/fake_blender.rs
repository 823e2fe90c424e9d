//! A stand-in Blender for fast core tests: it answers every bridge command with a small,
//! schema-valid reply (built from the protocol's own reply types), records every call, and
//! can be told to fail chosen calls the ways a real worker fails. No process, no socket, so a
//! whole run takes milliseconds.
//!
//! ```ignore
//! let blender = Arc::new(
//!     FakeBlender::new()
//!         .on("render_framed_views", 1, Fault::Lost)
//!         .on("execute", 2, Fault::RestartFails),
//! );
//! ```
//!
//! Real Blender stays the rule for everything that touches a scene (architecture.md); this
//! fake only stands in where the loop's own decisions are under test.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::watch;
use viga_blender::{BlenderTransport, LostReason, Recovery, TransportError};
use viga_protocol::bridge::{
    AddonListing, AppliedProgram, BlendFile, BridgeCommand, CameraInfo, CameraPose, CameraState,
    FaultKind, FrameState, FramedViewReply, FramedViewsReply, Framing, HelloInfo, Keyframes,
    MeshStats, RenderReply, RenderSpec, SceneInfo, SceneObject, VisibilityChange,
};
use viga_protocol::iteration::ExecutionResult;
use viga_protocol::message::ImageData;
use viga_skills::camera::VIEW_CAMERA;

/// What the supervisor says when it could not start a new Blender.
pub(crate) const START_FAILURE: &str =
    "Blender exited before the bridge was ready (exit status: 3): broken on purpose by the fake";
/// What the fake says when it refuses a command.
pub(crate) const REFUSAL: &str = "refused by the fake Blender on purpose";

/// What the fake does to one call instead of answering it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// Blender dies during the call and the supervisor starts a new one, with an empty
    /// scene (`Lost`, `Recovery::Restarted`).
    Lost,
    /// Blender dies during the call and the new one does not start
    /// (`Lost`, `Recovery::RestartFailed`).
    LostAndRestartFailed,
    /// The supervisor, still without a Blender after an earlier failed restart, tries to
    /// start one before the call and fails (`Start`), as a `Worker` does.
    RestartFails,
    /// The connection breaks and nobody restarts Blender, as with a plain client or an
    /// attached Blender (`Lost`, `Recovery::None`).
    LostForGood,
    /// Never answers: only a cancel or a time limit ends the call.
    Hang,
    /// Answers with a reply that has nothing of the command's shape, so the typed commands
    /// fail to read it (`MalformedReply`), as they do a reply the real client cannot read.
    Garbage,
    /// The bridge refuses the command; Blender itself is fine (`Refused`).
    Refuse,
}

/// A Blender that answers everything, records every call, and fails the calls it was told to.
pub(crate) struct FakeBlender {
    /// (command, n, fault): the n-th call of that command (1-based, counting every call,
    /// the loop's re-runs included) gets the fault instead of an answer.
    faults: Vec<(&'static str, usize, Fault)>,
    calls: Mutex<Vec<BridgeCommand>>,
    /// How many calls are hanging now, for tests that act while one does.
    hanging: watch::Sender<usize>,
}

impl FakeBlender {
    pub(crate) fn new() -> Self {
        Self {
            faults: Vec::new(),
            calls: Mutex::new(Vec::new()),
            hanging: watch::channel(0).0,
        }
    }

    /// Fails the `nth` call (1-based) of `command` (its wire name, `"render"`) with `fault`.
    pub(crate) fn on(mut self, command: &'static str, nth: usize, fault: Fault) -> Self {
        self.faults.push((command, nth, fault));
        self
    }

    /// Every call so far, in order, with its arguments.
    pub(crate) fn calls(&self) -> Vec<BridgeCommand> {
        self.calls.lock().unwrap().clone()
    }

    /// The wire names of every call so far, in order.
    pub(crate) fn names(&self) -> Vec<&'static str> {
        self.calls().iter().map(BridgeCommand::name).collect()
    }

    /// Returns once a call is hanging ([`Fault::Hang`]).
    pub(crate) async fn hanging(&self) {
        let mut hanging = self.hanging.subscribe();
        hanging.wait_for(|count| *count > 0).await.unwrap();
    }

    /// Records `command` and says which call of its kind it is.
    fn record(&self, command: &BridgeCommand) -> usize {
        let mut calls = self.calls.lock().unwrap();
        calls.push(command.clone());
        calls.iter().filter(|c| c.name() == command.name()).count()
    }

    async fn fail(&self, command: &'static str, fault: Fault) -> Result<Value, TransportError> {
        let crashed = LostReason::Exited("signal: 9 (SIGKILL)".to_owned());
        match fault {
            Fault::Lost => Err(TransportError::Lost {
                command,
                reason: crashed,
                recovery: Recovery::Restarted {
                    restored_checkpoint: None,
                },
            }),
            Fault::LostAndRestartFailed => Err(TransportError::Lost {
                command,
                reason: crashed,
                recovery: Recovery::RestartFailed(START_FAILURE.to_owned()),
            }),
            Fault::RestartFails => Err(TransportError::Start(START_FAILURE.to_owned())),
            Fault::LostForGood => Err(TransportError::Lost {
                command,
                reason: LostReason::Disconnected("connection reset by peer".to_owned()),
                recovery: Recovery::None,
            }),
            Fault::Hang => {
                self.hanging.send_modify(|count| *count += 1);
                std::future::pending().await
            }
            Fault::Garbage => Ok(json!({"garbage": "nothing any command answers"})),
            Fault::Refuse => Err(TransportError::Refused {
                command,
                kind: FaultKind::BlenderError,
                message: REFUSAL.to_owned(),
                traceback: None,
            }),
        }
    }
}

#[async_trait]
impl BlenderTransport for FakeBlender {
    async fn call(
        &self,
        command: BridgeCommand,
        _timeout: Option<Duration>,
    ) -> Result<Value, TransportError> {
        let nth = self.record(&command);
        let name = command.name();
        let fault = self
            .faults
            .iter()
            .find(|(faulty, at, _)| *faulty == name && *at == nth)
            .map(|(_, _, fault)| *fault);
        match fault {
            Some(fault) => self.fail(name, fault).await,
            None => answer(&command),
        }
    }

    fn describe(&self) -> String {
        "fake Blender (tests)".to_owned()
    }
}

/// What the bridge would answer `command` with, on a scene holding a crate and a camera.
fn answer(command: &BridgeCommand) -> Result<Value, TransportError> {
    Ok(match command {
        BridgeCommand::Hello { .. } => reply(HelloInfo {
            protocol_version: viga_protocol::PROTOCOL_VERSION,
            blender_version: "5.0.1".to_owned(),
            capabilities: Vec::new(),
            pid: std::process::id(),
            mode: "serve".to_owned(),
        }),
        BridgeCommand::Ping => json!({"pong": true}),
        BridgeCommand::Execute { .. } => reply(ran()),
        BridgeCommand::SceneInfo { offset, limit } => reply(scene(*offset, *limit)),
        BridgeCommand::Render(request) => {
            let camera = match (&request.pose, &request.camera) {
                // The bridge renders a pose from a temporary camera of this name.
                (Some(_), _) => format!("{VIEW_CAMERA}_render"),
                (None, Some(named)) => named.clone(),
                (None, None) => "Camera".to_owned(),
            };
            reply(render(
                &camera,
                &request.spec,
                request.output_path.as_deref(),
            )?)
        }
        BridgeCommand::SetCamera(pose) => reply(posed(pose)),
        BridgeCommand::FrameObjects(request) => reply(framed(
            request.camera.as_deref().unwrap_or(VIEW_CAMERA),
            request.direction.unwrap_or([1.0, -1.0, 0.8]),
        )),
        BridgeCommand::RenderFramedViews(request) => {
            let mut views = Vec::new();
            for (index, direction) in request.directions.iter().enumerate() {
                let path = request.output_paths.get(index).map(String::as_str);
                views.push(FramedViewReply {
                    framing: framed(VIEW_CAMERA, *direction),
                    render: render(VIEW_CAMERA, &request.spec, path)?,
                });
            }
            reply(FramedViewsReply { views })
        }
        BridgeCommand::SetVisibility { objects, visible } => reply(VisibilityChange {
            objects: objects.clone(),
            visible: *visible,
        }),
        BridgeCommand::SetFrame { frame } => reply(FrameState {
            frame: *frame,
            frame_start: 1,
            frame_end: 250,
        }),
        BridgeCommand::ListKeyframes => reply(Keyframes {
            frames: Vec::new(),
            objects: BTreeMap::new(),
        }),
        // Nothing reads a saved .blend back in these tests, so none is written.
        BridgeCommand::SaveBlend { path } | BridgeCommand::Checkpoint { path } => {
            reply(BlendFile {
                path: path.clone(),
                bytes: Some(0),
                objects: None,
            })
        }
        BridgeCommand::LoadBlend { path } | BridgeCommand::Restore { path } => reply(BlendFile {
            path: path.clone(),
            bytes: None,
            objects: Some(2),
        }),
        BridgeCommand::ListAddons { .. } => reply(AddonListing {
            addons: Vec::new(),
            problems: Vec::new(),
        }),
        BridgeCommand::ImportGnResult { .. }
        | BridgeCommand::SceneFingerprints
        | BridgeCommand::ImportSceneResult { .. } => {
            return Err(TransportError::Refused {
                command: command.name(),
                kind: FaultKind::NotFound,
                message: "the fake Blender neither fingerprints scenes nor imports results"
                    .to_owned(),
                traceback: None,
            });
        }
        BridgeCommand::AddonCommand { addon_id, .. } => {
            return Err(TransportError::Refused {
                command: command.name(),
                kind: FaultKind::NotFound,
                message: format!("no add-on {addon_id:?}: the fake Blender has none"),
                traceback: None,
            });
        }
        BridgeCommand::ApplyProgram { .. } => reply(AppliedProgram {
            execution: ran(),
            reverted: false,
        }),
        BridgeCommand::UndoPush { .. } => json!({"pushed": true}),
        BridgeCommand::Undo => json!({"undone": true}),
        BridgeCommand::Shutdown => json!({}),
    })
}

fn reply(value: impl Serialize) -> Value {
    serde_json::to_value(value).unwrap()
}

/// A program that ran without a word.
fn ran() -> ExecutionResult {
    ExecutionResult {
        duration_ms: 1.0,
        ..ExecutionResult::default()
    }
}

/// The crate every program of these tests builds: a 2 m cube standing on the floor.
fn crate_box() -> Framing {
    Framing {
        center: [0.0, 0.0, 1.0],
        radius: 3f64.sqrt(),
        distance: 6.0,
        bbox_min: [-1.0, -1.0, 0.0],
        bbox_max: [1.0, 1.0, 2.0],
        objects: vec!["Crate".to_owned()],
    }
}

fn scene(offset: u32, limit: u32) -> SceneInfo {
    let object = |name: &str, kind: &str, location: [f64; 3]| SceneObject {
        name: name.to_owned(),
        kind: kind.to_owned(),
        location,
        rotation_euler: [0.0; 3],
        scale: [1.0; 3],
        dimensions: [2.0; 3],
        bbox_min: [location[0] - 1.0, location[1] - 1.0, location[2] - 1.0],
        bbox_max: [location[0] + 1.0, location[1] + 1.0, location[2] + 1.0],
        visible: true,
        parent: None,
        materials: Vec::new(),
        modifiers: Vec::new(),
        mesh: None,
        shape_keys: Vec::new(),
        light: None,
        camera: None,
        source: None,
    };
    let camera = SceneObject {
        camera: Some(CameraInfo {
            kind: "PERSP".to_owned(),
            lens: 50.0,
        }),
        dimensions: [0.0; 3],
        ..object("Camera", "CAMERA", [6.0, -6.0, 4.0])
    };
    let crate_mesh = SceneObject {
        mesh: Some(MeshStats {
            vertices: 8,
            polygons: 6,
        }),
        ..object("Crate", "MESH", [0.0, 0.0, 1.0])
    };
    // Sorted by name, paged like the bridge's.
    let objects = [camera, crate_mesh];
    let total = objects.len() as u32;
    let page: Vec<_> = objects
        .into_iter()
        .skip(offset as usize)
        .take(limit as usize)
        .collect();
    let next = offset + page.len() as u32;
    SceneInfo {
        blender_version: "5.0.1".to_owned(),
        scene: "Scene".to_owned(),
        unit_system: "METRIC".to_owned(),
        frame_current: 1,
        frame_start: 1,
        frame_end: 250,
        active_camera: Some("Camera".to_owned()),
        render_engine: "BLENDER_WORKBENCH".to_owned(),
        total_objects: total,
        offset,
        next_offset: (next < total).then_some(next),
        objects: page,
        materials: Vec::new(),
    }
}

fn posed(pose: &CameraPose) -> CameraState {
    CameraState {
        camera: pose
            .camera
            .clone()
            .unwrap_or_else(|| VIEW_CAMERA.to_owned()),
        location: pose.location.unwrap_or_default(),
        rotation_euler: pose.rotation_euler.unwrap_or_default(),
        lens: pose.lens.unwrap_or(50.0),
        framing: None,
    }
}

/// `camera` framing the crate from `direction`, as `frame_objects` leaves it.
fn framed(camera: &str, direction: [f64; 3]) -> CameraState {
    let framing = crate_box();
    let length = direction
        .iter()
        .map(|d| d * d)
        .sum::<f64>()
        .sqrt()
        .max(1e-9);
    let location: [f64; 3] = std::array::from_fn(|axis| {
        framing.center[axis] + direction[axis] / length * framing.distance
    });
    CameraState {
        camera: camera.to_owned(),
        location,
        rotation_euler: [0.0; 3],
        lens: 50.0,
        framing: Some(framing),
    }
}

/// A render of the requested size, inline or written where the request says (as the bridge
/// does for a client on the same machine).
fn render(
    camera: &str,
    spec: &RenderSpec,
    output_path: Option<&str>,
) -> Result<RenderReply, TransportError> {
    let png = grey_png(spec.width, spec.height);
    let (image, path) = match output_path {
        Some(path) => {
            std::fs::write(path, &png).map_err(|err| TransportError::Refused {
                command: "render",
                kind: FaultKind::BlenderError,
                message: format!("cannot write {path}: {err}"),
                traceback: None,
            })?;
            (None, Some(path.to_owned()))
        }
        None => (Some(ImageData::png(png)), None),
    };
    Ok(RenderReply {
        image,
        path,
        width: spec.width,
        height: spec.height,
        engine: spec.engine,
        camera: camera.to_owned(),
        render_ms: 1.0,
    })
}

/// A mid-grey PNG of `width` x `height`: 8-bit greyscale in stored (uncompressed) deflate
/// blocks, so writing it takes no image crate and every decoder reads it.
pub(crate) fn grey_png(width: u32, height: u32) -> Vec<u8> {
    let mut rows = Vec::with_capacity((1 + width as usize) * height as usize);
    for _ in 0..height {
        rows.push(0); // filter type: none
        rows.extend(std::iter::repeat_n(128u8, width as usize));
    }
    let mut header = Vec::with_capacity(13);
    header.extend(width.to_be_bytes());
    header.extend(height.to_be_bytes());
    // Bit depth 8, greyscale, deflate, standard filtering, not interlaced.
    header.extend([8, 0, 0, 0, 0]);
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    push_chunk(&mut png, b"IHDR", &header);
    push_chunk(&mut png, b"IDAT", &zlib_stored(&rows));
    push_chunk(&mut png, b"IEND", &[]);
    png
}

fn push_chunk(png: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    png.extend((data.len() as u32).to_be_bytes());
    png.extend(kind);
    png.extend(data);
    png.extend(crc32(kind.iter().chain(data)).to_be_bytes());
}

/// `data` as a zlib stream of stored deflate blocks (at most 65 535 bytes each).
fn zlib_stored(data: &[u8]) -> Vec<u8> {
    let mut stream = vec![0x78, 0x01];
    let blocks = data.chunks(0xFFFF).count();
    for (index, block) in data.chunks(0xFFFF).enumerate() {
        stream.push(u8::from(index + 1 == blocks)); // BFINAL on the last; BTYPE 00, stored
        let length = block.len() as u16;
        stream.extend(length.to_le_bytes());
        stream.extend((!length).to_le_bytes());
        stream.extend(block);
    }
    let (mut a, mut b) = (1u32, 0u32);
    for byte in data {
        a = (a + u32::from(*byte)) % 65_521;
        b = (b + a) % 65_521;
    }
    stream.extend(((b << 16) | a).to_be_bytes());
    stream
}

fn crc32<'a>(bytes: impl Iterator<Item = &'a u8>) -> u32 {
    let mut crc = !0u32;
    for byte in bytes {
        crc ^= u32::from(*byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[test]
fn the_fake_png_is_a_png_of_the_requested_size() {
    for (width, height) in [(1, 1), (48, 32), (400, 400)] {
        let png = grey_png(width, height);
        assert_eq!(
            viga_skills::metrics::image_size(&png).unwrap(),
            (width, height)
        );
        // Decoded in full (checksums included), not only its header.
        viga_skills::montage::decode_view("fake", &png).unwrap();
    }
    assert_eq!(
        crc32(b"IEND".iter()),
        0xAE42_6082,
        "the CRC every PNG ends with"
    );
}

#[tokio::test]
async fn every_reply_has_the_shape_its_command_promises() {
    use viga_blender::BlenderCommands as _;
    use viga_protocol::bridge::{FramedViewsRequest, RenderEngine, RenderRequest};

    let blender = FakeBlender::new();
    let spec = RenderSpec {
        engine: RenderEngine::Workbench,
        width: 40,
        height: 30,
        samples: None,
    };
    assert!(
        blender
            .execute("pass", None, None)
            .await
            .unwrap()
            .succeeded()
    );
    let info = blender.scene_info(0, 1).await.unwrap();
    assert_eq!(
        (
            info.active_camera.as_deref(),
            info.objects.len(),
            info.next_offset
        ),
        (Some("Camera"), 1, Some(1))
    );
    let request = RenderRequest {
        camera: None,
        pose: None,
        spec,
        output_path: None,
    };
    let output = blender.render(request, None).await.unwrap();
    assert_eq!((output.width, output.height), (40, 30));
    let folder = tempfile::tempdir().unwrap();
    let written = folder.path().join("view.png");
    let request = FramedViewsRequest {
        objects: Vec::new(),
        padding: None,
        directions: vec![[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]],
        spec,
        output_paths: vec![
            written.to_string_lossy().into_owned(),
            folder.path().join("top.png").to_string_lossy().into_owned(),
        ],
    };
    let views = blender.render_framed_views(request, None).await.unwrap();
    assert_eq!(views.len(), 2);
    assert_eq!(views[1].framing.location, [0.0, 0.0, 7.0]);
    assert!(written.is_file(), "written where the request said");
    blender.set_camera(CameraPose::default()).await.unwrap();
    blender
        .set_visibility(vec!["Crate".into()], false)
        .await
        .unwrap();
    blender.set_frame(3).await.unwrap();
    blender.list_keyframes().await.unwrap();
    blender.save_blend("/nowhere/final.blend").await.unwrap();
    blender.load_blend("/nowhere/base.blend").await.unwrap();
    assert_eq!(
        blender.names(),
        [
            "execute",
            "scene_info",
            "render",
            "render_framed_views",
            "set_camera",
            "set_visibility",
            "set_frame",
            "list_keyframes",
            "save_blend",
            "load_blend"
        ]
    );
}

#[tokio::test]
async fn scripted_faults_hit_only_the_call_they_name() {
    use viga_blender::BlenderCommands as _;

    let blender = FakeBlender::new()
        .on("execute", 2, Fault::Lost)
        .on("execute", 3, Fault::Garbage)
        .on("scene_info", 1, Fault::Refuse);
    assert!(blender.execute("pass", None, None).await.is_ok());
    let lost = blender.execute("pass", None, None).await.unwrap_err();
    assert!(
        matches!(
            lost,
            TransportError::Lost {
                command: "execute",
                recovery: Recovery::Restarted { .. },
                ..
            }
        ),
        "{lost}"
    );
    let garbage = blender.execute("pass", None, None).await.unwrap_err();
    assert!(
        matches!(
            garbage,
            TransportError::MalformedReply {
                command: "execute",
                ..
            }
        ),
        "{garbage}"
    );
    assert!(blender.execute("pass", None, None).await.is_ok());
    let refused = blender.scene_info(0, 10).await.unwrap_err();
    assert!(
        matches!(refused, TransportError::Refused { .. }),
        "{refused}"
    );
    assert_eq!(blender.scene_info(0, 10).await.unwrap().total_objects, 2);
}
