# SPDX-License-Identifier: GPL-3.0-or-later
# The add-on's data. What the user types (mode, task, target, request) and each mode's
# conversation (the list of its run folders, nothing else: the run folders are the record) live
# on the Scene, so they are saved with the .blend; the state of a run, the chat as read from the
# run folders, its log and the discovered add-on tools live on the WindowManager, which is never
# saved: a reopened file does not pretend a run is going.

import bpy
from bpy.types import PropertyGroup
from bpy.props import (
    BoolProperty,
    CollectionProperty,
    EnumProperty,
    IntProperty,
    PointerProperty,
    StringProperty,
)

MAX_LOG_LINES = 200
MAX_LOG_LINE_CHARS = 500

MODES = [
    ("SCENE", "Scene", "Build or edit the scene from a description and an optional target picture"),
    ("GEOMETRY_NODES", "Geometry Nodes", "Build or edit a Geometry Nodes tree on the active object"),
    ("ADDON_TOOLS", "Add-on tools", "Tools that installed add-ons offer to viga through addon_ai.json"),
]

TARGET_SOURCES = [
    ("FILE", "File", "A picture file on disk (PNG or JPEG), or a video of the wanted animation"),
    ("IMAGE", "Image", "An image in this .blend (saved to a temporary PNG when the run starts)"),
    ("FOLDER", "Folder", "A folder of pictures: <Camera>.png for several views, <Camera>_f<frame>.png or "
     "numbered frames for an animation"),
]

CHAT_KINDS = [
    ("REQUEST", "Request", "What the person asked"),
    ("ITERATION", "Iteration", "An iteration (a round, a step) of a run"),
    ("PLAN", "Plan", "The plan the model made"),
    ("CODE", "Program", "A program the model wrote"),
    ("RESULT", "Result", "What running a program did"),
    ("TOOL", "Tool call", "A tool call with its parameters and what came back"),
    ("RENDER", "Render", "A render of the result"),
    ("VERDICT", "Verdict", "What the verifier said"),
    ("GATES", "Gates", "The Geometry Nodes gates' report"),
    ("STEP", "Step", "A Geometry Nodes step"),
    ("ANSWER", "Answer", "The model's last word"),
    ("NOTE", "Note", "A warning or note"),
    ("END", "End", "How the run ended"),
]

RUN_STATES = [
    ("IDLE", "Idle", "No run"),
    ("RUNNING", "Running", "viga is working"),
    ("CANCELLING", "Cancelling", "viga was asked to stop"),
    ("FINISHED", "Finished", "The run ended normally"),
    ("FAILED", "Failed", "The run ended with an error"),
    ("CANCELLED", "Cancelled", "The run was stopped"),
]

RUN_KINDS = [
    ("SCENE", "Scene", "A scene run (viga run)"),
    ("GN", "Geometry Nodes", "A Geometry Nodes run (viga gn)"),
    ("AGENT", "Add-on agent", "An add-on agent run (viga agent)"),
]

LOG_LEVELS = [
    ("INFO", "Info", "Progress of the run"),
    ("OUTPUT", "Output", "What viga printed outside the event stream"),
    ("WARNING", "Warning", "Something went wrong and the run carries on"),
    ("ERROR", "Error", "Something the run could not get past"),
]


class VigaRunRef(PropertyGroup):
    """One turn of a conversation: its run folder, where everything else is."""
    path: StringProperty(name="Run folder", subtype="DIR_PATH")


class VigaTargetView(PropertyGroup):
    """A further target picture and the camera whose view it shows."""
    camera: StringProperty(name="Camera", description="The camera whose view the picture shows")
    file: StringProperty(name="Picture", subtype="FILE_PATH")


def _mode_changed(self, context):
    # The chat shows the conversation of the mode chosen; it is read from its run folders.
    from . import chat  # chat reads this module's conversation(); imported when needed
    chat.reload(context, self.mode)


class VigaSceneSettings(PropertyGroup):
    mode: EnumProperty(name="Mode", items=MODES, default="SCENE", update=_mode_changed)
    task: StringProperty(name="Task", description="What the scene should be, in words")
    target_source: EnumProperty(name="Target", items=TARGET_SOURCES, default="FILE")
    target_file: StringProperty(
        name="Target file", subtype="FILE_PATH",
        description="A picture of the wanted scene (optional)",
    )
    target_image: PointerProperty(
        name="Target image", type=bpy.types.Image,
        description="An image of the wanted scene (optional)",
    )
    request: StringProperty(
        name="Request", description="What to build on the active object, e.g. \"scatter cubes on the plane\"",
    )
    command: StringProperty(
        name="Command", description="What the agent should do with the add-on tools, e.g. \"put the lamp to the left of the table\"",
    )
    addons_folder: StringProperty(
        name="Add-on folder", subtype="DIR_PATH",
        description="Also load add-on packages with an addon_ai.json from this folder (optional)",
    )
    target_folder: StringProperty(
        name="Target folder", subtype="DIR_PATH",
        description="A folder of <Camera>.png pictures, or of an animation's frames",
    )
    target_camera: StringProperty(
        name="Seen from", description="The camera whose view the target shows (empty: the scene's active camera)",
    )
    target_views: CollectionProperty(type=VigaTargetView)
    frames: StringProperty(
        name="Frames", description="Animation frames to compare, as scene frames: e.g. 1,24,48 (empty: a "
        "video's first, middle and last frame; every frame of a folder)",
    )
    preset_name: StringProperty(
        name="Save as preset", description="When the run is done, save the steps it applied as a preset of "
        "this name (empty: no preset)",
    )
    preset: StringProperty(
        name="Preset", description="A stored preset to apply as a run of its own, instead of asking the model",
    )
    # Each mode's conversation: its runs, oldest first. A new message continues the last one.
    scene_runs: CollectionProperty(type=VigaRunRef)
    gn_runs: CollectionProperty(type=VigaRunRef)
    agent_runs: CollectionProperty(type=VigaRunRef)


