# SPDX-License-Identifier: GPL-3.0-or-later
# API keys a desktop user gives once. The key is typed into a dialog of the preferences and
# handed straight to `viga key set VARIABLE` on its standard input, on a background thread:
# viga keeps it in the operating system's keyring, or else in a file only the user can read.
# Blender never stores it: not in the preferences, not in the .blend, not in the operator's
# remembered settings (SKIP_SAVE), and the dialog's field is emptied at once. A run finds it
# again itself: viga reads the variable from its environment, else from its key store.

import bpy
from bpy.props import StringProperty

from . import background

# variable -> (kept: True/False, what viga said), as viga key status last answered.
_status = {}
_asked = set()


def cached_status(variable):
    """True when viga keeps a key for `variable`, False when it does not, None while unknown."""
    known = _status.get(variable)
    return None if known is None else known[0]


def status_text(variable):
    known = _status.get(variable)
    if known is None:
        return "Key for %s: asking viga..." % variable
    return known[1]


def _viga_and_environment(prefs):
    from . import runner  # runner imports this module's users; imported when needed
    return runner.find_viga(prefs), runner.child_environment(prefs)


def refresh_status(prefs, variable):
    """Asks viga (on a thread) whether it keeps a key for `variable`; one question at a time."""
    if variable in _asked:
        return
    try:
        viga, environment = _viga_and_environment(prefs)
    except Exception as exc:  # noqa: BLE001 - no viga yet: the panel says so elsewhere
        _status[variable] = (None, "Key for %s: unknown (%s)" % (variable, exc))
        return
    _asked.add(variable)

    def done(result, error):
        _asked.discard(variable)
        if error is not None:
            _status[variable] = (None, "Key for %s: viga could not say (%s)" % (variable, error))
            return
        code, stdout, stderr = result
        line = (stdout.strip().splitlines() or stderr.strip().splitlines() or [""])[-1]
        if code == 0:
            _status[variable] = (True, line)
        elif code == 1:
            _status[variable] = (False, line)
        else:
            _status[variable] = (None, "Key for %s: %s" % (variable, line))
        _tag_preferences_redraw()

    background.submit(lambda: background.run_command([viga, "key", "status", variable], environment), done)


def _tag_preferences_redraw():
    if bpy.app.background:
        return
    for window in bpy.context.window_manager.windows:
        for area in window.screen.areas:
            area.tag_redraw()


def _key_command(prefs, variable, verb, key, report):
    """Runs `viga key VERB VARIABLE` on a thread, the key on its stdin; report(level, text)
    says how it went, on the main thread."""
    viga, environment = _viga_and_environment(prefs)

    def done(result, error):
        if error is not None:
            report("ERROR", "viga key %s failed: %s" % (verb, error))
        else:
            code, stdout, stderr = result
            said = (stdout.strip() or stderr.strip() or "viga said nothing").splitlines()[-1]
            report("INFO" if code == 0 else "ERROR", said)
        _status.pop(variable, None)
        refresh_status(prefs, variable)

    background.submit(lambda: background.run_command([viga, "key", verb, variable], environment, key), done)


def _log_report(level, text):
    from . import properties
    properties.append_log(bpy.context.window_manager.viga_run, text, "INFO" if level == "INFO" else "ERROR")


def _start_key_command(operator, prefs, verb, key):
    """Starts `viga key VERB` for the operator's variable; False (and an error report) when
    viga cannot be found."""
    try:
        _key_command(prefs, operator.variable, verb, key, _log_report)
    except Exception as exc:  # noqa: BLE001 - no viga: say what to do
        operator.report({"ERROR"}, str(exc))
        return False
    return True


class VIGA_OT_set_key(bpy.types.Operator):
    bl_idname = "viga.set_key"
    bl_label = "Set key"
    bl_description = ("Give viga the API key once: it is kept in your keyring (or a file only you can read), "
                      "never in Blender, and runs read it from there")
    bl_options = {"INTERNAL"}

    variable: StringProperty(name="Variable", options={"HIDDEN", "SKIP_SAVE"})
    key: StringProperty(name="Key", subtype="PASSWORD", options={"SKIP_SAVE"},
                        description="The API key; it goes to viga's key store and is not kept in Blender")

    def invoke(self, context, _event):
        return context.window_manager.invoke_props_dialog(self, width=420)

    def draw(self, _context):
        self.layout.label(text="Key for %s" % self.variable)
        self.layout.prop(self, "key", text="")

    def execute(self, context):
        from . import preferences  # preferences imports this module
        key, self.key = self.key, ""
        prefs = preferences.get(context)
        if prefs is None:
            self.report({"ERROR"}, "viga's preferences are missing: enable the add-on in Preferences > Add-ons")
            return {"CANCELLED"}
        if not self.variable or not key.strip():
            self.report({"ERROR"}, "Paste the key into the field first")
            return {"CANCELLED"}
        if not _start_key_command(self, prefs, "set", key):
            return {"CANCELLED"}
        self.report({"INFO"}, "Handing the key for %s to viga's key store" % self.variable)
        return {"FINISHED"}


class VIGA_OT_forget_key(bpy.types.Operator):
    bl_idname = "viga.forget_key"
    bl_label = "Forget key"
    bl_description = "Remove the key viga keeps for this variable (the keyring's or the file's)"
    bl_options = {"INTERNAL"}

    variable: StringProperty(name="Variable", options={"HIDDEN", "SKIP_SAVE"})

    def execute(self, context):
        from . import preferences
        prefs = preferences.get(context)
        if prefs is None or not self.variable:
            self.report({"ERROR"}, "Which key? Name the key variable in Preferences > Add-ons > viga")
            return {"CANCELLED"}
        return {"FINISHED"} if _start_key_command(self, prefs, "delete", None) else {"CANCELLED"}


CLASSES = (VIGA_OT_set_key, VIGA_OT_forget_key)


def register():
    for cls in CLASSES:
        bpy.utils.register_class(cls)


def unregister():
    for cls in reversed(CLASSES):
        bpy.utils.unregister_class(cls)
    _status.clear()
    _asked.clear()
