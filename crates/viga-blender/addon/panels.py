# SPDX-License-Identifier: GPL-3.0-or-later
# The viga tab of the 3D viewport's sidebar: a chat per mode (the .blend's conversation, read
# from its run folders), the message box, what a run is doing, a review of a finished scene
# run before it is applied, and the history and log. draw() only reads properties and the
# runner's, chat's and history's in-memory caches: it never touches the disk, never blocks
# and has nothing to raise.

import os
import textwrap

import bpy

from . import chat, history, operators, preferences, properties, runner

WRAP_CHARS = 42
THUMBNAIL_SCALE = 5.0
DETAIL_LINES = 40  # lines of a chat line's detail shown below the list
STREAMING_LINES = 6  # last lines of the model's reply as it arrives
CHAT_ROWS = 10

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
MESSAGE_FIELDS = {"SCENE": "task", "GEOMETRY_NODES": "request", "ADDON_TOOLS": "command"}


def _wrapped(layout, text, icon="NONE", limit=None):
    """A label broken into lines the narrow sidebar can show (at most `limit` lines)."""
    column = layout.column(align=True)
    lines = []
    for paragraph in str(text).splitlines() or [""]:
        lines.extend(textwrap.wrap(paragraph, WRAP_CHARS) or [""])
    if limit is not None and len(lines) > limit:
        lines = lines[:limit] + ["... (%d more lines)" % (len(lines) - limit)]
    for number, line in enumerate(lines):
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


class VIGA_UL_chat(bpy.types.UIList):
    """The conversation, one line per row; a program shows only under an open iteration."""

    def draw_item(self, _context, layout, _data, item, _icon, _active_data, _active_propname, _index):
        row = layout.row(align=True)
        icon = chat.FAILED_ICON if item.failed else chat.KIND_ICONS.get(item.kind, "INFO")
        if item.kind == "ITERATION":
            row.prop(item, "expanded", text="", icon="TRIA_DOWN" if item.expanded else "TRIA_RIGHT", emboss=False)
            row.label(text=item.text, icon=icon)
            if item.ran and item.run_kind == "scene":
                apply = row.operator("viga.apply_result", text="", icon="CHECKMARK")
                apply.run_folder, apply.iteration = item.run_folder, item.iteration
        elif item.kind == "RENDER":
            render, target = chat.icon(item.image), chat.icon(item.target)
            if render:
                row.label(text="", icon_value=render)
            if target:
                row.label(text="", icon_value=target)
            row.label(text=item.text + (" beside the target" if item.target else ""), icon="NONE" if render else icon)
        elif item.kind == "REQUEST":
            row.label(text="%d. %s" % (item.turn, item.text), icon=icon)
        else:
            row.label(text=item.text, icon=icon)

    def filter_items(self, _context, data, propname):
        shown = chat.visible(getattr(data, propname))
        return [self.bitflag_filter_item if visible else 0 for visible in shown], []


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
        self._draw_chat(layout, context, settings, status)
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
            following = len(properties.conversation(settings, settings.mode)) > 0
            row.operator("viga.start_run", text="Send" if following else "Start", icon="PLAY")

    @staticmethod
    def _draw_chat(layout, context, settings, status):
        wm = context.window_manager
        turns = len(properties.conversation(settings, settings.mode))
        header = layout.row(align=True)
        if wm.viga_chat_mode not in ("", settings.mode) or (turns and not len(wm.viga_chat)):
            header.label(text="%d turns: press reload to read them" % turns, icon="FILE_REFRESH")
        elif chat.is_loading():
            header.label(text="Reading the conversation...", icon="TIME")
        else:
            header.label(text="Conversation: %d turns" % turns if turns else "A new conversation",
                         icon="OUTLINER_DATA_GP_LAYER")
        header.operator("viga.reload_chat", text="", icon="FILE_REFRESH")
        header.operator("viga.new_conversation", text="", icon="ADD")
        if len(wm.viga_chat) and wm.viga_chat_mode == settings.mode:
            layout.template_list("VIGA_UL_chat", "", wm, "viga_chat", wm, "viga_chat_index", rows=CHAT_ROWS)
            VIGA_PT_main._draw_detail(layout, wm)
        if _running(status) and status.streaming_text:
            box = layout.box()
            box.label(text="The model is writing (%s):" % status.streaming_role.replace("_", " "), icon="TEXT")
            lines = []
            for paragraph in status.streaming_text.splitlines():
                lines.extend(textwrap.wrap(paragraph, WRAP_CHARS) or [""])
            for line in lines[-STREAMING_LINES:]:
                box.label(text=line)

    @staticmethod
    def _draw_detail(layout, wm):
        if not 0 <= wm.viga_chat_index < len(wm.viga_chat):
            return
        entry = wm.viga_chat[wm.viga_chat_index]
        box = layout.box()
        if entry.kind == "RENDER":
            row = box.row()
            for path, label in ((entry.image, "render"), (entry.target, "target")):
                shown = chat.icon(path)
                if not path:
                    continue
                cell = row.column(align=True)
                if shown:
                    cell.template_icon(icon_value=shown, scale=THUMBNAIL_SCALE)
                cell.label(text=label)
        if entry.kind == "ITERATION" and entry.ran and entry.run_kind == "scene":
            row = box.row(align=True)
            show = row.operator("viga.show_program", icon="SCRIPT")
            show.run_folder, show.iteration = entry.run_folder, entry.iteration
            apply = row.operator("viga.apply_result", text="Apply this iteration", icon="CHECKMARK")
            apply.run_folder, apply.iteration = entry.run_folder, entry.iteration
        detail = entry.detail or entry.text
        if entry.kind == "CODE":
            column = box.column(align=True)
            lines = detail.splitlines()
            for line in lines[:DETAIL_LINES]:
                column.label(text=line.replace("\t", "    ") or " ")
            if len(lines) > DETAIL_LINES:
                column.label(text="... (%d more lines)" % (len(lines) - DETAIL_LINES))
        else:
            _wrapped(box, detail, limit=DETAIL_LINES)

    @staticmethod
    def _draw_scene_inputs(layout, settings):
        column = layout.column()
        column.prop(settings, "task", text="Message")
        column.row().prop(settings, "target_source", expand=True)
        if settings.target_source == "FILE":
            column.prop(settings, "target_file", text="")
        elif settings.target_source == "FOLDER":
            column.prop(settings, "target_folder", text="")
        else:
            column.template_ID(settings, "target_image", new="image.new", open="image.open")
        column.prop(settings, "target_camera")
        column.prop(settings, "frames")
        for index, view in enumerate(settings.target_views):
            row = column.row(align=True)
            row.prop(view, "camera", text="")
            row.prop(view, "file", text="")
            row.operator("viga.remove_target_view", text="", icon="X").index = index
        column.operator("viga.add_target_view", icon="ADD")

    @staticmethod
    def _draw_gn_inputs(layout, context, settings):
        column = layout.column()
        column.prop(settings, "request", text="Message")
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
        column.prop(settings, "command", text="Message")
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


