# The add-on's data. What the user types (mode, task, target, request) lives on the Scene, so
# it is saved with the .blend; the state of a run, its log and the discovered add-on tools live
# on the WindowManager, which is never saved: a reopened file does not pretend a run is going.

import bpy
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
    ("FILE", "File", "A picture file on disk (PNG or JPEG)"),
    ("IMAGE", "Image", "An image in this .blend (saved to a temporary PNG when the run starts)"),
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


class VigaSceneSettings(bpy.types.PropertyGroup):
    mode: EnumProperty(name="Mode", items=MODES, default="SCENE")
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


class VigaLogLine(bpy.types.PropertyGroup):
    text: StringProperty()
    level: EnumProperty(items=LOG_LEVELS, default="INFO")


class VigaAddonTool(bpy.types.PropertyGroup):
    # `name` (the tool's name) is PropertyGroup's own.
    addon_id: StringProperty()
    addon_name: StringProperty()
    description: StringProperty()
    available: BoolProperty(description="The add-on is loaded and exposes a handler for its tools")


class VigaRunStatus(bpy.types.PropertyGroup):
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


def append_log(status, text, level="INFO"):
    """Adds text to the run log, one entry per line, keeping the last MAX_LOG_LINES."""
    for line in str(text).splitlines() or [""]:
        while len(status.log) >= MAX_LOG_LINES:
            status.log.remove(0)
        entry = status.log.add()
        entry.text = line[:MAX_LOG_LINE_CHARS]
        entry.level = level
    status.log_index = len(status.log) - 1


CLASSES = (VigaSceneSettings, VigaLogLine, VigaAddonTool, VigaRunStatus)


def register():
    for cls in CLASSES:
        bpy.utils.register_class(cls)
    bpy.types.Scene.viga = PointerProperty(type=VigaSceneSettings)
    bpy.types.WindowManager.viga_run = PointerProperty(type=VigaRunStatus)
    bpy.types.WindowManager.viga_tools = CollectionProperty(type=VigaAddonTool)
    bpy.types.WindowManager.viga_tools_index = IntProperty()
    # On the WindowManager, so no .blend comes with it ticked; each run is confirmed anyway.
    bpy.types.WindowManager.viga_gn_in_this_blender = BoolProperty(
        name="Run in this Blender (trusted)",
        description="Run the Geometry Nodes steps in this Blender instead of viga's contained worker: "
        "the model's Python then runs as you, with your files, network and the API keys in Blender's "
        "environment. You confirm it for every run",
    )


def unregister():
    del bpy.types.WindowManager.viga_gn_in_this_blender
    del bpy.types.WindowManager.viga_tools_index
    del bpy.types.WindowManager.viga_tools
    del bpy.types.WindowManager.viga_run
    del bpy.types.Scene.viga
    for cls in reversed(CLASSES):
        bpy.utils.unregister_class(cls)
