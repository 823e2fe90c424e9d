# mcp-for-blender's own Blender add-on (blender_mcp/bundled/addon.py of the installed
# mcp-for-blender wheel) running in a headless Blender (the bpy module), for tests and the
# side-by-side benchmark: viga drives it as people's MCP clients do, through that project's
# MCP server.
#
#   python mcp_for_blender_host.py -- [--interval SECONDS] [--blend FILE]
#
# The add-on registers itself with its own register(). Two things stand in for the
# interactive Blender it expects, and nothing else of it is changed:
#   - its timers run in this loop (bpy.app.timers never fire in background mode; viga's
#     add-on host's TimerPump), the command queue drained at the interval the add-on asks
#     for, or at --interval;
#   - its server is started here, as its start() does, because start() refuses background
#     mode; the accept thread, the client threads and the main-thread drain are its own.
# Telemetry: consent lives in the add-on's preferences, off by default, and is never given.
#
# Prints `MCP_FOR_BLENDER_READY {"port": ..., "pid": ...}` once serving, then runs until
# SIGTERM or SIGINT, or until the process that started it (VIGA_PARENT_PID) is gone.

import json
import os
import signal
import socket
import sys
import threading
import time

import bpy

# viga's own headless add-on host, written beside this script: its TimerPump stands in for
# Blender's event loop here too.
from addon_host import TimerPump

READY_MARKER = "MCP_FOR_BLENDER_READY "


def parse_args(argv):
    args = argv[argv.index("--") + 1:] if "--" in argv else []
    options = {"interval": None, "blend": None}
    i = 0
    while i < len(args):
        name = args[i][2:] if args[i].startswith("--") else None
        if name in options and i + 1 < len(args):
            options[name] = args[i + 1]
            i += 2
        else:
            raise SystemExit("mcp-for-blender host: unknown argument %r (expected --interval SECONDS, --blend FILE)" % args[i])
    return options


def start_server(addon, pump, interval):
    """What BlenderMCPServer.start() does, but for its refusal of background mode."""
    server = addon.BlenderMCPServer(host="localhost", port=0)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(5)
    server.socket = listener
    server.port = listener.getsockname()[1]
    server.running = True
    server.server_thread = threading.Thread(target=server._server_loop, daemon=True)
    server.server_thread.start()
    addon._register_edit_capture_handlers()
    bpy.app.timers.register(server._drain_command_queue, persistent=True)
    if interval is not None:
        pump.fixed[server._drain_command_queue] = float(interval)
    bpy.types.blendermcp_server = server
    return server


def exit_with_parent():
    parent = os.environ.get("VIGA_PARENT_PID", "")
    if not parent.isdigit():
        return

    def watch():
        while True:
            try:
                os.kill(int(parent), 0)
            except ProcessLookupError:
                os._exit(0)
            except PermissionError:
                pass
            time.sleep(0.5)

    threading.Thread(target=watch, daemon=True).start()


def main():
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    options = parse_args(sys.argv)
    exit_with_parent()
    if options["blend"]:
        bpy.ops.wm.open_mainfile(filepath=os.path.abspath(options["blend"]))
    pump = TimerPump()
    pump.install()
    from blender_mcp.bundled import addon

    addon.register()
    # Its auto-start (which refuses background mode, and retries every second) and its
    # update check (the network) are its interactive start-up; the server starts here.
    pump.due.clear()
    server = start_server(addon, pump, options["interval"])
    # On a line of its own: the add-on's server thread may be printing at the same moment.
    sys.stdout.write("\n" + READY_MARKER + json.dumps({"port": server.port, "pid": os.getpid()}) + "\n")
    sys.stdout.flush()
    try:
        pump.run(stop)
    finally:
        addon.unregister()


if __name__ == "__main__":
    main()
