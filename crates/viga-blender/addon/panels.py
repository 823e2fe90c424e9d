# The viga tab of the 3D viewport's sidebar. draw() only reads properties and the runner's and
# history's in-memory caches: it never touches the disk, never blocks and has nothing to raise.

import os
import textwrap

import bpy

from . import history, preferences, runner

WRAP_CHARS = 42
THUMBNAIL_SCALE = 5.0

STATE_ICONS = {
    "RUNNING": "TIME",
    "CANCELLING": "CANCEL",
    "FINISHED": "CHECKMARK",
    "FAILED": "ERROR",
    "CANCELLED": "CANCEL",
}
LOG_ICONS = {"INFO": "INFO", "OUTPUT": "CONSOLE", "WARNING": "ERROR", "ERROR": "CANCEL"}
STOP_LABELS = {
    "accepted": "accepted",
    "max_iterations": "iteration budget spent",
    "cancelled": "cancelled",
    "failed": "failed",
    "": "unfinished",
}
# An agent run stops as "accepted" when the model answers, and spends steps, not iterations.
AGENT_STOP_LABELS = dict(STOP_LABELS, accepted="answered", max_iterations="step budget spent")
# Resuming continues at the next iteration: pointless once accepted, and a spent budget stays spent.
RESUMABLE_STOPS = {"", "cancelled", "failed"}
KIND_TITLES = {"SCENE": "Scene run", "GN": "Geometry Nodes run", "AGENT": "Add-on agent run"}
HISTORY_ICONS = {"scene": "SCENE_DATA", "gn": "NODETREE", "agent": "TOOL_SETTINGS"}


def _wrapped(layout, text, icon="NONE"):
    """A label broken into lines the narrow sidebar can show."""
    column = layout.column(align=True)
    for number, line in enumerate(textwrap.wrap(text, WRAP_CHARS) or [""]):
        # Continuation lines get a blank icon so they line up with the first line's text.
        line_icon = icon if number == 0 or icon == "NONE" else "BLANK1"
        column.label(text=line, icon=line_icon)
    return column


def _running(status):
    return status.state in ("RUNNING", "CANCELLING")


class VIGA_UL_log(bpy.types.UIList):
    """The run log, one line per row."""

    def draw_item(self, _context, layout, _data, item, _icon, _active_data, _active_propname, _index):
        layout.label(text=item.text, icon=LOG_ICONS.get(item.level, "INFO"))


class VIGA_UL_addon_tools(bpy.types.UIList):
    """Tools found in installed add-ons' addon_ai.json."""

    def draw_item(self, _context, layout, _data, item, _icon, _active_data, _active_propname, _index):
        row = layout.row()
        row.label(text=item.name, icon="CHECKMARK" if item.available else "ERROR")
        row.label(text=item.addon_name)


class VigaSidebarPanel:
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "viga"


class VIGA_PT_main(VigaSidebarPanel, bpy.types.Panel):
    bl_idname = "VIGA_PT_main"
    bl_label = "viga"

    def draw(self, context):
        layout = self.layout
        settings = context.scene.viga
        status = context.window_manager.viga_run
        layout.row().prop(settings, "mode", expand=True)
        if settings.mode == "ADDON_TOOLS":
            self._draw_addon_tools(layout, context, settings)
        elif settings.mode == "SCENE":
            self._draw_scene_inputs(layout, settings)
        else:
            self._draw_gn_inputs(layout, context, settings)
        self._draw_setup(layout, context)
        row = layout.row()
        row.scale_y = 1.4
        if _running(status):
            cancelling = status.state == "CANCELLING"
            row.enabled = not cancelling
            row.operator("viga.cancel_run", text="Cancelling..." if cancelling else "Cancel", icon="CANCEL")
        else:
            row.operator("viga.start_run", text="Start", icon="PLAY")

    @staticmethod
    def _draw_scene_inputs(layout, settings):
        column = layout.column()
        column.prop(settings, "task")
        column.row().prop(settings, "target_source", expand=True)
        if settings.target_source == "FILE":
            column.prop(settings, "target_file", text="")
        else:
            column.template_ID(settings, "target_image", new="image.new", open="image.open")

    @staticmethod
    def _draw_gn_inputs(layout, context, settings):
        column = layout.column()
        column.prop(settings, "request")
        active = context.view_layer.objects.active
        if active is None:
            column.label(text="Select the object to work on", icon="ERROR")
        else:
            column.label(text="Object: " + active.name, icon="OBJECT_DATA")
        column.prop(context.window_manager, "viga_gn_in_this_blender")
        if context.window_manager.viga_gn_in_this_blender:
            _wrapped(column, "Trusted: the model's Python runs in this Blender, as you, with your files, "
                     "network and keys; you confirm it when you start", icon="ERROR")
        else:
            _wrapped(column, "Runs on a copy in viga's contained worker; the node groups and modifiers "
                     "come back as one undo step", icon="LOCKED")
        prefs = preferences.get(context)
        if prefs is not None and prefs.python_mode == "TRUSTED":
            _wrapped(column, "Python steps skip safe mode's filter; you confirm it when you start", icon="ERROR")

    @staticmethod
    def _draw_setup(layout, context):
        prefs = preferences.get(context)
        if prefs is None:
            _wrapped(layout, "Enable viga in Preferences > Add-ons to set its model", icon="ERROR")
            return
        for problem in preferences.setup_problems(prefs):
            _wrapped(layout, problem, icon="ERROR")

    @staticmethod
    def _draw_addon_tools(layout, context, settings):
        wm = context.window_manager
        column = layout.column()
        column.prop(settings, "command")
        column.prop(settings, "addons_folder")
        header = layout.row()
        header.label(text="Tools from add-ons (%d)" % len(wm.viga_tools))
        header.operator("viga.refresh_addon_tools", text="", icon="FILE_REFRESH")
        if len(wm.viga_tools):
            layout.template_list(
                "VIGA_UL_addon_tools", "", wm, "viga_tools", wm, "viga_tools_index",
                item_dyntip_propname="description", rows=4,
            )
        else:
            layout.label(text="None found yet: press refresh")
        _wrapped(layout, "The agent works on this scene: each command it runs is one undo step.", icon="INFO")


