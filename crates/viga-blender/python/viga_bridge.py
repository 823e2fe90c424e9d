# viga bridge: runs inside Blender and serves viga's framed protocol on 127.0.0.1.
#
# Started three ways, all served by the same Dispatcher:
#   python viga_bridge.py -- --mode serve            (bpy module; main-thread loop)
#   blender -b --factory-startup -P viga_bridge.py -- --mode serve
#   inside the viga_blender extension (an interactive Blender): a network thread fills a
#   queue that one persistent bpy.app.timers poller drains on the main thread (`--mode queue`
#   runs the same queue path headless, with the main thread standing in for the timer). The
#   extension is built from this very file by `viga addon build`.
#
# Wire: every frame is a 4-byte big-endian length followed by that many bytes of UTF-8 JSON.
# The first frame from the client must be {"id", "command": "hello", "token",
# "protocol_version"}; the token comes from the VIGA_BRIDGE_TOKEN environment variable.
# Replies are {"id", "ok": true, "result"} or {"id", "ok": false, "error": {"kind", "message",
# ...}}. Exceptions raised by a user program are not bridge errors: `execute` returns them in
# its result, with traceback and line number.
#
# Before a client has shown the token it is a stranger: its whole hello must arrive within
# HANDSHAKE_DEADLINE_S and fit MAX_HELLO_BYTES, it says hello on a thread of its own, and
# nothing it sends can raise past that thread. One authenticated client is served at a time;
# another one is answered "busy" and closed.

import base64
import contextlib
import hashlib
import hmac
import io
import json
import linecache
import math
import os
import queue
import re
import shutil
import socket
import stat
import struct
import sys
import tempfile
import threading
import time
import traceback

import bpy
import mathutils

PROTOCOL_VERSION = 1
MAX_REQUEST_BYTES = 16 * 1024 * 1024
# A hello is a few hundred bytes; until a client has shown the token it may send no more.
MAX_HELLO_BYTES = 4096
MAX_CAPTURE_CHARS = 256 * 1024
# The whole hello, however the client spreads its bytes: one byte every few seconds must not
# hold a connection for longer than this.
HANDSHAKE_DEADLINE_S = 10.0
# Clients saying hello at once; more are closed unread, so strangers cannot pile up threads.
MAX_PENDING_HANDSHAKES = 8
# How long an authenticated client waits for the one before it to leave (a client that
# reconnects at once may be ahead of the bridge noticing it left) before it is told "busy".
BUSY_GRACE_S = 2.0
PROGRAM_FILENAME = "<viga-program>"
READY_MARKER = "VIGA_BRIDGE_READY "
CAPABILITIES = [
    "execute", "scene_info", "render", "set_camera", "frame_objects", "render_framed_views", "set_visibility",
    "set_frame", "list_keyframes", "save_blend", "load_blend", "checkpoint", "restore",
    "list_addons", "addon_command", "apply_program", "undo_push", "undo", "import_gn_result",
    "import_scene_result", "scene_fingerprints", "ping", "shutdown",
]
# Commands that would replace the open file of a person's Blender: refused in add-on mode,
# where the scene belongs to the user and is never reloaded, replaced or closed by viga.
USER_SCENE_REPLACING = ("load_blend", "restore")
ENGINES = {"WORKBENCH": "BLENDER_WORKBENCH", "CYCLES": "CYCLES", "EEVEE": "BLENDER_EEVEE"}
# Cycles' GPU backends, the fastest first.
GPU_BACKENDS = ("OPTIX", "CUDA", "HIP", "ONEAPI", "METAL")
_cycles_gpu = None
VIEW_CAMERA_NAME = "viga_view_camera"


