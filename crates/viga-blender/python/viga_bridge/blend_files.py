""".blend files: saved and loaded (checkpoints, base scenes, resets) with their scripts and
Python drivers disabled, and output paths Blender would read as templates kept apart."""

import contextlib
import io
import os

import bpy

from .common import BridgeError

def read_as_template(path):
    """Whether Blender could rewrite `path` as a render output: Blender 5 expands {variables}
    (`{blend_name}`; an unmatched brace fails the render), a leading `//` means "beside the
    open .blend", and `#` stands for frame digits in animation output. Rendered there
    directly, the PNG could land somewhere else or not at all."""
    return "#" in path or "{" in path or "}" in path or path.startswith("//")


def checked_path(args, must_exist):
    path = args.get("path")
    if not isinstance(path, str) or not path:
        raise BridgeError("bad_request", "a non-empty string \"path\" is required")
    if must_exist and not os.path.isfile(path):
        raise BridgeError("not_found", "no .blend file at %s" % path)
    return path


def save_blend(args):
    path = checked_path(args, must_exist=False)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with contextlib.redirect_stdout(io.StringIO()):
        bpy.ops.wm.save_as_mainfile(filepath=path, copy=True, check_existing=False)
    return {"path": path, "bytes": os.path.getsize(path)}


def load_blend(args):
    """Opens a .blend as data: its embedded scripts and Python driver expressions do not run
    (whatever the user's auto-run preference says), and its UI layout is not loaded. Base
    scenes and eval instances come from run folders and downloads, which are data."""
    path = checked_path(args, must_exist=True)
    with contextlib.redirect_stdout(io.StringIO()):
        bpy.ops.wm.open_mainfile(filepath=path, load_ui=False, use_scripts=False)
    return {"path": path, "objects": len(bpy.data.objects)}
