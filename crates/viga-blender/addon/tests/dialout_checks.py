# Checks of the add-on's dial-out (dialout.py) inside real Blender (the bpy module), against
# a server written here frame by frame (ws_peer.py), so it can ask what a real viga server
# never does: run a program, save or open a file, load add-on packages, render to a path, undo
# a step it did not record, speak for another user, name a file outside the server files
# folder. Also: one undo step per command, a failing command taken back, a message sent again
# answered and not run again, an add-on enabled mid-session pushed to the server, a lost
# connection dialled again as the same instance, and a replaced Blender that stops dialling.
#
#   .viga/venv/bin/python crates/viga-blender/addon/tests/dialout_checks.py -- --package-dir DIR
#
# DIR holds the package viga_blender/ (from the built zip). Run with BLENDER_USER_RESOURCES,
# VIGA_CONNECTION_DIR and VIGA_CONFIG_DIR pointing at folders of the test's own. Timers do not
# fire in the bpy module, so the checks call the dial-out's timer themselves. Prints one line
# per check and ends with "N passed, M failed"; exits 1 if anything failed.

import argparse
import json
import os
import queue
import shutil
import socket
import sys
import tempfile
import textwrap
import threading
import time
import traceback
import zipfile

import bpy

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))
sys.path.insert(0, HERE)

import ws_peer  # noqa: E402 - found through the path above


def parse_args():
    argv = sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else sys.argv[1:]
    parser = argparse.ArgumentParser(description="dial-out checks for viga's Blender add-on")
    parser.add_argument("--package-dir", required=True, help="a folder holding the package viga_blender/")
    return parser.parse_args(argv)


ARGS = parse_args()
sys.path.insert(0, os.path.abspath(ARGS.package_dir))

import viga_blender  # noqa: E402 - found through --package-dir
from viga_blender import dialout, server_login, viga_bridge  # noqa: E402

TMP = tempfile.mkdtemp(prefix="viga_dialout_checks_")
TOKEN = "alice-token-0123456789abc"

COUNTER_MANIFEST = {
    "addon_info": {"id": "counter", "name": "Counter", "version": "1.0.0", "author": "viga",
                   "category": "test", "description": "Counts"},
    "ai_integration": {
        "agent_description": "Counts on the scene.",
        "tools": [
            {"name": "bump", "description": "Add to the counter.",
             "parameters": [{"name": "amount", "type": "integer", "description": "how much", "required": False, "default": 1}]},
            {"name": "fail", "description": "Change the counter, then raise.", "parameters": []},
            {"name": "keep", "description": "Write a file.",
             "parameters": [{"name": "target", "type": "file_path", "description": "where"},
                            {"name": "text", "type": "string", "description": "what"}]},
        ],
    },
}
COUNTER_CODE = '''
import bpy

def bump(amount=1):
    scene = bpy.context.scene
    scene["viga_counter"] = scene.get("viga_counter", 0) + amount
    return {"counter": scene["viga_counter"]}

def fail():
    bpy.context.scene["viga_counter"] = 999
    raise RuntimeError("the counter broke")

def keep(target, text):
    with open(target, "w", encoding="utf-8") as handle:
        handle.write(text)
    return {"written": target}

def secret():
    bpy.context.scene["viga_secret"] = True

VIGA_COMMANDS = {"bump": bump, "fail": fail, "keep": keep, "secret": secret}
'''


def make_counter_addon():
    folder = os.path.join(TMP, "addons")
    package = os.path.join(folder, "counter")
    os.makedirs(package, exist_ok=True)
    with open(os.path.join(package, "__init__.py"), "w", encoding="utf-8") as handle:
        handle.write(COUNTER_CODE)
    with open(os.path.join(package, "addon_ai.json"), "w", encoding="utf-8") as handle:
        json.dump(COUNTER_MANIFEST, handle)
    return folder


# --------------------------------------------------------------------------- a fake server


