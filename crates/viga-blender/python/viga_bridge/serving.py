"""Serving: the listening socket, the handshake of strangers (bounded in time, size and
number), one authenticated client at a time, the main-thread queue of the add-on and
`--mode queue`, and `main` for a headless Blender."""

import contextlib
import hmac
import json
import os
import queue
import socket
import sys
import threading
import time
import traceback

import bpy

from .common import FrameError, PROTOCOL_VERSION
from .protocol import HANDSHAKE_DEADLINE_S, MAX_HELLO_BYTES, error_reply, read_frame, write_frame
from .commands import dispatch

# Clients saying hello at once; more are closed unread, so strangers cannot pile up threads.
MAX_PENDING_HANDSHAKES = 8
# How long an authenticated client waits for the one before it to leave (a client that
# reconnects at once may be ahead of the bridge noticing it left) before it is told "busy".
BUSY_GRACE_S = 2.0


READY_MARKER = "VIGA_BRIDGE_READY "
CAPABILITIES = [
    "execute", "scene_info", "render", "set_camera", "frame_objects", "render_framed_views", "set_visibility",
    "set_frame", "list_keyframes", "save_blend", "load_blend", "checkpoint", "restore",
    "list_addons", "addon_command", "apply_program", "undo_push", "undo", "import_gn_result",
    "import_scene_result", "scene_fingerprints", "ping", "shutdown",
]


def outer_pid():
    """This process's id as viga sees it, where /proc tells it. A contained Blender runs in
    a PID namespace of its own, whose /proc lists only its ids there: viga then takes the
    id from the Unix socket's peer credentials instead."""
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
