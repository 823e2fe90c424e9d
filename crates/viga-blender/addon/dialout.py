# SPDX-License-Identifier: GPL-3.0-or-later
# Dial-out: this Blender connects to a viga server (`viga gateway`) so the people chatting
# with the server's agent, from its web page, work on this scene with this Blender's add-ons.
#
# The connection goes out from here (no port is opened on this machine): a WebSocket to
# <server>/blender, a hello with the user name and token (kept by server_login, never in the
# .blend or the preferences), then the server's messages:
#   - addon_command (the seed message: addon_id, command, params, username, message_id):
#     runs the add-on's command on Blender's main thread as ONE undo step; a command that
#     fails is taken back at once. Path parameters are resolved in the "Server files" folder.
#   - request: one of the bridge's reading and looking commands (scene_info, list_addons,
#     render, ...), answered on the main thread. Nothing that runs a program, opens or saves a
#     file, loads add-on packages or replaces the open file is ever answered.
# Every answer is {"type": "response", "message_id", "reply"}; answers are kept by message id,
# so a message the server sends again (after a reconnect) is answered again, not run again.
# When add-ons are enabled or disabled here, a registry message with the new listing goes to
# the server, so its agent offers the new tools on its next turn.
#
# A network thread reads, a worker thread answers (one message at a time, in order), and a
# timer runs the work on the main thread; nothing blocks Blender's interface while it waits.
# A lost connection is dialled again with growing pauses (1 s doubling to 30 s, jittered)
# until the server answers or the person disconnects.

import collections
import ipaddress
import json
import os
import queue
import random
import threading
import time
import uuid

import bpy
from bpy.props import StringProperty

from . import command_checks, server_files, server_login, viga_bridge, websocket_client

PING_INTERVAL_S = 15.0
SILENCE_LIMIT_S = 45.0
HELLO_TIMEOUT_S = 15.0
CONNECT_TIMEOUT_S = 10.0
BACKOFF_FIRST_S = 1.0
BACKOFF_MAX_S = 30.0
ANSWERS_KEPT = 256
MAX_MESSAGE_ID_CHARS = 128
ADDON_CHECK_INTERVAL_S = 1.0
TIMER_INTERVAL_S = 0.02
# Close codes of the server that mean "do not dial again by yourself".
CLOSE_REPLACED = 4001
CLOSE_REFUSED = 4003
BLENDER_PATH = "/blender"

# What a server may ask besides add-on commands: reading the scene and the add-ons, looking
# (renders come back as data, never written to a path), and undo steps. `undo` only right
# after the server's own `undo_push` (see Session._checked).
ALLOWED_REQUESTS = frozenset({
    "ping", "scene_info", "list_addons", "render", "set_camera", "frame_objects",
    "render_framed_views", "set_visibility", "set_frame", "list_keyframes", "undo_push", "undo",
})
# Request fields that would name a file or folder on this machine.
PATH_FIELDS = ("output_path", "output_paths", "folder")


class ShuttingDown(Exception):
    """The dial-out stopped while work waited for the main thread."""


class MainThreadCalls:
    """Functions from the worker thread, run on the main thread by the dial-out's timer."""

    def __init__(self):
        self.calls = queue.Queue()
        self.closed = False

    def run(self, function):
        """Runs `function` on the main thread and returns what it returned (or raises what
        it raised); blocks the calling thread until then."""
        if self.closed:
            raise ShuttingDown()
        done, slot = threading.Event(), {}
        self.calls.put((function, slot, done))
        while not done.wait(0.5):
            if self.closed:
                raise ShuttingDown()
        if "error" in slot:
            raise slot["error"]
        return slot["value"]

    def drain(self, budget_s=0.05):
        deadline = time.perf_counter() + budget_s
        while time.perf_counter() < deadline:
            try:
                function, slot, done = self.calls.get_nowait()
            except queue.Empty:
                return
            try:
                slot["value"] = function()
            except Exception as exc:  # noqa: BLE001 - handed back to the waiting thread
                slot["error"] = exc
            done.set()

    def close(self):
        self.closed = True
        while True:
            try:
                _function, slot, done = self.calls.get_nowait()
            except queue.Empty:
                return
            slot["error"] = ShuttingDown()
            done.set()