class BridgeError(Exception):
    """A request the bridge refuses; `kind` tells the client which."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind
        self.message = message


class FrameError(Exception):
    """The connection carried something that is not a frame; it is closed."""


# --------------------------------------------------------------------------- framing


def read_exact(sock, count, deadline=None):
    """Reads `count` bytes; None on a clean close before the first byte, fewer bytes on a
    close midway. With a `deadline` (time.monotonic()) every wait is shortened to what is
    left of it, so the deadline bounds the whole read, not each recv."""
    chunks = []
    remaining = count
    while remaining:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise FrameError("no complete hello within %.0f s; closing this connection" % HANDSHAKE_DEADLINE_S)
            sock.settimeout(left)
        try:
            chunk = sock.recv(min(remaining, 1 << 20))
        except socket.timeout:
            if deadline is None:
                raise
            continue  # the loop's deadline check says what happened
        if not chunk:
            return None if remaining == count and not chunks else b"".join(chunks)
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def read_frame(sock, limit=MAX_REQUEST_BYTES, deadline=None):
    """Returns the parsed JSON of one frame, None on a clean close; raises FrameError."""
    header = read_exact(sock, 4, deadline)
    if header is None:
        return None
    if len(header) < 4:
        raise FrameError("truncated frame header")
    (length,) = struct.unpack(">I", header)
    if length > limit:
        raise FrameError("frame of %d bytes exceeds the limit of %d bytes" % (length, limit))
    body = read_exact(sock, length, deadline)
    if body is None or len(body) < length:
        raise FrameError("truncated frame: expected %d bytes" % length)
    try:
        return json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        # RecursionError: a deeply nested body ([[[[...) is refused like any other garbage.
        return {"__garbage__": "%s: %s" % (type(err).__name__, err)}


def encode_reply(value):
    """The reply as UTF-8 JSON that any strict reader accepts. Python's json writes NaN and
    Infinity, which are not JSON, and a program's output may hold lone surrogates, which UTF-8
    cannot carry: either would make the reply unreadable, so a reply holding them is sent as
    a cleaned copy (non-finite numbers as null, each surrogate as U+FFFD). A reply that cannot
    be encoded at all becomes a blender_error reply to the same request."""
    try:
        return dump_utf8(value)
    except (ValueError, TypeError, RecursionError):
        pass  # NaN, Infinity and lone surrogates are cleaned below; anything else fails there again
    try:
        return dump_utf8(readable(value))
    except (ValueError, TypeError, RecursionError) as err:
        request_id = value.get("id") if isinstance(value, dict) else None
        if not isinstance(request_id, (int, str)):
            request_id = None  # the id itself may be what could not be encoded
        return dump_utf8(readable(error_reply(
            request_id, "blender_error", "the reply could not be encoded as JSON: %s: %s" % (type(err).__name__, err),
        )))


def dump_utf8(value):
    return json.dumps(value, separators=(",", ":"), allow_nan=False, ensure_ascii=False).encode("utf-8")


SURROGATES = re.compile("[\ud800-\udfff]")


def readable(value):
    """A copy of `value` without what encode_reply cannot send."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return SURROGATES.sub("\ufffd", value)
    if isinstance(value, dict):
        return {readable(key): readable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [readable(item) for item in value]
    return value


def write_frame(sock, value):
    body = encode_reply(value)
    sock.sendall(struct.pack(">I", len(body)) + body)


def error_reply(request_id, kind, message, **extra):
    error = {"kind": kind, "message": message}
    error.update(extra)
    return {"id": request_id, "ok": False, "error": error}


# --------------------------------------------------------------------------- helpers


def rounded(values, places=4):
    return [round(float(v), places) for v in values]


def object_or_error(name):
    obj = bpy.data.objects.get(name)
    if obj is None:
        known = sorted(o.name for o in bpy.data.objects)[:20]
        raise BridgeError("not_found", "no object named %r; objects are: %s" % (name, ", ".join(known) or "(none)"))
    return obj


def world_bbox(obj):
    corners = [obj.matrix_world @ mathutils.Vector(corner) for corner in obj.bound_box]
    low = mathutils.Vector((min(c[i] for c in corners) for i in range(3)))
    high = mathutils.Vector((max(c[i] for c in corners) for i in range(3)))
    return low, high


def user_error_line(tb_entries):
    line = None
    for entry in tb_entries:
        if entry.filename == PROGRAM_FILENAME:
            line = entry.lineno
    return line


def run_program(code):
    """Runs a user program; returns the ExecutionResult shape of viga-protocol."""
    stdout, stderr = BoundedCapture(_program_log), BoundedCapture(_program_log)
    linecache.cache[PROGRAM_FILENAME] = (len(code), None, code.splitlines(True), PROGRAM_FILENAME)
    started = time.perf_counter()
    error = None
    try:
        compiled = compile(code, PROGRAM_FILENAME, "exec")
        program_globals = {"__name__": "__main__", "__builtins__": __builtins__, "bpy": bpy}
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            exec(compiled, program_globals)
    except SyntaxError as exc:
        error = {
            "error_type": type(exc).__name__,
            "message": bounded(exc.msg or str(exc)),
            "traceback": bounded("".join(traceback.format_exception_only(type(exc), exc))),
        }
        if exc.lineno is not None:
            error["line"] = exc.lineno
    except BaseException as exc:  # noqa: BLE001 - a user program may raise anything, SystemExit included
        entries = traceback.extract_tb(exc.__traceback__)
        # Drop the bridge's own frames: the user reads from their program down.
        first_user = next((i for i, e in enumerate(entries) if e.filename == PROGRAM_FILENAME), 0)
        shown = traceback.format_list(entries[first_user:])
        error = {
            "error_type": type(exc).__name__,
            "message": bounded(str(exc)),
            "traceback": bounded(
                "Traceback (most recent call last):\n" + "".join(shown)
                + "".join(traceback.format_exception_only(type(exc), exc))
            ),
        }
        line = user_error_line(entries)
        if line is not None:
            error["line"] = line
    duration_ms = (time.perf_counter() - started) * 1000.0
    if _program_log is not None:
        _program_log.stop()
    result = {
        "stdout": stdout.getvalue(),
        "stderr": stderr.getvalue(),
        "duration_ms": round(duration_ms, 3),
    }
    if error is not None:
        result["error"] = error
    return result


def bounded(text):
    if len(text) <= MAX_CAPTURE_CHARS:
        return text
    return text[:MAX_CAPTURE_CHARS] + "\n[viga: output truncated after %d characters]\n" % MAX_CAPTURE_CHARS


class OutputLog:
    """The end of what the running program printed (stdout and stderr as they interleave),
    kept in a file viga can read after Blender is gone: a program stopped at its time limit
    has no reply to carry its output. Two files take turns, so the newest PROGRAM_LOG_CHARS
    to twice that are always there, however much the program prints; lines reach the file as
    they end. A program's threads may print at once, hence the lock."""

    def __init__(self, path):
        self.path = path
        self.previous = path + ".1"
        self.lock = threading.Lock()
        self.handle = None
        self.written = 0

    def start(self):
        with self.lock:
            self._close()
            for name in (self.path, self.previous):
                with contextlib.suppress(OSError):
                    os.remove(name)
            self._open()

    def _open(self):
        try:
            # Line-buffered: a program that prints a line and then hangs has that line kept.
            self.handle = open(self.path, "w", encoding="utf-8", errors="replace", newline="", buffering=1)
        except OSError:
            self.handle = None
        self.written = 0

    def _close(self):
        if self.handle is not None:
            with contextlib.suppress(OSError, ValueError):
                self.handle.close()
        self.handle = None

    def write(self, text):
        text = text[-PROGRAM_LOG_CHARS:]  # one huge write keeps its end only
        with self.lock:
            if self.handle is None:
                return
            try:
                if self.written >= PROGRAM_LOG_CHARS:
                    self._close()
                    os.replace(self.path, self.previous)
                    self._open()
                    if self.handle is None:
                        return
                self.handle.write(text)
                self.written += len(text)
            except (OSError, ValueError):
                self._close()  # a full disk stops the log, never the program

    def stop(self):
        with self.lock:
            self._close()


PROGRAM_LOG_CHARS = 32 * 1024
# Set by viga for its own workers (a file in the worker's scratch folder); unset in a
# person's Blender, whose programs are never stopped by a kill.
_program_log = OutputLog(os.environ["VIGA_PROGRAM_LOG"]) if os.environ.get("VIGA_PROGRAM_LOG") else None


class BoundedCapture(io.TextIOBase):
    """A program's stdout or stderr, kept up to MAX_CAPTURE_CHARS while it is written: a
    program printing in a loop must not fill Blender's memory before the reply is cut. What
    does not fit is counted, not kept. Everything also goes to the program log, if any."""

    def __init__(self, log=None):
        super().__init__()
        self.parts = []
        self.kept = 0
        self.dropped = 0
        self.log = log

    def writable(self):
        return True

    def write(self, text):
        if not isinstance(text, str):
            raise TypeError("write() argument must be str, not %s" % type(text).__name__)
        if self.log is not None:
            self.log.write(text)
        room = max(MAX_CAPTURE_CHARS - self.kept, 0)
        if room:
            piece = text[:room]
            self.parts.append(piece)
            self.kept += len(piece)
        self.dropped += max(len(text) - room, 0)
        return len(text)

    def getvalue(self):
        text = "".join(self.parts)
        if self.dropped:
            text += "\n[viga: output truncated after %d characters; %d more were not kept]\n" % (self.kept, self.dropped)
        return text


def reset_scene(reset):
    if reset is None:
        return
    kind = reset.get("kind")
    if kind == "factory":
        bpy.ops.wm.read_factory_settings(use_empty=True)
    elif kind == "blend":
        load_blend({"path": reset.get("path")})
    else:
        raise BridgeError("bad_request", "unknown reset kind %r; use \"factory\" or \"blend\"" % kind)


# --------------------------------------------------------------------------- commands


def cmd_ping(_args):
    return {"pong": True}


def cmd_execute(args):
    code = args.get("code")
    if not isinstance(code, str):
        raise BridgeError("bad_request", "execute needs a string field \"code\"")
    if _program_log is not None:
        # Emptied before the scene is reloaded: if that is what runs out of time, the
        # previous program's output must not be taken for this one's.
        _program_log.start()
    reset_scene(args.get("reset"))
    return run_program(code)


# --------------------------------------------------------------------------- undo
#
# Changes made from a timer or a socket request are on no undo step of their own: each change
# viga applies to a person's scene is wrapped in steps here, so one Ctrl-Z takes it back.


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
    work = _addon_state.get("work")
    if work is not None:
        work.drain()
    push_undo_step(message)
    undo_one_step()


def text_field(args, field, default=None):
    value = args.get(field, default)
    if not isinstance(value, str) or not value:
        raise BridgeError("bad_request", "%s needs a non-empty string field %r" % (args.get("command"), field))
    return value


def cmd_apply_program(args):
    execution = apply_program(text_field(args, "code"), text_field(args, "message", "viga: program"))
    reverted = execution.pop("reverted", False)
    return {"execution": execution, "reverted": reverted}


def cmd_undo_push(args):
    push_undo_step(text_field(args, "message"))
    return {"pushed": True}


def cmd_undo(_args):
    undo_one_step()
    return {"undone": True}


# --------------------------------------------------------------------------- results as data
#
# Attached runs work in viga's own (contained) worker, on a copy of the person's scene. Their
# results come back as data: a .blend the worker saved, and what to take from it. Everything
# in it was written where model code ran, so nothing of it runs: datablocks are appended
# (Blender's append runs no script; a file's registered texts run only when a file is opened
# with auto-run on), and before any of the person's data changes, every appended datablock is
# checked (result_refusal: only the kinds the result may bring, nothing linked from another
# file, no text, no driver needing Python, no node tree or node type written in Python, no
# script node). A result that fails is removed again, and the scene is as it was; one that
# passes is ONE undo step. Geometry Nodes results and scene results share all of this.

# Node tree types Blender itself defines; a tree of any other type is written in Python.
RESULT_TREE_TYPES = ("GeometryNodeTree", "ShaderNodeTree", "CompositorNodeTree", "TextureNodeTree")
# Nodes that run code of their own: OSL scripts, from a text or a file.
RESULT_CODE_NODES = ("ShaderNodeScript",)
# The longest datablock name Blender keeps, in bytes.
RESULT_NAME_BYTES = 255


def result_name(value, what):
    if not isinstance(value, str) or not value or "\x00" in value or len(value.encode("utf-8")) > RESULT_NAME_BYTES:
        raise BridgeError("bad_request", "%s must be a name of 1 to %d bytes without NUL, not %r"
                          % (what, RESULT_NAME_BYTES, value if isinstance(value, str) else type(value).__name__))
    return value


def result_file(args):
    path = checked_path(args, must_exist=False)
    try:
        mode = os.lstat(path).st_mode
    except OSError as exc:
        raise BridgeError("not_found", "the run's result %s cannot be read: %s" % (path, exc)) from None
    if not stat.S_ISREG(mode):
        raise BridgeError("bad_request", "the run's result %s is not a regular file (a link or a device is not read)" % path)
    return os.path.abspath(path)


def result_ids():
    """Every datablock in this Blender, by pointer: (collection name, ID)."""
    found = {}
    for prop in bpy.data.bl_rna.properties:
        if prop.type != "COLLECTION":
            continue
        for block in getattr(bpy.data, prop.identifier):
            found[block.as_pointer()] = (prop.identifier, block)
    return found


def result_python_driver(block):
    """The first driver of `block` (or of a node tree embedded in it) that needs Python."""
    for owner in (block, getattr(block, "node_tree", None)):
        animation = getattr(owner, "animation_data", None) if owner is not None else None
        for curve in (animation.drivers if animation is not None else ()):
            driver = curve.driver
            if driver.type == "SCRIPTED" and not driver.is_simple_expression:
                return "%s[%d]: %r" % (curve.data_path, curve.array_index, driver.expression)
    return None


def result_refusal(collection, block, allowed):
    """Why an appended datablock must not stay in the person's scene, or None. `allowed`:
    the bpy.data collections this kind of result may bring."""
    kind = "%s %r" % (type(block).__name__, block.name)
    if collection not in allowed:
        return "%s (bpy.data.%s) is not part of this kind of result" % (kind, collection)
    if collection != "libraries" and block.library is not None:
        return "%s is linked from another file (%s)" % (kind, block.library.filepath)
    driver = result_python_driver(block)
    if driver is not None:
        return "%s has a driver that needs Python: %s" % (kind, driver)
    trees = [block] if collection == "node_groups" else [getattr(block, "node_tree", None)]
    for tree in trees:
        if tree is None:
            continue
        if tree.bl_idname not in RESULT_TREE_TYPES:
            return "%s is a %s, not one of Blender's own node tree types" % (kind, tree.bl_idname)
        for node in tree.nodes:
            if type(node).__module__ not in ("bpy.types", "_bpy_types"):
                return "%s has node %r of a type written in Python (%s)" % (kind, node.name, node.bl_idname)
            if node.bl_idname in RESULT_CODE_NODES:
                return "%s has a script node %r (%s), which runs code of its own" % (kind, node.name, node.bl_idname)
    return None


def result_check_appended(added, allowed):
    """Refuses the result when one of the appended datablocks `added` ((collection, ID)
    pairs) is refused."""
    for collection, block in added:
        refused = result_refusal(collection, block, allowed)
        if refused:
            raise BridgeError("result_refused", "the run's result was refused: %s" % refused)


def result_original_name(block, collection, file_names, path):
    """The name an appended datablock had in the result file: Blender renames one whose name
    was taken, and keeps the original in its weak reference (objects have none: their
    numbered suffix is dropped when the file has the bare name and not the numbered one)."""
    reference = getattr(block, "library_weak_reference", None)
    if reference is not None and os.path.abspath(bpy.path.abspath(reference.filepath)) == path:
        return reference.id_name[2:]
    names = file_names.get(collection, ())
    if block.name in names:
        return block.name
    base, dot, suffix = block.name.rpartition(".")
    if dot and suffix.isdigit() and base in names:
        return base
    return block.name


def result_noun(collection):
    """What one member of a bpy.data collection is called: node_groups -> node group."""
    return {"meshes": "mesh", "libraries": "library"}.get(collection, collection[:-1].replace("_", " "))


def result_append(path, requests):
    """Appends the datablocks `requests` names ({bpy.data collection: [names]}) from `path`,
    with what they use: ({(collection, name): the appended ID}, the file's names by
    collection)."""
    with bpy.data.libraries.load(path, link=False) as (data_from, data_to):
        file_names = {attr: set(getattr(data_from, attr)) for attr in dir(data_from)
                      if isinstance(getattr(data_from, attr), list)}
        for collection, names in requests.items():
            missing = [name for name in names if name not in file_names.get(collection, ())]
            if missing:
                raise BridgeError("result_refused", "the run's result has no %s %s"
                                  % (result_noun(collection), ", ".join(repr(n) for n in missing)))
            setattr(data_to, collection, list(names))
    appended = {}
    for collection, names in requests.items():
        for name, block in zip(names, getattr(data_to, collection)):
            appended[(collection, name)] = block
    return appended, file_names


def result_use_own(result, requested):
    """What the appended datablocks use that the scene already had (an object a node points
    at, a material) is the scene's own: each copy the append brought of one is replaced by
    the scene's and removed. `requested`: the pointers of the datablocks the result asked
    for, which stay. Returns the removed copies."""
    duplicates = []
    for collection, block in result["added"]:
        if collection == "libraries" or block.as_pointer() in requested:
            continue
        name = result_original_name(block, collection, result["file_names"], result["path"])
        original = result["before"].get((collection, name))
        if original is not None:
            block.user_remap(original)
            duplicates.append(block)
    result_remove(duplicates)
    return duplicates


def result_remove(blocks):
    blocks = list(blocks)
    if blocks:
        bpy.data.batch_remove(blocks)


def result_appended_since(before_ids):
    """The datablocks that are new since `before_ids` (result_ids()), as (collection, ID)."""
    return [(collection, block) for pointer, (collection, block) in result_ids().items()
            if pointer not in before_ids]


def result_drop_unused(kept):
    """Removes the appended datablocks `kept` that nothing uses any more (copies replaced by
    the scene's own, the library entry the append left behind), until none is left."""
    while True:
        unused = [block for block in kept
                  if (block.users_id == () if isinstance(block, bpy.types.Library) else block.users == 0)]
        if not unused:
            return
        result_remove(unused)
        kept = [block for block in kept if block not in unused]


def result_as_one_undo_step(message, check, apply):
    """Brings a result in as ONE undo step named `message`: check() appends and checks it
    (removing it again when it refuses it), apply(checked) puts it in place; a failure while
    applying goes back to the step before."""
    ensure_undo_base()
    checked = check()
    try:
        applied = apply(checked)
    except Exception:
        push_undo_step(message + " (failed)")
        undo_one_step()
        raise
    push_undo_step(message)
    return applied


# --------------------------------------------------------------------------- Geometry Nodes results
#
# A Geometry Nodes run's result: the node groups the run made or changed, appended from the
# .blend the worker saved, and the Geometry Nodes modifiers with their input values, whose
# names and values are checked against what the groups declare.

GN_RESULT_LIMITS = {"node_groups": 64, "modifiers": 64, "inputs": 512}
GN_STRING_CHARS = 4096
# bpy.data collections a node group's dependencies may be appended into. Texts (scripts),
# scenes, cache files (they read Alembic/USD files), sounds, clips, brushes and the like are not.
GN_DEPENDENCY_COLLECTIONS = (
    "node_groups", "objects", "meshes", "curves", "hair_curves", "pointclouds", "volumes",
    "materials", "images", "textures", "collections", "fonts", "lattices", "metaballs",
    "lights", "cameras", "armatures", "grease_pencils", "annotations", "shape_keys", "actions",
    "libraries",
)
# A modifier input's datablock kind -> the bpy.data collection it names a member of.
GN_DATABLOCK_KINDS = {"object": "objects", "collection": "collections", "material": "materials",
                      "image": "images"}
GN_SOCKET_VALUES = {
    "NodeSocketFloat": "number", "NodeSocketInt": "integer", "NodeSocketBool": "boolean",
    "NodeSocketMenu": "integer", "NodeSocketString": "string", "NodeSocketVector": "vector",
    "NodeSocketColor": "vector", "NodeSocketRotation": "vector",
    "NodeSocketObject": "object", "NodeSocketCollection": "collection",
    "NodeSocketMaterial": "material", "NodeSocketImage": "image",
}


def gn_list(args, field, limit):
    value = args.get(field)
    if not isinstance(value, list) or len(value) > limit:
        raise BridgeError("bad_request", "import_gn_result needs a list %r of at most %d entries" % (field, limit))
    return value


def gn_modifier_requests(entries, groups):
    """The modifiers of the result, checked for shape: object, modifier and group names, and
    inputs as {key: value}. Whether they fit the scene and the groups is checked later."""
    requests = []
    seen = set()
    for index, entry in enumerate(entries):
        where = "modifiers[%d]" % index
        if not isinstance(entry, dict) or set(entry) != {"object", "modifier", "node_group", "inputs"}:
            raise BridgeError("bad_request", "%s must have exactly object, modifier, node_group and inputs" % where)
        obj = result_name(entry["object"], where + ".object")
        modifier = result_name(entry["modifier"], where + ".modifier")
        if len(modifier.encode("utf-8")) > 63:
            raise BridgeError("bad_request", "%s.modifier %r is longer than Blender's 63 bytes" % (where, modifier))
        group = result_name(entry["node_group"], where + ".node_group")
        if group not in groups:
            raise BridgeError("bad_request", "%s uses node group %r, which the result does not bring" % (where, group))
        if (obj, modifier) in seen:
            raise BridgeError("bad_request", "%s repeats the modifier %r on %r" % (where, modifier, obj))
        seen.add((obj, modifier))
        inputs = entry["inputs"]
        if not isinstance(inputs, dict) or len(inputs) > GN_RESULT_LIMITS["inputs"]:
            raise BridgeError("bad_request", "%s.inputs must be an object of at most %d values" % (where, GN_RESULT_LIMITS["inputs"]))
        requests.append((obj, modifier, group, inputs))
    return requests


def gn_input_value(value, expected, where, length):
    """A modifier input value as Blender stores it, or a refusal."""
    if expected == "boolean" and isinstance(value, bool):
        return value
    if expected == "integer" and isinstance(value, int) and not isinstance(value, bool):
        return value
    if expected == "number" and isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    if expected == "string" and isinstance(value, str) and len(value) <= GN_STRING_CHARS:
        return value
    if expected == "vector" and isinstance(value, list) and len(value) == length and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value):
        return [float(v) for v in value]
    if expected in GN_DATABLOCK_KINDS and isinstance(value, dict) and set(value) == {"kind", "name"} \
            and value["kind"] == expected:
        if value["name"] is None:
            return None
        name = result_name(value["name"], where)
        block = getattr(bpy.data, GN_DATABLOCK_KINDS[expected]).get(name)
        if block is None:
            raise BridgeError("result_refused", "%s names the %s %r, which is not in this scene" % (where, expected, name))
        return block
    raise BridgeError("result_refused", "%s must be a %s%s, not %r" % (
        where, expected, " of %d numbers" % length if expected == "vector" else "", value))