class VIGA_PT_status(VigaSidebarPanel, bpy.types.Panel):
    bl_idname = "VIGA_PT_status"
    bl_parent_id = "VIGA_PT_main"
    bl_label = "Run"

    @classmethod
    def poll(cls, context):
        return context.window_manager.viga_run.state != "IDLE"

    def draw(self, context):
        layout = self.layout
        status = context.window_manager.viga_run
        kind = KIND_TITLES.get(status.kind, "Run")
        layout.label(text="%s: %s" % (kind, status.state.lower()), icon=STATE_ICONS.get(status.state, "INFO"))
        self._draw_progress(layout, status)
        self._draw_thumbnails(layout)
        if not _running(status):
            self._draw_outcome(layout, status)

    @staticmethod
    def _draw_progress(layout, status):
        column = layout.column(align=True)
        if status.max_iterations:
            column.label(text="Iteration %d of %d" % (status.iteration, status.max_iterations))
        elif status.iteration:
            counted = {"GN": "Round %d", "AGENT": "Step %d"}.get(status.kind, "Iteration %d")
            column.label(text=counted % status.iteration)
        if status.step:
            # An agent's step is numbered above; its text says what the step is doing.
            agent = status.kind == "AGENT"
            column.label(text=status.step[:1].upper() + status.step[1:] if agent else "Step: " + status.step)
        column.label(text="Tokens: %d in, %d out" % (status.tokens_in, status.tokens_out))
        if status.verdict:
            _wrapped(layout, "Verdict: " + status.verdict, icon="HIDE_OFF")

    @staticmethod
    def _draw_thumbnails(layout):
        shots = runner.thumbnails()
        if not shots:
            return
        grid = layout.grid_flow(columns=2, even_columns=True, align=True)
        for shot in shots:
            cell = grid.column(align=True)
            if shot.icon_id:  # Blender has no icons in background mode
                cell.template_icon(icon_value=shot.icon_id, scale=THUMBNAIL_SCALE)
            cell.label(text=shot.view)

    @staticmethod
    def _draw_outcome(layout, status):
        if status.message:
            message = _wrapped(layout, status.message, icon="ERROR" if status.state == "FAILED" else "INFO")
            message.alert = status.state == "FAILED"
        row = layout.row(align=True)
        if status.state == "FINISHED" and status.kind == "SCENE" and status.final_program and not status.applied:
            row.operator("viga.apply_result", text="Apply", icon="CHECKMARK")
            row.operator("viga.discard_result", text="Discard", icon="X")
        else:
            if status.applied:
                layout.label(text="Applied: Edit > Undo takes it back", icon="CHECKMARK")
            if status.kind == "AGENT" and status.iteration:
                _wrapped(layout, "Each command the agent ran is one undo step (Edit > Undo)", icon="LOOP_BACK")
            row.operator("viga.discard_result", text="Dismiss", icon="X")
        if status.report_path and status.run_folder:
            layout.operator("viga.open_report", icon="URL").path = status.run_folder


class VIGA_PT_history(VigaSidebarPanel, bpy.types.Panel):
    bl_idname = "VIGA_PT_history"
    bl_parent_id = "VIGA_PT_main"
    bl_label = "History"
    bl_options = {"DEFAULT_CLOSED"}

    def draw(self, _context):
        layout = self.layout
        row = layout.row()
        runs = history.cached_runs()
        row.label(text="%d recent runs" % len(runs))
        row.operator("viga.refresh_history", text="", icon="FILE_REFRESH")
        if not runs:
            _wrapped(layout, "No runs found in %s" % (history.cached_root() or "the runs folder (press refresh)"))
        for run in runs:
            self._draw_run(layout, run)

    @staticmethod
    def _draw_run(layout, run):
        box = layout.box()
        title = run.task or os.path.basename(run.path)
        box.label(text=title, icon=HISTORY_ICONS.get(run.kind, "SCENE_DATA"))
        row = box.row(align=True)
        stop_labels = AGENT_STOP_LABELS if run.kind == "agent" else STOP_LABELS
        row.label(text=stop_labels.get(run.stop, run.stop))
        row.operator("viga.open_report", text="", icon="URL").path = run.path
        if run.kind == "scene" and run.stop in RESUMABLE_STOPS:
            row.operator("viga.resume_run", text="", icon="PLAY").path = run.path


class VIGA_PT_log(VigaSidebarPanel, bpy.types.Panel):
    bl_idname = "VIGA_PT_log"
    bl_parent_id = "VIGA_PT_main"
    bl_label = "Log"
    bl_options = {"DEFAULT_CLOSED"}

    def draw(self, context):
        layout = self.layout
        status = context.window_manager.viga_run
        layout.template_list("VIGA_UL_log", "", status, "log", status, "log_index", rows=8)
        layout.operator("viga.clear_log", icon="TRASH")


CLASSES = (VIGA_UL_log, VIGA_UL_addon_tools, VIGA_PT_main, VIGA_PT_status, VIGA_PT_history, VIGA_PT_log)


register, unregister = bpy.utils.register_classes_factory(CLASSES)
