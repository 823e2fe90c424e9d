"""The bridge in the viga_blender extension: its register() calls start_addon_server(),
its unregister() stop_addon_server(). The connection file `viga ... --attach` reads is
written readable by this user only."""

import base64
import contextlib
import json
import os
import socket
import stat

import bpy

from . import served
from .common import PROTOCOL_VERSION
from .undo import ensure_undo_base
from .serving import start_queue_server

CONNECTION_DIR_ENV = "VIGA_CONNECTION_DIR"
# How often the main thread looks for queued requests: an idle look costs microseconds, and
# every request waits for the next one.
POLL_INTERVAL_S = 0.01


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
    return served.addon.get("connection")


def start_addon_server():
    """Serves on a random loopback port with a fresh token, and writes port, token, pid and
    protocol version to blender-<pid>.json in connection_dir() for `viga ... --attach`.
    Returns the poll function to register as a persistent bpy.app.timers callback."""
    if "server" in served.addon:
        return served.addon["poll"]
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
    served.user_scene = True
    ensure_undo_base()
    bpy.app.handlers.load_post.append(ensure_undo_base_after_load)

    def poll():
        work.drain()
        return POLL_INTERVAL_S

    served.addon.update(server=server, work=work, poll=poll, connection=path)
    return poll


@bpy.app.handlers.persistent
def ensure_undo_base_after_load(_path):
    ensure_undo_base()


def stop_addon_server():
    """Stops serving and removes the connection file; safe to call twice."""
    with contextlib.suppress(ValueError):
        bpy.app.handlers.load_post.remove(ensure_undo_base_after_load)
    server = served.addon.pop("server", None)
    if server is not None:
        with contextlib.suppress(OSError):
            server.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            server.close()
    work = served.addon.pop("work", None)
    if work is not None:
        work.close()
    path = served.addon.pop("connection", None)
    if path is not None:
        with contextlib.suppress(OSError):
            os.remove(path)
    served.addon.pop("poll", None)
    served.user_scene = False