def gn_modifier_inputs(group, inputs, where):
    """Checks every input against the group's interface: {key: value as Blender stores it}."""
    sockets = {}
    for item in group.interface.items_tree:
        if item.item_type == "SOCKET" and item.in_out == "INPUT" and item.socket_type in GN_SOCKET_VALUES:
            default = getattr(item, "default_value", None)
            length = len(default) if GN_SOCKET_VALUES[item.socket_type] == "vector" and default is not None else 0
            sockets[item.identifier] = (GN_SOCKET_VALUES[item.socket_type], length)
    values = {}
    for key, value in inputs.items():
        place = "%s.inputs[%r]" % (where, key)
        identifier, expected, length = key, None, 0
        for suffix, kind in (("_use_attribute", "boolean"), ("_attribute_name", "string")):
            if key.endswith(suffix) and key[:-len(suffix)] in sockets:
                identifier, expected = key[:-len(suffix)], kind
        if identifier not in sockets:
            raise BridgeError("result_refused", "%s: node group %r has no input %r" % (place, group.name, key))
        if expected is None:
            expected, length = sockets[identifier]
        values[key] = gn_input_value(value, expected, place, length)
    return values


def gn_checked_result(path, names, modifiers):
    """Appends the result and checks all of it; a result that fails is removed again before
    the refusal is raised, so the person's data is as it was. Returns what applying needs."""
    before_ids = result_ids()
    before = {(collection, block.name): block for collection, block in before_ids.values()
              if collection != "libraries" and block.library is None}
    try:
        appended, file_names = result_append(path, {"node_groups": names})
        appended = {name: appended[("node_groups", name)] for name in names}
        added = result_appended_since(before_ids)
        for name, group in appended.items():
            if group is None or group.bl_idname not in RESULT_TREE_TYPES:
                raise BridgeError("result_refused", "the run's result %r is not a node group Blender can use here" % name)
        result_check_appended(added, GN_DEPENDENCY_COLLECTIONS)
        plan = []
        for obj_name, modifier_name, group_name, inputs in modifiers:
            where = "modifier %r on %r" % (modifier_name, obj_name)
            obj = before.get(("objects", obj_name))
            if obj is None:
                raise BridgeError("result_refused", "%s: there is no object %r in this scene (renamed or deleted during the run?)" % (where, obj_name))
            existing = obj.modifiers.get(modifier_name)
            if existing is not None and existing.type != "NODES":
                raise BridgeError("result_refused", "%s: the scene's modifier of that name is a %s modifier" % (where, existing.type))
            if existing is None and obj.type not in ("MESH", "CURVE", "CURVES", "POINTCLOUD", "VOLUME", "GREASEPENCIL", "FONT"):
                raise BridgeError("result_refused", "%s: a %s cannot carry a Geometry Nodes modifier" % (where, obj.type))
            group = appended[group_name]
            plan.append((obj, modifier_name, group, gn_modifier_inputs(group, inputs, where)))
    except BaseException:
        result_remove(block for _collection, block in result_appended_since(before_ids))
        raise
    return {"before": before, "appended": appended, "added": added, "file_names": file_names,
            "path": path, "plan": plan}


def gn_apply_result(result):
    """Puts a checked result into the person's data: groups of a name the scene has replace
    it (wherever it is used), what the groups use that the scene already has is the scene's,
    and the modifiers get their groups and input values."""
    before, appended, added = result["before"], result["appended"], result["added"]
    requested = list(appended.values())
    replaced = []
    for name, group in appended.items():
        old = before.get(("node_groups", name))
        if old is not None:
            old.user_remap(group)
            replaced.append(old)
    result_remove(replaced)
    for name, group in appended.items():
        group.name = name
    duplicates = result_use_own(result, {group.as_pointer() for group in requested})
    changed = []
    for obj, modifier_name, group, values in result["plan"]:
        modifier = obj.modifiers.get(modifier_name) or obj.modifiers.new(modifier_name, "NODES")
        modifier.node_group = group
        for key, value in values.items():
            modifier[key] = value
        obj.update_tag()
        changed.append("%s/%s" % (obj.name, modifier.name))
    # Appended copies nothing uses any more, and the library entry the append left behind.
    result_drop_unused([block for _collection, block in added if block not in duplicates and block not in requested])
    return {"node_groups": sorted(appended), "replaced": sorted(old_name for old_name in appended
                                                                if ("node_groups", old_name) in before),
            "modifiers": changed}


def cmd_import_gn_result(args):
    path = result_file(args)
    names = [result_name(name, "node_groups[%d]" % i)
             for i, name in enumerate(gn_list(args, "node_groups", GN_RESULT_LIMITS["node_groups"]))]
    if len(set(names)) != len(names):
        raise BridgeError("bad_request", "node_groups names a group twice")
    modifiers = gn_modifier_requests(gn_list(args, "modifiers", GN_RESULT_LIMITS["modifiers"]), set(names))
    message = text_field(args, "message")
    return result_as_one_undo_step(message, lambda: gn_checked_result(path, names, modifiers), gn_apply_result)


# --------------------------------------------------------------------------- scene results
#
# An attached scene run's result. The worker re-ran the chosen program on the copy of the
# person's scene, compared fingerprints of the copy's datablocks before and after it
# (scene_fingerprints, below) and saved the scene it left; viga turned the comparison into a
# plan: the objects the run made or changed (with the collections they are in), the objects it
# removed, the other datablocks it changed or made, and the scene's camera and world. Here the
# plan is applied to the open scene as ONE undo step, without running anything: what it names
# is appended from the saved .blend and checked (result_refusal) before anything of the
# person's changes. The copy was their scene, so what the run left alone is theirs and stays
# (their edits since the copy too): a changed object or datablock replaces theirs of its name
# wherever it is used, a new one comes in under its own name (numbered when the name is taken),
# a removed object leaves this scene, and what the appended datablocks use that the run left
# unchanged is theirs, not a copy. A run that did not start from their scene (no copy) only
# adds: nothing of theirs is replaced or removed. Other scenes of their file keep their own
# objects, and datablocks linked from libraries are never replaced.

SCENE_RESULT_LIMITS = {"objects": 10000, "remove": 10000, "data": 10000, "collections": 1000,
                       "object_collections": 64}
# bpy.data collections a scene result may bring. Texts (scripts), scenes, cache files, sounds,
# clips, brushes, workspaces and the like are not; libraries only as the entry an append
# leaves, since nothing linked from one may come in.
SCENE_RESULT_COLLECTIONS = (
    "objects", "meshes", "curves", "hair_curves", "pointclouds", "volumes", "materials",
    "node_groups", "images", "textures", "collections", "fonts", "lattices", "metaballs",
    "lights", "lightprobes", "cameras", "speakers", "armatures", "grease_pencils", "annotations",
    "shape_keys", "actions", "particles", "palettes", "worlds", "libraries",
)
# Of those, the ones a plan names datablocks of (changed or new). Objects are named on their
# own; shape keys come with their geometry, collections are made by name.
SCENE_DATA_COLLECTIONS = tuple(c for c in SCENE_RESULT_COLLECTIONS
                               if c not in ("objects", "shape_keys", "collections", "libraries"))
SCENE_LINK_KEYS = ("keep", "clear")


def scene_names(value, what, limit, allow_empty=False):
    if not isinstance(value, list) or len(value) > limit:
        raise BridgeError("bad_request", "%s must be a list of at most %d names" % (what, limit))
    names = [name if allow_empty and name == "" else result_name(name, "%s[%d]" % (what, i))
             for i, name in enumerate(value)]
    if len(set(names)) != len(names):
        raise BridgeError("bad_request", "%s names something twice" % what)
    return names


def scene_link(value, what):
    """A plan's camera or world: "keep", "clear" or {"use": name}."""
    if value in SCENE_LINK_KEYS:
        return value
    if isinstance(value, dict) and set(value) == {"use"}:
        return {"use": result_name(value["use"], what + ".use")}
    raise BridgeError("bad_request", "%s must be \"keep\", \"clear\" or {\"use\": name}, not %r" % (what, value))


def scene_data_names(value, what):
    if not isinstance(value, dict) or any(key not in SCENE_DATA_COLLECTIONS for key in value):
        raise BridgeError("bad_request", "%s must map bpy.data collections (%s) to names"
                          % (what, ", ".join(SCENE_DATA_COLLECTIONS)))
    return {key: scene_names(names, "%s.%s" % (what, key), SCENE_RESULT_LIMITS["data"])
            for key, names in value.items()}


def scene_plan(args):
    """The plan, checked for shape: names, sizes, and nothing named twice."""
    plan = args.get("plan")
    keys = {"from_open_scene", "objects", "remove", "changed", "added", "collections", "camera", "world"}
    if not isinstance(plan, dict) or set(plan) != keys:
        raise BridgeError("bad_request", "import_scene_result needs a plan with exactly %s" % ", ".join(sorted(keys)))
    if not isinstance(plan["from_open_scene"], bool):
        raise BridgeError("bad_request", "plan.from_open_scene must be true or false")
    entries = plan["objects"]
    if not isinstance(entries, list) or len(entries) > SCENE_RESULT_LIMITS["objects"]:
        raise BridgeError("bad_request", "plan.objects must be a list of at most %d objects" % SCENE_RESULT_LIMITS["objects"])
    objects = []
    for index, entry in enumerate(entries):
        where = "plan.objects[%d]" % index
        if not isinstance(entry, dict) or set(entry) != {"name", "replaces", "collections"} \
                or not isinstance(entry["replaces"], bool):
            raise BridgeError("bad_request", "%s must have exactly name, replaces (true or false) and collections" % where)
        collections = scene_names(entry["collections"], where + ".collections",
                                  SCENE_RESULT_LIMITS["object_collections"], allow_empty=True)
        if not collections:
            raise BridgeError("bad_request", "%s.collections names no collection to put it in" % where)
        objects.append({"name": result_name(entry["name"], where + ".name"),
                        "replaces": entry["replaces"] and plan["from_open_scene"], "collections": collections})
    scene_names([entry["name"] for entry in objects], "plan.objects", SCENE_RESULT_LIMITS["objects"])
    changed = scene_data_names(plan["changed"], "plan.changed")
    added = scene_data_names(plan["added"], "plan.added")
    for collection, names in changed.items():
        twice = set(names) & set(added.get(collection, ()))
        if twice:
            raise BridgeError("bad_request", "plan names %s in bpy.data.%s as changed and as new" % (sorted(twice), collection))
    parents = plan["collections"]
    if not isinstance(parents, dict) or len(parents) > SCENE_RESULT_LIMITS["collections"]:
        raise BridgeError("bad_request", "plan.collections must map at most %d collections to their parents" % SCENE_RESULT_LIMITS["collections"])
    parents = {result_name(name, "plan.collections key"): "" if parent == "" else result_name(parent, "plan.collections[%r]" % name)
               for name, parent in parents.items()}
    return {"from_open_scene": plan["from_open_scene"], "objects": objects,
            "remove": scene_names(plan["remove"], "plan.remove", SCENE_RESULT_LIMITS["remove"]) if plan["from_open_scene"] else [],
            "changed": changed if plan["from_open_scene"] else {}, "added": added,
            "collections": parents, "camera": scene_link(plan["camera"], "plan.camera"),
            "world": scene_link(plan["world"], "plan.world")}