class Connection:
    """One accepted dial-out connection: a thread reads its frames into a queue (answering
    pings); the checks send frames and take messages."""

    def __init__(self, peer):
        self.peer = peer
        self.messages = queue.Queue()
        self.closed = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        try:
            while True:
                fin, opcode, data = self.peer.read_frame()
                if opcode == ws_peer.OP_TEXT:
                    self.messages.put(json.loads(data.decode("utf-8")))
                elif opcode == ws_peer.OP_PING:
                    self.peer.send(self.peer.frame(ws_peer.OP_PONG, data))
                elif opcode == ws_peer.OP_CLOSE:
                    self.messages.put({"type": "__closed__", "payload": data.hex()})
                    return
        except (EOFError, OSError):
            self.closed.set()

    def send(self, message):
        self.peer.send(self.peer.frame(ws_peer.OP_TEXT, json.dumps(message).encode("utf-8")))

    def take(self, kind=None, timeout=20):
        """The next message (of `type` kind, skipping others), pumping Blender meanwhile."""
        def next_one():
            try:
                message = self.messages.get_nowait()
            except queue.Empty:
                return None
            return message if kind is None or message.get("type") == kind else next_one()
        return pump_until(next_one, timeout, "no %s message" % (kind or "any"))

    def ask(self, message):
        """Sends `message` and returns the reply the Blender sent for its id."""
        self.send(message)
        while True:
            answer = self.take("response")
            if answer["message_id"] == message["message_id"]:
                return answer["reply"]


class FakeServer:
    def __init__(self):
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(4)
        self.url = "ws://127.0.0.1:%d" % self.listener.getsockname()[1]

    def accept(self, timeout=20):
        """The next dial-out, past its handshake, and its hello; pumps Blender meanwhile."""
        accepted = queue.Queue()

        def run():
            self.listener.settimeout(timeout)
            try:
                conn, _ = self.listener.accept()
            except OSError as err:
                accepted.put(err)
                return
            peer = ws_peer.Peer(conn)
            peer.accept()
            accepted.put(Connection(peer))

        threading.Thread(target=run, daemon=True).start()
        got = pump_until(lambda: _take(accepted), timeout + 1, "no dial-out arrived")
        if isinstance(got, Exception):
            raise got
        return got, got.take("hello")

    def close(self):
        self.listener.close()


def _take(source):
    try:
        return source.get_nowait()
    except queue.Empty:
        return None


