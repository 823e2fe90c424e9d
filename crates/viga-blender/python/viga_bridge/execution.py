"""Running a program: compiled as <viga-program> so its tracebacks name its own lines and
hide the bridge's, its stdout and stderr kept up to MAX_CAPTURE_CHARS as they are written
(and copied to VIGA_PROGRAM_LOG when set), the scene reset first when asked."""

import contextlib
import errno
import io
import linecache
import os
import threading
import time
import traceback

import bpy

from .common import BridgeError
from .blend_files import load_blend

MAX_CAPTURE_CHARS = 256 * 1024


PROGRAM_FILENAME = "<viga-program>"


def user_error_line(tb_entries):
    line = None
    for entry in tb_entries:
        if entry.filename == PROGRAM_FILENAME:
            line = entry.lineno
    return line


# The limits the containment launcher applies, as it tells the program (VIGA_LIMITS,
# "memory=4294967296,file-size=..."): an error they cause is named, so the model knows why.
# Where EAGAIN means no process could be started (and not a non-blocking read).
_PROCESS_STARTERS = {"fork", "_execute_child", "_fork_exec", "posix_spawn", "spawnv", "forkpty"}


def _limits():
    limits = {}
    for pair in os.environ.get("VIGA_LIMITS", "").split(","):
        name, _, value = pair.partition("=")
        if value.isdigit():
            limits[name] = int(value)
    return limits


def _shown(name, value):
    if name == "processes":
        return "%d processes" % value
    for unit, label in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if value >= unit and value % unit == 0:
            return "%d %s" % (value // unit, label)
    return "%d bytes" % value


def _starting_a_process(exc):
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.name in _PROCESS_STARTERS or "fork" in (frame.line or ""):
            return True
    return False


def limit_hint(exc):
    """' (the program hit the file-size limit (1 GiB))' when `exc` is what a limit causes."""
    limits = _limits()
    name = None
    if isinstance(exc, MemoryError):
        name = "memory"
    elif isinstance(exc, OSError) and exc.errno == errno.EFBIG:
        name = "file-size"
    elif isinstance(exc, OSError) and exc.errno == errno.EAGAIN and _starting_a_process(exc):
        name = "processes"
    elif isinstance(exc, RuntimeError) and "can't start new thread" in str(exc):
        name = "processes"
    if name not in limits:
        return ""
    noun = {"memory": "memory", "processes": "process", "file-size": "file-size"}[name]
    return " (the program hit the %s limit (%s))" % (noun, _shown(name, limits[name]))


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
            "message": bounded(str(exc) + limit_hint(exc)),
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


# The grey of Blender's own default world (its factory startup's background, linear RGB).
DEFAULT_WORLD_GREY = 0.05087608844041824


def add_default_world():
    """Gives the empty scene Blender's default world, as a new file in Blender has: a target
    rendered from Blender's default scene has its grey background, which an empty scene without
    a world (black) would never match, whatever the program."""
    world = bpy.data.worlds.new("World")
    world.color = (DEFAULT_WORLD_GREY,) * 3
    background = world.node_tree.nodes.get("Background") if world.node_tree else None
    if background is not None:
        background.inputs["Color"].default_value = (DEFAULT_WORLD_GREY,) * 3 + (1.0,)
        background.inputs["Strength"].default_value = 1.0
    bpy.context.scene.world = world


def reset_scene(reset):
    if reset is None:
        return
    kind = reset.get("kind")
    if kind == "factory":
        bpy.ops.wm.read_factory_settings(use_empty=True)
        add_default_world()
    elif kind == "blend":
        load_blend({"path": reset.get("path")})
    else:
        raise BridgeError("bad_request", "unknown reset kind %r; use \"factory\" or \"blend\"" % kind)


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