def new_message_id():
    return uuid.uuid4().hex


def _refusal(message):
    return viga_bridge.error_reply(None, "bad_request", message)


def _message_id(message):
    message_id = message.get("message_id")
    if isinstance(message_id, str) and 0 < len(message_id) <= MAX_MESSAGE_ID_CHARS:
        return message_id
    return None


class Session:
    """One dial-out: the connection (dialled again when lost), its threads and its timer."""

    def __init__(self, url, username, token, files_folder):
        websocket_client.parse_url(url)  # refuses a bad URL before anything starts
        self.url = url.rstrip("/") + BLENDER_PATH if not url.rstrip("/").endswith(BLENDER_PATH) else url
        self.username = username
        self._token = token
        self.files_folder = files_folder
        # One per session: the server sends a message again after a reconnect only to the
        # same instance, whose answers are kept here.
        self.instance = uuid.uuid4().hex
        self.blender_version = bpy.app.version_string
        self.main = MainThreadCalls()
        self.jobs = queue.Queue()
        self.answers = collections.OrderedDict()
        self.manifests = {}
        self.undo_armed = False
        self.stopping = threading.Event()
        self.ws = None
        self.state = "connecting"
        self.detail = "dialling %s" % self.url
        self.addon_keys = None
        self.next_addon_check = 0.0
        # Blender finds a timer by the function object it was given: kept, so stop() names
        # the same one.
        self._timer = self.tick
        self.reader = threading.Thread(target=self._dial_forever, name="viga-dialout", daemon=True)
        self.worker = threading.Thread(target=self._work, name="viga-dialout-work", daemon=True)

    # ------------------------------------------------------------------ lifetime

    def start(self):
        bpy.app.timers.register(self._timer, persistent=True)
        self.worker.start()
        self.reader.start()

    def stop(self, why="disconnected"):
        self.stopping.set()
        self.state, self.detail = "stopped", why
        ws = self.ws
        if ws is not None:
            ws.close(websocket_client.CLOSE_GOING_AWAY, "the person disconnected")
        self.main.close()
        self.jobs.put(None)
        if bpy.app.timers.is_registered(self._timer):
            bpy.app.timers.unregister(self._timer)

    def tick(self):
        """The timer: main-thread work for the worker thread, and a look at which add-ons
        are enabled (a change goes to the server as a registry message)."""
        self.main.drain()
        now = time.monotonic()
        if self.state == "connected" and now >= self.next_addon_check:
            self.next_addon_check = now + ADDON_CHECK_INTERVAL_S
            keys = tuple(sorted(bpy.context.preferences.addons.keys()))
            if self.addon_keys is not None and keys != self.addon_keys:
                self.jobs.put(("registry", None))
            self.addon_keys = keys
        return TIMER_INTERVAL_S

    # ------------------------------------------------------------------ the connection

    def _dial_forever(self):
        failures = 0
        while not self.stopping.is_set():
            self.state, self.detail = "connecting", "dialling %s" % self.url
            try:
                ws = websocket_client.WebSocket.connect(self.url, timeout=CONNECT_TIMEOUT_S)
            except (OSError, ValueError, websocket_client.WebSocketError) as err:
                failures += 1
                self._pause(failures, "cannot reach the server: %s" % err)
                continue
            self.ws = ws
            try:
                if not self._hello(ws):
                    return
                failures = 0
                self._read(ws)
            except websocket_client.ConnectionClosed as closed:
                if closed.code in (CLOSE_REPLACED, CLOSE_REFUSED):
                    self.state, self.detail = "stopped", closed.reason or "the server ended the session"
                    self.stopping.set()
                    return
                failures += 1
                self._pause(failures, "the connection was lost (%s)" % (closed.reason or closed.code))
            except (OSError, ValueError, websocket_client.WebSocketError) as err:
                failures += 1
                self._pause(failures, "the connection failed: %s" % err)
            finally:
                self.ws = None
                ws.close(websocket_client.CLOSE_GOING_AWAY, "")

    def _pause(self, failures, why):
        if self.stopping.is_set():
            return
        delay = min(BACKOFF_MAX_S, BACKOFF_FIRST_S * 2 ** min(failures - 1, 10))
        delay *= random.uniform(0.5, 1.0)
        self.state, self.detail = "waiting", "%s; trying again in %.0f s" % (why, delay)
        self.stopping.wait(delay)

    def _hello(self, ws):
        """Says who this is; False when the server refused for good (a wrong token)."""
        hello_id = new_message_id()
        ws.send_text(json.dumps({
            "type": "hello", "message_id": hello_id, "username": self.username,
            "token": self._token, "instance": self.instance,
            "blender_version": self.blender_version,
        }))
        answer = json.loads(ws.recv(timeout=HELLO_TIMEOUT_S))
        if not isinstance(answer, dict) or answer.get("message_id") != hello_id:
            raise websocket_client.WebSocketError("the server did not answer the hello")
        if answer.get("type") == "refused":
            message = str(answer.get("message") or "the server refused")
            if answer.get("retry"):
                raise websocket_client.WebSocketError(message)
            self.state, self.detail = "stopped", message
            self.stopping.set()
            return False
        if answer.get("type") != "welcome":
            raise websocket_client.WebSocketError("the server answered the hello with %r" % answer.get("type"))
        self.state, self.detail = "connected", "connected to %s as %s" % (self.url, self.username)
        self.addon_keys = None
        self.jobs.put(("registry", None))
        return True

    def _read(self, ws):
        while not self.stopping.is_set():
            try:
                text = ws.recv(timeout=PING_INTERVAL_S)
            except TimeoutError:
                if time.monotonic() - ws.last_received > SILENCE_LIMIT_S:
                    raise websocket_client.WebSocketError("the server has been silent for %d s" % SILENCE_LIMIT_S) from None
                ws.ping()
                continue
            try:
                message = json.loads(text)
            except ValueError:
                continue
            if isinstance(message, dict) and message.get("type") in ("addon_command", "request"):
                self.jobs.put(("message", message))

    # ------------------------------------------------------------------ answering

    def _work(self):
        while True:
            job = self.jobs.get()
            if job is None:
                return
            kind, message = job
            try:
                if kind == "registry":
                    listing = self.main.run(self._listing)
                    self._send({"type": "registry", "message_id": new_message_id(), "listing": listing})
                else:
                    self._answer(message)
            except ShuttingDown:
                return
            except (OSError, websocket_client.WebSocketError):
                # The connection went; kept answers are sent again when asked again.
                continue

    def _send(self, value):
        ws = self.ws
        if ws is None:
            raise websocket_client.WebSocketError("not connected")
        ws.send_text(json.dumps(value, default=str))

    def _answer(self, message):
        message_id = _message_id(message)
        if message_id is None:
            return
        reply = self.answers.get(message_id)
        if reply is None:
            reply = self._checked(message)
            self.answers[message_id] = reply
            while len(self.answers) > ANSWERS_KEPT:
                self.answers.popitem(last=False)
        self._send({"type": "response", "message_id": message_id, "reply": reply})

    def _checked(self, message):
        """The bridge's reply to the message, or a refusal of what a server may not ask."""
        armed, self.undo_armed = self.undo_armed, False
        if message.get("type") == "addon_command":
            return self._addon_command(message)
        request = message.get("request")
        if not isinstance(request, dict):
            return _refusal("a request message needs a request object")
        command = request.get("command")
        if command not in ALLOWED_REQUESTS:
            return _refusal(
                "a viga server may not ask this Blender for %r; it may ask for add-on commands and %s"
                % (command, ", ".join(sorted(ALLOWED_REQUESTS)))
            )
        if any(request.get(field) for field in PATH_FIELDS):
            return _refusal("a viga server may not name files or folders of this machine (%s)" % ", ".join(PATH_FIELDS))
        if command == "undo" and not armed:
            return _refusal("a viga server may undo only the step it recorded just before")
        request = dict(request, id=None)
        reply = self.main.run(lambda: self._dispatch(request))
        self.undo_armed = command == "undo_push" and reply.get("ok") is True
        return reply

    def _addon_command(self, message):
        claimed = message.get("username")
        if claimed is not None and claimed != self.username:
            return _refusal("this Blender is connected as %r, not %r" % (self.username, claimed))
        addon_id, command, params = message.get("addon_id"), message.get("command"), message.get("params")
        if not isinstance(addon_id, str) or not isinstance(command, str) or not isinstance(params, dict):
            return _refusal("an addon_command needs addon_id, command (strings) and params (an object)")
        manifest = self.manifests.get(addon_id)
        if manifest is None:
            return _refusal("add-on %r is not enabled in this Blender (or not listed yet)" % addon_id)
        refused = command_checks.refusal(manifest, addon_id, command, params)
        if refused is not None:
            return _refusal(refused)
        step = message.get("undo_step")
        if not isinstance(step, str) or not step.strip():
            step = viga_bridge.undo_name(command)
        try:
            folder = server_files.prepare_folder(self.files_folder)
            params = server_files.confine_params(params, server_files.declared_paths(manifest, command), folder)
        except server_files.PathRefused as why:
            return _refusal(str(why))
        except OSError as err:
            return viga_bridge.error_reply(None, "blender_error", "the server files folder %s cannot be used: %s" % (self.files_folder, err))
        request = {"id": None, "command": "addon_command", "addon_id": addon_id, "tool": command,
                   "params": params, "undo_step": step[:200]}
        return self.main.run(lambda: self._dispatch(request))

    def _listing(self):
        """On the main thread: the add-ons enabled here, as list_addons lists them."""
        listing = viga_bridge.cmd_list_addons({})
        self._remember(listing)
        self.addon_keys = tuple(sorted(bpy.context.preferences.addons.keys()))
        return listing

    def _dispatch(self, request):
        """On the main thread: the bridge's own answer, the add-on listing remembered."""
        reply = viga_bridge.dispatch(request)
        if request.get("command") == "list_addons" and reply.get("ok"):
            self._remember(reply.get("result") or {})
        return reply

    def _remember(self, listing):
        manifests = {}
        for entry in listing.get("addons") or []:
            manifest = entry.get("manifest") if isinstance(entry, dict) else None
            addon_id = manifest.get("addon_info", {}).get("id") if isinstance(manifest, dict) else None
            if isinstance(addon_id, str):
                manifests.setdefault(addon_id, manifest)
        self.manifests = manifests


