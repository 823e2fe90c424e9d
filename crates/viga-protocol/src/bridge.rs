//! Frames spoken between viga and the bridge running inside Blender.
//!
//! Every frame is a 4-byte big-endian length followed by that many bytes of UTF-8 JSON. The
//! client's first frame is [`BridgeCommand::Hello`] with the worker's token; every request
//! carries an `id` that its reply echoes. Replies are [`BridgeReply`]: `ok` with a `result`
//! whose shape depends on the command, or a [`BridgeFault`]. An exception raised by a user
//! program is not a fault: `execute` returns it inside its
//! [`ExecutionResult`](crate::iteration::ExecutionResult).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::message::ImageData;
use crate::secret::Secret;

/// The line the bridge prints on stdout once it listens: the marker, then JSON
/// `{"port", "pid", "mode"}`.
pub const READY_MARKER: &str = "VIGA_BRIDGE_READY ";
/// The environment variable that hands the bridge its token.
pub const TOKEN_ENV: &str = "VIGA_BRIDGE_TOKEN";
/// The environment variable naming the process the bridge must not outlive.
pub const PARENT_PID_ENV: &str = "VIGA_PARENT_PID";
/// The environment variable naming the file the bridge keeps the end of the running
/// program's output in, for viga to read when it had to stop the program.
pub const PROGRAM_LOG_ENV: &str = "VIGA_PROGRAM_LOG";
/// The largest request frame the bridge accepts.
pub const MAX_REQUEST_BYTES: u32 = 16 * 1024 * 1024;
/// The largest reply frame viga accepts (renders travel inline as base64 PNG).
pub const MAX_REPLY_BYTES: u32 = 512 * 1024 * 1024;

/// A request frame.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BridgeRequest {
    pub id: u64,
    #[serde(flatten)]
    pub command: BridgeCommand,
}

/// What Blender should do. The tag is `command`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "command", rename_all = "snake_case")]
pub enum BridgeCommand {
    Hello {
        token: Secret,
        protocol_version: u32,
    },
    Ping,
    /// Run a program; with `reset`, first reload the base scene so the program runs on a
    /// known state and every iteration is reproducible from its code.
    Execute {
        code: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reset: Option<SceneReset>,
    },
    /// One page of the scene summary, objects sorted by name.
    SceneInfo {
        offset: u32,
        limit: u32,
    },
    Render(RenderRequest),
    /// Create or move a camera (the verifier's view camera when unnamed).
    SetCamera(CameraPose),
    /// Point a camera at the joint bounding box of some objects (all visible meshes when
    /// none are named), with padding.
    FrameObjects(FrameRequest),
    /// Frame the same objects from each direction in turn and render that view: what
    /// `frame_objects` and `render` do, for several views in one round trip.
    RenderFramedViews(FramedViewsRequest),
    SetVisibility {
        objects: Vec<String>,
        visible: bool,
    },
    SetFrame {
        frame: i32,
    },
    ListKeyframes,
    SaveBlend {
        path: String,
    },
    LoadBlend {
        path: String,
    },
    /// Save the scene where a restarted worker can restore it from.
    Checkpoint {
        path: String,
    },
    Restore {
        path: String,
    },
    /// Discover add-ons that ship an `addon_ai.json` manifest: installed add-ons, and every
    /// add-on package in `folder` when given (loaded, registered, then listed).
    ListAddons {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        folder: Option<String>,
    },
    /// Run one command of a registered add-on on the main thread; the reply carries the
    /// command's result and a fresh scene summary.
    AddonCommand {
        addon_id: String,
        /// The add-on's command (its tool name); `command` is taken by the frame's tag.
        tool: String,
        params: Value,
        /// Make the command one undo step of this name in the same main-thread call (a
        /// command that raises is taken back at once), so nothing can come between the
        /// command and its step.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        undo_step: Option<String>,
    },
    /// Run a program on the open scene as one undo step named `message` (the state before
    /// is pushed first); a program that fails is undone at once. For a person's Blender.
    ApplyProgram {
        code: String,
        message: String,
    },
    /// Record the scene as an undo step named `message`.
    UndoPush {
        message: String,
    },
    /// Go back one undo step.
    Undo,
    /// Bring a Geometry Nodes run's result from the .blend at `path` (saved by viga's worker)
    /// into the open scene as one undo step named `message`: its node groups appended (and
    /// replacing those of the same name), its modifiers created or updated. No program runs;
    /// the bridge checks the file's datablocks, names and values first, and a result it
    /// refuses leaves the scene as it was. For a person's Blender.
    ImportGnResult {
        path: String,
        /// The node groups of a [`crate::gn::GnResult`].
        node_groups: Vec<String>,
        /// The modifiers of a [`crate::gn::GnResult`].
        modifiers: Vec<crate::gn::GnModifierResult>,
        message: String,
    },
    /// Fingerprints of the open scene's objects and of the file's datablocks, to compare
    /// before and after a program ([`SceneFingerprints`]). For viga's own workers.
    SceneFingerprints,
    /// Make the open scene match a scene run's result, from the .blend at `path` (saved by
    /// viga's worker), as one undo step named `message`, following `plan`: what it names is
    /// appended, checked (no text, no driver needing Python, nothing linked, no node type
    /// written in Python, no script node, nothing that would read or write a file there) and
    /// put in place. No program runs; a result the bridge refuses leaves the scene as it was.
    /// For a person's Blender.
    ImportSceneResult {
        path: String,
        plan: SceneResultPlan,
        message: String,
    },
    Shutdown,
}

