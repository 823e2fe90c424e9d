# SPDX-License-Identifier: GPL-3.0-or-later
# Runs one viga child process at a time without ever blocking Blender's UI.
#
# The child prints one JSON object per stdout line (`--events jsonl`). Two daemon threads read
# its stdout and stderr into a queue; only the main thread touches bpy: a persistent
# bpy.app.timers callback (tick) drains a bounded number of lines per call into the
# WindowManager's run status and the chat, finishes background jobs (background.py), and tags
# the sidebar for redraw. In background mode timers do not fire, so a headless host or test
# calls pump() itself.

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

from . import background, chat, history, properties, viga_bridge

TICK_INTERVAL_S = 0.1
MAX_LINES_PER_TICK = 200
CANCEL_GRACE_S = 1.0  # after a cancel, how long viga may take to stop before it is killed
PIPE_GRACE_S = 1.0  # after viga exits, how long to wait for pipes a grandchild may hold open
STDERR_TAIL_LINES = 8
MAX_THUMBNAILS = 5  # the target and the latest renders

# The stream's lines are viga_protocol::stream's StreamRecord: `v` is its version, and every
# kind of run ends with the same StopReason.
STREAM_VERSION = 1
OUTCOME_STATES = {
    "accepted": "FINISHED",
    "max_iterations": "FINISHED",
    "time_limit": "FINISHED",
    "generator_ended": "FINISHED",
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
MAX_STREAMING_CHARS = 4000  # of the model's reply as it arrives, the end is kept
MODES_OF_KINDS = {"SCENE": "SCENE", "GN": "GEOMETRY_NODES", "AGENT": "ADDON_TOOLS"}
CHAT_KINDS_OF_KINDS = {"SCENE": "scene", "GN": "gn", "AGENT": "agent"}

Thumbnail = namedtuple("Thumbnail", "view path icon_id")


class RunnerError(Exception):
    """A run could not be started or stopped; the message is meant for the user."""


class Session:
    """One viga child process and what its reader threads have queued."""

    def __init__(self, proc, argv, cleanup, kind, scene_name, turn):
        self.proc = proc
        self.argv = list(argv)
        # The conversation this run is a turn of: its mode, the scene that keeps its list, and
        # the run's lines as the chat shows them while it works.
        self.mode = MODES_OF_KINDS.get(kind, "SCENE")
        self.scene_name = scene_name
        self.turn = TurnState(chat.TurnBuilder("", turn, CHAT_KINDS_OF_KINDS.get(kind, "scene")))
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


class TurnState:
    """A live turn: its builder, where it starts in the chat, how much of it the chat has."""

    def __init__(self, builder):
        self.builder = builder
        self.base = None
        self.synced = 0


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
    """The viga executable: the preference, else viga on PATH. Raises RunnerError saying how to
    fix it. The package names no path of the machine that built it, so these are the only two
    places to look."""
    if prefs.viga_path.strip():
        path = _abspath(prefs.viga_path)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
        raise RunnerError(
            "The viga executable set in the add-on preferences is not an executable file: %s "
            "(fix it in Preferences > Add-ons > viga)" % path
        )
    found = shutil.which("viga")
    if found is not None:
        return found
    raise RunnerError(
        "viga was not found on the PATH Blender started with: set the path of the viga executable in "
        "Preferences > Add-ons > viga > viga executable (`viga addon build` prints it), or start "
        "Blender from a shell whose PATH holds viga"
    )


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


def _path(text):
    return _abspath(text) if text.strip() else ""


def scene_command(viga, connection, task, targets, prefs, runs_root, continue_from="", camera="", frames=""):
    """`viga run` on a copy of this Blender's scene. `targets` are picture paths or
    CAMERA=PICTURE; `continue_from` is the conversation's last run folder."""
    argv = [viga, "run", "--attach", "--connection", connection, "--apply", "never", "--events", "jsonl"]
    argv += _option("--task", task)
    for target in targets:
        argv += ["--target", target]
    if camera:
        argv += _option("--camera", camera)
    if frames:
        argv += ["--frames", frames]
    if continue_from:
        argv += ["--continue", continue_from]
    argv += provider_flags(prefs)
    # Auto passes no engine: viga then renders the verifier's views in Cycles when there is a
    # target (Workbench shows neither lights nor materials) and in Workbench without one.
    if prefs.verifier_engine != "AUTO":
        argv += ["--engine", prefs.verifier_engine.lower()]
    argv += ["--resolution", str(prefs.render_size)]
    if prefs.samples > 0:
        argv += ["--samples", str(prefs.samples)]
    argv += ["--max-iterations", str(prefs.max_iterations), "--memory", str(prefs.memory_window)]
    argv += ["--program-timeout", "%g" % prefs.program_timeout]
    argv += ["--generator-tools", prefs.generator_tools.lower(), "--generator-max-turns", str(prefs.generator_max_turns)]
    if not prefs.plan_each_iteration:
        argv.append("--no-plan")
    if _path(prefs.assets_folder):
        argv += ["--assets", _path(prefs.assets_folder)]
    if prefs.polyhaven:
        argv.append("--polyhaven")
    if prefs.assets_generate != "NONE":
        argv += ["--assets-generate", prefs.assets_generate.lower()]
    return argv + ["--output", runs_root]


def gn_command(viga, connection, request, object_name, prefs, runs_root, unrestricted=False,
               in_this_blender=False, continue_from="", preset="", save_preset="", presets_root=""):
    """`viga gn` on this Blender's scene: on a copy in viga's contained worker, or (trusted,
    in_this_blender) in this Blender itself. The panel has asked the person to confirm
    whatever the run is trusted with, so the flags say so. `preset` applies a preset file
    instead of asking the model (a turn of its own, not a follow-up)."""
    # The request always goes after "--": one starting with "-" would read as a flag, and
    # one that is a word of `viga gn`'s own (`preset`) as its subcommand.
    argv = [viga, "gn", "--attach", "--connection", connection, "--events", "jsonl"]
    argv += _option("--object", object_name)
    argv += provider_flags(prefs)
    argv += ["--output", runs_root, "--max-rounds", str(prefs.gn_max_rounds)]
    gates = sorted(prefs.gn_gates)
    if set(gates) != preferences_gates():
        argv += ["--gates", ",".join(gates)]
    if preset:
        argv += ["--preset", preset]
    else:
        if prefs.gn_cache:
            argv.append("--cache")
        if continue_from:
            argv += ["--continue", continue_from]
    if save_preset:
        argv += _option("--save-preset", save_preset)
    if (preset or save_preset) and presets_root:
        argv += ["--presets-dir", presets_root]
    if unrestricted:
        argv.append("--trusted-python")
    if in_this_blender:
        argv.append("--trusted")
    if unrestricted or in_this_blender:
        argv.append("--confirm-trusted")
    return argv + ["--", request]


def preferences_gates():
    from . import preferences  # preferences imports keys, which imports this module
    return preferences.ALL_GATES


def agent_command(viga, connection, command, addons_folder, prefs, runs_root, continue_from=""):
    # A command starting with "-" would read as a flag; after "--" it is positional for sure.
    leading_dash = command.startswith("-")
    argv = [viga, "agent"] + ([] if leading_dash else [command])
    argv += ["--attach", "--connection", connection, "--events", "jsonl"]
    if addons_folder:
        argv += ["--addons", addons_folder]
    if continue_from:
        argv += ["--continue", continue_from]
    argv += provider_flags(prefs)
    argv += ["--max-steps", str(prefs.agent_max_steps), "--resolution", str(prefs.render_size)]
    argv += ["--output", runs_root]
    return argv + (["--", command] if leading_dash else [])


def apply_command(viga, connection, run_folder, iteration):
    """`viga apply`: the program of one iteration of a finished scene run (0: the run's
    result) on this scene, as one undo step. However viga applies a result, the panel asks it
    through this one command."""
    argv = [viga, "apply", run_folder, "--attach", "--connection", connection, "--events", "jsonl"]
    if iteration:
        argv += ["--iteration", str(iteration)]
    return argv


def resume_command(viga, folder):
    return [viga, "resume", folder, "--events", "jsonl"]


# --------------------------------------------------------------------------- starting and stopping


def _status():
    return bpy.context.window_manager.viga_run


def is_running():
    return _session is not None


def live_run_folder(mode):
    """The run folder of the run going on in `mode` ("" before it has one), or None when no
    run of that mode is going on."""
    session = _session
    if session is None or session.mode != mode:
        return None
    return session.turn.builder.run_folder


def chat_reloaded(mode):
    """The chat was read again for `mode`: a run going on there shows its turn again, after
    the earlier ones."""
    session = _session
    if session is not None and session.mode == mode:
        session.turn.base = None
        session.turn.synced = 0
        session.turn.builder.changed.clear()


def remove_files(paths):
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
    child_environment) and streams its events into the run status and the chat of its mode,
    as the next turn of that mode's conversation. kind is 'SCENE', 'GN' or 'AGENT'; the files
    in cleanup are deleted when the run ends (or now, if it cannot start)."""
    global _session
    if _session is not None:
        remove_files(cleanup)
        raise RunnerError("A viga run is already running; cancel it or wait for it to finish")
    try:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, encoding="utf-8", errors="replace", bufsize=1, env=child_environment(prefs),
        )
    except OSError as exc:
        remove_files(cleanup)
        raise RunnerError("Cannot start %s: %s" % (argv[0], exc.strerror or exc)) from exc
    scene = bpy.context.scene
    mode = MODES_OF_KINDS.get(kind, "SCENE")
    turn = len(properties.conversation(scene.viga, mode)) + 1
    _session = Session(proc, argv, cleanup, kind, scene.name, turn)
    status = _status()
    _reset_status(status, kind, task, max_iterations)
    clear_thumbnails()
    _session.turn.builder.request(task)
    _sync_chat(_session)
    properties.append_log(status, "Started: " + shlex.join(argv))
    tag_redraw()


def _sync_chat(session):
    """Shows the live turn's new lines in the chat, when the chat shows its mode."""
    wm = bpy.context.window_manager
    if wm.viga_chat_mode not in ("", session.mode) or chat.is_loading():
        return
    if wm.viga_chat_mode == "":
        wm.viga_chat_mode = session.mode
    turn = session.turn
    if turn.base is None:
        turn.base = len(wm.viga_chat)
    turn.synced = chat.update(wm, turn.base, turn.builder, turn.synced)


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
    status.applied_iteration = 0
    status.message = ""
    status.streaming_text = ""
    status.streaming_role = ""


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
    tag_redraw()


