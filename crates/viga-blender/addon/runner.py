# Runs one viga child process at a time without ever blocking Blender's UI.
#
# The child prints one JSON object per stdout line (`--events jsonl`). Two daemon threads read
# its stdout and stderr into a queue; only the main thread touches bpy: a persistent
# bpy.app.timers callback (tick) drains a bounded number of lines per call into the
# WindowManager's run status and tags the sidebar for redraw. In background mode timers do
# not fire, so a headless host or test calls pump() itself.

import collections
import json
import os
import queue
import shlex
import shutil
import signal
import subprocess
import threading
import time
import traceback
from collections import namedtuple

import bpy
import bpy.utils.previews

from . import history, properties, viga_bridge

TICK_INTERVAL_S = 0.1
MAX_LINES_PER_TICK = 200
CANCEL_GRACE_S = 1.0  # after a cancel, how long viga may take to stop before it is killed
PIPE_GRACE_S = 1.0  # after viga exits, how long to wait for pipes a grandchild may hold open
STDERR_TAIL_LINES = 8
MAX_THUMBNAILS = 4
VIGA_PATH_FILE = "viga_path.txt"  # written into the package by `viga addon build`

# The stream's lines are viga_protocol::stream's StreamRecord: `v` is its version, and every
# kind of run ends with the same StopReason.
STREAM_VERSION = 1
OUTCOME_STATES = {
    "accepted": "FINISHED",
    "max_iterations": "FINISHED",
    "cancelled": "CANCELLED",
    "failed": "FAILED",
}
ROLE_STEPS = {
    "planner": "writing code",
    "generator": "writing code",
    "fast_fix": "fast retry",
    "verifier": "verifying",
    "investigate": "verifying",
}
MAX_INT_PROPERTY = 2**31 - 1

Thumbnail = namedtuple("Thumbnail", "view path icon_id")


class RunnerError(Exception):
    """A run could not be started or stopped; the message is meant for the user."""


class Session:
    """One viga child process and what its reader threads have queued."""

    def __init__(self, proc, argv, cleanup):
        self.proc = proc
        self.argv = list(argv)
        self.lines = queue.Queue()
        self.stderr_tail = collections.deque(maxlen=STDERR_TAIL_LINES)
        self.cleanup = list(cleanup)  # temporary files to delete when the run ends
        self.cancel_at = None
        self.killed = False
        self.exited_at = None
        self.finished = None  # the `finished` line, once read
        self.error = None  # the message of an `error` line, once read
        self.version_warned = False  # a line of another stream version was said once
        self.threads = [
            threading.Thread(target=_read_stdout, args=(proc.stdout, self.lines), name="viga-stdout", daemon=True),
            threading.Thread(target=_read_stderr, args=(proc.stderr, self), name="viga-stderr", daemon=True),
        ]
        for thread in self.threads:
            thread.start()


_session = None
_previews = None
_thumbnails = []
_thumbnail_index = None


# --------------------------------------------------------------------------- reader threads


def _read_stdout(stream, lines):
    for raw in stream:
        text = raw.strip()
        if not text:
            continue
        try:
            message = json.loads(text)
        except ValueError:
            message = None
        if isinstance(message, dict):
            lines.put(("message", message))
        else:
            lines.put(("text", text))  # viga prints a few plain notes, e.g. for the scripted provider
    stream.close()


def _read_stderr(stream, session):
    for raw in stream:
        text = raw.rstrip()
        if text:
            session.stderr_tail.append(text)
            session.lines.put(("stderr", text))
    stream.close()


# --------------------------------------------------------------------------- the command line


def _abspath(path):
    return os.path.normpath(bpy.path.abspath(os.path.expanduser(path.strip())))


