//! A stand-in Blender for unit tests of the layers above the transport (the loop, the
//! add-on registry, the gateway): it answers every bridge command with a small,
//! schema-valid reply (built from the protocol's own reply types), records every call, and
//! can be told to fail chosen calls the ways a real worker fails, or to answer a command
//! with a reply the test wrote. No process, no socket, so a whole run takes milliseconds.
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
//! fake only stands in where the decisions above the transport are under test. Tests that
//! wrap a real worker to break it on cue schedule their faults with [`FaultPlan`] too.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard};
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

/// The camera viga frames views with (`viga_skills::camera::VIEW_CAMERA`, which this crate
/// cannot name: viga-skills is above it).
pub const VIEW_CAMERA: &str = "viga_view_camera";
/// The Blender version the fake reports unless told another ([`FakeBlender::blender_version`]).
pub const BLENDER_VERSION: &str = "5.0.1";
/// What the supervisor says when it could not start a new Blender.
pub const START_FAILURE: &str =
    "Blender exited before the bridge was ready (exit status: 3): broken on purpose by the fake";
/// What the fake says when it refuses a command.
pub const REFUSAL: &str = "refused by the fake Blender on purpose";

/// What the fake does to one call instead of answering it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
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

/// Which call of which command gets which fault: the n-th call of a command (1-based,
/// counting every call, the loop's re-runs included). For the fake, and for tests that wrap
/// a real worker and break it on cue.
#[derive(Debug)]
pub struct FaultPlan<F> {
    faults: Vec<(&'static str, usize, F)>,
    counts: Mutex<HashMap<&'static str, usize>>,
}

impl<F: Copy> FaultPlan<F> {
    pub fn new() -> Self {
        Self {
            faults: Vec::new(),
            counts: Mutex::new(HashMap::new()),
        }
    }

    /// Plans `fault` for the `nth` call (1-based) of `command` (its wire name, `"render"`).
    pub fn on(mut self, command: &'static str, nth: usize, fault: F) -> Self {
        self.faults.push((command, nth, fault));
        self
    }

    /// Counts a call of `command` and returns the fault planned for it, if any.
    pub fn next(&self, command: &'static str) -> Option<F> {
        let nth = {
            let mut counts = locked(&self.counts);
            let count = counts.entry(command).or_default();
            *count += 1;
            *count
        };
        self.faults
            .iter()
            .find(|(faulty, at, _)| *faulty == command && *at == nth)
            .map(|(_, _, fault)| *fault)
    }
}

impl<F: Copy> Default for FaultPlan<F> {
    fn default() -> Self {
        Self::new()
    }
}

/// A Blender that answers everything, records every call, and fails the calls it was told to.
#[derive(Debug)]
pub struct FakeBlender {
    plan: FaultPlan<Fault>,
    /// A fault for every call, before the plan is asked (a Blender that never starts).
    every_call: Option<Fault>,
    /// Replies the test wrote, by command name, in place of the fake's own.
    scripted: Mutex<HashMap<&'static str, Value>>,
    blender_version: String,
    calls: Mutex<Vec<BridgeCommand>>,
    /// How many calls are hanging now, for tests that act while one does.
    hanging: watch::Sender<usize>,
}

impl Default for FakeBlender {
    fn default() -> Self {
        Self::new()
    }
}

impl FakeBlender {
    pub fn new() -> Self {
        Self {
            plan: FaultPlan::new(),
            every_call: None,
            scripted: Mutex::new(HashMap::new()),
            blender_version: BLENDER_VERSION.to_owned(),
            calls: Mutex::new(Vec::new()),
            hanging: watch::channel(0).0,
        }
    }

    /// Fails the `nth` call (1-based) of `command` (its wire name, `"render"`) with `fault`.
    pub fn on(mut self, command: &'static str, nth: usize, fault: Fault) -> Self {
        self.plan = self.plan.on(command, nth, fault);
        self
    }

    /// Fails every call with `fault`.
    pub fn failing_every_call(mut self, fault: Fault) -> Self {
        self.every_call = Some(fault);
        self
    }

    /// Reports `version` as Blender's, in `hello` and `scene_info`.
    pub fn blender_version(mut self, version: &str) -> Self {
        version.clone_into(&mut self.blender_version);
        self
    }