impl BridgeCommand {
    /// The wire name of the command, for messages and logs.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Hello { .. } => "hello",
            Self::Ping => "ping",
            Self::Execute { .. } => "execute",
            Self::SceneInfo { .. } => "scene_info",
            Self::Render(_) => "render",
            Self::SetCamera(_) => "set_camera",
            Self::FrameObjects(_) => "frame_objects",
            Self::RenderFramedViews(_) => "render_framed_views",
            Self::SetVisibility { .. } => "set_visibility",
            Self::SetFrame { .. } => "set_frame",
            Self::ListKeyframes => "list_keyframes",
            Self::SaveBlend { .. } => "save_blend",
            Self::LoadBlend { .. } => "load_blend",
            Self::Checkpoint { .. } => "checkpoint",
            Self::Restore { .. } => "restore",
            Self::ListAddons { .. } => "list_addons",
            Self::AddonCommand { .. } => "addon_command",
            Self::ApplyProgram { .. } => "apply_program",
            Self::UndoPush { .. } => "undo_push",
            Self::Undo => "undo",
            Self::ImportGnResult { .. } => "import_gn_result",
            Self::SceneFingerprints => "scene_fingerprints",
            Self::ImportSceneResult { .. } => "import_scene_result",
            Self::Shutdown => "shutdown",
        }
    }
}

/// The state a program starts from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum SceneReset {
    /// An empty factory-settings scene.
    Factory,
    /// A `.blend` file, reopened.
    Blend { path: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub enum RenderEngine {
    /// Fast OpenGL shading; no materials' full look. About 1 s at 256x256 on a CPU.
    #[default]
    #[serde(rename = "WORKBENCH")]
    Workbench,
    /// Path tracing; set `samples` low on a CPU.
    #[serde(rename = "CYCLES")]
    Cycles,
    /// Rasterised; without a GPU it falls back to software GL and takes about a minute.
    #[serde(rename = "EEVEE")]
    Eevee,
}

/// Reads an engine as a person types it (`workbench`, `cycles`, `eevee`, any case).
impl std::str::FromStr for RenderEngine {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.to_ascii_lowercase().as_str() {
            "workbench" => Ok(Self::Workbench),
            "cycles" => Ok(Self::Cycles),
            "eevee" => Ok(Self::Eevee),
            other => Err(format!(
                "unknown engine {other:?}; use workbench, cycles or eevee"
            )),
        }
    }
}

/// How images are rendered: the engine, the size and the samples. Run settings, eval
/// settings, the tools' render settings and the `render` / `render_framed_views` requests
/// (flattened) all hold one, so they cannot drift apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RenderSpec {
    pub engine: RenderEngine,
    pub width: u32,
    pub height: u32,
    /// Cycles / EEVEE samples; Workbench ignores it.
    // Left out when unset: requests carry the spec flattened, and the bridge reads a missing
    // `samples` as the engine's default where `null` would fail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples: Option<u32>,
}

/// "Cycles 64x64 16 spp", "Workbench 512x512": for logs and reports.
impl std::fmt::Display for RenderSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let engine = match self.engine {
            RenderEngine::Workbench => "Workbench",
            RenderEngine::Cycles => "Cycles",
            RenderEngine::Eevee => "EEVEE",
        };
        write!(f, "{engine} {}x{}", self.width, self.height)?;
        match self.samples {
            Some(samples) if self.engine != RenderEngine::Workbench => write!(f, " {samples} spp"),
            _ => Ok(()),
        }
    }
}