def scene_collections(scene):
    """The collections of `scene` objects can be put in, by name ("" is the scene's own)."""
    found = {"": scene.collection}
    for collection in scene.collection.children_recursive:
        if collection.library is None:
            found.setdefault(collection.name, collection)
    return found


def scene_replaceable(block):
    """Whether a result may replace or remove `block`: not linked from a library, nor a
    library override (appended, an override would bring the linked datablock it overrides)."""
    return block.library is None and block.override_library is None


def scene_object(scene, name):
    """The object of `scene` named `name` that a plan may replace or remove."""
    obj = scene.objects.get(name)
    return obj if obj is not None and scene_replaceable(obj) else None


def scene_checked_result(path, plan):
    """Appends what the plan names and checks every datablock the append added; a result
    that fails is removed again before the refusal is raised, so the person's data is as it
    was. Returns what applying needs."""
    before_ids = result_ids()
    before = {(collection, block.name): block for collection, block in before_ids.values()
              if collection != "libraries" and block.library is None}
    requests = {"objects": [entry["name"] for entry in plan["objects"]]}
    for names in (plan["changed"], plan["added"]):
        for collection, members in names.items():
            requests.setdefault(collection, []).extend(members)
    requests = {collection: names for collection, names in requests.items() if names}
    try:
        appended, file_names = result_append(path, requests)
        added = result_appended_since(before_ids)
        for (collection, name), block in appended.items():
            if block is None:
                raise BridgeError("result_refused", "the run's result %s %r cannot be used here" % (result_noun(collection), name))
        result_check_appended(added, SCENE_RESULT_COLLECTIONS)
    except BaseException:
        result_remove(block for _collection, block in result_appended_since(before_ids))
        raise
    return {"before": before, "appended": appended, "added": added, "file_names": file_names,
            "path": path, "plan": plan, "added_pointers": {block.as_pointer() for _collection, block in added}}


def scene_collection_for(scene, name, parents, collections, made, depth=0):
    """The collection of `scene` named `name`, made (under its parent in the result, or the
    scene's own collection) when the scene has none."""
    found = collections.get(name)
    if found is not None:
        return found
    parent_name = parents.get(name, "")
    if depth > 32 or parent_name == name:
        parent = scene.collection
    else:
        parent = scene_collection_for(scene, parent_name, parents, collections, made, depth + 1)
    collection = bpy.data.collections.new(name)
    parent.children.link(collection)
    collections[name] = collection
    made.append(collection.name)
    return collection


def scene_place(scene, obj, names, parents, collections, made):
    """Puts `obj` in exactly the collections of `scene` the result has it in (its places in
    other scenes stay)."""
    wanted = {scene_collection_for(scene, name, parents, collections, made).as_pointer() for name in names}
    for collection in list(collections.values()):
        inside = collection.objects.get(obj.name) == obj
        if collection.as_pointer() in wanted and not inside:
            collection.objects.link(obj)
        elif collection.as_pointer() not in wanted and inside:
            collection.objects.unlink(obj)


def scene_apply_result(result):
    """Makes the open scene match the checked result (see the section's comment)."""
    scene = bpy.context.scene
    plan, before, appended = result["plan"], result["before"], result["appended"]
    requested = {block.as_pointer() for block in appended.values()}
    report = {"added": [], "replaced": [], "removed": [], "data_replaced": [], "data_added": [],
              "collections_made": [], "renamed": {}, "camera": None, "world": None, "notes": []}
    # Changed datablocks replace the person's of their name, wherever it is used.
    for collection, names in plan["changed"].items():
        for name in names:
            new = appended[(collection, name)]
            old = before.get((collection, name))
            if old is not None and scene_replaceable(old):
                old.user_remap(new)
                result_remove([old])
                report["data_replaced"].append("%s/%s" % (collection, name))
            new.name = name
    for collection, names in plan["added"].items():
        for name in names:
            new = appended[(collection, name)]
            new.name = name
            report["data_added"].append("%s/%s" % (collection, new.name))
    # What the appended datablocks use that the run left unchanged is the person's own (a
    # run that did not start from their scene has nothing of theirs).
    if plan["from_open_scene"]:
        result_use_own(result, requested)
    collections = scene_collections(scene)
    brought = {}
    for entry in plan["objects"]:
        name = entry["name"]
        new = appended[("objects", name)]
        old = scene_object(scene, name) if entry["replaces"] else None
        if old is not None:
            # Every use of theirs (its collections in every scene, children, modifiers and
            # constraints pointing at it, a scene's camera) now uses the result's.
            old.user_remap(new)
            result_remove([old])
            report["replaced"].append(name)
        new.name = name
        if old is None:
            report["added"].append(new.name)
        if new.name != name:
            report["renamed"][name] = new.name
        scene_place(scene, new, entry["collections"], plan["collections"], collections, report["collections_made"])
        brought[name] = new
    for name in plan["remove"]:
        obj = scene_object(scene, name)
        if obj is None or name in brought:
            continue
        for collection in collections.values():
            if collection.objects.get(obj.name) == obj:
                collection.objects.unlink(obj)
        if obj.users == 0:
            result_remove([obj])
        report["removed"].append(name)
    camera = plan["camera"]
    if camera == "clear":
        scene.camera = None
    elif camera != "keep":
        obj = brought.get(camera["use"]) or scene.objects.get(camera["use"])
        if obj is None:
            report["notes"].append("the result's camera %r is not in your scene; the scene's camera was left as it was" % camera["use"])
        else:
            scene.camera = obj
    world = plan["world"]
    if world == "clear":
        scene.world = None
    elif world != "keep":
        block = appended.get(("worlds", world["use"])) or bpy.data.worlds.get(world["use"])
        if block is None:
            report["notes"].append("the result's world %r is not in your file; the scene's world was left as it was" % world["use"])
        else:
            scene.world = block
    report["camera"] = scene.camera.name if scene.camera is not None else None
    report["world"] = scene.world.name if scene.world is not None else None
    # Appended copies nothing uses any more, and the library entry the append left behind
    # (removed datablocks are gone from result_ids()).
    placed = {obj.as_pointer() for obj in brought.values()}
    result_drop_unused([block for pointer, (_collection, block) in result_ids().items()
                        if pointer in result["added_pointers"] and pointer not in placed])
    return report


def cmd_import_scene_result(args):
    path = result_file(args)
    plan = scene_plan(args)
    message = text_field(args, "message")
    return result_as_one_undo_step(message, lambda: scene_checked_result(path, plan), scene_apply_result)


# --------------------------------------------------------------------------- scene fingerprints
#
# Run in viga's own worker, before and after a program: what the program changed is what
# differs. A fingerprint covers what Blender stores and a program sets: settings, references
# to other datablocks (by name), custom properties, node trees, geometry (as attributes),
# keyframes, drivers, edited pixels; not what Blender derives (matrices, bounds, normals,
# selection) or a datablock's own user count.

FP_SKIPPED = frozenset({
    "rna_type", "bl_rna", "id_data", "original", "users", "session_uid", "matrix_world",
    "matrix_local", "matrix_basis", "bound_box", "preview", "library_weak_reference",
    "users_collection", "users_scene", "animation_data", "pixels", "internal_links",
    "uv_layer_clone", "uv_layer_stencil",
    # What is selected: editing state, not the scene (adding a node selects it alone).
    "select", "select_head", "select_tail", "select_control_point", "select_left_handle",
    "select_right_handle",
})
# Scalars Blender derives even though a datablock offers them as read-only properties; the
# read-only ones it stores are kept.
FP_STORED_READONLY = frozenset({"type", "bl_idname"})
# Collections Blender offers as views of a geometry's attributes, which are hashed instead.
FP_ATTRIBUTE_VIEWS = frozenset({
    "vertices", "edges", "polygons", "loops", "uv_layers", "vertex_colors", "color_attributes",
    "attributes", "points", "curves", "corner_normals", "polygon_normals", "vertex_normals",
    "loop_triangles", "loop_triangle_polygons", "curve_offset_data", "position_data",
})
# Collections longer than this are hashed as arrays, not walked item by item.
FP_WALKED_ITEMS = 64
FP_ARRAY_TYPES = {"FLOAT": "float32", "INT": "int32", "BOOLEAN": "bool_"}
FP_ATTRIBUTE_VALUES = {
    "FLOAT": ("value", 1, "float32"), "INT": ("value", 1, "int32"), "INT8": ("value", 1, "int32"),
    "BOOLEAN": ("value", 1, "bool_"), "FLOAT2": ("vector", 2, "float32"),
    "FLOAT_VECTOR": ("vector", 3, "float32"), "FLOAT_COLOR": ("color", 4, "float32"),
    "BYTE_COLOR": ("color", 4, "float32"), "INT32_2D": ("value", 2, "int32"),
    "QUATERNION": ("value", 4, "float32"), "FLOAT4X4": ("value", 16, "float32"),
}
_fp_properties = {}


def fp_properties(struct):
    """The properties of `struct`'s type a fingerprint reads, as (identifier, type, subtype,
    fixed array length or 1), cached by type."""
    rna = struct.bl_rna
    found = _fp_properties.get(rna.identifier)
    if found is None:
        found = []
        for prop in rna.properties:
            key = prop.identifier
            if key in FP_SKIPPED or prop.is_runtime:
                continue
            scalar = prop.type not in ("POINTER", "COLLECTION")
            if scalar and prop.is_readonly and key not in FP_STORED_READONLY:
                continue
            length = getattr(prop, "array_length", 0) if getattr(prop, "is_array", False) else 1
            if length == 0:
                continue  # an array of any length (pixels): read only where hashed on purpose
            found.append((key, prop.type, prop.subtype, length))
        _fp_properties[rna.identifier] = found
    return found


def fp_plain(value):
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, bpy.types.ID):
        return [type(value).__name__, value.name]
    if hasattr(value, "to_dict"):
        return {key: fp_plain(item) for key, item in value.items()}
    try:
        return [fp_plain(item) for item in value]
    except TypeError:
        return str(value)


def fp_custom(struct):
    """A struct's custom properties, or None for a struct that has none."""
    try:
        keys = struct.keys()
    except TypeError:
        return None
    return {key: fp_plain(struct[key]) for key in keys} if keys else None


def fp_digest(value):
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode("utf-8")).hexdigest()[:32]


def fp_array_hash(items):
    """The numbers of a long collection (a curve's points, keyframes), hashed."""
    import numpy  # only viga's own workers fingerprint; Blender ships numpy
    digest = hashlib.sha256(str(len(items)).encode())
    if len(items):
        for key, kind, _subtype, length in fp_properties(items[0]):
            dtype = FP_ARRAY_TYPES.get(kind)
            if dtype is None:
                if key == "name":
                    digest.update("\0".join(item.name for item in items).encode("utf-8"))
                continue
            buffer = numpy.empty(len(items) * length, dtype=dtype)
            try:
                items.foreach_get(key, buffer)
            except (RuntimeError, TypeError, AttributeError):
                continue
            digest.update(key.encode())
            digest.update(buffer.tobytes())
    return digest.hexdigest()


