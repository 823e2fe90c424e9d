# Checks of the add-on's WebSocket client (websocket_client.py) and its path rule
# (server_files.py) against a server written here frame by frame, so every case a real server
# rarely sends is sent: fragments with a ping between them, masked and oversized frames,
# reserved bits, bad UTF-8, a close, a frame cut by a timeout, bad handshakes. Needs no
# Blender:
#
#   python crates/viga-blender/addon/tests/websocket_checks.py
#
# Prints one line per check and ends with "N passed, M failed"; exits 1 if anything failed.

import os
import struct
import sys
import tempfile
import threading
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

import server_files  # noqa: E402 - found through the path above
import websocket_client as wsc  # noqa: E402
from ws_peer import serve_once  # noqa: E402


def expect_closed(call, code):
    try:
        call()
    except wsc.ConnectionClosed as closed:
        assert closed.code == code, (closed.code, closed.reason)
        return closed
    raise AssertionError("expected the connection to close with %d" % code)


CHECKS = []


def check(function):
    CHECKS.append(function)
    return function


@check
def urls_are_read_or_refused():
    assert wsc.parse_url("ws://example.org") == (False, "example.org", 80, "/")
    assert wsc.parse_url("wss://example.org:8443/blender?x=1") == (True, "example.org", 8443, "/blender?x=1")
    for bad in ("http://example.org", "ws://", "ws://alice:secret@example.org", "ws://h/#frag", "example.org"):
        try:
            wsc.parse_url(bad)
        except ValueError:
            continue
        raise AssertionError("accepted %r" % bad)


@check
def frames_out_are_masked_and_long_messages_survive_both_ways():
    big = "é" * 40000 + "end"  # 80 KB of UTF-8: a 64-bit length

    def server(peer):
        peer.accept()
        for expected in ("short", "m" * 300, big):
            fin, opcode, data = peer.read_frame()
            assert fin and opcode == wsc.OP_TEXT and data.decode() == expected, (opcode, len(data))
        peer.send(peer.frame(wsc.OP_TEXT, big.encode()))
        peer.send(peer.frame(wsc.OP_BINARY, b"\x00\x01\x02"))

    url, finished = serve_once(server)
    ws = wsc.WebSocket.connect(url)
    for text in ("short", "m" * 300, big):
        ws.send_text(text)
    assert ws.recv(timeout=5) == big
    assert ws.recv(timeout=5) == b"\x00\x01\x02"
    ws.close()
    finished()


@check
def fragments_are_joined_and_pings_between_them_answered():
    def server(peer):
        peer.accept()
        peer.send(
            peer.frame(wsc.OP_TEXT, b"hel", fin=False),
            peer.frame(wsc.OP_PING, b"are you there"),
            peer.frame(wsc.OP_CONTINUATION, b"l", fin=False),
            peer.frame(wsc.OP_PONG, b"unasked"),
            peer.frame(wsc.OP_CONTINUATION, b"o"),
        )
        fin, opcode, data = peer.read_frame()
        assert (fin, opcode, data) == (True, wsc.OP_PONG, b"are you there"), (opcode, data)
        fin, opcode, data = peer.read_frame()
        assert (opcode, data) == (wsc.OP_PING, b"tick"), (opcode, data)

    url, finished = serve_once(server)
    ws = wsc.WebSocket.connect(url)
    assert ws.recv(timeout=5) == "hello"
    ws.ping(b"tick")
    finished()
    ws.close()


@check
def a_close_is_answered_and_raised():
    def server(peer):
        peer.accept()
        peer.send(peer.frame(wsc.OP_CLOSE, struct.pack("!H", 1001) + "bye for now".encode()))
        fin, opcode, data = peer.read_frame()
        assert opcode == wsc.OP_CLOSE and struct.unpack("!H", data[:2])[0] == 1001, data

    url, finished = serve_once(server)
    ws = wsc.WebSocket.connect(url)
    closed = expect_closed(lambda: ws.recv(timeout=5), 1001)
    assert closed.reason == "bye for now"
    expect_closed(lambda: ws.send_text("after the close"), 1001)
    finished()


def protocol_error(frames, code):
    """The client meets `frames` and must close with `code` (its close frame says so)."""

    def server(peer):
        peer.accept()
        peer.send(*frames(peer))
        fin, opcode, data = peer.read_frame()
        assert opcode == wsc.OP_CLOSE and struct.unpack("!H", data[:2])[0] == code, (opcode, data)

    url, finished = serve_once(server)
    ws = wsc.WebSocket.connect(url, max_message_bytes=1000)
    expect_closed(lambda: ws.recv(timeout=5), code)
    finished()