/// One render of the scene, from a camera or an explicit pose.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RenderRequest {
    /// A camera object to render from; the scene camera when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub camera: Option<String>,
    /// An explicit pose, rendered from a temporary camera (overrides `camera`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pose: Option<CameraPose>,
    /// Engine, size and samples: `engine`, `width`, `height` and `samples` on the wire.
    #[serde(flatten)]
    pub spec: RenderSpec,
    /// Write the PNG here instead of sending it inline (for clients on the same machine).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_path: Option<String>,
}

/// A camera pose. `look_at` wins over `rotation_euler` when both are given.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CameraPose {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub camera: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<[f64; 3]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotation_euler: Option<[f64; 3]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub look_at: Option<[f64; 3]>,
    /// Focal length in millimetres.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lens: Option<f64>,
    /// Make this the scene camera (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub make_active: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FrameRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub camera: Option<String>,
    /// Objects to frame; every visible mesh when empty.
    #[serde(default)]
    pub objects: Vec<String>,
    /// Fraction of the bounding sphere's radius added around it (0.1 = 10%).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub padding: Option<f64>,
    /// Direction from the box centre towards the camera (default (1, -1, 0.8)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direction: Option<[f64; 3]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub make_active: Option<bool>,
}

/// Views of the same objects from several directions, each framed like `frame_objects`
/// (on the verifier's view camera) and rendered from it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FramedViewsRequest {
    /// Objects to frame; every visible mesh when empty.
    #[serde(default)]
    pub objects: Vec<String>,
    /// Fraction of the bounding sphere's radius added around it (0.1 = 10%).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub padding: Option<f64>,
    /// One view per direction (from the box centre towards the camera), rendered in order.
    pub directions: Vec<[f64; 3]>,
    /// Engine, size and samples of every view: `engine`, `width`, `height` and `samples` on
    /// the wire.
    #[serde(flatten)]
    pub spec: RenderSpec,
    /// One path per direction to write the PNGs to (clients on the same machine); without
    /// them the PNGs come inline.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub output_paths: Vec<String>,
}

/// The `render_framed_views` reply on the wire: one view per requested direction, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FramedViewsReply {
    pub views: Vec<FramedViewReply>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FramedViewReply {
    /// Where the view camera was put, and what it framed.
    pub framing: CameraState,
    pub render: RenderReply,
}

/// One view of `render_framed_views`, its image in memory.
#[derive(Debug, Clone, PartialEq)]
pub struct FramedRender {
    pub framing: CameraState,
    pub output: RenderOutput,
}

/// A reply frame.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BridgeReply {
    /// The request's id; null when the request could not be read.
    pub id: Option<u64>,
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<BridgeFault>,
    /// Time Blender spent handling the request, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elapsed_ms: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    Auth,
    Version,
    BadFrame,
    BadRequest,
    UnknownCommand,
    NotFound,
    BlenderError,
    // Refused in a person's Blender: the command would replace or close their open file.
    // (Plain comments: doc comments would split the schema's enum into one branch each.)
    UserScene,
    // Blender could not record or go back an undo step.
    UndoUnavailable,
    // The add-on was disabled while the request waited.
    ShuttingDown,
    // The bridge serves another client; it serves one at a time.
    Busy,
    // A Geometry Nodes or scene result that does not fit the scene, or carries what a
    // person's scene must not take in (a text, a driver needing Python, linked data, a script
    // node); nothing was changed.
    ResultRefused,
}

/// Why the bridge refused or failed a command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BridgeFault {
    pub kind: FaultKind,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceback: Option<String>,
}

/// The bridge's answer to `hello`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HelloInfo {
    pub protocol_version: u32,
    pub blender_version: String,
    pub capabilities: Vec<String>,
    pub pid: u32,
    /// `serve`, `queue` or `addon`.
    pub mode: String,
}

/// What `apply_program` did to the open scene.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AppliedProgram {
    pub execution: crate::iteration::ExecutionResult,
    /// The program failed and its partial changes were undone: the scene is as before.
    pub reverted: bool,
    /// The program enabled or disabled an add-on (false when an older bridge did not say).
    #[serde(default)]
    pub addons_changed: bool,
}

