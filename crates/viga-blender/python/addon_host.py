# viga's headless add-on host: Blender (the bpy module, or `blender -b`) with the viga
# extension installed FROM ITS ZIP through Blender's own extension machinery and enabled,
# and the add-on's timers run by this loop, since bpy.app.timers never fire in background
# mode. Tests and CI attach to it exactly as to a person's Blender.
#
#   python addon_host.py -- --zip viga_blender-X.zip [--blend scene.blend] [--stats out.json]
#       [--addons DIR] [--server URL --username NAME --server-files DIR]
#
# --addons loads the add-on packages of DIR as if the person had enabled them. --server
# connects the add-on to a viga server as the person would (Preferences > viga server >
# Connect), with the token from VIGA_SERVER_TOKEN, which is removed from the environment at
# once and kept where the add-on keeps tokens.
#
# Prints `VIGA_ADDON_HOST_READY {"connection": ..., "pid": ..., "module": ...}` once serving,
# then runs until SIGTERM or SIGINT: it disables the add-on (which removes the connection
# file) and, with --stats, writes how long each timer callback held the main thread.

import json
import os
import signal
import sys
import threading
import time
import traceback

import bpy

READY_MARKER = "VIGA_ADDON_HOST_READY "
EXTENSION_ID = "viga_blender"
REPOSITORY = "user_default"
IDLE_SLEEP_S = 0.002


class TimerPump:
    """Stands in for Blender's event loop: every function the add-on registers with
    bpy.app.timers is called here when due, and rescheduled by what it returns, as Blender
    does. Installed before the add-on is enabled, so the add-on's own registration path
    runs unchanged."""

    def __init__(self):
        self.due = {}
        self.callback_ms = []
        # Intervals that override what a function returns (a test host compares add-ons at
        # one cadence).
        self.fixed = {}

    def install(self):
        timers = bpy.app.timers
        timers.register = self.register
        timers.unregister = self.unregister
        timers.is_registered = self.is_registered

    def register(self, function, first_interval=0.0, persistent=False):
        self.due[function] = time.monotonic() + max(float(first_interval), 0.0)

    def unregister(self, function):
        if function not in self.due:
            raise ValueError("Error: function is not registered")
        del self.due[function]

    def is_registered(self, function):
        return function in self.due

    def tick(self):
        """Calls every due function once; returns when the next one is due."""
        now = time.monotonic()
        for function, due in list(self.due.items()):
            if due > now or function not in self.due:
                continue
            started = time.perf_counter()
            try:
                interval = function()
            except Exception:  # noqa: BLE001 - Blender prints a failing timer and drops it
                traceback.print_exc()
                interval = None
            self.callback_ms.append((time.perf_counter() - started) * 1000.0)
            if function not in self.due:
                continue  # it unregistered itself
            if interval is None:
                del self.due[function]
            else:
                interval = self.fixed.get(function, interval)
                self.due[function] = time.monotonic() + max(float(interval), 0.0)
        return min(self.due.values(), default=now + 0.05)

    def run(self, stop):
        while not stop.is_set():
            next_due = self.tick()
            time.sleep(min(max(next_due - time.monotonic(), 0.0), IDLE_SLEEP_S))


def parse_args(argv):
    args = argv[argv.index("--") + 1:] if "--" in argv else []
    options = {"zip": None, "blend": None, "stats": None, "addons": None, "server": None,
               "username": None, "server-files": None}
    i = 0
    while i < len(args):
        name = args[i][2:] if args[i].startswith("--") else None
        if name in options and i + 1 < len(args):
            options[name] = args[i + 1]
            i += 2
        else:
            raise SystemExit("viga addon host: unknown argument %r (expected --zip FILE, --blend FILE, --stats FILE, "
                             "--addons DIR, --server URL --username NAME --server-files DIR)" % args[i])
    if not options["zip"] or not os.path.isfile(options["zip"]):
        raise SystemExit("viga addon host: --zip must name the extension zip built by `viga addon build`")
    if options["server"] and not options["username"]:
        raise SystemExit("viga addon host: --server needs --username")
    return options


def install(zip_path):
    """Installs and enables the extension as Preferences > Install from Disk does."""
    result = bpy.ops.extensions.package_install_files(filepath=os.path.abspath(zip_path), repo=REPOSITORY, enable_on_install=True)
    module_name = "bl_ext.%s.%s" % (REPOSITORY, EXTENSION_ID)
    if "FINISHED" not in result or module_name not in bpy.context.preferences.addons:
        raise SystemExit("viga addon host: Blender did not install and enable %s from %s (%s)" % (module_name, zip_path, result))
    return module_name, sys.modules[module_name]


def main():
    # Heard from the start: a stop that comes while the add-on is being enabled (its
    # connection file already written) still disables it, so no stale file is left.
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    options = parse_args(sys.argv)
    if options["blend"]:
        bpy.ops.wm.open_mainfile(filepath=os.path.abspath(options["blend"]))
    pump = TimerPump()
    pump.install()
    module_name, module = install(options["zip"])
    # The host ends with the process that started it (VIGA_PARENT_PID), as workers do, so a
    # killed test run leaves no Blender behind.
    module.viga_bridge.exit_with_parent()
    if options["addons"]:
        listing = module.viga_bridge.cmd_list_addons({"folder": os.path.abspath(options["addons"])})
        if listing["problems"]:
            raise SystemExit("viga addon host: add-ons of %s did not load: %s" % (options["addons"], listing["problems"]))
    if options["server"]:
        token = os.environ.pop("VIGA_SERVER_TOKEN", "")
        if not token:
            raise SystemExit("viga addon host: --server needs the token in VIGA_SERVER_TOKEN")
        module.dialout.connect(options["server"], options["username"], token, options["server-files"])
    ready = {"connection": module.viga_bridge.addon_connection_path(), "pid": os.getpid(), "module": module_name}
    sys.stdout.write(READY_MARKER + json.dumps(ready) + "\n")
    sys.stdout.flush()
    try:
        pump.run(stop)
    finally:
        import addon_utils
        addon_utils.disable(module_name)
        if options["stats"]:
            with open(options["stats"], "w", encoding="utf-8") as handle:
                json.dump({"callback_ms": pump.callback_ms}, handle)


if __name__ == "__main__":
    main()
