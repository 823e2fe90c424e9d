"""Changes made from a timer or a socket request are on no undo step of their own: each change
viga applies to a person's scene is wrapped in steps here, so one Ctrl-Z takes it back."""

import contextlib

import bpy

from . import served
from .common import BridgeError, text_field
from .execution import run_program

def undo_context():
    """Undo operators need a window in an interactive Blender, and timers run without one;
    the bpy module has no windows and needs none."""
    manager = bpy.context.window_manager
    windows = list(manager.windows) if manager is not None else []
    if windows and bpy.context.window is None:
        return bpy.context.temp_override(window=windows[0])
    return contextlib.nullcontext()


def push_undo_step(message):
    with undo_context():
        if not bpy.ops.ed.undo_push.poll():
            raise BridgeError("undo_unavailable", "Blender cannot record an undo step here (is undo turned off in Preferences > System?)")
        bpy.ops.ed.undo_push(message=message)


def undo_one_step():
    with undo_context():
        if not bpy.ops.ed.undo.poll():
            raise BridgeError("undo_unavailable", "Blender has no undo step to go back to (is undo turned off in Preferences > System?)")
        bpy.ops.ed.undo()


def ensure_undo_base():
    """Blender undoes back to a recorded step only. With nothing to undo yet (a file just
    loaded in background Blender has no step at all) the current state is recorded first, so
    viga's first change can be taken back. Where history exists, its last step already holds
    the current state: another one would be a duplicate, and one Ctrl-Z would seem to do
    nothing."""
    with undo_context():
        if not bpy.ops.ed.undo.poll():
            push_undo_step("viga: original")


# Undo history entries stay readable: a task is cut to this many characters (as viga's own
# `undo_name` does for the steps it asks for).
UNDO_NAME_CHARS = 60


def undo_name(task):
    """The undo step a run's result is applied as: "viga: " and the task, cut short."""
    name = task[:UNDO_NAME_CHARS]
    if len(task) > UNDO_NAME_CHARS:
        name += "\u2026"
    return "viga: " + name


def apply_program(code, message):
    """Runs a program on the open scene as ONE undo step named `message`, so one undo gives
    the scene back as it was. A program that fails is taken back at once (`reverted` in the
    result), so a half-applied change never stays."""
    ensure_undo_base()
    result = run_program(code)
    if "error" in result:
        push_undo_step(message + " (failed)")
        undo_one_step()
        result["reverted"] = True
    else:
        push_undo_step(message)
    return result


def discard_changes_since_last_step(message):
    """Takes the open scene back to its last undo step: for a viga run that edits the scene as
    it goes and was killed before it could take its changes back itself. Requests that had
    already arrived are answered first, so none of them lands after the revert."""
    work = served.addon.get("work")
    if work is not None:
        work.drain()
    push_undo_step(message)
    undo_one_step()


def enabled_addons():
    return set(bpy.context.preferences.addons.keys())


def cmd_apply_program(args):
    # Compared around the program, so a client lists the add-ons again only when this one
    # enabled or disabled some (a listing is another trip through the main-thread timer).
    before = enabled_addons()
    execution = apply_program(text_field(args, "code"), text_field(args, "message", "viga: program"))
    reverted = execution.pop("reverted", False)
    return {"execution": execution, "reverted": reverted, "addons_changed": enabled_addons() != before}


def cmd_undo_push(args):
    push_undo_step(text_field(args, "message"))
    return {"pushed": True}


def cmd_undo(_args):
    undo_one_step()
    return {"undone": True}