def _kill(session):
    session.proc.kill()
    try:
        session.proc.wait(timeout=2.0)
    except subprocess.TimeoutExpired:
        print("viga: the viga process %d did not exit after SIGKILL" % session.proc.pid)
    remove_files(session.cleanup)


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
    if background.drain() | chat.fill_pending():
        tag_redraw()
    session = _session
    if session is None:
        return
    _sync_chat(session)
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
        tag_redraw()


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
    status.streaming_text = ""
    status.streaming_role = ""
    if session.finished is not None:
        status.final_program = _text(session.finished.get("final_program"))
    remove_files(session.cleanup)
    level = {"FINISHED": "INFO", "CANCELLED": "WARNING"}.get(state, "ERROR")
    properties.append_log(status, "Run %s%s" % (state.lower(), ": " + message if message else ""), level)
    history.refresh(bpy.context)
    # The run folder is the record: the chat reads the whole conversation again from it.
    if bpy.context.window_manager.viga_chat_mode in ("", session.mode):
        chat.reload(bpy.context, session.mode)


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


def tag_redraw():
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
    session.turn.builder.run_folder = status.run_folder
    for entry in session.turn.builder.entries:
        entry["run_folder"] = status.run_folder
    # The turn joins its mode's conversation as soon as its folder exists, so a cancelled or
    # failed turn is part of the record too.
    scene = bpy.data.scenes.get(session.scene_name)
    if scene is not None and status.run_folder:
        runs = properties.conversation(scene.viga, session.mode)
        if not any(run.path == status.run_folder for run in runs):
            runs.add().path = status.run_folder