def find_viga(prefs):
    """The viga executable: the preference, else the one `viga addon build` recorded, else viga
    on PATH. Raises RunnerError saying how to fix it."""
    if prefs.viga_path.strip():
        path = _abspath(prefs.viga_path)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
        raise RunnerError(
            "The viga executable set in the add-on preferences is not an executable file: %s "
            "(fix it in Preferences > Add-ons > viga)" % path
        )
    built = _built_viga_path()
    if built is not None:
        return built
    found = shutil.which("viga")
    if found is not None:
        return found
    raise RunnerError(
        "viga was not found: set the path of the viga executable in Preferences > Add-ons > viga "
        "(it is not on PATH and this add-on was not built with `viga addon build`)"
    )


def _built_viga_path():
    try:
        with open(os.path.join(os.path.dirname(__file__), VIGA_PATH_FILE), "r", encoding="utf-8") as handle:
            path = handle.read().strip()
    except OSError:
        return None  # a package not made by `viga addon build` has no such file
    return path if path and os.path.isfile(path) else None


def _option(flag, value):
    # clap reads a value starting with "-" as another flag unless it is attached with "=".
    return [flag + "=" + value] if value.startswith("-") else [flag, value]


def provider_flags(prefs):
    flags = ["--provider", prefs.provider]
    if prefs.model.strip():
        flags += _option("--model", prefs.model.strip())
    if prefs.provider == "scripted":
        return flags + ["--script", _abspath(prefs.script)]
    if prefs.base_url.strip():
        flags += _option("--base-url", prefs.base_url.strip())
    if prefs.api_key_env.strip():
        flags += _option("--api-key-env", prefs.api_key_env.strip())
    return flags


def scene_command(viga, connection, task, target, prefs, runs_root):
    argv = [viga, "run", "--attach", "--connection", connection, "--apply", "never", "--events", "jsonl"]
    argv += _option("--task", task)
    if target:
        argv += ["--target", target]
    argv += provider_flags(prefs)
    argv += ["--engine", prefs.render_engine.lower(), "--resolution", str(prefs.render_size)]
    if prefs.samples > 0:
        argv += ["--samples", str(prefs.samples)]
    argv += ["--max-iterations", str(prefs.max_iterations), "--memory", str(prefs.memory_window)]
    return argv + ["--output", runs_root]


def gn_command(viga, connection, request, object_name, prefs, runs_root, unrestricted=False,
               in_this_blender=False):
    """`viga gn` on this Blender's scene: on a copy in viga's contained worker, or (trusted,
    in_this_blender) in this Blender itself. The panel has asked the person to confirm
    whatever the run is trusted with, so the flags say so."""
    # The request always goes after "--": one starting with "-" would read as a flag, and
    # one that is a word of `viga gn`'s own (`preset`) as its subcommand.
    argv = [viga, "gn", "--attach", "--connection", connection, "--events", "jsonl"]
    argv += _option("--object", object_name)
    argv += provider_flags(prefs)
    argv += ["--output", runs_root]
    if unrestricted:
        argv.append("--trusted-python")
    if in_this_blender:
        argv.append("--trusted")
    if unrestricted or in_this_blender:
        argv.append("--confirm-trusted")
    return argv + ["--", request]


def agent_command(viga, connection, command, addons_folder, prefs, runs_root):
    # A command starting with "-" would read as a flag; after "--" it is positional for sure.
    leading_dash = command.startswith("-")
    argv = [viga, "agent"] + ([] if leading_dash else [command])
    argv += ["--attach", "--connection", connection, "--events", "jsonl"]
    if addons_folder:
        argv += ["--addons", addons_folder]
    argv += provider_flags(prefs)
    argv += ["--output", runs_root]
    return argv + (["--", command] if leading_dash else [])


def resume_command(viga, folder):
    return [viga, "resume", folder, "--events", "jsonl"]


# --------------------------------------------------------------------------- starting and stopping


def _status():
    return bpy.context.window_manager.viga_run


def is_running():
    return _session is not None


def _remove_files(paths):
    for path in paths:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            print("viga: cannot remove the temporary file %s: %s" % (path, exc))


