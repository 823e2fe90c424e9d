"""viga's bridge in a person's Blender reached through another project's MCP server (such as
mcp-for-blender), whose code tool runs what viga sends: each request arrives as a small
program that calls `answer`, and the reply goes back as one printed line, pictures inline.

The open file is the person's (served.user_scene): nothing replaces it. A run's reset (each
iteration starts from the scene the run began with) goes back by undo to the step `begin_run`
recorded; each program that runs after a reset is one undo step of its own, so after a run
the scene holds its last program, and Ctrl-Z walks back to the scene as it was."""

import json

from . import served
from .commands import dispatch
from .protocol import error_reply
from .undo import apply_program, ensure_undo_base, push_undo_step, undo_one_step

REPLY_MARKER = "VIGA_BRIDGE_REPLY "
START_STEP = "viga: before the run"

# Program steps recorded since the run's start step: a reset undoes them all (and whatever
# changed since the last of them).
_run = {"began": False, "steps": 0}


def begin_run():
    """Records the scene as it is now as the state every reset goes back to."""
    served.user_scene = True
    ensure_undo_base()
    push_undo_step(START_STEP)
    _run.update(began=True, steps=0)
    return REPLY_MARKER + json.dumps({"id": None, "ok": True, "result": {"began": True}})


def back_to_start():
    if not _run["began"]:
        raise RuntimeError("the run's start was not recorded (begin_run)")
    # Changes since the last step (a camera set, a program run without a reset) are on no
    # step: recorded first, so the undos below take them back too.
    push_undo_step("viga: reset")
    for _ in range(_run["steps"] + 1):
        undo_one_step()
    _run["steps"] = 0


def execute_from_start(request):
    back_to_start()
    # One undo step, as an attached program is; one that fails is taken back at once, so
    # it leaves no half-made change (nor a step to undo at the next reset).
    result = apply_program(request.get("code", ""), "viga: program")
    if not result.pop("reverted", False):
        _run["steps"] += 1
    return {"id": request.get("id"), "ok": True, "result": result}


def answer(request_text):
    """One request (the bridge's JSON) in, one printed reply line out."""
    try:
        request = json.loads(request_text)
    except ValueError as err:
        return REPLY_MARKER + json.dumps(error_reply(None, "bad_frame", "request is not valid JSON: %s" % err))
    if isinstance(request, dict) and request.get("command") == "execute" and request.get("reset"):
        try:
            reply = execute_from_start(request)
        except Exception as exc:  # noqa: BLE001 - any Blender failure becomes a typed reply
            reply = error_reply(request.get("id"), "blender_error", "going back to the run's start failed: %s: %s" % (type(exc).__name__, exc))
    else:
        reply = dispatch(request)
    return REPLY_MARKER + json.dumps(reply)
