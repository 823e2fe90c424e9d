# The server's end of a WebSocket, written frame by frame for the add-on's checks
# (websocket_checks.py, dialout_checks.py): it answers the handshake and reads and writes
# exactly the frames it is told, so the checks can send what a real server rarely does.

import base64
import hashlib
import socket
import struct
import threading

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
OP_CONTINUATION, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA


class Peer:
    """The server's end of one connection: reads the handshake, answers it, and reads and
    writes frames exactly as told."""

    def __init__(self, conn):
        self.conn = conn
        self.buffer = b""

    def read_exact(self, count):
        while len(self.buffer) < count:
            chunk = self.conn.recv(65536)
            if not chunk:
                raise EOFError("the client closed")
            self.buffer += chunk
        data, self.buffer = self.buffer[:count], self.buffer[count:]
        return data

    def read_request(self):
        while b"\r\n\r\n" not in self.buffer:
            chunk = self.conn.recv(4096)
            if not chunk:
                raise EOFError("no request")
            self.buffer += chunk
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        lines = head.decode("ascii").split("\r\n")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        return lines[0], headers

    def accept(self, accept_value=None, extra=""):
        request_line, headers = self.read_request()
        assert request_line.startswith("GET /blender HTTP/1.1"), request_line
        assert headers["upgrade"].lower() == "websocket" and headers["sec-websocket-version"] == "13", headers
        key = headers["sec-websocket-key"]
        assert len(base64.b64decode(key)) == 16
        if accept_value is None:
            accept_value = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
        self.conn.sendall((
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            "Sec-WebSocket-Accept: %s\r\n%s\r\n" % (accept_value, extra)
        ).encode())
        return headers

    def read_frame(self):
        """(fin, opcode, payload) of the client's next frame, which must be masked."""
        first, second = self.read_exact(2)
        assert second & 0x80, "a client frame must be masked"
        length = second & 0x7F
        if length == 126:
            length = struct.unpack("!H", self.read_exact(2))[0]
        elif length == 127:
            length = struct.unpack("!Q", self.read_exact(8))[0]
        mask = self.read_exact(4)
        data = bytes(b ^ mask[i % 4] for i, b in enumerate(self.read_exact(length)))
        return bool(first & 0x80), first & 0x0F, data

    def frame(self, opcode, payload, fin=True, masked=False, rsv=0):
        first = (0x80 if fin else 0) | rsv | opcode
        length = len(payload)
        if length < 126:
            header = struct.pack("!BB", first, (0x80 if masked else 0) | length)
        elif length < 65536:
            header = struct.pack("!BBH", first, (0x80 if masked else 0) | 126, length)
        else:
            header = struct.pack("!BBQ", first, (0x80 if masked else 0) | 127, length)
        if masked:
            header += b"\x01\x02\x03\x04"
            payload = bytes(b ^ (1, 2, 3, 4)[i % 4] for i, b in enumerate(payload))
        return header + payload

    def send(self, *frames):
        self.conn.sendall(b"".join(frames))


def serve_once(script):
    """A loopback server that runs `script(peer)` for one connection on a thread; returns
    the URL and a function that waits for the script and re-raises its failure."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    outcome = {}

    def run():
        conn, _ = listener.accept()
        try:
            script(Peer(conn))
        except BaseException as exc:  # noqa: BLE001 - handed to the check
            outcome["error"] = exc
        finally:
            conn.close()
            listener.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()

    def finished():
        thread.join(10)
        assert not thread.is_alive(), "the server side did not finish"
        if "error" in outcome:
            raise outcome["error"]

    return "ws://127.0.0.1:%d/blender" % port, finished