def child_environment(prefs):
    """The environment viga runs in: Blender's, with the containment the preferences choose.
    A VIGA_CONTAINMENT=off that Blender was started with does not reach runs started here,
    nor does the switch tests use to leave halves of containment out."""
    environment = dict(os.environ)
    environment["VIGA_CONTAINMENT"] = prefs.containment.lower()
    environment.pop("VIGA_CONTAIN_TEST_WITHOUT", None)
    return environment


def start(argv, kind, task, max_iterations, prefs, cleanup=()):
    """Starts viga with argv (in the environment the preferences make, see
    child_environment) and streams its events into the run status. kind is 'SCENE', 'GN' or
    'AGENT'; the files in cleanup are deleted when the run ends (or now, if it cannot
    start)."""
    global _session
    if _session is not None:
        _remove_files(cleanup)
        raise RunnerError("A viga run is already running; cancel it or wait for it to finish")
    try:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, encoding="utf-8", errors="replace", bufsize=1, env=child_environment(prefs),
        )
    except OSError as exc:
        _remove_files(cleanup)
        raise RunnerError("Cannot start %s: %s" % (argv[0], exc.strerror or exc)) from exc
    _session = Session(proc, argv, cleanup)
    status = _status()
    _reset_status(status, kind, task, max_iterations)
    clear_thumbnails()
    properties.append_log(status, "Started: " + shlex.join(argv))
    _tag_redraw()


def _reset_status(status, kind, task, max_iterations):
    status.state = "RUNNING"
    status.kind = kind
    status.task = task
    status.iteration = 0
    status.max_iterations = max_iterations
    status.step = "starting"
    status.verdict = ""
    status.tokens_in = 0
    status.tokens_out = 0
    status.run_folder = ""
    status.report_path = ""
    status.final_program = ""
    status.applied = False
    status.message = ""


def cancel():
    """Asks viga to stop (SIGINT, like Ctrl+C, so it can finish its run folder); a later tick
    kills it if it is still alive CANCEL_GRACE_S after."""
    session = _session
    if session is None:
        raise RunnerError("No viga run is running")
    if session.cancel_at is not None:
        return
    if os.name == "posix":
        try:
            session.proc.send_signal(signal.SIGINT)
        except ProcessLookupError:
            pass  # it exited a moment ago; the next tick finishes the run
    else:
        session.proc.terminate()
    session.cancel_at = time.monotonic()
    status = _status()
    status.state = "CANCELLING"
    status.step = "cancelling"
    properties.append_log(status, "Cancelling the run", "WARNING")
    _tag_redraw()


def _kill(session):
    session.proc.kill()
    try:
        session.proc.wait(timeout=2.0)
    except subprocess.TimeoutExpired:
        print("viga: the viga process %d did not exit after SIGKILL" % session.proc.pid)
    _remove_files(session.cleanup)


# --------------------------------------------------------------------------- the main-thread tick


def tick():
    """The timer callback; returns the interval until the next call."""
    try:
        pump()
    except Exception:  # noqa: BLE001 - a timer that raises is dropped for good and the panel would freeze
        traceback.print_exc()
    return TICK_INTERVAL_S


def pump(max_lines=MAX_LINES_PER_TICK):
    """Applies at most max_lines queued lines to the run status, kills a child that ignored a
    cancel, and ends the run once the child has exited and everything it wrote is applied."""
    session = _session
    if session is None:
        return
    status = _status()
    handled = 0
    while handled < max_lines:
        try:
            source, payload = session.lines.get_nowait()
        except queue.Empty:
            break
        _handle_line(status, session, source, payload)
        handled += 1
    killed = _kill_if_cancel_ignored(status, session)
    ended = _has_ended(session)
    if ended:
        _finish(status, session)
    if handled or killed or ended:
        _tag_redraw()