class VIGA_PT_presets(VigaSidebarPanel, bpy.types.Panel):
    bl_idname = "VIGA_PT_presets"
    bl_parent_id = "VIGA_PT_main"
    bl_label = "Geometry Nodes presets"
    bl_options = {"DEFAULT_CLOSED"}

    @classmethod
    def poll(cls, context):
        return context.scene.viga.mode == "GEOMETRY_NODES"

    def draw(self, context):
        layout = self.layout
        settings = context.scene.viga
        row = layout.row(align=True)
        row.prop(settings, "preset")
        row.operator("viga.refresh_presets", text="", icon="FILE_REFRESH")
        stored = operators.cached_presets()
        if stored:
            _wrapped(layout, "Stored: " + ", ".join(stored))
        if settings.preset.strip():
            _wrapped(layout, "Start applies the preset %r instead of asking the model" % settings.preset.strip(),
                     icon="INFO")
        layout.prop(settings, "preset_name")
        row = layout.row(align=True)
        row.operator("viga.import_preset", icon="IMPORT")
        row.operator("viga.export_preset", icon="EXPORT")


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
            self._draw_outcome(layout, context, status)

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
    def _draw_outcome(layout, context, status):
        if status.message:
            message = _wrapped(layout, status.message, icon="ERROR" if status.state == "FAILED" else "INFO")
            message.alert = status.state == "FAILED"
        reviewable = status.state == "FINISHED" and status.kind == "SCENE" and status.final_program
        if reviewable and not status.applied:
            VIGA_PT_status._draw_review(layout, context, status)
        row = layout.row(align=True)
        if reviewable and not status.applied:
            row.operator("viga.apply_result", text="Apply the result", icon="CHECKMARK")
            row.operator("viga.discard_result", text="Discard", icon="X")
        else:
            if status.applied:
                which = "iteration %d" % status.applied_iteration if status.applied_iteration else "the result"
                layout.label(text="Applied %s: Edit > Undo takes it back" % which, icon="CHECKMARK")
            if status.kind == "AGENT" and status.iteration:
                _wrapped(layout, "Each command the agent ran is one undo step (Edit > Undo)", icon="LOOP_BACK")
            row.operator("viga.discard_result", text="Dismiss", icon="X")
        if status.applying:
            layout.label(text="Applying...", icon="TIME")
        if status.report_path and status.run_folder:
            layout.operator("viga.open_report", icon="URL").path = status.run_folder

    @staticmethod
    def _draw_review(layout, context, status):
        """The plan, and every iteration that ran with its render beside the target: look at
        its program, apply any of them."""
        wm = context.window_manager
        box = layout.box()
        box.label(text="Review before applying", icon="HIDE_OFF")
        plans = [entry.detail for entry in wm.viga_chat if entry.run_folder == status.run_folder and entry.kind == "PLAN"]
        if plans:
            _wrapped(box, "Plan: " + plans[-1], limit=6)
        target = chat.icon(os.path.join(status.run_folder, chat.TARGET_FILE))
        ran = chat.ran_iterations(wm, status.run_folder)
        if not ran:
            box.label(text="Reading the run's iterations..." if chat.is_loading() else "No iteration ran to the end")
        for index, render, _code in ran:
            row = box.row(align=True)
            row.label(text="Iteration %d%s" % (index, " (the result)" if index == ran[-1][0] else ""))
            if chat.icon(render):
                row.label(text="", icon_value=chat.icon(render))
            if target:
                row.label(text="", icon_value=target)
            show = row.operator("viga.show_program", text="", icon="SCRIPT")
            show.run_folder, show.iteration = status.run_folder, index
            apply = row.operator("viga.apply_result", text="", icon="CHECKMARK")
            apply.run_folder, apply.iteration = status.run_folder, index


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


CLASSES = (VIGA_UL_log, VIGA_UL_addon_tools, VIGA_UL_chat, VIGA_PT_main, VIGA_PT_presets, VIGA_PT_status,
           VIGA_PT_history, VIGA_PT_log)


register, unregister = bpy.utils.register_classes_factory(CLASSES)