# --------------------------------------------------------------------------- the one session

_session = []


def current():
    """The running dial-out, or None."""
    return _session[0] if _session else None


def default_files_folder():
    return os.path.join(os.path.expanduser("~"), "viga-server-files")


def connect(url, username, token=None, files_folder=None):
    """Starts dialling `url` as `username` (replacing a running dial-out). The token is the
    one stored for them unless given; a given token is stored. Raises ValueError with what to
    do when something is missing."""
    url, username = url.strip(), username.strip()
    if not url or not username:
        raise ValueError("set the server URL and your user name in the viga add-on's preferences")
    refuse_plain_to_another_machine(url)
    if token:
        server_login.store_token(url, username, token)
    else:
        token = server_login.load_token(url, username)
    if not token:
        raise ValueError("no token is stored for %s at %s: connect once with your token" % (username, url))
    disconnect()
    session = Session(url, username, token, files_folder or default_files_folder())
    _session.append(session)
    session.start()
    return session


def refuse_plain_to_another_machine(url):
    """Raises ValueError for a ws:// URL whose host is not this machine: the token would cross
    the network unencrypted."""
    secure, host, _port, _path = websocket_client.parse_url(url)
    if secure or _is_loopback(host):
        return
    raise ValueError(
        "ws:// would send your token to %s unencrypted: use the server's wss:// address "
        "(ws:// is only for a server on this machine)" % host
    )