def _on_event(status, session, message):
    event = _dict(message.get("event"))
    handler = EVENT_HANDLERS.get(event.get("type"))
    if handler is not None:
        handler(status, event)
    if event.get("type") == "model_called":
        status.streaming_text = ""  # the reply is recorded now; the chat shows what came of it
    session.turn.builder.event(event)
    _sync_chat(session)


def _on_model_text(status, session, message):
    role = _text(message.get("role"))
    if role != status.streaming_role:
        status.streaming_text = ""
        status.streaming_role = role
    status.streaming_text = (status.streaming_text + _text(message.get("delta")))[-MAX_STREAMING_CHARS:]


def _on_report(status, session, message):
    status.report_path = _text(message.get("path"))


def _on_finished(status, session, message):
    session.finished = message
    if status.kind != "SCENE":
        # A Geometry Nodes run's last message, the agent's answer: the turn's last word.
        session.turn.builder.answer(_text(message.get("message")))
        _sync_chat(session)


def _on_notice(status, session, message):
    properties.append_log(status, _text(message.get("message")), "INFO")


def _on_error(status, session, message):
    session.error = _text(message.get("message")) or "viga refused to start"
    properties.append_log(status, session.error, "ERROR")


MESSAGE_HANDLERS = {
    "run_folder": _on_run_folder,
    "event": _on_event,
    "model_text": _on_model_text,
    "report": _on_report,
    "finished": _on_finished,
    "notice": _on_notice,
    "error": _on_error,
}


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
            status, "Iteration %d, attempt %d: %s" % (_int(event.get("index")), _int(event.get("attempt")), chat.describe_error(error)),
            "WARNING",
        )


def _on_fast_retry(status, event):
    attempt = _int(event.get("attempt"))
    status.step = "fast retry (attempt %d)" % attempt
    properties.append_log(status, "Fast retry %d: %s" % (attempt, _text(event.get("error"))), "WARNING")


def _on_worker_restarted(status, event):
    properties.append_log(status, "Worker restarted: " + _text(event.get("reason")), "WARNING")


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
    status.verdict = chat.verdict_text(feedback)
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
        # The target first, so the renders are seen beside it.
        target = os.path.join(run_folder, chat.TARGET_FILE)
        if os.path.isfile(target):
            shown = _previews.get(target) or _previews.load(target, target, "IMAGE")
            _thumbnails.append(Thumbnail("target", target, shown.icon_id))
    preview = _previews.get(path) or _previews.load(path, path, "IMAGE")
    _thumbnails.append(Thumbnail(view or os.path.basename(path), path, preview.icon_id))
    while len(_thumbnails) > MAX_THUMBNAILS:
        # The target stays first.
        dropped = _thumbnails.pop(1 if _thumbnails[0].view == "target" else 0)
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