    /// Answers every later call of `command` (its wire name) with `reply`, as it stands:
    /// for replies the fake does not make up, such as an add-on listing. May change while
    /// a test runs.
    pub fn answer(&self, command: &'static str, reply: Value) {
        locked(&self.scripted).insert(command, reply);
    }

    /// Every call so far, in order, with its arguments.
    pub fn calls(&self) -> Vec<BridgeCommand> {
        locked(&self.calls).clone()
    }

    /// The wire names of every call so far, in order.
    pub fn names(&self) -> Vec<&'static str> {
        self.calls().iter().map(BridgeCommand::name).collect()
    }

    /// How many calls of `command` (its wire name) there were so far.
    pub fn count(&self, command: &str) -> usize {
        locked(&self.calls)
            .iter()
            .filter(|call| call.name() == command)
            .count()
    }

    /// Returns once a call is hanging ([`Fault::Hang`]).
    pub async fn hanging(&self) {
        let mut hanging = self.hanging.subscribe();
        // The sender lives in `self`, so the channel cannot close while this waits.
        let _ = hanging.wait_for(|count| *count > 0).await;
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
        locked(&self.calls).push(command.clone());
        let name = command.name();
        if let Some(fault) = self.every_call.or_else(|| self.plan.next(name)) {
            return self.fail(name, fault).await;
        }
        if let Some(scripted) = locked(&self.scripted).get(name) {
            return Ok(scripted.clone());
        }
        answer(&command, &self.blender_version)
    }

    fn describe(&self) -> String {
        "fake Blender (tests)".to_owned()
    }
}

/// What the bridge would answer `command` with, on a scene holding a crate and a camera.
fn answer(command: &BridgeCommand, blender_version: &str) -> Result<Value, TransportError> {
    match command {
        BridgeCommand::Render(_)
        | BridgeCommand::SetCamera(_)
        | BridgeCommand::FrameObjects(_)
        | BridgeCommand::RenderFramedViews(_) => look(command),
        _ => state(command, blender_version),
    }
}

/// The answers to the commands that look at the scene: renders and camera moves.
fn look(command: &BridgeCommand) -> Result<Value, TransportError> {
    Ok(match command {
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
        // `answer` sends only the looks here.
        other => {
            return Err(TransportError::Refused {
                command: other.name(),
                kind: FaultKind::NotFound,
                message: "not a look at the scene".to_owned(),
                traceback: None,
            });
        }
    })
}

/// The answers to every command but the looks.
fn state(command: &BridgeCommand, blender_version: &str) -> Result<Value, TransportError> {
    Ok(match command {
        BridgeCommand::Hello { .. } => reply(HelloInfo {
            protocol_version: viga_protocol::PROTOCOL_VERSION,
            blender_version: blender_version.to_owned(),
            capabilities: Vec::new(),
            pid: std::process::id(),
            mode: "serve".to_owned(),
        }),
        BridgeCommand::Ping => json!({"pong": true}),
        BridgeCommand::Execute { .. } => reply(ran()),
        BridgeCommand::SceneInfo { offset, limit } => {
            reply(scene(*offset, *limit, blender_version))
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
            addons_changed: false,
        }),
        BridgeCommand::UndoPush { .. } => json!({"pushed": true}),
        BridgeCommand::Undo => json!({"undone": true}),
        BridgeCommand::Shutdown => json!({}),
        BridgeCommand::Render(_)
        | BridgeCommand::SetCamera(_)
        | BridgeCommand::FrameObjects(_)
        | BridgeCommand::RenderFramedViews(_) => return look(command),
    })
}

/// `value` as JSON; the protocol's reply types always serialize, so a failure is a broken
/// type and fails the test that met it.
fn reply(value: impl Serialize) -> Value {
    serde_json::to_value(value)
        .unwrap_or_else(|err| panic!("a protocol reply type does not serialize: {err}"))
}

/// The lock, also after a test thread panicked holding it: what it guards stays readable.
fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
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

fn scene(offset: u32, limit: u32, blender_version: &str) -> SceneInfo {
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
        blender_version: blender_version.to_owned(),
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
pub fn grey_png(width: u32, height: u32) -> Vec<u8> {
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
