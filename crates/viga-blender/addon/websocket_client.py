# SPDX-License-Identifier: GPL-3.0-or-later
# A small WebSocket client (RFC 6455) over the standard library's socket and ssl: Blender's
# Python ships no WebSocket library, and the add-on must not install one. It speaks what the
# dial-out needs and refuses the rest: no extensions, no subprotocols, masked frames out,
# unmasked frames in, fragmented messages reassembled, pings answered, a bounded message
# size and a bounded handshake. It imports nothing of Blender's, so it is tested with any
# Python.
#
# One thread reads (recv); any thread may send (sends are serialised by a lock).

import base64
import hashlib
import os
import socket
import ssl
import struct
import threading
import time
import urllib.parse

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
# The largest message read; a longer one closes the connection with 1009.
DEFAULT_MAX_MESSAGE_BYTES = 4 << 20
# The handshake's response head (status line and headers) must fit this.
MAX_HEAD_BYTES = 16 << 10
READ_CHUNK = 64 << 10

OP_CONTINUATION, OP_TEXT, OP_BINARY = 0x0, 0x1, 0x2
OP_CLOSE, OP_PING, OP_PONG = 0x8, 0x9, 0xA
CONTROL_OPS = (OP_CLOSE, OP_PING, OP_PONG)
DATA_OPS = (OP_TEXT, OP_BINARY)

CLOSE_NORMAL = 1000
CLOSE_GOING_AWAY = 1001
CLOSE_PROTOCOL_ERROR = 1002
CLOSE_INVALID_DATA = 1007
CLOSE_TOO_BIG = 1009
# Codes a peer may send (RFC 6455 7.4.1 and 7.4.2): 1000-1003, 1007-1011, 3000-4999.
_VALID_CLOSE_CODES = set(range(1000, 1004)) | set(range(1007, 1012)) | set(range(3000, 5000))


class WebSocketError(Exception):
    """The connection cannot be used any more: a failed handshake, a protocol error, a
    broken socket."""


class HandshakeError(WebSocketError):
    """The server did not accept the WebSocket handshake. `status` is its HTTP status (0
    when it said nothing readable)."""

    def __init__(self, message, status=0):
        super().__init__(message)
        self.status = status


class ConnectionClosed(WebSocketError):
    """The connection was closed by either side; `code` and `reason` are the peer's (1006
    and the cause when it went away without a close frame)."""

    def __init__(self, code, reason):
        super().__init__("connection closed (%d%s)" % (code, ": " + reason if reason else ""))
        self.code = code
        self.reason = reason


def parse_url(url):
    """(secure, host, port, path) of a ws:// or wss:// URL, refusing anything else: another
    scheme, no host, credentials in the URL, a fragment."""
    parts = urllib.parse.urlsplit(url.strip())
    if parts.scheme not in ("ws", "wss"):
        raise ValueError("the server URL must start with ws:// or wss://, not %r" % url)
    if not parts.hostname:
        raise ValueError("the server URL names no host: %r" % url)
    if parts.username or parts.password:
        raise ValueError("the server URL may not hold a user name or password (the token is sent after connecting)")
    if parts.fragment:
        raise ValueError("the server URL may not have a #fragment")
    secure = parts.scheme == "wss"
    port = parts.port or (443 if secure else 80)
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return secure, parts.hostname, port, path


def accept_key(key):
    """The Sec-WebSocket-Accept a server must answer `key` with."""
    return base64.b64encode(hashlib.sha1((key + GUID).encode("ascii")).digest()).decode("ascii")


