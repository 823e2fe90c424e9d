"""The command table and dispatch: one request in, one reply out, on the main thread, with
the time Blender spent on it. In a person's Blender the commands that would replace their
open file are refused."""

import time
import traceback

from . import served
from .common import BridgeError
from .protocol import error_reply
from .blend_files import load_blend, save_blend
from .execution import cmd_execute, cmd_ping
from .undo import cmd_apply_program, cmd_undo, cmd_undo_push
from .gn_results import cmd_import_gn_result
from .scene_results import cmd_import_scene_result
from .scene_info import cmd_list_keyframes, cmd_scene_info, cmd_set_frame, cmd_set_visibility
from .fingerprints import cmd_scene_fingerprints
from .renders import cmd_frame_objects, cmd_render, cmd_render_framed_views, cmd_set_camera
from .addons import cmd_addon_command, cmd_list_addons

# Commands that would replace the open file of a person's Blender: refused in add-on mode,
# where the scene belongs to the user and is never reloaded, replaced or closed by viga.
USER_SCENE_REPLACING = ("load_blend", "restore")


COMMANDS = {
    "ping": cmd_ping,
    "execute": cmd_execute,
    "scene_info": cmd_scene_info,
    "render": cmd_render,
    "set_camera": cmd_set_camera,
    "frame_objects": cmd_frame_objects,
    "render_framed_views": cmd_render_framed_views,
    "set_visibility": cmd_set_visibility,
    "set_frame": cmd_set_frame,
    "list_keyframes": cmd_list_keyframes,
    "save_blend": save_blend,
    "load_blend": load_blend,
    "checkpoint": save_blend,
    "restore": load_blend,
    "list_addons": cmd_list_addons,
    "addon_command": cmd_addon_command,
    "apply_program": cmd_apply_program,
    "undo_push": cmd_undo_push,
    "undo": cmd_undo,
    "import_gn_result": cmd_import_gn_result,
    "import_scene_result": cmd_import_scene_result,
    "scene_fingerprints": cmd_scene_fingerprints,
}


def dispatch(request):
    """Runs one request on the calling (main) thread and returns its reply, with the time
    Blender spent on it (`elapsed_ms`), so clients can tell Blender's work from their own."""
    started = time.perf_counter()
    reply = dispatch_timed(request)
    reply["elapsed_ms"] = round((time.perf_counter() - started) * 1000.0, 3)
    return reply


def dispatch_timed(request):
    # The type first: `in` on a number raises, and a frame may hold any JSON value.
    if not isinstance(request, dict):
        return error_reply(None, "bad_request", "a request must be a JSON object")
    if "__garbage__" in request:
        return error_reply(None, "bad_frame", "frame is not valid JSON: %s" % request["__garbage__"])
    request_id = request.get("id")
    command = request.get("command")
    handler = COMMANDS.get(command)
    if handler is None:
        return error_reply(request_id, "unknown_command", "unknown command %r; known: %s" % (command, ", ".join(sorted(COMMANDS))))
    if served.user_scene and (command in USER_SCENE_REPLACING or (command == "execute" and request.get("reset"))):
        return error_reply(
            request_id, "user_scene",
            "%s would replace the open file of this Blender, which belongs to its user; attached, "
            "viga runs programs on the open scene (apply_program) and keeps base scenes in a worker of its own" % command,
        )
    try:
        return {"id": request_id, "ok": True, "result": handler(request)}
    except BridgeError as err:
        return error_reply(request_id, err.kind, err.message)
    except Exception as exc:  # noqa: BLE001 - any Blender failure becomes a typed reply
        return error_reply(
            request_id, "blender_error", "%s: %s" % (type(exc).__name__, exc),
            error_type=type(exc).__name__, traceback=traceback.format_exc(),
        )