def pump_until(condition, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        session = dialout.current()
        if session is not None:
            session.tick()
        value = condition()
        if value is not None:
            return value
        time.sleep(0.003)
    raise AssertionError("timed out: %s" % what)


def welcome(connection, hello):
    connection.send({"type": "welcome", "message_id": hello["message_id"], "user": "alice"})
    return connection.take("registry")


def counter():
    return bpy.context.scene.get("viga_counter", 0)


def command(message_id, name, params, **extra):
    message = {"type": "addon_command", "message_id": message_id, "addon_id": "counter",
               "command": name, "params": params, "username": "alice"}
    message.update(extra)
    return message


def request(message_id, **fields):
    return {"type": "request", "message_id": message_id, "request": fields}


def start(server):
    files = os.path.join(TMP, "server-files-%d" % time.monotonic_ns())
    dialout.connect(server.url, "alice", TOKEN, files)
    connection, hello = server.accept()
    return connection, hello, files


# --------------------------------------------------------------------------- checks

CHECKS = []


def check(function):
    CHECKS.append(function)
    return function


@check
def hello_registry_and_one_undo_step_per_command():
    server = FakeServer()
    try:
        connection, hello, _files = start(server)
        assert hello["username"] == "alice" and hello["token"] == TOKEN, hello
        assert hello["blender_version"] == bpy.app.version_string and len(hello["instance"]) == 32, hello
        assert server_login.load_token(server.url, "alice") == TOKEN, "the token is kept"
        with open(os.path.join(os.environ["VIGA_CONFIG_DIR"], server_login.TOKENS_FILE)) as handle:
            assert TOKEN in handle.read()
        assert os.stat(os.path.join(os.environ["VIGA_CONFIG_DIR"], server_login.TOKENS_FILE)).st_mode & 0o077 == 0
        registry = welcome(connection, hello)
        ids = [entry["manifest"]["addon_info"]["id"] for entry in registry["listing"]["addons"]]
        assert "counter" in ids, ids
        assert dialout.current().state == "connected"
        before = counter()
        reply = connection.ask(command("m1", "bump", {"amount": 2}))
        assert reply["ok"] and reply["result"]["result"] == {"counter": before + 2}, reply
        again = connection.ask(command("m1", "bump", {"amount": 2}))
        assert again == reply and counter() == before + 2, "a message sent again is not run again"
        viga_bridge.undo_one_step()
        assert counter() == before, "one undo takes the whole command back"
    finally:
        dialout.disconnect()
        server.close()


@check
def what_a_server_may_not_ask_is_refused():
    server = FakeServer()
    try:
        connection, hello, files = start(server)
        welcome(connection, hello)
        refusals = {
            "r1": request("r1", command="execute", code="import os"),
            "r2": request("r2", command="save_blend", path=os.path.join(TMP, "stolen.blend")),
            "r3": request("r3", command="load_blend", path="/etc/passwd"),
            "r4": request("r4", command="list_addons", folder=TMP),
            "r5": request("r5", command="render", engine="WORKBENCH", width=8, height=8, output_path=os.path.join(TMP, "x.png")),
            "r6": request("r6", command="undo"),
            "r7": request("r7", command="apply_program", code="pass", message="x"),
            "r8": command("r8", "bump", {}, username="mallory"),
            "r9": dict(command("r9", "bump", {}), addon_id="nope"),
            "r10": request("r10", command="addon_command", addon_id="counter", tool="bump", params={}),
            # A handler the add-on has but its manifest does not declare, parameters it does
            # not declare, of the wrong type, or missing.
            "r11": command("r11", "secret", {}),
            "r12": command("r12", "bump", {"amount": 1, "extra": "x"}),
            "r13": command("r13", "bump", {"amount": "9"}),
            "r14": command("r14", "keep", {"target": "ok.txt"}),
        }
        before = counter()
        for message_id, message in refusals.items():
            reply = connection.ask(message)
            assert not reply["ok"], (message_id, reply)
        said = {message_id: connection.ask(refusals[message_id])["error"]["message"]
                for message_id in ("r11", "r12", "r13", "r14")}
        assert "declares no command 'secret'; it declares: bump, fail, keep" in said["r11"], said
        assert "takes no parameter extra; it takes: amount" in said["r12"], said
        assert "amount of bump must be an integer" in said["r13"], said
        assert "needs the parameter text" in said["r14"], said
        assert not bpy.context.scene.get("viga_secret"), "an undeclared handler never runs"
        assert counter() == before, "nothing refused ran"
        assert not os.path.exists(os.path.join(TMP, "stolen.blend"))
        assert connection.ask(request("u1", command="undo_push", message="viga: look"))["ok"]
        assert connection.ask(request("u2", command="undo"))["ok"], "undo right after its own step"
        for name, target in (("k1", "../escape.txt"), ("k2", "/etc/viga-escape"), ("k3", os.path.join(TMP, "out.txt"))):
            reply = connection.ask(command(name, "keep", {"target": target, "text": "x"}))
            assert not reply["ok"] and "server files folder" in reply["error"]["message"], (target, reply)
        reply = connection.ask(command("k4", "keep", {"target": "ok.txt", "text": "kept"}))
        assert reply["ok"], reply
        written = os.path.join(os.path.realpath(files), "ok.txt")
        assert reply["result"]["result"] == {"written": written}, reply
        with open(written, encoding="utf-8") as handle:
            assert handle.read() == "kept"
        before = counter()
        failed = connection.ask(command("f1", "fail", {}))
        assert not failed["ok"] and "the counter broke" in failed["error"]["message"], failed
        assert counter() == before, "a failing command is taken back"
    finally:
        dialout.disconnect()
        server.close()


def install_scene_stats():
    """Installs the scene_stats fixture as an extension, enabled, as a person does."""
    source = os.path.join(REPO, "fixtures", "addons", "installable", "scene_stats")
    path = os.path.join(TMP, "scene_stats.zip")
    with zipfile.ZipFile(path, "w") as archive:
        for name in sorted(os.listdir(source)):
            if os.path.isfile(os.path.join(source, name)):
                archive.write(os.path.join(source, name), name)
    result = bpy.ops.extensions.package_install_files(filepath=path, repo="user_default", enable_on_install=True)
    assert result == {"FINISHED"}, result


@check
def an_enabled_addon_is_pushed_and_a_lost_connection_is_dialled_again():
    server = FakeServer()
    try:
        connection, hello, _files = start(server)
        welcome(connection, hello)
        ran = connection.ask(command("once", "bump", {"amount": 5}))
        assert ran["ok"], ran
        install_scene_stats()
        pushed = connection.take("registry")
        ids = [entry["manifest"]["addon_info"]["id"] for entry in pushed["listing"]["addons"]]
        assert "scene_stats" in ids, ids
        # The connection drops without a close: the same Blender dials back in.
        connection.peer.conn.shutdown(socket.SHUT_RDWR)
        connection.peer.conn.close()
        again, second_hello = server.accept(timeout=30)
        assert second_hello["instance"] == hello["instance"], "the same instance"
        welcome(again, second_hello)
        before = counter()
        assert again.ask(command("once", "bump", {"amount": 5})) == ran, "answered from what was kept"
        assert counter() == before, "and not run again"
        # Another Blender of the same user replaced this one: it stops dialling.
        again.peer.send(again.peer.frame(ws_peer.OP_CLOSE, (4001).to_bytes(2, "big") + b"replaced"))
        pump_until(lambda: dialout.current().state == "stopped" or None, 10, "the dial-out did not stop")
        assert "replaced" in dialout.current().detail, dialout.current().detail
        server.listener.settimeout(3)
        try:
            server.listener.accept()
            raise AssertionError("a replaced Blender dialled again")
        except socket.timeout:
            pass
    finally:
        dialout.disconnect()
        server.close()


@check
def a_refused_token_stops_dialling_and_a_bad_url_is_refused():
    server = FakeServer()
    try:
        dialout.connect(server.url, "alice", "wrong-token-0123456789", os.path.join(TMP, "files"))
        connection, hello = server.accept()
        connection.send({"type": "refused", "message_id": hello["message_id"],
                         "message": "unknown user or wrong token", "retry": False})
        pump_until(lambda: dialout.current().state == "stopped" or None, 10, "the dial-out did not stop")
        assert dialout.current().detail == "unknown user or wrong token", dialout.current().detail
    finally:
        dialout.disconnect()
        server.close()
    for url in ("http://example.org", "ws://user:pw@example.org", "ws://example.org:8765", "ws://10.1.2.3:8765"):
        try:
            dialout.connect(url, "alice", TOKEN)
        except ValueError:
            continue
        raise AssertionError("accepted %r" % url)
    try:
        dialout.connect("ws://127.0.0.1:9", "nobody-with-a-token", None)
        raise AssertionError("connected without a token")
    except ValueError as err:
        assert "no token is stored" in str(err), err


def main():
    viga_blender.register()
    if bpy.context.preferences.addons.get(viga_blender.__name__) is None:
        bpy.context.preferences.addons.new().module = viga_blender.__name__
    listing = viga_bridge.cmd_list_addons({"folder": make_counter_addon()})
    assert not listing["problems"], listing["problems"]
    passed = failed = 0
    for function in CHECKS:
        try:
            function()
        except Exception:  # noqa: BLE001 - report every failing check, then carry on
            failed += 1
            print("FAIL %s\n%s" % (function.__name__, textwrap.indent(traceback.format_exc(), "    ")))
        else:
            passed += 1
            print("ok   %s" % function.__name__)
    viga_blender.unregister()
    shutil.rmtree(TMP, ignore_errors=True)
    print("%d passed, %d failed" % (passed, failed))
    sys.stdout.flush()
    os._exit(1 if failed else 0)


main()