def fp_attributes(attributes):
    """Every attribute of a geometry, hashed (selection and UV selection state left out)."""
    import numpy
    found = []
    for attribute in sorted(attributes, key=lambda a: a.name):
        if attribute.name.startswith((".select", ".uv_select")):
            continue
        digest = hashlib.sha256()
        spec = FP_ATTRIBUTE_VALUES.get(attribute.data_type)
        if spec is not None:
            key, width, dtype = spec
            buffer = numpy.empty(len(attribute.data) * width, dtype=dtype)
            attribute.data.foreach_get(key, buffer)
            digest.update(buffer.tobytes())
        elif attribute.data_type == "STRING":
            digest.update("\0".join(item.value for item in attribute.data).encode("utf-8"))
        found.append([attribute.name, attribute.domain, attribute.data_type, digest.hexdigest()])
    return found


def fp_state(struct, depth, skip=()):
    """A struct's settings as plain data: values, datablocks by name (embedded ones and shape
    keys whole), nested structs and collections down to `depth` levels, long collections
    hashed."""
    state = {}
    for key, kind, subtype, _length in fp_properties(struct):
        if key in skip:
            continue
        try:
            value = getattr(struct, key)
        except Exception:  # noqa: BLE001 - some properties exist only in some states
            continue
        if kind == "POINTER":
            if isinstance(value, bpy.types.ID):
                if value.is_embedded_data or key == "shape_keys":
                    state[key] = fp_id(value)
                else:
                    state[key] = [type(value).__name__, value.name,
                                  value.library.filepath if value.library is not None else None]
            elif value is None or depth > 0:
                state[key] = None if value is None else fp_state(value, depth - 1)
        elif kind == "COLLECTION":
            if len(value) and isinstance(value[0], bpy.types.ID):
                state[key] = [item.name for item in value]
            elif depth > 0 and len(value) <= FP_WALKED_ITEMS:
                state[key] = [fp_state(item, depth - 1) for item in value]
            else:
                state[key] = fp_array_hash(value)
        elif kind == "STRING" and subtype in ("FILE_PATH", "DIR_PATH") and value:
            library = getattr(struct.id_data, "library", None)
            state[key] = os.path.normpath(bpy.path.abspath(value, library=library))
        else:
            state[key] = fp_plain(value)
    custom = fp_custom(struct)
    if custom:
        state["<custom>"] = custom
    return state


def fp_animation(block):
    animation = getattr(block, "animation_data", None)
    if animation is None:
        return None
    drivers = []
    for curve in animation.drivers:
        driver = curve.driver
        variables = [[variable.name, variable.type,
                      [[target.id.name if target.id is not None else None, target.data_path,
                        target.transform_type, target.transform_space, target.bone_target]
                       for target in variable.targets]]
                     for variable in driver.variables]
        drivers.append([curve.data_path, curve.array_index, driver.type, driver.expression,
                        driver.use_self, variables])
    tracks = [[track.name, track.mute, [[strip.name, strip.action.name if strip.action else None,
                                         strip.frame_start, strip.frame_end] for strip in track.strips]]
              for track in animation.nla_tracks]
    return [animation.action.name if animation.action is not None else None, drivers, tracks]


def fp_node_tree(tree):
    def sockets(items):
        return [[socket.identifier, fp_plain(getattr(socket, "default_value", None))] for socket in items]
    nodes = []
    for node in sorted(tree.nodes, key=lambda n: n.name):
        state = fp_state(node, 2, skip=("inputs", "outputs"))
        nodes.append([state, sockets(node.inputs), sockets(node.outputs)])
    links = sorted((l.from_node.name, l.from_socket.identifier, l.to_node.name, l.to_socket.identifier, l.is_muted)
                   for l in tree.links)
    items = [fp_state(item, 0) for item in tree.interface.items_tree]
    return [fp_state(tree, 0, skip=("nodes", "links", "interface")), items, nodes, links]


def fp_id(block):
    """A datablock's state, as plain data."""
    import numpy
    if isinstance(block, bpy.types.NodeTree):
        state = {"<tree>": fp_node_tree(block)}
    elif isinstance(block, (bpy.types.Mesh, bpy.types.Curves, bpy.types.PointCloud)):
        state = fp_state(block, 2, skip=FP_ATTRIBUTE_VIEWS)
        state["<attributes>"] = fp_attributes(block.attributes)
        if isinstance(block, bpy.types.Mesh):
            starts = numpy.empty(len(block.polygons), dtype="int32")
            block.polygons.foreach_get("loop_start", starts)
            state["<faces>"] = hashlib.sha256(starts.tobytes()).hexdigest()
    elif isinstance(block, bpy.types.Action):
        state = fp_state(block, 0)
        state["<fcurves>"] = [[curve.data_path, curve.array_index,
                               [[tuple(k.co), tuple(k.handle_left), tuple(k.handle_right), k.interpolation,
                                 k.easing, k.handle_left_type, k.handle_right_type] for k in curve.keyframe_points]]
                              for curve in iter_fcurves(block)]
    elif isinstance(block, bpy.types.Image):
        state = fp_state(block, 1, skip=("size", "bindcode", "has_data", "is_dirty", "depth", "channels",
                                         "is_float", "frame_duration", "resolution"))
        if block.is_dirty and block.has_data:
            pixels = numpy.empty(len(block.pixels), dtype="float32")
            block.pixels.foreach_get(pixels)
            state["<pixels>"] = hashlib.sha256(pixels.tobytes()).hexdigest()
        if block.packed_file is not None:
            state["<packed>"] = hashlib.sha256(bytes(block.packed_file.data)).hexdigest()
    else:
        state = fp_state(block, 2)
    state["<animation>"] = fp_animation(block)
    return state


def fp_scene_places(scene):
    """({object name: the collections of the scene it is in, "" for the scene's own},
    {collection name: its parent, "" for the scene's own})."""
    places, parents = {}, {}
    pending = [("", scene.collection)]
    seen = set()
    while pending:
        name, collection = pending.pop(0)
        if collection.as_pointer() in seen:
            continue
        seen.add(collection.as_pointer())
        for obj in collection.objects:
            places.setdefault(obj.name, []).append(name)
        for child in collection.children:
            if child.library is None:
                parents.setdefault(child.name, name)
                pending.append((child.name, child))
    return places, parents


def cmd_scene_fingerprints(_args):
    scene = bpy.context.scene
    places, parents = fp_scene_places(scene)
    objects = {}
    for obj in scene.objects:
        if not scene_replaceable(obj) or obj.name not in places:
            continue
        state = fp_id(obj)
        state["<collections>"] = sorted(places[obj.name])
        objects[obj.name] = {"fingerprint": fp_digest(state), "collections": sorted(places[obj.name])}
    data = {}
    for collection in SCENE_DATA_COLLECTIONS:
        # A datablock nothing uses is not saved with the scene, so no result can bring it.
        blocks = {block.name: fp_digest(fp_id(block)) for block in getattr(bpy.data, collection)
                  if scene_replaceable(block) and block.users > 0}
        if blocks:
            data[collection] = blocks
    return {"scene": scene.name, "camera": scene.camera.name if scene.camera is not None else None,
            "world": scene.world.name if scene.world is not None else None,
            "objects": objects, "collections": parents, "data": data}


def describe_object(obj):
    low, high = world_bbox(obj)
    entry = {
        "name": obj.name,
        "type": obj.type,
        "location": rounded(obj.location),
        "rotation_euler": rounded(obj.rotation_euler),
        "scale": rounded(obj.scale),
        "dimensions": rounded(obj.dimensions),
        "bbox_min": rounded(low),
        "bbox_max": rounded(high),
        "visible": not obj.hide_render,
    }
    if obj.parent is not None:
        entry["parent"] = obj.parent.name
    materials = [slot.material.name for slot in obj.material_slots if slot.material is not None]
    if materials:
        entry["materials"] = materials
    if obj.modifiers:
        entry["modifiers"] = [{"name": m.name, "type": m.type} for m in obj.modifiers]
    data = obj.data
    if obj.type == "MESH" and data is not None:
        entry["mesh"] = {"vertices": len(data.vertices), "polygons": len(data.polygons)}
        if data.shape_keys is not None:
            entry["shape_keys"] = [
                {"name": key.name, "value": round(key.value, 4)} for key in data.shape_keys.key_blocks
            ]
    elif obj.type == "LIGHT":
        entry["light"] = {"type": data.type, "energy": round(data.energy, 4), "color": rounded(data.color)}
    elif obj.type == "CAMERA":
        entry["camera"] = {"type": data.type, "lens": round(data.lens, 4)}
    source = viga_source(obj)
    if source is not None:
        entry["source"] = source
    return entry


def viga_source(obj):
    """The object's `viga_source` custom property (set by viga's asset and initialisation
    imports) when it is a short string; a program may set anything there, so nothing else."""
    try:
        value = obj.get("viga_source")
    except Exception:
        return None
    if not isinstance(value, str) or not value:
        return None
    return value[:32]


def cmd_scene_info(args):
    offset = int(args.get("offset", 0))
    limit = int(args.get("limit", 50))
    if offset < 0 or limit < 1:
        raise BridgeError("bad_request", "scene_info needs offset >= 0 and limit >= 1")
    scene = bpy.context.scene
    objects = sorted(scene.objects, key=lambda o: o.name)
    page = objects[offset:offset + limit]
    next_offset = offset + len(page)
    return {
        "blender_version": bpy.app.version_string,
        "scene": scene.name,
        "unit_system": scene.unit_settings.system,
        "frame_current": scene.frame_current,
        "frame_start": scene.frame_start,
        "frame_end": scene.frame_end,
        "active_camera": scene.camera.name if scene.camera else None,
        "render_engine": scene.render.engine,
        "total_objects": len(objects),
        "offset": offset,
        "next_offset": next_offset if next_offset < len(objects) else None,
        "objects": [describe_object(obj) for obj in page],
        "materials": sorted(m.name for m in bpy.data.materials),
    }


def look_at_rotation(location, target):
    direction = mathutils.Vector(target) - mathutils.Vector(location)
    if direction.length < 1e-9:
        raise BridgeError("bad_request", "look_at target coincides with the camera location")
    return direction.to_track_quat("-Z", "Y").to_euler()


def ensure_camera(name):
    obj = bpy.data.objects.get(name)
    if obj is not None:
        if obj.type != "CAMERA":
            raise BridgeError("bad_request", "object %r is a %s, not a camera" % (name, obj.type))
        return obj
    data = bpy.data.cameras.new(name)
    obj = bpy.data.objects.new(name, data)
    bpy.context.scene.collection.objects.link(obj)
    return obj


def apply_pose(camera, pose):
    location = pose.get("location")
    if location is not None:
        camera.location = vector3(location, "location")
    if pose.get("look_at") is not None:
        camera.rotation_euler = look_at_rotation(camera.location, vector3(pose["look_at"], "look_at"))
    elif pose.get("rotation_euler") is not None:
        camera.rotation_euler = vector3(pose["rotation_euler"], "rotation_euler")
    if pose.get("lens") is not None:
        camera.data.lens = float(pose["lens"])


def vector3(value, field):
    if not isinstance(value, (list, tuple)) or len(value) != 3:
        raise BridgeError("bad_request", "%s must be a list of three numbers" % field)
    return mathutils.Vector([float(v) for v in value])


def camera_state(camera):
    return {
        "camera": camera.name,
        "location": rounded(camera.location),
        "rotation_euler": rounded(camera.rotation_euler),
        "lens": round(camera.data.lens, 4),
    }


def cmd_set_camera(args):
    camera = ensure_camera(args.get("camera") or VIEW_CAMERA_NAME)
    apply_pose(camera, args)
    if args.get("make_active", True):
        bpy.context.scene.camera = camera
    bpy.context.view_layer.update()
    return camera_state(camera)


