# SPDX-License-Identifier: GPL-3.0-or-later
"""viga inside Blender.

The extension does two things. It hosts viga's bridge (`viga_bridge`, the same file viga's
headless workers run), so `viga run|gn|mcp --attach` can drive this Blender: a network thread
queues requests and one persistent timer answers them on the main thread. And it gives the
person at the keyboard a sidebar panel (View3D > Sidebar > viga) that starts viga runs as a
child process, streams their events into a chat per mode (the .blend's conversation, read
from its run folders), continues a conversation with each new message, and applies a chosen
result to the open scene as one undo step. Nothing here calls a model or blocks the main
thread.
"""

import bpy

from . import chat, dialout, history, keys, operators, panels, preferences, properties, runner, viga_bridge

# Registered in this order, unregistered in reverse.
_UI_MODULES = (preferences, properties, history, keys, chat, operators, dialout, panels)
_bridge_poll = []


def register():
    for module in _UI_MODULES:
        module.register()
    try:
        poll = viga_bridge.start_addon_server()
    except OSError as err:
        for module in reversed(_UI_MODULES):
            module.unregister()
        raise RuntimeError("viga cannot serve this Blender: %s" % err) from err
    bpy.app.timers.register(poll, persistent=True)
    _bridge_poll.append(poll)
    runner.register()


def unregister():
    runner.unregister()
    while _bridge_poll:
        poll = _bridge_poll.pop()
        if bpy.app.timers.is_registered(poll):
            bpy.app.timers.unregister(poll)
    viga_bridge.stop_addon_server()
    for module in reversed(_UI_MODULES):
        module.unregister()