def conversation(settings, mode):
    """The run folders of the conversation of `mode` ('SCENE', 'GEOMETRY_NODES', 'ADDON_TOOLS')."""
    return {"SCENE": settings.scene_runs, "GEOMETRY_NODES": settings.gn_runs, "ADDON_TOOLS": settings.agent_runs}[mode]


class VigaChatEntry(PropertyGroup):
    """One line of the chat, read from a run folder (or from the stream of a run going on)."""
    kind: EnumProperty(items=CHAT_KINDS, default="NOTE")
    text: StringProperty()
    detail: StringProperty(description="Everything of it: a whole program, a tool call's parameters and reply")
    turn: IntProperty(description="Which turn of the conversation (1 = the first request)")
    iteration: IntProperty()
    run_folder: StringProperty(subtype="DIR_PATH")
    run_kind: StringProperty(description="scene, gn or agent: the kind of run the line comes from")
    image: StringProperty(subtype="FILE_PATH", description="A render")
    target: StringProperty(subtype="FILE_PATH", description="The target picture the render is compared with")
    expanded: BoolProperty(name="Show programs", description="Show this iteration's programs")
    ran: BoolProperty(description="This iteration's program ran to the end: it can be applied")
    failed: BoolProperty()


class VigaLogLine(PropertyGroup):
    text: StringProperty()
    level: EnumProperty(items=LOG_LEVELS, default="INFO")


class VigaAddonTool(PropertyGroup):
    # `name` (the tool's name) is PropertyGroup's own.
    addon_id: StringProperty()
    addon_name: StringProperty()
    description: StringProperty()
    available: BoolProperty(description="The add-on is loaded and exposes a handler for its tools")


class VigaRunStatus(PropertyGroup):
    state: EnumProperty(name="State", items=RUN_STATES, default="IDLE")
    kind: EnumProperty(name="Kind", items=RUN_KINDS, default="SCENE")
    task: StringProperty(name="Task")
    iteration: IntProperty(name="Iteration")
    max_iterations: IntProperty(name="Max iterations", description="0 when the run has no fixed budget")
    step: StringProperty(name="Step")
    verdict: StringProperty(name="Verdict")
    tokens_in: IntProperty(name="Input tokens")
    tokens_out: IntProperty(name="Output tokens")
    run_folder: StringProperty(name="Run folder", subtype="DIR_PATH")
    report_path: StringProperty(name="Report", subtype="FILE_PATH")
    final_program: StringProperty(name="Final program", subtype="FILE_PATH")
    applied: BoolProperty(name="Applied", description="The final program was applied to the scene")
    message: StringProperty(name="Message")
    log: CollectionProperty(type=VigaLogLine)
    log_index: IntProperty()
    # The model's reply as it arrives (streaming providers), until the event that records it.
    streaming_text: StringProperty()
    streaming_role: StringProperty()
    # An apply in progress (viga apply), and the iteration applied last.
    applying: BoolProperty()
    applied_iteration: IntProperty()


def append_log(status, text, level="INFO"):
    """Adds text to the run log, one entry per line, keeping the last MAX_LOG_LINES."""
    for line in str(text).splitlines() or [""]:
        while len(status.log) >= MAX_LOG_LINES:
            status.log.remove(0)
        entry = status.log.add()
        entry.text = line[:MAX_LOG_LINE_CHARS]
        entry.level = level
    status.log_index = len(status.log) - 1


CLASSES = (VigaRunRef, VigaTargetView, VigaSceneSettings, VigaChatEntry, VigaLogLine, VigaAddonTool, VigaRunStatus)


def register():
    for cls in CLASSES:
        bpy.utils.register_class(cls)
    bpy.types.Scene.viga = PointerProperty(type=VigaSceneSettings)
    bpy.types.WindowManager.viga_run = PointerProperty(type=VigaRunStatus)
    bpy.types.WindowManager.viga_tools = CollectionProperty(type=VigaAddonTool)
    bpy.types.WindowManager.viga_tools_index = IntProperty()
    bpy.types.WindowManager.viga_chat = CollectionProperty(type=VigaChatEntry)
    bpy.types.WindowManager.viga_chat_index = IntProperty(name="Selected line")
    # Which mode's conversation viga_chat holds ("" until one was read).
    bpy.types.WindowManager.viga_chat_mode = StringProperty()
    # On the WindowManager, so no .blend comes with it ticked; each run is confirmed anyway.
    bpy.types.WindowManager.viga_gn_in_this_blender = BoolProperty(
        name="Run in this Blender (trusted)",
        description="Run the Geometry Nodes steps in this Blender instead of viga's contained worker: "
        "the model's Python then runs as you, with your files, network and the API keys in Blender's "
        "environment. You confirm it for every run",
    )


def unregister():
    del bpy.types.WindowManager.viga_chat_mode
    del bpy.types.WindowManager.viga_chat_index
    del bpy.types.WindowManager.viga_chat
    del bpy.types.WindowManager.viga_gn_in_this_blender
    del bpy.types.WindowManager.viga_tools_index
    del bpy.types.WindowManager.viga_tools
    del bpy.types.WindowManager.viga_run
    del bpy.types.Scene.viga
    for cls in reversed(CLASSES):
        bpy.utils.unregister_class(cls)