/// What `scene_fingerprints` reports of the open scene: a digest of each of its objects and
/// of each datablock of the file, by name. Datablocks linked from a library are left out:
/// a result never replaces them.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SceneFingerprints {
    pub scene: String,
    /// The scene's camera object.
    pub camera: Option<String>,
    /// The scene's world.
    pub world: Option<String>,
    pub objects: BTreeMap<String, ObjectFingerprint>,
    /// Every collection of the scene, with the collection it is a child of (`""`: the
    /// scene's own collection).
    pub collections: BTreeMap<String, String>,
    /// bpy.data collection (`meshes`, `materials`, ...) -> datablock name -> digest.
    pub data: BTreeMap<String, BTreeMap<String, String>>,
}

/// One object of a scene, fingerprinted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ObjectFingerprint {
    pub fingerprint: String,
    /// The collections of the scene it is in (`""`: the scene's own collection).
    pub collections: Vec<String>,
}

/// What `import_scene_result` takes from a scene run's result, and what it does with the
/// open scene.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SceneResultPlan {
    /// The run started from a copy of this scene: what it changed replaces the scene's own,
    /// what it removed is removed, and what it left unchanged is the scene's. Otherwise the
    /// result only adds.
    pub from_open_scene: bool,
    /// The objects the run made or changed.
    pub objects: Vec<BroughtObject>,
    /// The objects the run removed.
    pub remove: Vec<String>,
    /// bpy.data collection -> the datablocks the run changed: each replaces the scene's
    /// datablock of its name, wherever that is used.
    pub changed: BTreeMap<String, Vec<String>>,
    /// bpy.data collection -> the datablocks the run made: they come in under their own
    /// names (numbered when a name is taken).
    pub added: BTreeMap<String, Vec<String>>,
    /// Where a collection the objects are put in sits, for one the scene does not have:
    /// collection -> parent (`""`: the scene's own collection).
    pub collections: BTreeMap<String, String>,
    pub camera: SceneLink,
    pub world: SceneLink,
}

/// An object a result brings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BroughtObject {
    pub name: String,
    /// It replaces the scene's object of its name (which the run changed).
    pub replaces: bool,
    /// The collections of the scene it goes in (`""`: the scene's own collection); made
    /// where missing.
    pub collections: Vec<String>,
}

/// What a result does with the scene's camera or world.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum SceneLink {
    /// Left as it is.
    #[default]
    Keep,
    /// Unset: the run's scene has none.
    Clear,
    /// The object (camera) or world of this name: the result's, or the scene's own.
    Use(String),
}

/// What `import_scene_result` did to the open scene, as one undo step.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SceneResultImported {
    /// Objects the result added, by their names in the scene.
    pub added: Vec<String>,
    /// Objects of the scene the result's replaced.
    pub replaced: Vec<String>,
    /// Objects removed from the scene.
    pub removed: Vec<String>,
    /// Datablocks of the file the result's replaced, as `collection/name`.
    pub data_replaced: Vec<String>,
    /// Datablocks the result added, as `collection/name`.
    pub data_added: Vec<String>,
    /// Collections made to put objects in.
    pub collections_made: Vec<String>,
    /// Result name -> name in the scene, for objects whose name was taken.
    pub renamed: BTreeMap<String, String>,
    /// The scene's camera and world afterwards.
    pub camera: Option<String>,
    pub world: Option<String>,
    /// What could not be done as the result has it (a camera no longer in the scene).
    pub notes: Vec<String>,
}

/// The connection file a person's Blender writes while the viga add-on serves it
/// (`blender-<pid>.json` in a folder only its user can read), so `viga ... --attach` can
/// find and authenticate to it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ConnectionInfo {
    /// The loopback TCP port the add-on's bridge listens on.
    pub port: u16,
    pub token: Secret,
    /// The Blender process; a file whose process is gone is stale.
    pub pid: u32,
    pub protocol_version: u32,
    #[serde(default)]
    pub blender_version: String,
    /// The Blender executable (empty for Blender as a Python module): viga can start its
    /// own workers from it when no other Blender is set up.
    #[serde(default)]
    pub binary_path: String,
}