def cmd_frame_objects(args):
    """Points a camera at the joint world bounding box of some objects, from a direction,
    far enough that the box's bounding sphere fits the narrower field of view with padding."""
    names = args.get("objects") or []
    if names:
        targets = [object_or_error(name) for name in names]
    else:
        targets = [o for o in bpy.context.scene.objects if o.type == "MESH" and not o.hide_render]
    if not targets:
        raise BridgeError("not_found", "no mesh objects to frame; name the objects to frame")
    padding = float(args.get("padding", 0.1))
    if padding < 0:
        raise BridgeError("bad_request", "padding must be >= 0")
    direction = vector3(args.get("direction", [1.0, -1.0, 0.8]), "direction")
    if direction.length < 1e-9:
        raise BridgeError("bad_request", "direction must not be the zero vector")
    direction.normalize()
    low = mathutils.Vector((math.inf,) * 3)
    high = mathutils.Vector((-math.inf,) * 3)
    for obj in targets:
        obj_low, obj_high = world_bbox(obj)
        for i in range(3):
            low[i] = min(low[i], obj_low[i])
            high[i] = max(high[i], obj_high[i])
    center = (low + high) / 2.0
    radius = max((high - low).length / 2.0, 1e-3)
    camera = ensure_camera(args.get("camera") or VIEW_CAMERA_NAME)
    render = bpy.context.scene.render
    aspect = (render.resolution_x * render.pixel_aspect_x) / max(render.resolution_y * render.pixel_aspect_y, 1e-9)
    sensor_fov = camera.data.angle  # along the sensor-fit axis (the wider one under AUTO)
    if aspect >= 1.0:
        narrow_fov = 2.0 * math.atan(math.tan(sensor_fov / 2.0) / aspect)
    else:
        narrow_fov = 2.0 * math.atan(math.tan(sensor_fov / 2.0) * aspect)
    distance = radius * (1.0 + padding) / math.sin(narrow_fov / 2.0)
    camera.location = center + direction * distance
    camera.rotation_euler = look_at_rotation(camera.location, center)
    camera.data.clip_end = max(camera.data.clip_end, distance + radius * 2.0)
    if args.get("make_active", True):
        bpy.context.scene.camera = camera
    bpy.context.view_layer.update()
    state = camera_state(camera)
    state.update({
        "center": rounded(center),
        "radius": round(radius, 4),
        "distance": round(distance, 4),
        "bbox_min": rounded(low),
        "bbox_max": rounded(high),
        "objects": sorted(o.name for o in targets),
    })
    return state


def requested_size(args):
    width, height = int(args.get("width", 512)), int(args.get("height", 512))
    if not (1 <= width <= 16384 and 1 <= height <= 16384):
        raise BridgeError("bad_request", "width and height must be between 1 and 16384")
    return width, height


def cmd_render_framed_views(args):
    """Frames the same objects from each direction on the view camera and renders that
    view: what frame_objects and render do, for several views in one round trip."""
    directions = args.get("directions")
    if not isinstance(directions, list) or not directions:
        raise BridgeError("bad_request", "render_framed_views needs a non-empty list \"directions\"")
    paths = args.get("output_paths") or []
    if paths and len(paths) != len(directions):
        raise BridgeError(
            "bad_request",
            "give one output path per direction (%d directions, %d paths)" % (len(directions), len(paths)),
        )
    width, height = requested_size(args)
    with render_settings_kept(bpy.context.scene), view_camera_kept_out():
        return framed_views(args, directions, paths, width, height)


@contextlib.contextmanager
def view_camera_kept_out():
    """In a person's Blender, looking leaves nothing behind: the view camera a look makes
    (object and camera data) is removed again. viga's own workers keep it, as they keep
    the render settings."""
    existed = bpy.data.objects.get(VIEW_CAMERA_NAME) is not None
    try:
        yield
    finally:
        made = bpy.data.objects.get(VIEW_CAMERA_NAME)
        if _serving_user_scene and not existed and made is not None:
            remove_camera(made)


def remove_camera(camera):
    """Removes a camera object viga made, and its camera data when nothing else uses it."""
    data = camera.data
    bpy.data.objects.remove(camera, do_unlink=True)
    if data is not None and data.users == 0:
        bpy.data.cameras.remove(data)


def framed_views(args, directions, paths, width, height):
    # Framing fits the output's aspect ratio, so the output size is set before framing.
    render = bpy.context.scene.render
    render.resolution_x, render.resolution_y, render.resolution_percentage = width, height, 100
    frame_args = {"camera": VIEW_CAMERA_NAME, "objects": args.get("objects") or [], "make_active": False}
    if args.get("padding") is not None:
        frame_args["padding"] = args["padding"]
    render_args = {"camera": VIEW_CAMERA_NAME, "engine": args.get("engine", "WORKBENCH"), "width": width, "height": height}
    if args.get("samples") is not None:
        render_args["samples"] = args["samples"]
    views = []
    for index, direction in enumerate(directions):
        framing = cmd_frame_objects(dict(frame_args, direction=direction))
        rendered = cmd_render(dict(render_args, output_path=paths[index]) if paths else render_args)
        views.append({"framing": framing, "render": rendered})
    return {"views": views}


# The render settings a render sets for itself. In a person's Blender each is put back
# afterwards, so looking at their scene never changes how it renders for them. viga's own
# workers keep them: later framing (investigate, set_camera) fits the last render's size.
KEPT_RENDER_SETTINGS = (
    ("render", "engine"), ("render", "resolution_x"), ("render", "resolution_y"),
    ("render", "resolution_percentage"), ("render", "filepath"),
    ("render.image_settings", "file_format"), ("render.image_settings", "color_mode"),
    ("cycles", "samples"), ("cycles", "device"), ("cycles", "use_denoising"),
    ("cycles", "denoising_prefilter"),
    ("eevee", "taa_render_samples"),
)


@contextlib.contextmanager
def render_settings_kept(scene):
    if not _serving_user_scene:
        yield
        return

    def owner(path):
        target = scene
        for part in path.split("."):
            target = getattr(target, part, None)
        return target

    saved = [(owner(path), name, getattr(owner(path), name)) for path, name in KEPT_RENDER_SETTINGS if owner(path) is not None]
    try:
        yield
    finally:
        for target, name, value in saved:
            with contextlib.suppress(AttributeError, TypeError, ValueError):
                setattr(target, name, value)


def cmd_render(args):
    with render_settings_kept(bpy.context.scene):
        return render_with(args)


def render_with(args):
    scene = bpy.context.scene
    engine_name = args.get("engine", "WORKBENCH")
    if engine_name not in ENGINES:
        raise BridgeError("bad_request", "unknown engine %r; use one of %s" % (engine_name, ", ".join(ENGINES)))
    width, height = requested_size(args)
    previous_camera = scene.camera
    temporary = None
    if args.get("pose") is not None:
        temporary = ensure_camera(VIEW_CAMERA_NAME + "_render")
        apply_pose(temporary, args["pose"])
        scene.camera = temporary
    elif args.get("camera"):
        camera = object_or_error(args["camera"])
        if camera.type != "CAMERA":
            raise BridgeError("bad_request", "object %r is a %s, not a camera" % (camera.name, camera.type))
        scene.camera = camera
    if scene.camera is None:
        raise BridgeError("bad_request", "the scene has no camera; pass \"camera\" or a \"pose\"")
    render = scene.render
    render.engine = ENGINES[engine_name]
    render.resolution_x, render.resolution_y, render.resolution_percentage = width, height, 100
    render.image_settings.file_format = "PNG"
    render.image_settings.color_mode = "RGB"
    if engine_name == "CYCLES":
        scene.cycles.samples = int(args.get("samples", 16))
        scene.cycles.device = args.get("device") or ("GPU" if cycles_gpu() else "CPU")
        # Denoised (OpenImageDenoise) whatever the scene or a program set: at the
        # low sample counts renders are made with, noise would otherwise swamp what a light
        # or a material changed, and make scores vary from render to render.
        scene.cycles.use_denoising = True
        # The guiding passes (albedo, normal) denoised together with the colour, not each
        # first on its own (Blender's default, ACCURATE), which on a CPU costs about as much
        # as the 16 samples: a 512x512 render of the demo scene took 8.4 s of CPU time with
        # it and 5.3 s without, and differs from a 256-sample render by a photometric loss
        # of 1.1e-5 instead of 0.6e-5 (a 100 W and a 1000 W lamp differ by over 1e-3).
        scene.cycles.denoising_prefilter = "FAST"
    elif engine_name == "EEVEE" and args.get("samples") is not None:
        scene.eevee.taa_render_samples = int(args["samples"])
    # With output_path (a client sharing this machine's filesystem), the PNG stays on disk and
    # only its path travels; otherwise it goes inline as base64. An output path Blender would
    # read as a template is rendered to a plain temporary file and moved there afterwards.
    output_path = args.get("output_path")
    direct = bool(output_path) and not read_as_template(output_path)
    if direct:
        path = output_path
    else:
        handle, path = tempfile.mkstemp(prefix="viga-render-", suffix=".png")
        os.close(handle)
    camera_name = scene.camera.name
    try:
        if read_as_template(path):
            raise BridgeError(
                "bad_request",
                "the temporary file %s has characters Blender reads as a path template ({ } # or a "
                "leading //); set TMPDIR to a folder without them" % path,
            )
        render.filepath = path
        started = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            bpy.ops.render.render(write_still=True)
        render_ms = (time.perf_counter() - started) * 1000.0
        png = None
        if output_path and not direct:
            shutil.move(path, output_path)
        elif not output_path:
            with open(path, "rb") as handle_png:
                png = handle_png.read()
    finally:
        if not direct:
            with contextlib.suppress(OSError):
                os.remove(path)  # gone already when it was moved into place
        scene.camera = previous_camera
        if temporary is not None:
            remove_camera(temporary)
    delivered = (
        {"path": output_path}
        if output_path
        else {"image": {"media_type": "image/png", "data": base64.b64encode(png).decode("ascii")}}
    )
    return {
        **delivered,
        "width": width,
        "height": height,
        "engine": engine_name,
        "camera": camera_name,
        "render_ms": round(render_ms, 3),
    }


def read_as_template(path):
    """Whether Blender could rewrite `path` as a render output: Blender 5 expands {variables}
    (`{blend_name}`; an unmatched brace fails the render), a leading `//` means "beside the
    open .blend", and `#` stands for frame digits in animation output. Rendered there
    directly, the PNG could land somewhere else or not at all."""
    return "#" in path or "{" in path or "}" in path or path.startswith("//")


def cmd_set_visibility(args):
    names = args.get("objects")
    if not isinstance(names, list) or not names:
        raise BridgeError("bad_request", "set_visibility needs a non-empty list \"objects\"")
    visible = bool(args.get("visible", True))
    targets = [object_or_error(name) for name in names]
    for obj in targets:
        obj.hide_render = not visible
        obj.hide_viewport = not visible
    return {"objects": sorted(o.name for o in targets), "visible": visible}


def cmd_set_frame(args):
    if "frame" not in args:
        raise BridgeError("bad_request", "set_frame needs an integer \"frame\"")
    scene = bpy.context.scene
    scene.frame_set(int(args["frame"]))
    return {"frame": scene.frame_current, "frame_start": scene.frame_start, "frame_end": scene.frame_end}


def cmd_list_keyframes(_args):
    frames = set()
    per_object = {}
    for obj in bpy.context.scene.objects:
        action = obj.animation_data.action if obj.animation_data else None
        if action is None:
            continue
        object_frames = set()
        for fcurve in iter_fcurves(action):
            for point in fcurve.keyframe_points:
                object_frames.add(int(round(point.co[0])))
        if object_frames:
            per_object[obj.name] = sorted(object_frames)
            frames |= object_frames
    return {"frames": sorted(frames), "objects": per_object}


def iter_fcurves(action):
    # Blender 4.4+ keeps F-curves in layered actions; older releases on the action itself.
    if hasattr(action, "layers") and len(action.layers) > 0:
        for layer in action.layers:
            for strip in layer.strips:
                for bag in getattr(strip, "channelbags", []):
                    yield from bag.fcurves
        return
    yield from getattr(action, "fcurves", [])


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


# --------------------------------------------------------------------------- add-ons
#
# An add-on takes part when it ships `addon_ai.json` (seed 004's manifest) beside its
# `__init__.py` and exposes `VIGA_COMMANDS = {"tool_name": function}`. viga validates the
# manifest and checks its requirements; the bridge only finds it, says which of its Python
# dependencies are missing here, and routes commands to the functions on this thread.

ADDON_MANIFEST = "addon_ai.json"
MAX_SCENE_LINES = 100
# Add-on id -> its module, rebuilt by every listing, so the commands of an add-on disabled
# since are refused instead of reaching a module Blender no longer runs.
_addons = {}
# Folders list_addons was given. Loading a folder's packages is like enabling them in this
# Blender (they stay loaded), so every later listing rescans these folders too.
_addon_folders = []
# `__init__.py` -> (mtime, problem) of folder packages that failed to load: a broken package
# is tried again once it changed, not on every listing (a listing runs every few seconds).
_addon_load_failures = {}