def _kill_if_cancel_ignored(status, session):
    if session.cancel_at is None or session.killed or session.proc.poll() is not None:
        return False
    if time.monotonic() - session.cancel_at < CANCEL_GRACE_S:
        return False
    session.proc.kill()
    session.killed = True
    properties.append_log(status, "viga did not stop within %.0f s of the cancel; killed it" % CANCEL_GRACE_S, "WARNING")
    if status.kind == "GN" and "--trusted" in session.argv:
        # In trusted mode a Geometry Nodes run edits this scene as it goes; killed before it
        # could undo its changes, it is undone here, so a cancel always leaves the scene as
        # it was. (On a copy, the run's result comes in as one bridge command, whole or not
        # at all, so there is nothing to undo.)
        viga_bridge.discard_changes_since_last_step("viga: cancelled run")
        properties.append_log(status, "The run's changes to the scene were undone")
    elif status.kind == "AGENT":
        # The agent makes every command it finishes one undo step; killed in the middle of
        # one, that command's partial change is on no step and is undone here, so the scene
        # keeps whole commands only.
        viga_bridge.discard_changes_since_last_step("viga: cancelled command")
        properties.append_log(status, "The command in flight was undone; the finished ones stay, one undo step each")
    return True


def _has_ended(session):
    if session.proc.poll() is None:
        return False
    now = time.monotonic()
    if session.exited_at is None:
        session.exited_at = now
    # Readers first: once they are done nothing more is queued, so an empty queue is final.
    readers_done = not any(thread.is_alive() for thread in session.threads)
    if not session.lines.empty():
        return False
    return readers_done or now - session.exited_at > PIPE_GRACE_S


def _finish(status, session):
    global _session
    _session = None
    state, message = _outcome(session)
    status.state = state
    status.step = ""
    status.message = message
    if session.finished is not None:
        status.final_program = _text(session.finished.get("final_program"))
    _remove_files(session.cleanup)
    level = {"FINISHED": "INFO", "CANCELLED": "WARNING"}.get(state, "ERROR")
    properties.append_log(status, "Run %s%s" % (state.lower(), ": " + message if message else ""), level)
    history.refresh(bpy.context)


def _outcome(session):
    """(state, message) of an ended run."""
    finished = session.finished
    if finished is not None:
        exit_code = finished.get("exit_code")
        fallback = "FINISHED" if exit_code in (0, None) else "FAILED"
        state = OUTCOME_STATES.get(_text(_dict(finished.get("stop")).get("reason")), fallback)
        message = _text(finished.get("message"))
        if state == "FAILED" and not message:
            message = _stderr_summary(session)
        return state, message
    if session.cancel_at is not None:
        return "CANCELLED", "Cancelled"
    if session.error:
        return "FAILED", session.error
    return "FAILED", "viga exited with code %s without finishing. %s" % (session.proc.returncode, _stderr_summary(session))


def _stderr_summary(session):
    lines = list(session.stderr_tail)[-3:]
    return " | ".join(lines) if lines else "It printed nothing on stderr."


def _tag_redraw():
    if bpy.app.background:
        return  # no windows to redraw
    for window in bpy.context.window_manager.windows:
        for area in window.screen.areas:
            if area.type != "VIEW_3D":
                continue
            for region in area.regions:
                if region.type == "UI":
                    region.tag_redraw()


# --------------------------------------------------------------------------- lines and events


def _text(value):
    return value if isinstance(value, str) else ""


