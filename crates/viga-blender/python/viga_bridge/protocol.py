"""The wire: every frame is a 4-byte big-endian length and that many bytes of UTF-8 JSON.
Replies are strict JSON whatever a program printed (NaN and Infinity become null, lone
surrogates U+FFFD), and a hello must arrive whole within HANDSHAKE_DEADLINE_S."""

import json
import math
import re
import socket
import struct
import time

from .common import FrameError

MAX_REQUEST_BYTES = 16 * 1024 * 1024
# A hello is a few hundred bytes; until a client has shown the token it may send no more.
MAX_HELLO_BYTES = 4096


# The whole hello, however the client spreads its bytes: one byte every few seconds must not
# hold a connection for longer than this.
HANDSHAKE_DEADLINE_S = 10.0


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