def load_addon_package(folder, name):
    import importlib.util
    module_name = "viga_addon_" + "".join(c if c.isalnum() else "_" for c in name)
    if module_name in sys.modules:
        return sys.modules[module_name]
    init = os.path.join(folder, name, "__init__.py")
    spec = importlib.util.spec_from_file_location(module_name, init, submodule_search_locations=[os.path.join(folder, name)])
    if spec is None or spec.loader is None:
        raise ImportError("cannot load %s" % init)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
        if hasattr(module, "register"):
            module.register()
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return module


def read_manifest(path):
    with open(path, "r", encoding="utf-8") as handle:
        return json.load(handle)


def enabled_addon_modules():
    """The modules of the add-ons enabled in this Blender, legacy add-ons and extensions
    (`bl_ext.<repo>.<id>`) alike. `addon_utils.modules()` does not serve here: it lists every
    installed add-on, enabled or not, as a stand-in module parsed from the source (so without
    VIGA_COMMANDS), and with refresh=False from a cache that misses add-ons installed since."""
    modules = []
    for name in bpy.context.preferences.addons.keys():
        module = sys.modules.get(name)
        if getattr(module, "__file__", None):
            modules.append(module)
    return modules


def folder_addon_modules(folder, problems):
    modules = []
    for name in sorted(os.listdir(folder)):
        package = os.path.join(folder, name)
        if not os.path.isfile(os.path.join(package, ADDON_MANIFEST)):
            continue
        init = os.path.join(package, "__init__.py")
        if not os.path.isfile(init):
            problems.append("%s: has %s but no __init__.py" % (name, ADDON_MANIFEST))
            continue
        changed = os.stat(init).st_mtime_ns
        failure = _addon_load_failures.get(init)
        if failure is not None and failure[0] == changed:
            problems.append(failure[1])
            continue
        try:
            modules.append(load_addon_package(folder, name))
            _addon_load_failures.pop(init, None)
        except BaseException as exc:  # noqa: BLE001 - a broken add-on must not stop discovery
            problem = "%s: cannot be loaded: %s: %s" % (name, type(exc).__name__, exc)
            _addon_load_failures[init] = (changed, problem)
            problems.append(problem)
    return modules


def remembered_folder_modules(folder, problems):
    """The add-on modules of `folder` (remembered for later listings) and of every folder
    given before."""
    if folder:
        if not os.path.isdir(folder):
            raise BridgeError("not_found", "no add-on folder at %s" % folder)
        folder = os.path.normpath(os.path.abspath(folder))
        if folder not in _addon_folders:
            _addon_folders.append(folder)
    modules = []
    for remembered in list(_addon_folders):
        if os.path.isdir(remembered):
            modules.extend(folder_addon_modules(remembered, problems))
        else:
            _addon_folders.remove(remembered)
            problems.append("add-on folder %s is gone; its add-ons are no longer offered" % remembered)
    return modules


def dependency_present(requirement):
    """Whether a manifest dependency ("numpy", "numpy>=1.24", "opencv-python") can be used
    here: importable under that name, or installed as a distribution of that name (whose
    import name may differ). Version bounds are not checked."""
    import importlib.metadata
    import importlib.util
    import re
    name = re.split(r"[\s<>=!~;\[(]", requirement.strip(), maxsplit=1)[0]
    if not name:
        return False
    try:
        if importlib.util.find_spec(name) is not None:
            return True
    except (ImportError, ValueError):
        pass
    try:
        importlib.metadata.distribution(name)
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


def missing_dependencies(manifest):
    # The manifest is not validated here (viga does that), so every level is checked.
    integration = manifest.get("ai_integration") if isinstance(manifest, dict) else None
    requirements = integration.get("requirements") if isinstance(integration, dict) else None
    dependencies = requirements.get("dependencies") if isinstance(requirements, dict) else None
    if not isinstance(dependencies, list):
        return []
    return [d for d in dependencies if isinstance(d, str) and not dependency_present(d)]


def describe_addons(modules, problems):
    """Each module's manifest as listed to viga, and the routes for its commands. A package
    both enabled and in a folder is listed once; of two manifests with one id, the first
    gets the commands (viga keeps the first too and reports the second)."""
    found, routes, seen = [], {}, set()
    for module in modules:
        manifest_path = os.path.join(os.path.dirname(module.__file__), ADDON_MANIFEST)
        if manifest_path in seen or not os.path.isfile(manifest_path):
            continue
        seen.add(manifest_path)
        try:
            manifest = read_manifest(manifest_path)
        except (OSError, ValueError) as exc:
            problems.append("%s: manifest is not readable JSON: %s" % (manifest_path, exc))
            continue
        addon_id = manifest.get("addon_info", {}).get("id") if isinstance(manifest, dict) else None
        if isinstance(addon_id, str):
            routes.setdefault(addon_id, module)
        found.append({
            "path": manifest_path,
            "manifest": manifest,
            "has_handlers": isinstance(getattr(module, "VIGA_COMMANDS", None), dict),
            "missing_dependencies": missing_dependencies(manifest),
        })
    return found, routes


def cmd_list_addons(args):
    import hashlib
    problems = []
    modules = enabled_addon_modules() + remembered_folder_modules(args.get("folder"), problems)
    found, routes = describe_addons(modules, problems)
    _addons.clear()
    _addons.update(routes)
    blender_version = ".".join(str(part) for part in bpy.app.version)
    # Everything viga decides from, hashed: an equal fingerprint means viga can keep what it
    # derived last time instead of validating every manifest again.
    listed = json.dumps([found, problems, blender_version], sort_keys=True, default=str)
    return {
        "addons": found,
        "problems": problems,
        "blender_version": blender_version,
        "fingerprint": hashlib.sha256(listed.encode("utf-8")).hexdigest()[:32],
    }


def scene_lines():
    lines = []
    for obj in sorted(bpy.context.scene.objects, key=lambda o: o.name)[:MAX_SCENE_LINES]:
        lines.append("%s [%s] at (%s)" % (obj.name, obj.type, ", ".join("%.3f" % v for v in obj.location)))
    extra = len(bpy.context.scene.objects) - MAX_SCENE_LINES
    if extra > 0:
        lines.append("... and %d more objects" % extra)
    return lines


def cmd_addon_command(args):
    addon_id, tool, params = args.get("addon_id"), args.get("tool"), args.get("params")
    module = _addons.get(addon_id)
    if module is None:
        raise BridgeError(
            "not_found",
            "no registered add-on %r (registered: %s); list_addons finds add-ons"
            % (addon_id, ", ".join(sorted(_addons)) or "none"),
        )
    handlers = getattr(module, "VIGA_COMMANDS", None) or {}
    handler = handlers.get(tool)
    if handler is None:
        raise BridgeError("not_found", "add-on %r has no command %r (it has: %s)" % (addon_id, tool, ", ".join(sorted(handlers)) or "none"))
    if not isinstance(params, dict):
        raise BridgeError("bad_request", "params must be a JSON object")
    step = args.get("undo_step")
    if step is None:
        result = handler(**params)
    else:
        # The command and its undo step in one main-thread call, so no other request (and no
        # lost connection) can come between them: a command that ran is one step, and one that
        # raised is taken back before anything else happens.
        if not isinstance(step, str) or not step:
            raise BridgeError("bad_request", "undo_step must be a non-empty string")
        ensure_undo_base()
        try:
            result = handler(**params)
        except Exception:
            push_undo_step(step + " (failed)")
            undo_one_step()
            raise
        push_undo_step(step)
    try:
        json.dumps(result)
    except (TypeError, ValueError):
        result = repr(result)
    return {"result": result, "scene": scene_lines()}


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

# True while this bridge serves a person's Blender (the extension): its open file is theirs.
_serving_user_scene = False


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
    if _serving_user_scene and (command in USER_SCENE_REPLACING or (command == "execute" and request.get("reset"))):
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


# --------------------------------------------------------------------------- serving


