"""viga bridge: runs inside Blender and serves viga's framed protocol on 127.0.0.1.

Started three ways, all served by the same dispatch (commands.py):
  python run_viga_bridge.py -- --mode serve            (bpy module; main-thread loop)
  blender -b --factory-startup -P run_viga_bridge.py -- --mode serve
  inside the viga_blender extension (an interactive Blender): a network thread fills a
  queue that one persistent bpy.app.timers poller drains on the main thread (`--mode queue`
  runs the same queue path headless, with the main thread standing in for the timer). The
  extension ships this very package (`viga addon build`).

Wire (protocol.py): every frame is a 4-byte big-endian length followed by that many bytes of
UTF-8 JSON. The first frame from the client must be {"id", "command": "hello", "token",
"protocol_version"}; the token comes from the VIGA_BRIDGE_TOKEN environment variable.
Replies are {"id", "ok": true, "result"} or {"id", "ok": false, "error": {"kind", "message",
...}}. Exceptions raised by a user program are not bridge errors: `execute` returns them in
its result, with traceback and line number (execution.py).

Before a client has shown the token it is a stranger (serving.py): its whole hello must
arrive within HANDSHAKE_DEADLINE_S and fit MAX_HELLO_BYTES, it says hello on a thread of its
own, and nothing it sends can raise past that thread. One authenticated client is served at a
time; another one is answered "busy" and closed.

A person's Blender reached through another project's MCP server runs the same dispatch, a
request at a time, through that server's code tool (over_mcp.py).

What the extension, the headless add-on host, the launcher and the MCP path call is exported
here.
"""

from .addon_server import addon_connection_path, private_dir, start_addon_server, stop_addon_server, write_private_json
from . import over_mcp
from .addons import cmd_list_addons
from .commands import dispatch
from .common import BridgeError
from .protocol import error_reply
from .serving import exit_with_parent, main
from .undo import apply_program, discard_changes_since_last_step, undo_name, undo_one_step

__all__ = [
    "BridgeError",
    "addon_connection_path",
    "apply_program",
    "cmd_list_addons",
    "discard_changes_since_last_step",
    "dispatch",
    "error_reply",
    "exit_with_parent",
    "main",
    "over_mcp",
    "private_dir",
    "start_addon_server",
    "stop_addon_server",
    "undo_name",
    "undo_one_step",
    "write_private_json",
]