def _int(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    return max(0, min(int(value), MAX_INT_PROPERTY))


def _dict(value):
    return value if isinstance(value, dict) else {}


def _list(value):
    return value if isinstance(value, list) else []


def _handle_line(status, session, source, payload):
    if source in ("stderr", "text"):
        properties.append_log(status, payload, "OUTPUT")
        return
    if payload.get("v") != STREAM_VERSION and not session.version_warned:
        session.version_warned = True
        properties.append_log(
            status,
            "viga speaks event stream version %r, this add-on %d: install the add-on this viga builds (viga addon build)"
            % (payload.get("v"), STREAM_VERSION),
            "WARNING",
        )
    handler = MESSAGE_HANDLERS.get(payload.get("kind"))
    if handler is not None:
        handler(status, session, payload)  # unknown kinds are skipped: newer viga, older add-on


def _on_run_folder(status, session, message):
    status.run_folder = _text(message.get("path"))
    properties.append_log(status, "Run folder: " + status.run_folder)


def _on_event(status, session, message):
    event = _dict(message.get("event"))
    handler = EVENT_HANDLERS.get(event.get("type"))
    if handler is not None:
        handler(status, event)


def _on_report(status, session, message):
    status.report_path = _text(message.get("path"))


def _on_finished(status, session, message):
    session.finished = message


def _on_notice(status, session, message):
    properties.append_log(status, _text(message.get("message")), "INFO")


def _on_error(status, session, message):
    session.error = _text(message.get("message")) or "viga refused to start"
    properties.append_log(status, session.error, "ERROR")


MESSAGE_HANDLERS = {
    "run_folder": _on_run_folder,
    "event": _on_event,
    "report": _on_report,
    "finished": _on_finished,
    "notice": _on_notice,
    "error": _on_error,
}


def describe_error(error):
    line = error.get("line")
    where = " at line %d" % line if isinstance(line, int) else ""
    return "%s%s: %s" % (_text(error.get("error_type")) or "Error", where, _text(error.get("message")))


def verdict_text(feedback):
    if feedback.get("accepted") is True:
        return "Accepted"
    notes = [_text(n) for n in _list(feedback.get("visual_differences")) + _list(feedback.get("suggestions"))]
    notes = [note for note in notes if note]
    if not notes:
        return "Needs changes"
    more = " (and %d more)" % (len(notes) - 1) if len(notes) > 1 else ""
    return "Needs changes: %s%s" % (notes[0], more)


def _on_run_started(status, event):
    status.task = _text(event.get("task")) or status.task
    resumed = event.get("resumed_from_iteration")
    note = " (resumed after iteration %d)" % resumed if isinstance(resumed, int) else ""
    properties.append_log(status, "Run started%s: %s" % (note, status.task))


def _on_iteration_started(status, event):
    status.iteration = _int(event.get("index"))
    status.step = "planning"
    properties.append_log(status, "Iteration %d" % status.iteration)


def _on_model_called(status, event):
    usage = _dict(event.get("usage"))
    status.tokens_in = min(status.tokens_in + _int(usage.get("input_tokens")), MAX_INT_PROPERTY)
    status.tokens_out = min(status.tokens_out + _int(usage.get("output_tokens")), MAX_INT_PROPERTY)
    if event.get("role") == "agent":
        # Each of the agent's steps is one model call: its index is the step number.
        status.iteration = _int(event.get("index"))
        status.step = "choosing the next command"
        return
    step = ROLE_STEPS.get(event.get("role"))
    if step is not None:
        status.step = step


def _on_execution_finished(status, event):
    error = _dict(_dict(event.get("result")).get("error"))
    if error:
        properties.append_log(
            status, "Iteration %d, attempt %d: %s" % (_int(event.get("index")), _int(event.get("attempt")), describe_error(error)),
            "WARNING",
        )


def _on_fast_retry(status, event):
    attempt = _int(event.get("attempt"))
    status.step = "fast retry (attempt %d)" % attempt
    properties.append_log(status, "Fast retry %d: %s" % (attempt, _text(event.get("error"))), "WARNING")


def _on_worker_restarted(status, event):
    properties.append_log(status, "Blender worker restarted: " + _text(event.get("reason")), "WARNING")


def _on_render_produced(status, event):
    _add_thumbnail(status.run_folder, _int(event.get("index")), _text(event.get("render_id")), _text(event.get("view")))


def _on_tool_invoked(status, event):
    ok = event.get("ok") is True
    tool = _text(event.get("tool"))
    properties.append_log(status, "Tool %s: %s" % (tool, _text(event.get("summary"))), "INFO" if ok else "WARNING")
    if status.kind == "AGENT":
        status.step = "last tool: %s%s" % (tool, "" if ok else " (refused)")


def _on_feedback_produced(status, event):
    feedback = _dict(event.get("feedback"))
    status.verdict = verdict_text(feedback)
    properties.append_log(status, "Verdict: " + status.verdict)


def _on_gates_checked(status, event):
    report = _dict(event.get("report"))
    if report.get("success") is True:
        properties.append_log(status, "Gates passed")
        return
    failed = ", ".join(_text(name) for name in _list(report.get("failed_gates")))
    messages = "; ".join(_text(text) for text in _list(report.get("messages")))
    properties.append_log(status, "Gates failed: %s. %s" % (failed, messages), "WARNING")


def _on_gn_state_changed(status, event):
    state = _text(event.get("to"))
    status.iteration = _int(event.get("round"))
    status.step = state.replace("_", " ")
    properties.append_log(status, "Round %d: %s" % (status.iteration, status.step))


def _on_gn_step_finished(status, event):
    record = _dict(event.get("record"))
    error = _text(record.get("error"))
    text = "Step %s (%s): %s %s" % (
        _text(record.get("step_id")), _text(record.get("action_type")), _text(record.get("status")), _text(record.get("message")),
    )
    properties.append_log(status, text + (" - " + error if error else ""), "WARNING" if error else "INFO")


def _on_iteration_finished(status, event):
    record = _dict(event.get("record"))
    properties.append_log(status, "Iteration %d finished" % _int(record.get("index")))


def _on_warning(status, event):
    properties.append_log(status, _text(event.get("message")), "WARNING")


def _on_run_finished(status, event):
    stop = _dict(event.get("stop"))
    reason = _text(stop.get("reason")).replace("_", " ")
    message = _text(stop.get("message"))
    properties.append_log(status, "Run stopped: %s%s" % (reason, " - " + message if message else ""))


EVENT_HANDLERS = {
    "run_started": _on_run_started,
    "iteration_started": _on_iteration_started,
    "model_called": _on_model_called,
    "execution_finished": _on_execution_finished,
    "fast_retry": _on_fast_retry,
    "worker_restarted": _on_worker_restarted,
    "render_produced": _on_render_produced,
    "tool_invoked": _on_tool_invoked,
    "feedback_produced": _on_feedback_produced,
    "gates_checked": _on_gates_checked,
    "gn_state_changed": _on_gn_state_changed,
    "gn_step_finished": _on_gn_step_finished,
    "iteration_finished": _on_iteration_finished,
    "warning": _on_warning,
    "run_finished": _on_run_finished,
}


# --------------------------------------------------------------------------- thumbnails


def thumbnails():
    """The latest renders of the run, oldest first: (view, path, icon_id) tuples. icon_id is 0
    where Blender has no icons (background mode)."""
    return list(_thumbnails)


def clear_thumbnails():
    global _thumbnail_index
    _thumbnails.clear()
    _thumbnail_index = None
    if _previews is not None:
        _previews.clear()


def _add_thumbnail(run_folder, index, render_id, view):
    """Loads a render's PNG into the preview collection (main thread only)."""
    global _thumbnail_index
    if _previews is None or not render_id or not run_folder:
        return
    path = os.path.join(run_folder, render_id)
    if not os.path.isfile(path):
        return  # renamed or removed since; a thumbnail is not worth a warning
    if index != _thumbnail_index:
        clear_thumbnails()
        _thumbnail_index = index
    preview = _previews.get(path) or _previews.load(path, path, "IMAGE")
    _thumbnails.append(Thumbnail(view or os.path.basename(path), path, preview.icon_id))
    while len(_thumbnails) > MAX_THUMBNAILS:
        dropped = _thumbnails.pop(0)
        if all(kept.path != dropped.path for kept in _thumbnails):
            del _previews[dropped.path]


# --------------------------------------------------------------------------- registration


def register():
    global _previews
    _previews = bpy.utils.previews.new()
    bpy.app.timers.register(tick, persistent=True)


def unregister():
    global _session, _previews
    if bpy.app.timers.is_registered(tick):
        bpy.app.timers.unregister(tick)
    if _session is not None:
        _kill(_session)
        _session = None
    clear_thumbnails()
    if _previews is not None:
        bpy.utils.previews.remove(_previews)
        _previews = None
