# SPDX-License-Identifier: GPL-3.0-or-later
# Where runs go, and the list of earlier runs. The list is read from disk only by refresh()
# (the refresh operator, a finished run, a loaded .blend) and cached, so the panel's draw()
# never walks the disk.

import json
import os
from collections import namedtuple

import bpy
from bpy.app.handlers import persistent

from . import preferences

EVENTS_FILE = "events.jsonl"
ARGS_FILE = "args.json"
MAX_DEPTH = 3  # <root>/<mode>/<timestamp>/<task>/ is viga's deepest run folder
MAX_RUNS = 20

RunEntry = namedtuple("RunEntry", "path task kind stop")

_cache = {"root": "", "runs": []}


def runs_root(context):
    """The folder viga writes run folders into: the preference if set, else viga_runs beside
    the saved .blend, else ~/.viga/runs."""
    prefs = preferences.get(context)
    configured = prefs.runs_folder.strip() if prefs is not None else ""
    if configured:
        return os.path.normpath(bpy.path.abspath(os.path.expanduser(configured)))
    if bpy.data.filepath:
        return os.path.normpath(bpy.path.abspath("//viga_runs"))
    return os.path.join(os.path.expanduser("~"), ".viga", "runs")


def run_kind(path):
    # viga's Geometry Nodes runs live in <output>/gn/<run id>/, its add-on agent's in
    # <output>/agent/<timestamp>/<task>/. Looking only at the folders where viga puts those
    # names keeps a "gn" or "agent" elsewhere in the path (a user's folder) from counting.
    parent = os.path.dirname(os.path.normpath(path))
    if os.path.basename(parent) == "gn":
        return "gn"
    if os.path.basename(os.path.dirname(parent)) == "agent":
        return "agent"
    return "scene"


def _subfolders_or_run(folder):
    """(True, []) when folder is a run folder, else (False, its subfolders)."""
    try:
        with os.scandir(folder) as entries:
            children = list(entries)
        if any(child.name == EVENTS_FILE and child.is_file() for child in children):
            return True, []
        return False, [child.path for child in children if child.is_dir(follow_symlinks=False)]
    except OSError:
        return False, []  # unreadable or vanished: not a run, nothing below it


def find_run_folders(root):
    found, pending = [], [(root, 0)]
    while pending:
        folder, depth = pending.pop()
        is_run, subfolders = _subfolders_or_run(folder)
        if is_run:
            found.append(folder)
        elif depth < MAX_DEPTH:
            pending.extend((sub, depth + 1) for sub in subfolders)
    return found


def _events_mtime(folder):
    try:
        return os.stat(os.path.join(folder, EVENTS_FILE)).st_mtime
    except OSError:
        return 0.0


def read_args(folder):
    """The run's args.json as a dict; empty when it is missing or unreadable."""
    try:
        with open(os.path.join(folder, ARGS_FILE), "r", encoding="utf-8") as handle:
            args = json.load(handle)
    except (OSError, ValueError):
        return {}
    return args if isinstance(args, dict) else {}


def read_task(folder):
    task = read_args(folder).get("task")
    return task if isinstance(task, str) else ""


def read_stop(folder):
    """The stop reason of the run's last run_finished event; "" while a run (or its latest
    resume, which logs a new run_started) has not finished."""
    stop = ""
    try:
        with open(os.path.join(folder, EVENTS_FILE), "r", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                # Most lines carry code and renders; parse only the two that matter.
                if "run_finished" not in line and "run_started" not in line:
                    continue
                try:
                    event = json.loads(line)
                except ValueError:
                    continue  # a line cut short by a killed run
                if not isinstance(event, dict):
                    continue
                if event.get("type") == "run_started":
                    stop = ""
                elif event.get("type") == "run_finished":
                    details = event.get("stop")
                    reason = details.get("reason") if isinstance(details, dict) else None
                    stop = reason if isinstance(reason, str) else ""
    except OSError:
        return ""
    return stop


def list_runs(root):
    """Run folders below root, newest first, at most MAX_RUNS."""
    folders = sorted(find_run_folders(root), key=_events_mtime, reverse=True)[:MAX_RUNS]
    return [RunEntry(folder, read_task(folder), run_kind(folder), read_stop(folder)) for folder in folders]


def refresh(context):
    root = runs_root(context)
    _cache["root"] = root
    _cache["runs"] = list_runs(root)


def cached_runs():
    return _cache["runs"]


def cached_root():
    return _cache["root"]


def _initial_refresh():
    # Register runs with a restricted context (no bpy.data); the first list waits for the UI.
    _refresh_all()
    return None


@persistent
def _refresh_after_load(_filepath):
    # The default runs root sits beside the .blend, so another file may mean other runs; and
    # the file keeps its own conversations.
    _refresh_all()


def _refresh_all():
    from . import chat, keys  # both import modules that import this one
    refresh(bpy.context)
    chat.reload(bpy.context)
    prefs = preferences.get(bpy.context)
    variable = preferences.key_variable(prefs) if prefs is not None else None
    if variable:
        keys.refresh_status(prefs, variable)


def register():
    bpy.app.timers.register(_initial_refresh, first_interval=0.5)
    bpy.app.handlers.load_post.append(_refresh_after_load)


def unregister():
    if _refresh_after_load in bpy.app.handlers.load_post:
        bpy.app.handlers.load_post.remove(_refresh_after_load)
    if bpy.app.timers.is_registered(_initial_refresh):
        bpy.app.timers.unregister(_initial_refresh)
    _cache["root"], _cache["runs"] = "", []