def outer_pid():
    """This process's id as viga sees it. A contained Blender runs in a PID namespace of its
    own, where it is 1; /proc, which is the host's, lists its id in every namespace from the
    outermost in."""
    try:
        with open("/proc/self/status", "r", encoding="ascii") as status:
            for line in status:
                if line.startswith("NSpid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return os.getpid()


def hello_result(mode):
    return {
        "protocol_version": PROTOCOL_VERSION,
        "blender_version": bpy.app.version_string,
        "capabilities": CAPABILITIES,
        "pid": outer_pid(),
        "mode": mode,
    }


def handshake(conn, token, mode, session):
    """Checks the client's hello: all of it within HANDSHAKE_DEADLINE_S and MAX_HELLO_BYTES.
    A client with the right token is admitted by taking `session` (the lock held while a
    client is served), or told it is busy. Returns True when the connection may proceed; the
    caller then holds `session` and releases it when the client leaves."""
    deadline = time.monotonic() + HANDSHAKE_DEADLINE_S
    try:
        request = read_frame(conn, MAX_HELLO_BYTES, deadline)
    except FrameError as err:
        conn.settimeout(1.0)
        send_quietly(conn, error_reply(None, "bad_frame", str(err)))
        return False
    except OSError:
        return False
    if not isinstance(request, dict) or request.get("command") != "hello":
        send_quietly(conn, error_reply(None, "auth", "the first frame must be a hello with the worker token"))
        return False
    request_id = request.get("id")
    if not token_matches(request.get("token"), token):
        send_quietly(conn, error_reply(request_id, "auth", "wrong token"))
        return False
    if request.get("protocol_version") != PROTOCOL_VERSION:
        send_quietly(conn, error_reply(
            request_id, "version",
            "client speaks protocol %r, this bridge speaks %d" % (request.get("protocol_version"), PROTOCOL_VERSION),
        ))
        return False
    if not session.acquire(timeout=BUSY_GRACE_S):
        send_quietly(conn, error_reply(
            request_id, "busy",
            "this Blender is serving another viga client; it serves one at a time, try again when that one is done",
        ))
        return False
    try:
        conn.settimeout(None)
        write_frame(conn, {"id": request_id, "ok": True, "result": hello_result(mode)})
    except OSError:
        session.release()  # gone before it was served: the next client may come in
        return False
    except BaseException:
        session.release()
        raise
    return True


def token_matches(offered, token):
    """Compares in constant time. The offered string is compared as bytes with surrogates
    passed through, so a token UTF-8 cannot encode (a lone surrogate) is refused like any
    wrong one instead of raising."""
    if not isinstance(offered, str):
        return False
    return hmac.compare_digest(offered.encode("utf-8", "surrogatepass"), token.encode("utf-8"))


def cycles_gpu():
    """Whether Cycles renders on a GPU here; decided once per process. viga's own Blender
    (factory settings) turns on the fastest GPU backend with a device; a person's Blender is
    asked only what its own preferences chose, and they are never changed."""
    global _cycles_gpu
    if _cycles_gpu is not None:
        return _cycles_gpu
    _cycles_gpu = False
    try:
        prefs = bpy.context.preferences.addons["cycles"].preferences
        if _serving_user_scene:
            _cycles_gpu = prefs.compute_device_type != "NONE" and any(d.use and d.type != "CPU" for d in prefs.devices)
            return _cycles_gpu
        for backend in GPU_BACKENDS:
            try:
                prefs.compute_device_type = backend
            except TypeError:
                continue  # not built into this Blender
            prefs.get_devices_for_type(backend)
            gpus = [device for device in prefs.devices if device.type == backend]
            if gpus:
                for device in gpus:
                    device.use = True
                _cycles_gpu = True
                return True
        prefs.compute_device_type = "NONE"
    except Exception:  # no Cycles add-on, or a driver that fails to enumerate: the CPU it is
        _cycles_gpu = False
    return _cycles_gpu


def send_quietly(conn, value):
    with contextlib.suppress(OSError):
        write_frame(conn, value)


def listen(port, unix_path=None):
    """A loopback TCP listener, or with `unix_path` a Unix domain socket there: a contained
    worker has a network namespace of its own, which viga's TCP cannot reach, and the socket
    lies in the worker's private scratch folder (0700), so only its owner can connect."""
    if unix_path:
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_umask = os.umask(0o177)
        try:
            server.bind(unix_path)
        finally:
            os.umask(old_umask)
    else:
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", port))
    server.listen(MAX_PENDING_HANDSHAKES)
    return server


def announce(server, mode):
    if server.family == socket.AF_UNIX:
        port = 0
        where = {"unix": server.getsockname()}
    else:
        port = server.getsockname()[1]
        where = {"port": port}
    sys.stdout.write(READY_MARKER + json.dumps(dict(where, pid=os.getpid(), mode=mode)) + "\n")
    sys.stdout.flush()
    return port


def serve_connection(conn, handle, allow_shutdown=True):
    """Reads frames until the client leaves or sends something unreadable. Returns False when
    the client asked the bridge to shut down (refused where `allow_shutdown` is False: a
    person's Blender stops serving when they disable the add-on, not when a client says so)."""
    if conn.family == socket.AF_INET:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while True:
        try:
            request = read_frame(conn)
        except FrameError as err:
            send_quietly(conn, error_reply(None, "bad_frame", str(err) + "; closing this connection"))
            return True
        except OSError:
            return True
        if request is None:
            return True
        if isinstance(request, dict) and request.get("command") == "shutdown":
            if allow_shutdown:
                send_quietly(conn, {"id": request.get("id"), "ok": True, "result": {"shutting_down": True}})
                return False
            send_quietly(conn, error_reply(request.get("id"), "user_scene", "this Blender stops serving viga when its user disables the viga add-on"))
            continue
        try:
            write_frame(conn, handle(request))
        except OSError:
            return True


class Gatekeeper:
    """Accepts connections on a network thread of its own. Each client says hello on a
    short-lived thread, so one that is slow, silent or hostile before authenticating holds
    nothing but that thread, for HANDSHAKE_DEADLINE_S at most. An admitted client is handed
    to `serve`, which must call leave() once it is done with it."""

    def __init__(self, server, token, mode, serve):
        self.server = server
        self.token = token
        self.mode = mode
        self.serve = serve
        self.session = threading.Lock()
        self.greeting = threading.BoundedSemaphore(MAX_PENDING_HANDSHAKES)

    def start(self):
        thread = threading.Thread(target=self.accept_forever, name="viga-bridge-network", daemon=True)
        thread.start()
        return thread

    def accept_forever(self):
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                if self.server.fileno() < 0:
                    return  # the socket was closed: the bridge is stopping
                time.sleep(0.1)  # out of file descriptors, say: serve again once that passes
                continue
            if not self.greeting.acquire(blocking=False):
                close_quietly(conn)  # as many strangers as may say hello at once are already here
                continue
            try:
                threading.Thread(target=self.greet, args=(conn,), name="viga-bridge-hello", daemon=True).start()
            except RuntimeError:  # no thread to be had: this client is turned away
                self.greeting.release()
                close_quietly(conn)

    def greet(self, conn):
        admitted = False
        try:
            admitted = handshake(conn, self.token, self.mode, self.session)
        except Exception:  # noqa: BLE001 - nothing a client sends before the token may end the service
            traceback.print_exc()
        finally:
            self.greeting.release()
        if admitted:
            self.serve(conn)
        else:
            close_quietly(conn)

    def leave(self):
        """The served client is gone: the next one may be admitted."""
        self.session.release()

    def stop(self):
        """Stops accepting; shutdown() first, since close() alone does not wake accept()."""
        with contextlib.suppress(OSError):
            self.server.shutdown(socket.SHUT_RDWR)
        close_quietly(self.server)


def close_quietly(sock):
    with contextlib.suppress(OSError):
        sock.close()


def serve_admitted(gate, conn, handle, allow_shutdown):
    """Serves an admitted client until it leaves, then lets the next one in. Returns False
    when the client asked the bridge to shut down."""
    try:
        with conn:
            return serve_connection(conn, handle, allow_shutdown)
    except Exception:  # noqa: BLE001 - one bad client must never end the service
        traceback.print_exc()
        return True
    finally:
        gate.leave()


def serve_forever(token, port, mode, handle, unix_path=None):
    """Serves on the main thread (bpy wants every call there): the gatekeeper's threads
    admit clients, and the main thread serves them one at a time."""
    server = listen(port, unix_path)
    admitted = queue.Queue()
    gate = Gatekeeper(server, token, mode, admitted.put)
    gate.start()
    announce(server, mode)
    while serve_admitted(gate, admitted.get(), handle, allow_shutdown=True):
        pass
    gate.stop()


class MainThreadQueue:
    """Requests from the network thread wait here until the main thread drains them: in an
    interactive Blender from one persistent bpy.app.timers poller, headless from a loop."""

    def __init__(self):
        self.requests = queue.Queue()

    def submit(self, request):
        """Called from the network thread; blocks until the main thread has answered (or the
        queue was closed, when the add-on is disabled with a request still waiting)."""
        done = threading.Event()
        slot = {}
        self.requests.put((request, slot, done))
        done.wait()
        return slot["reply"]

    def drain(self, budget_s=0.05):
        """Answers queued requests on the calling (main) thread for at most about budget_s;
        returns how many it answered."""
        answered = 0
        deadline = time.perf_counter() + budget_s
        while True:
            try:
                request, slot, done = self.requests.get_nowait()
            except queue.Empty:
                return answered
            slot["reply"] = dispatch(request)
            done.set()
            answered += 1
            if time.perf_counter() >= deadline:
                return answered

    def close(self):
        """Answers every waiting request with a refusal, so no network thread waits forever."""
        while True:
            try:
                request, slot, done = self.requests.get_nowait()
            except queue.Empty:
                return
            request_id = request.get("id") if isinstance(request, dict) else None
            slot["reply"] = error_reply(request_id, "shutting_down", "the viga add-on was disabled while this request waited")
            done.set()


def start_queue_server(token, port, mode, unix_path=None):
    """Starts the network thread; returns (queue, server socket, port, thread). The thread
    ends when the server socket is closed (the add-on is disabled, or a client asked for a
    shutdown where that is allowed)."""
    work = MainThreadQueue()
    server = listen(port, unix_path)
    bound_port = 0 if unix_path else server.getsockname()[1]
    allow_shutdown = mode != "addon"

    def serve(conn):
        # On the hello thread: requests go through the queue to the main thread.
        if not serve_admitted(gate, conn, work.submit, allow_shutdown):
            gate.stop()

    gate = Gatekeeper(server, token, mode, serve)
    thread = gate.start()
    return work, server, bound_port, thread


def parse_args(argv):
    args = argv[argv.index("--") + 1:] if "--" in argv else []
    options = {"mode": "serve", "port": 0, "unix": None}
    i = 0
    while i < len(args):
        if args[i] in ("--mode", "--port", "--unix") and i + 1 < len(args):
            options[args[i][2:]] = args[i + 1]
            i += 2
        else:
            raise SystemExit("viga bridge: unknown argument %r (expected --mode serve|queue, --port N, --unix PATH)" % args[i])
    options["port"] = int(options["port"])
    return options


def take_token():
    token = os.environ.pop("VIGA_BRIDGE_TOKEN", "")
    if not token:
        raise SystemExit("viga bridge: VIGA_BRIDGE_TOKEN is not set; the bridge refuses to serve without a token")
    return token


def exit_with_parent():
    """Ends this Blender when the process that started it is gone (killed, crashed, or a test
    binary that exited without dropping its worker), so no orphaned Blender lingers. The
    parent names itself in VIGA_PARENT_PID: by the time `import bpy` has finished, a short-lived
    parent may already be gone, and getppid() would then name init."""
    if os.name != "posix":
        return  # os.kill(pid, 0) probes only on POSIX; on Windows it would terminate.
    named = os.environ.pop("VIGA_PARENT_PID", "")
    if os.getppid() == 0:
        return  # the first process of a PID namespace: its launcher, outside, watches viga
    parent = int(named) if named.isdigit() else os.getppid()

    def watch():
        while True:
            time.sleep(1.0)
            try:
                os.kill(parent, 0)
            except ProcessLookupError:
                os._exit(0)
            except PermissionError:
                pass  # alive, owned by someone else

    threading.Thread(target=watch, name="viga-parent-watch", daemon=True).start()


def main():
    options = parse_args(sys.argv)
    token = take_token()
    exit_with_parent()
    if options["mode"] == "serve":
        serve_forever(token, options["port"], "serve", dispatch, options["unix"])
    elif options["mode"] == "queue":
        work, server, _port, thread = start_queue_server(token, options["port"], "queue", options["unix"])
        announce(server, "queue")
        while thread.is_alive():
            work.drain()
            time.sleep(0.001)
    else:
        raise SystemExit("viga bridge: unknown mode %r (use serve or queue)" % options["mode"])


# --------------------------------------------------------------------------- add-on
#
# In the viga_blender extension this file is a module of the package: the extension's
# register() calls start_addon_server(), its unregister() stop_addon_server().

CONNECTION_DIR_ENV = "VIGA_CONNECTION_DIR"
# How often the main thread looks for queued requests: an idle look costs microseconds, and
# every request waits for the next one.
POLL_INTERVAL_S = 0.01
_addon_state = {}


def connection_dir():
    """The per-user private folder of connection files: $VIGA_CONNECTION_DIR, else the
    session's runtime folder, else ~/.viga/connections. viga looks in the same place."""
    explicit = os.environ.get(CONNECTION_DIR_ENV)
    if explicit:
        return explicit
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime):
        return os.path.join(runtime, "viga")
    return os.path.join(os.path.expanduser("~"), ".viga", "connections")


def private_dir(path):
    """Creates `path` readable by this user only, or checks that it is: a folder that is a
    link, or is owned by someone else, is refused (another user could read the token)."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise OSError("%s is not a plain folder (a link?); viga will not write its token there" % path)
    if hasattr(os, "getuid"):
        if info.st_uid != os.getuid():
            raise OSError("%s belongs to another user; viga will not write its token there" % path)
        if info.st_mode & 0o077:
            os.chmod(path, 0o700)
    return path


def write_private_json(path, value):
    """Writes `value` to `path` with mode 0600 by exclusive create and rename, so the token
    is never readable by anyone else, not even for a moment."""
    partial = "%s.%d.partial" % (path, os.getpid())
    with contextlib.suppress(FileNotFoundError):
        os.remove(partial)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(partial, flags, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(value, handle)
    os.replace(partial, path)


def addon_connection_path():
    """The connection file of this Blender while the add-on serves, else None."""
    return _addon_state.get("connection")


def start_addon_server():
    """Serves on a random loopback port with a fresh token, and writes port, token, pid and
    protocol version to blender-<pid>.json in connection_dir() for `viga ... --attach`.
    Returns the poll function to register as a persistent bpy.app.timers callback."""
    global _serving_user_scene
    if "server" in _addon_state:
        return _addon_state["poll"]
    token = base64.urlsafe_b64encode(os.urandom(24)).decode("ascii")
    work, server, port, _thread = start_queue_server(token, 0, "addon")
    try:
        folder = private_dir(connection_dir())
        path = os.path.join(folder, "blender-%d.json" % os.getpid())
        write_private_json(path, {
            "port": port,
            "token": token,
            "pid": os.getpid(),
            "protocol_version": PROTOCOL_VERSION,
            "blender_version": bpy.app.version_string,
            "binary_path": bpy.app.binary_path or "",
        })
    except OSError:
        server.close()
        raise
    _serving_user_scene = True
    ensure_undo_base()
    bpy.app.handlers.load_post.append(ensure_undo_base_after_load)

    def poll():
        work.drain()
        return POLL_INTERVAL_S

    _addon_state.update(server=server, work=work, poll=poll, connection=path)
    return poll


@bpy.app.handlers.persistent
def ensure_undo_base_after_load(_path):
    ensure_undo_base()


def stop_addon_server():
    """Stops serving and removes the connection file; safe to call twice."""
    global _serving_user_scene
    with contextlib.suppress(ValueError):
        bpy.app.handlers.load_post.remove(ensure_undo_base_after_load)
    server = _addon_state.pop("server", None)
    if server is not None:
        with contextlib.suppress(OSError):
            server.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            server.close()
    work = _addon_state.pop("work", None)
    if work is not None:
        work.close()
    path = _addon_state.pop("connection", None)
    if path is not None:
        with contextlib.suppress(OSError):
            os.remove(path)
    _addon_state.pop("poll", None)
    _serving_user_scene = False


if __name__ == "__main__":
    main()