def mask_payload(payload, mask):
    """`payload` XORed with the 4-byte `mask` repeated: as one big integer, so a large
    payload costs two conversions rather than a Python loop per byte."""
    if not payload:
        return b""
    length = len(payload)
    repeated = (mask * (length // 4 + 1))[:length]
    return (int.from_bytes(payload, "big") ^ int.from_bytes(repeated, "big")).to_bytes(length, "big")


def encode_frame(opcode, payload, fin=True, mask=None):
    """One frame as a client sends it: always masked (a fresh random key unless given)."""
    if mask is None:
        mask = os.urandom(4)
    first = (0x80 if fin else 0) | opcode
    length = len(payload)
    if length < 126:
        header = struct.pack("!BB", first, 0x80 | length)
    elif length < 1 << 16:
        header = struct.pack("!BBH", first, 0x80 | 126, length)
    else:
        header = struct.pack("!BBQ", first, 0x80 | 127, length)
    return header + mask + mask_payload(payload, mask)


def _header_tokens(value):
    return {token.strip().lower() for token in value.split(",") if token.strip()}


class WebSocket:
    """An open client connection. Build one with `WebSocket.connect(url)`."""

    def __init__(self, sock, max_message_bytes=DEFAULT_MAX_MESSAGE_BYTES, buffered=b""):
        self.sock = sock
        self.max_message_bytes = max_message_bytes
        self._buffer = bytearray(buffered)
        self._send_lock = threading.Lock()
        # A message being reassembled from fragments: its opcode and parts so far.
        self._fragment_op = None
        self._fragments = []
        self._fragment_bytes = 0
        self._close_sent = False
        self.closed = None  # the ConnectionClosed once the connection is over
        self.last_received = time.monotonic()

    # ------------------------------------------------------------------ opening

    @classmethod
    def connect(cls, url, timeout=10.0, ssl_context=None, max_message_bytes=DEFAULT_MAX_MESSAGE_BYTES):
        """Connects and completes the handshake within `timeout` seconds. wss:// checks the
        server's certificate against the system's trusted ones (or `ssl_context`'s)."""
        secure, host, port, path = parse_url(url)
        deadline = time.monotonic() + timeout
        raw = socket.create_connection((host, port), timeout=timeout)
        try:
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock = raw
            if secure:
                context = ssl_context or ssl.create_default_context()
                sock = context.wrap_socket(raw, server_hostname=host)
            default_port = 443 if secure else 80
            host_header = host if port == default_port else "%s:%d" % (host, port)
            if ":" in host and not host.startswith("["):
                host_header = "[%s]" % host if port == default_port else "[%s]:%d" % (host, port)
            leftover = cls._handshake(sock, host_header, path, deadline)
        except BaseException:
            raw.close()
            raise
        sock.settimeout(None)
        return cls(sock, max_message_bytes, leftover)

    @staticmethod
    def _handshake(sock, host_header, path, deadline):
        key = base64.b64encode(os.urandom(16)).decode("ascii")
        request = (
            "GET %s HTTP/1.1\r\n"
            "Host: %s\r\n"
            "Upgrade: websocket\r\n"
            "Connection: Upgrade\r\n"
            "Sec-WebSocket-Key: %s\r\n"
            "Sec-WebSocket-Version: 13\r\n"
            "\r\n" % (path, host_header, key)
        )
        sock.sendall(request.encode("ascii"))
        head = bytearray()
        while b"\r\n\r\n" not in head:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise HandshakeError("the server did not answer the WebSocket handshake in time")
            if len(head) > MAX_HEAD_BYTES:
                raise HandshakeError("the server's handshake answer is longer than %d bytes" % MAX_HEAD_BYTES)
            sock.settimeout(remaining)
            try:
                chunk = sock.recv(4096)
            except socket.timeout as err:
                raise HandshakeError("the server did not answer the WebSocket handshake in time") from err
            if not chunk:
                raise HandshakeError("the server closed the connection during the handshake")
            head += chunk
        end = head.index(b"\r\n\r\n")
        leftover = bytes(head[end + 4:])
        lines = head[:end].decode("iso-8859-1").split("\r\n")
        status_parts = lines[0].split(" ", 2)
        if len(status_parts) < 2 or not status_parts[0].startswith("HTTP/1.") or not status_parts[1].isdigit():
            raise HandshakeError("the server's answer is not HTTP: %r" % lines[0][:200])
        status = int(status_parts[1])
        if status != 101:
            reason = status_parts[2] if len(status_parts) > 2 else ""
            raise HandshakeError("the server refused the WebSocket handshake: %d %s" % (status, reason), status)
        headers = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep:
                raise HandshakeError("unreadable header in the server's answer: %r" % line[:200])
            name = name.strip().lower()
            headers[name] = (headers[name] + ", " if name in headers else "") + value.strip()
        if "websocket" not in _header_tokens(headers.get("upgrade", "")):
            raise HandshakeError("the server's answer does not upgrade to websocket")
        if "upgrade" not in _header_tokens(headers.get("connection", "")):
            raise HandshakeError("the server's answer lacks Connection: Upgrade")
        if headers.get("sec-websocket-accept") != accept_key(key):
            raise HandshakeError("the server's Sec-WebSocket-Accept does not match the key sent")
        if headers.get("sec-websocket-extensions") or headers.get("sec-websocket-protocol"):
            raise HandshakeError("the server chose an extension or subprotocol that was not offered")
        return leftover

    # ------------------------------------------------------------------ sending

    def _send_frame(self, opcode, payload):
        frame = encode_frame(opcode, payload)
        with self._send_lock:
            if self._close_sent and opcode != OP_CLOSE:
                raise self.closed or ConnectionClosed(CLOSE_NORMAL, "closed")
            try:
                self.sock.sendall(frame)
            except OSError as err:
                raise self._lost("sending failed: %s" % err) from err

    def send_text(self, text):
        self._send_frame(OP_TEXT, text.encode("utf-8"))

    def send_binary(self, data):
        self._send_frame(OP_BINARY, bytes(data))

    def ping(self, payload=b""):
        if len(payload) > 125:
            raise ValueError("a ping carries at most 125 bytes")
        self._send_frame(OP_PING, payload)

    def close(self, code=CLOSE_NORMAL, reason=""):
        """Sends a close frame (once) and closes the socket. The peer's answer is not
        waited for: the dial-out never needs the last word."""
        payload = struct.pack("!H", code) + reason.encode("utf-8")[:123]
        with self._send_lock:
            already = self._close_sent
            self._close_sent = True
        if not already:
            try:
                with self._send_lock:
                    self.sock.sendall(encode_frame(OP_CLOSE, payload))
            except OSError:
                pass
        if self.closed is None:
            self.closed = ConnectionClosed(code, reason)
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()

    # ------------------------------------------------------------------ receiving

    def recv(self, timeout=None):
        """The next message: str for text, bytes for binary. Pings are answered and pongs
        noted on the way. Raises TimeoutError when nothing whole arrived within `timeout`
        seconds (the connection stays usable: a frame cut by the timeout is kept), and
        ConnectionClosed when the connection ends."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self.closed is not None:
                raise self.closed
            frame = self._take_frame()
            if frame is None:
                self._fill(deadline)
                continue
            message = self._handle(*frame)
            if message is not None:
                return message

    def _fill(self, deadline):
        if deadline is None:
            self.sock.settimeout(None)
        else:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("no message within the time given")
            self.sock.settimeout(remaining)
        try:
            chunk = self.sock.recv(READ_CHUNK)
        except socket.timeout as err:
            raise TimeoutError("no message within the time given") from err
        except OSError as err:
            raise self._lost("reading failed: %s" % err) from err
        if not chunk:
            raise self._lost("the server went away without closing")
        self._buffer += chunk
        self.last_received = time.monotonic()

    def _take_frame(self):
        """(fin, opcode, payload) of the first whole frame in the buffer, consumed; None when
        it is not all here yet. Checks what a server may send before reading a payload."""
        buffer = self._buffer
        if len(buffer) < 2:
            return None
        first, second = buffer[0], buffer[1]
        fin, rsv, opcode = bool(first & 0x80), first & 0x70, first & 0x0F
        masked, length = bool(second & 0x80), second & 0x7F
        if rsv:
            self._fail(CLOSE_PROTOCOL_ERROR, "a frame with reserved bits set (no extension was agreed)")
        if masked:
            self._fail(CLOSE_PROTOCOL_ERROR, "the server sent a masked frame")
        if opcode not in DATA_OPS + CONTROL_OPS + (OP_CONTINUATION,):
            self._fail(CLOSE_PROTOCOL_ERROR, "unknown opcode %#x" % opcode)
        offset = 2
        if length == 126:
            if len(buffer) < 4:
                return None
            length = struct.unpack_from("!H", buffer, 2)[0]
            offset = 4
        elif length == 127:
            if len(buffer) < 10:
                return None
            length = struct.unpack_from("!Q", buffer, 2)[0]
            offset = 10
            if length >> 63:
                self._fail(CLOSE_PROTOCOL_ERROR, "a frame length with its top bit set")
        if opcode in CONTROL_OPS:
            if length > 125:
                self._fail(CLOSE_PROTOCOL_ERROR, "a control frame longer than 125 bytes")
            if not fin:
                self._fail(CLOSE_PROTOCOL_ERROR, "a fragmented control frame")
        elif self._fragment_bytes + length > self.max_message_bytes:
            self._fail(CLOSE_TOO_BIG, "a message longer than %d bytes" % self.max_message_bytes)
        if len(buffer) < offset + length:
            return None
        payload = bytes(buffer[offset:offset + length])
        del buffer[:offset + length]
        return fin, opcode, payload

    def _handle(self, fin, opcode, payload):
        if opcode == OP_PING:
            self._send_frame(OP_PONG, payload)
            return None
        if opcode == OP_PONG:
            return None
        if opcode == OP_CLOSE:
            self._on_close(payload)
        if opcode == OP_CONTINUATION:
            if self._fragment_op is None:
                self._fail(CLOSE_PROTOCOL_ERROR, "a continuation frame with no message to continue")
        elif self._fragment_op is not None:
            self._fail(CLOSE_PROTOCOL_ERROR, "a new message began before the fragmented one ended")
        else:
            self._fragment_op = opcode
        self._fragments.append(payload)
        self._fragment_bytes += len(payload)
        if not fin:
            return None
        opcode, data = self._fragment_op, b"".join(self._fragments)
        self._fragment_op, self._fragments, self._fragment_bytes = None, [], 0
        if opcode == OP_BINARY:
            return data
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            self._fail(CLOSE_INVALID_DATA, "a text message that is not UTF-8")

    def _on_close(self, payload):
        if len(payload) == 1:
            self._fail(CLOSE_PROTOCOL_ERROR, "a close frame with a one-byte body")
        code, reason = 1005, ""
        if len(payload) >= 2:
            code = struct.unpack_from("!H", payload)[0]
            if code not in _VALID_CLOSE_CODES:
                self._fail(CLOSE_PROTOCOL_ERROR, "a close frame with code %d" % code)
            try:
                reason = payload[2:].decode("utf-8")
            except UnicodeDecodeError:
                self._fail(CLOSE_INVALID_DATA, "a close reason that is not UTF-8")
        closed = ConnectionClosed(code, reason)
        # Answered with the same code, as RFC 6455 5.5.1 asks, unless we closed first.
        self.close(code if code != 1005 else CLOSE_NORMAL)
        self.closed = closed
        raise closed

    def _fail(self, code, why):
        """A protocol error: close with `code` and raise."""
        self.close(code, why)
        self.closed = ConnectionClosed(code, why)
        raise self.closed

    def _lost(self, why):
        closed = ConnectionClosed(1006, why)
        if self.closed is None:
            self.closed = closed
        try:
            self.sock.close()
        except OSError:
            pass
        return closed