/// One page of the scene summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SceneInfo {
    pub blender_version: String,
    pub scene: String,
    pub unit_system: String,
    pub frame_current: i32,
    pub frame_start: i32,
    pub frame_end: i32,
    pub active_camera: Option<String>,
    pub render_engine: String,
    pub total_objects: u32,
    pub offset: u32,
    /// The offset of the next page; null on the last page.
    pub next_offset: Option<u32>,
    pub objects: Vec<SceneObject>,
    pub materials: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SceneObject {
    pub name: String,
    /// Blender object type: MESH, LIGHT, CAMERA, EMPTY, ...
    #[serde(rename = "type")]
    pub kind: String,
    pub location: [f64; 3],
    pub rotation_euler: [f64; 3],
    pub scale: [f64; 3],
    pub dimensions: [f64; 3],
    /// World-space axis-aligned bounding box.
    pub bbox_min: [f64; 3],
    pub bbox_max: [f64; 3],
    pub visible: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub materials: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub modifiers: Vec<ModifierInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mesh: Option<MeshStats>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shape_keys: Vec<ShapeKeyInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub light: Option<LightInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub camera: Option<CameraInfo>,
    /// Where viga's tools got the object from, as its `viga_source` custom property says:
    /// `init` (reconstructed from the target picture before the first round), or an asset
    /// source (`local`, `polyhaven`, `meshy`). Absent for objects programs made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ModifierInfo {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MeshStats {
    pub vertices: u32,
    pub polygons: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ShapeKeyInfo {
    pub name: String,
    pub value: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LightInfo {
    #[serde(rename = "type")]
    pub kind: String,
    pub energy: f64,
    pub color: [f64; 3],
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CameraInfo {
    #[serde(rename = "type")]
    pub kind: String,
    pub lens: f64,
}

/// The `render` reply on the wire: the PNG inline, or the path it was written to when the
/// request named an `output_path`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RenderReply {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ImageData>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    pub width: u32,
    pub height: u32,
    pub engine: RenderEngine,
    pub camera: String,
    pub render_ms: f64,
}

/// A rendered image, in memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RenderOutput {
    pub image: ImageData,
    pub width: u32,
    pub height: u32,
    pub engine: RenderEngine,
    pub camera: String,
    /// Time Blender spent rendering, in milliseconds.
    pub render_ms: f64,
}

/// A picture of one view as the loop keeps it, whoever made it (Blender, LibreOffice,
/// Chromium).
#[derive(Debug, Clone, PartialEq)]
pub struct ViewPicture {
    pub image: ImageData,
    pub width: u32,
    pub height: u32,
    /// Time the renderer spent making it, in milliseconds.
    pub render_ms: f64,
    /// The Blender engine that rendered it; `None` for a renderer that is not Blender.
    pub engine: Option<RenderEngine>,
}

impl From<RenderOutput> for ViewPicture {
    fn from(output: RenderOutput) -> Self {
        Self {
            image: output.image,
            width: output.width,
            height: output.height,
            render_ms: output.render_ms,
            engine: Some(output.engine),
        }
    }
}

/// Where a camera is after `set_camera` or `frame_objects`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CameraState {
    pub camera: String,
    pub location: [f64; 3],
    pub rotation_euler: [f64; 3],
    pub lens: f64,
    /// Set by `frame_objects`: what was framed and how.
    #[serde(default, skip_serializing_if = "Option::is_none", flatten)]
    pub framing: Option<Framing>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Framing {
    pub center: [f64; 3],
    /// Radius of the bounding sphere of the joint box.
    pub radius: f64,
    /// Distance from the camera to the centre.
    pub distance: f64,
    pub bbox_min: [f64; 3],
    pub bbox_max: [f64; 3],
    pub objects: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct VisibilityChange {
    pub objects: Vec<String>,
    pub visible: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct FrameState {
    pub frame: i32,
    pub frame_start: i32,
    pub frame_end: i32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Keyframes {
    /// Every frame that holds a keyframe, ascending.
    pub frames: Vec<i32>,
    pub objects: BTreeMap<String, Vec<i32>>,
}

/// An add-on the bridge found: its manifest as written (validated on viga's side) and where
/// it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DiscoveredAddon {
    /// The manifest file.
    pub path: String,
    /// The manifest's JSON, unvalidated: viga validates it and names the add-on and field.
    pub manifest: Value,
    /// Whether the add-on exposes command handlers (`VIGA_COMMANDS`).
    pub has_handlers: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AddonListing {
    pub addons: Vec<DiscoveredAddon>,
    /// Add-ons whose files could not be read or loaded, with the reason.
    #[serde(default)]
    pub problems: Vec<String>,
}

/// What an add-on command answered, and the scene after it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AddonCommandResult {
    pub result: Value,
    /// One line per object after the command: the context the model sees next.
    pub scene: Vec<String>,
}

/// A `.blend` saved or opened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct BlendFile {
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub objects: Option<u32>,
}

crate::validate::plain_protocol_types!(BridgeRequest, BridgeReply, ConnectionInfo);

// A camera pose can come from a model (a translated camera instruction), so it is validated.
crate::validate::plain_protocol_types!(CameraPose);