def _is_loopback(host):
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def disconnect(why="disconnected"):
    while _session:
        _session.pop().stop(why)


def status_line():
    """One line for the interface: what the dial-out is doing."""
    session = current()
    if session is None:
        return "Not connected to a viga server"
    return session.detail


# --------------------------------------------------------------------------- operators


def _prefs(context):
    addon = context.preferences.addons.get(__package__)
    return addon.preferences if addon is not None else None


class VIGA_OT_server_connect(bpy.types.Operator):
    """Connect this Blender to a viga server, so the server's agent works on this scene"""

    bl_idname = "viga.server_connect"
    bl_label = "Connect to viga server"
    bl_options = {"REGISTER", "INTERNAL"}

    token: StringProperty(
        name="Token", subtype="PASSWORD", options={"SKIP_SAVE"},
        description="Your token on the server (kept in a private file, never in the .blend); "
        "empty = the one stored",
    )

    def invoke(self, context, _event):
        return context.window_manager.invoke_props_dialog(self)

    def execute(self, context):
        prefs = _prefs(context)
        if prefs is None:
            self.report({"ERROR"}, "enable the viga add-on in Preferences > Add-ons first")
            return {"CANCELLED"}
        try:
            connect(prefs.server_url, prefs.server_username, self.token or None,
                    bpy.path.abspath(prefs.server_files) if prefs.server_files else None)
        except (ValueError, OSError) as err:
            self.report({"ERROR"}, str(err))
            return {"CANCELLED"}
        return {"FINISHED"}