@check
def hostile_frames_close_the_connection_with_the_right_code():
    protocol_error(lambda p: [p.frame(wsc.OP_TEXT, b"masked", masked=True)], wsc.CLOSE_PROTOCOL_ERROR)
    protocol_error(lambda p: [p.frame(wsc.OP_TEXT, b"rsv", rsv=0x40)], wsc.CLOSE_PROTOCOL_ERROR)
    protocol_error(lambda p: [p.frame(0x3, b"unknown")], wsc.CLOSE_PROTOCOL_ERROR)
    protocol_error(lambda p: [p.frame(wsc.OP_PING, b"x" * 126)], wsc.CLOSE_PROTOCOL_ERROR)
    protocol_error(lambda p: [p.frame(wsc.OP_PING, b"x", fin=False)], wsc.CLOSE_PROTOCOL_ERROR)
    protocol_error(lambda p: [p.frame(wsc.OP_CONTINUATION, b"orphan")], wsc.CLOSE_PROTOCOL_ERROR)
    protocol_error(lambda p: [p.frame(wsc.OP_TEXT, b"a", fin=False), p.frame(wsc.OP_TEXT, b"b")],
                   wsc.CLOSE_PROTOCOL_ERROR)
    protocol_error(lambda p: [p.frame(wsc.OP_TEXT, b"\xff\xfe")], wsc.CLOSE_INVALID_DATA)
    # Too big in one frame, and too big only once its fragments are added up.
    protocol_error(lambda p: [p.frame(wsc.OP_BINARY, b"x" * 1001)], wsc.CLOSE_TOO_BIG)
    protocol_error(lambda p: [p.frame(wsc.OP_TEXT, b"x" * 600, fin=False),
                              p.frame(wsc.OP_CONTINUATION, b"x" * 600)], wsc.CLOSE_TOO_BIG)
    protocol_error(lambda p: [p.frame(wsc.OP_CLOSE, struct.pack("!H", 999))], wsc.CLOSE_PROTOCOL_ERROR)


@check
def a_frame_cut_by_a_timeout_is_kept():
    gate = threading.Event()

    def server(peer):
        peer.accept()
        whole = peer.frame(wsc.OP_TEXT, b"patience")
        peer.send(whole[:4])
        gate.wait(5)
        peer.send(whole[4:])

    url, finished = serve_once(server)
    ws = wsc.WebSocket.connect(url)
    try:
        ws.recv(timeout=0.2)
        raise AssertionError("half a frame is not a message")
    except TimeoutError:
        pass
    gate.set()
    assert ws.recv(timeout=5) == "patience"
    ws.close()
    finished()


def refused_handshake(respond, fragment):
    def server(peer):
        peer.read_request()
        peer.conn.sendall(respond)

    url, finished = serve_once(server)
    try:
        wsc.WebSocket.connect(url, timeout=3)
    except wsc.HandshakeError as err:
        assert fragment in str(err), err
    else:
        raise AssertionError("the handshake should fail: %r" % fragment)
    finished()


@check
def bad_handshakes_are_refused():
    refused_handshake(b"HTTP/1.1 403 Forbidden\r\n\r\n", "403 Forbidden")
    refused_handshake(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                      b"Sec-WebSocket-Accept: d3Jvbmc=\r\n\r\n", "does not match")
    refused_handshake(b"SSH-2.0-OpenSSH\r\n\r\n", "not HTTP")
    refused_handshake(b"HTTP/1.1 101 OK\r\n" + b"X-Padding: " + b"a" * 20000, "longer than")

    def extension(peer):
        peer.accept(extra="Sec-WebSocket-Extensions: permessage-deflate\r\n")

    url, finished = serve_once(extension)
    try:
        wsc.WebSocket.connect(url, timeout=3)
        raise AssertionError("an extension nobody offered was accepted")
    except wsc.HandshakeError as err:
        assert "not offered" in str(err), err
    finished()


@check
def a_server_that_goes_away_is_a_closed_connection():
    def server(peer):
        peer.accept()

    url, finished = serve_once(server)
    ws = wsc.WebSocket.connect(url)
    finished()
    expect_closed(lambda: ws.recv(timeout=5), 1006)


@check
def paths_stay_in_the_server_files_folder():
    root = tempfile.mkdtemp()
    folder = server_files.prepare_folder(os.path.join(root, "files"))
    assert server_files.confine(folder, "out/scene.glb") == os.path.join(folder, "out", "scene.glb")
    assert server_files.confine(folder, os.path.join(folder, "a.png")) == os.path.join(folder, "a.png")
    os.symlink(root, os.path.join(folder, "escape"))
    for bad, why in (("../secret", ".."), ("/etc/passwd", "outside"), ("escape/x", "link"), ("", "empty")):
        try:
            server_files.confine(folder, bad)
        except server_files.PathRefused as err:
            assert why in str(err), (bad, err)
        else:
            raise AssertionError("accepted %r" % bad)
    for name in ("filepath", "output_path", "imageFile", "file_name", "folder"):
        assert server_files.looks_like_path(name), name
    for name in ("file_format", "object_name", "side"):
        assert not server_files.looks_like_path(name), name
    manifest = {"ai_integration": {"tools": [{"name": "save", "parameters": [{"name": "target", "type": "file_path"}]}]}}
    declared = server_files.declared_paths(manifest, "save")
    params = {"target": "a.blend", "options": {"log_path": "b.txt", "level": 3}, "names": ["x"]}
    confined = server_files.confine_params(params, declared, folder)
    assert confined == {"target": os.path.join(folder, "a.blend"),
                        "options": {"log_path": os.path.join(folder, "b.txt"), "level": 3},
                        "names": ["x"]}, confined
    # Strings under names that say nothing of paths are the command's own business.
    plain = {"options": {"labels": ["/not/a/path"]}}
    assert server_files.confine_params(plain, set(), folder) == plain
    try:
        server_files.confine_params({"dirs": {"out_dir": "/etc"}}, set(), folder)
        raise AssertionError("a nested path outside was accepted")
    except server_files.PathRefused as err:
        assert "dirs.out_dir" in str(err), err


def main():
    passed = failed = 0
    for function in CHECKS:
        try:
            function()
        except Exception:  # noqa: BLE001 - report every failing check, then carry on
            failed += 1
            print("FAIL %s\n%s" % (function.__name__, traceback.format_exc()))
        else:
            passed += 1
            print("ok   %s" % function.__name__)
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


main()