class VIGA_OT_server_disconnect(bpy.types.Operator):
    """Disconnect this Blender from the viga server"""

    bl_idname = "viga.server_disconnect"
    bl_label = "Disconnect from viga server"
    bl_options = {"REGISTER", "INTERNAL"}

    def execute(self, _context):
        disconnect()
        return {"FINISHED"}


class VIGA_OT_server_forget_token(bpy.types.Operator):
    """Remove the token stored for this server and user"""

    bl_idname = "viga.server_forget_token"
    bl_label = "Forget token"
    bl_options = {"REGISTER", "INTERNAL"}

    def execute(self, context):
        prefs = _prefs(context)
        if prefs is not None:
            server_login.forget_token(prefs.server_url, prefs.server_username)
        return {"FINISHED"}


def draw_preferences(prefs, layout):
    """The Server box of the add-on's preferences."""
    box = layout.box()
    box.label(text="viga server", icon="URL")
    box.prop(prefs, "server_url")
    box.prop(prefs, "server_username")
    box.prop(prefs, "server_files")
    box.prop(prefs, "server_connect_on_start")
    row = box.row()
    if current() is None:
        row.operator(VIGA_OT_server_connect.bl_idname, text="Connect", icon="LINKED")
    else:
        row.operator(VIGA_OT_server_disconnect.bl_idname, text="Disconnect", icon="UNLINKED")
    row.operator(VIGA_OT_server_forget_token.bl_idname, text="Forget token", icon="TRASH")
    box.label(text=status_line())


def _connect_on_start():
    prefs = _prefs(bpy.context)
    if prefs is not None and prefs.server_connect_on_start and prefs.server_url and prefs.server_username:
        try:
            connect(prefs.server_url, prefs.server_username,
                    files_folder=bpy.path.abspath(prefs.server_files) if prefs.server_files else None)
        except (ValueError, OSError) as err:
            print("viga: not connecting to the server: %s" % err)
    return None


CLASSES = (VIGA_OT_server_connect, VIGA_OT_server_disconnect, VIGA_OT_server_forget_token)


def register():
    for cls in CLASSES:
        bpy.utils.register_class(cls)
    # Preferences are read once Blender has finished starting, not during registration.
    bpy.app.timers.register(_connect_on_start, first_interval=1.0)


def unregister():
    if bpy.app.timers.is_registered(_connect_on_start):
        bpy.app.timers.unregister(_connect_on_start)
    disconnect()
    for cls in reversed(CLASSES):
        bpy.utils.unregister_class(cls)
