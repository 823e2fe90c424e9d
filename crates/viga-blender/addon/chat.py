# SPDX-License-Identifier: GPL-3.0-or-later
# The chat of each mode: the transcript of the .blend's conversation, read from its run
# folders (the run folders are the record; the .blend keeps only their list, per mode). Each
# turn is a request followed by what its run did: plans, programs (collapsed under their
# iteration), what running them did, tool calls with parameters and replies, renders beside
# the target, verdicts, gate reports, the answer, how it ended.
#
# One builder (TurnBuilder) turns a run's events into chat lines, whether they come from the
# events.jsonl of a finished run (read on a background thread) or from the stream of a run
# going on (the runner feeds it on the main thread), so a turn reads the same live and after
# a restart.

import glob
import json
import os

import bpy
import bpy.utils.previews

from . import background

MAX_ENTRIES = 3000  # lines kept in the chat; the oldest go first
MAX_TEXT = 300  # characters of a chat line's summary
MAX_DETAIL = 20000  # characters of a line's detail (a program, a tool reply)
MAX_PREVIEWS = 120  # render thumbnails loaded at once
BATCH = 400  # chat lines added to the list per timer tick

ARGS_FILE = "args.json"
EVENTS_FILE = "events.jsonl"
REQUEST_FILE = "request.json"  # a Geometry Nodes run's
OUTCOME_FILE = "outcome.json"  # a Geometry Nodes run's
TRANSCRIPT_FILE = "transcript.json"  # an agent run's
TARGET_FILE = "target.png"

KIND_ICONS = {
    "REQUEST": "USER",
    "ITERATION": "LOOP_FORWARDS",
    "PLAN": "TEXT",
    "CODE": "SCRIPT",
    "RESULT": "CONSOLE",
    "TOOL": "TOOL_SETTINGS",
    "RENDER": "RENDER_RESULT",
    "VERDICT": "HIDE_OFF",
    "GATES": "CHECKBOX_HLT",
    "STEP": "NODETREE",
    "ANSWER": "OUTLINER_DATA_GP_LAYER",
    "NOTE": "INFO",
    "END": "CHECKMARK",
}
FAILED_ICON = "ERROR"


# --------------------------------------------------------------------------- building lines


def _cut(text, limit=MAX_TEXT):
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _dict(value):
    return value if isinstance(value, dict) else {}


def _list(value):
    return value if isinstance(value, list) else []


def _text(value):
    return value if isinstance(value, str) else ""


def _int(value):
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def describe_error(error):
    line = error.get("line")
    where = " at line %d" % line if isinstance(line, int) else ""
    return "%s%s: %s" % (_text(error.get("error_type")) or "Error", where, _text(error.get("message")))


class TurnBuilder:
    """The chat lines of one run (one turn). `entries` grows as events come in; an earlier
    line can change later (an iteration whose program ran), and its index goes to `changed`."""

    def __init__(self, run_folder, turn, kind):
        self.run_folder = run_folder or ""
        self.turn = turn
        self.kind = kind  # 'scene', 'gn' or 'agent'
        self.entries = []
        self.changed = set()
        self._iterations = {}

    def add(self, kind, text, detail="", iteration=0, image="", target="", failed=False):
        self.entries.append({
            "kind": kind, "text": _cut(text), "detail": str(detail)[:MAX_DETAIL], "turn": self.turn,
            "iteration": iteration, "run_folder": self.run_folder, "run_kind": self.kind, "image": image,
            "target": target, "ran": False, "failed": failed,
        })

    def request(self, text):
        self.add("REQUEST", text, detail=text)

    def _iteration(self, index, label):
        if index in self._iterations:
            return
        self._iterations[index] = len(self.entries)
        self.add("ITERATION", "%s %d" % (label, index), iteration=index)

    def _target_of(self, view):
        """The target picture a render of `view` is compared with (a view's own copy in
        targets/, else the run's first target), or "" when the run has none."""
        if not self.run_folder:
            return ""
        if view.startswith("target:"):
            label = view.split(":", 1)[1].replace("@", "_f").replace("/", "_")
            found = sorted(glob.glob(os.path.join(glob.escape(self.run_folder), "targets", "*-%s.png" % glob.escape(label))))
            if found:
                return found[0]
        path = os.path.join(self.run_folder, TARGET_FILE)
        return path if os.path.isfile(path) else ""

    def event(self, event):
        handler = getattr(self, "_on_" + _text(event.get("type")), None)
        if handler is not None:
            handler(event)  # unknown types are skipped: newer viga, older add-on

    def _on_iteration_started(self, event):
        self._iteration(_int(event.get("index")), "Iteration")

    def _on_plan_produced(self, event):
        plan = _text(event.get("plan"))
        self.add("PLAN", "Plan: " + plan, detail=plan, iteration=_int(event.get("index")))

    def _on_code_produced(self, event):
        code = _text(event.get("code"))
        attempt = _int(event.get("attempt"))
        lines = len(code.splitlines())
        label = "Program (%d lines)" % lines if attempt == 0 else "Fixed program, attempt %d (%d lines)" % (attempt + 1, lines)
        self.add("CODE", label, detail=code, iteration=_int(event.get("index")))

    def _on_execution_finished(self, event):
        result = _dict(event.get("result"))
        error = _dict(result.get("error"))
        index = _int(event.get("index"))
        if error:
            self.add("RESULT", "It failed: " + describe_error(error), detail=_text(error.get("traceback")),
                     iteration=index, failed=True)
        else:
            output = _text(result.get("stdout")).strip()
            self.add("RESULT", "It ran in %.0f ms" % float(result.get("duration_ms") or 0),
                     detail=output, iteration=index)

    def _on_generator_tool_called(self, event):
        call = _dict(event.get("call"))
        ok = call.get("ok") is True
        text = "Generator: %s(%s) -> %s" % (_text(call.get("tool")), _text(call.get("arguments")), _text(call.get("outcome")))
        detail = "%s\nparameters: %s\nreply: %s" % (_text(call.get("tool")), _text(call.get("arguments")), _text(call.get("outcome")))
        self.add("TOOL", text, detail=detail, iteration=_int(event.get("index")), failed=not ok)

    def _on_tool_invoked(self, event):
        index = _int(event.get("index"))
        ok = event.get("ok") is True
        summary = _text(event.get("summary"))
        who = "Agent" if self.kind == "agent" else "Verifier"
        if self.kind == "agent":
            self._iteration(index, "Step")
        self.add("TOOL", "%s: %s %s" % (who, _text(event.get("tool")), summary), detail=summary,
                 iteration=index, failed=not ok)

    def _on_model_called(self, event):
        if self.kind == "agent":
            self._iteration(_int(event.get("index")), "Step")

    def _on_render_produced(self, event):
        render_id = _text(event.get("render_id"))
        if not render_id or not self.run_folder:
            return
        view = _text(event.get("view"))
        engine = _text(event.get("engine"))
        label = "Render %s%s" % (view, " (%s)" % engine.capitalize() if engine else "")
        self.add("RENDER", label, iteration=_int(event.get("index")),
                 image=os.path.join(self.run_folder, render_id), target=self._target_of(view))

    def _on_feedback_produced(self, event):
        feedback = _dict(event.get("feedback"))
        self.add("VERDICT", "Verdict: " + verdict_text(feedback), detail=verdict_detail(feedback),
                 iteration=_int(event.get("index")), failed=feedback.get("accepted") is not True)

    def _on_gates_checked(self, event):
        report = _dict(event.get("report"))
        index = _int(event.get("index")) + 1
        self._iteration(index, "Round")
        if report.get("success") is True:
            self.add("GATES", "Gates passed", iteration=index)
            return
        failed = ", ".join(_text(name) for name in _list(report.get("failed_gates")))
        messages = "\n".join(_text(text) for text in _list(report.get("messages")))
        self.add("GATES", "Gates failed: " + failed, detail=messages, iteration=index, failed=True)

    def _on_gn_step_finished(self, event):
        record = _dict(event.get("record"))
        status = _text(record.get("status"))
        if status == "running":
            return
        index = _int(record.get("round")) + 1
        self._iteration(index, "Round")
        error = _text(record.get("error"))
        text = "Step %s (%s): %s %s" % (_text(record.get("step_id")), _text(record.get("action_type")), status,
                                        _text(record.get("message")))
        self.add("STEP", text, detail=error or _text(record.get("message")), iteration=index, failed=bool(error))

    def _on_iteration_finished(self, event):
        record = _dict(event.get("record"))
        index = _int(record.get("index"))
        ran = record.get("failure") in (None, "E3") and bool(_text(record.get("code")))
        at = self._iterations.get(index)
        if at is not None and ran:
            self.entries[at]["ran"] = True
            self.changed.add(at)

    def _on_warning(self, event):
        self.add("NOTE", _text(event.get("message")), detail=_text(event.get("message")))

    def _on_run_finished(self, event):
        stop = _dict(event.get("stop"))
        reason = _text(stop.get("reason"))
        words = {"accepted": "Accepted", "max_iterations": "Budget spent", "cancelled": "Cancelled",
                 "time_limit": "Time limit reached", "generator_ended": "Ended by the generator",
                 "failed": "Failed"}.get(reason, reason)
        message = _text(stop.get("message"))
        self.add("END", "%s%s" % (words, ": " + message if message else ""), detail=message,
                 failed=reason == "failed")

    def answer(self, text):
        if text:
            self.add("ANSWER", text, detail=text)

    def agent_transcript(self, transcript):
        """An agent run's tool calls with their whole parameters and replies (transcript.json)
        in place of the events' one-line summaries."""
        calls = [call for step in _list(transcript.get("steps")) for call in _list(_dict(step).get("calls"))]
        tools = [entry for entry in self.entries if entry["kind"] == "TOOL"]
        for entry, call in zip(tools, calls):
            call = _dict(call)
            entry["detail"] = ("%s\nparameters: %s\nreply: %s" % (
                _text(call.get("tool")), json.dumps(call.get("arguments"), indent=1),
                json.dumps(call.get("result"), indent=1)))[:MAX_DETAIL]


def verdict_text(feedback):
    if feedback.get("accepted") is True:
        return "Accepted"
    notes = [_text(n) for n in _list(feedback.get("visual_differences")) + _list(feedback.get("suggestions"))]
    notes = [note for note in notes if note]
    if not notes:
        return "Needs changes"
    more = " (and %d more)" % (len(notes) - 1) if len(notes) > 1 else ""
    return "Needs changes: %s%s" % (notes[0], more)


def verdict_detail(feedback):
    lines = ["Differences:"] + ["- " + _text(n) for n in _list(feedback.get("visual_differences"))]
    lines += ["Suggestions:"] + ["- " + _text(n) for n in _list(feedback.get("suggestions"))]
    return "\n".join(lines)


# --------------------------------------------------------------------------- reading run folders


def _read_json(path):
    try:
        with open(path, "r", encoding="utf-8") as handle:
            value = json.load(handle)
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def read_events(folder):
    """The run's events, in order; lines cut short by a killed run are skipped."""
    events = []
    try:
        with open(os.path.join(folder, EVENTS_FILE), "r", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if isinstance(event, dict):
                    events.append(event)
    except OSError:
        pass
    return events


def kind_of(folder):
    """'gn', 'agent' or 'scene', from what the folder holds."""
    if os.path.isfile(os.path.join(folder, REQUEST_FILE)):
        return "gn"
    if _read_json(os.path.join(folder, ARGS_FILE)).get("mode") == "agent":
        return "agent"
    return "scene"


def read_turn(folder, turn):
    """The chat lines of the run in `folder` as turn number `turn` (file reads only: runs on a
    background thread)."""
    kind = kind_of(folder)
    builder = TurnBuilder(folder, turn, kind)
    if not os.path.isdir(folder):
        builder.add("NOTE", "This turn's run folder is gone: %s" % folder, failed=True)
        return builder.entries
    request_file = REQUEST_FILE if kind == "gn" else ARGS_FILE
    settings = _read_json(os.path.join(folder, request_file))
    builder.request(_text(settings.get("request" if kind == "gn" else "task")) or os.path.basename(folder))
    for event in read_events(folder):
        builder.event(event)
    if kind == "gn":
        builder.answer(_text(_read_json(os.path.join(folder, OUTCOME_FILE)).get("final_message")))
    elif kind == "agent":
        transcript = _read_json(os.path.join(folder, TRANSCRIPT_FILE))
        builder.agent_transcript(transcript)
        builder.answer(_text(transcript.get("answer")))
    return builder.entries


def read_conversation(folders):
    """Every turn's lines, oldest first, the newest MAX_ENTRIES kept."""
    entries = []
    for number, folder in enumerate(folders, start=1):
        entries.extend(read_turn(folder, number))
    if len(entries) > MAX_ENTRIES:
        left_out = len(entries) - MAX_ENTRIES
        entries = entries[left_out:]
        entries.insert(0, {"kind": "NOTE", "text": "%d older lines are left out" % left_out, "detail": "",
                           "turn": 0, "iteration": 0, "run_folder": "", "run_kind": "", "image": "",
                           "target": "", "ran": False, "failed": False})
    return entries


# --------------------------------------------------------------------------- the chat list


_previews = None
_icons = {}  # picture path -> icon id
_loading = {}  # mode -> the generation of the read in flight
_generation = [0]
_pending = []  # (wm, entries) still to add, BATCH per tick


def icon(path):
    """The thumbnail of a picture loaded for the chat (0 when none: background mode, or not
    loaded). A dict lookup: draw() may call it."""
    return _icons.get(path, 0)


def _load_preview(path):
    if _previews is None or not path or path in _icons:
        return
    if len(_icons) >= MAX_PREVIEWS:
        return
    preview = _previews.get(path) or _previews.load(path, path, "IMAGE")
    _icons[path] = preview.icon_id


def _set_entry(item, entry):
    for key, value in entry.items():
        setattr(item, key, value)
    for path in (entry.get("image"), entry.get("target")):
        if path:
            _load_preview(path)


def append(wm, entries):
    """Adds chat lines (main thread), keeping at most MAX_ENTRIES."""
    chat = wm.viga_chat
    for entry in entries:
        _set_entry(chat.add(), entry)
    while len(chat) > MAX_ENTRIES:
        chat.remove(0)


def update(wm, base, builder, synced):
    """Brings the chat in line with a live turn's builder: lines past `synced` are added, lines
    that changed are set again; `base` is where the turn starts in the chat. Returns the new
    number of synced lines."""
    chat = wm.viga_chat
    for at in sorted(builder.changed):
        if at < synced and 0 <= base + at < len(chat):
            _set_entry(chat[base + at], builder.entries[at])
    builder.changed.clear()
    append(wm, builder.entries[synced:])
    return len(builder.entries)


def clear(wm):
    wm.viga_chat.clear()
    wm.viga_chat_index = 0
    _icons.clear()
    if _previews is not None:
        _previews.clear()


def reload(context, mode=None):
    """Reads the conversation of `mode` (default: the panel's) from its run folders on a
    background thread; the chat shows it once read. A read still in flight is forgotten."""
    from . import properties, runner  # both import this module
    settings = context.scene.viga
    mode = mode or settings.mode
    # A turn going on in this mode comes from its stream, not from its half-written folder.
    live = runner.live_run_folder(mode)
    folders = [run.path for run in properties.conversation(settings, mode) if not live or run.path != live]
    _generation[0] += 1
    generation = _generation[0]
    _loading[mode] = generation
    wm = context.window_manager

    def done(entries, error):
        if _loading.get(mode) != generation:
            return  # a newer read was asked for
        _loading.pop(mode, None)
        clear(wm)
        wm.viga_chat_mode = mode
        if error is not None:
            entries = [{"kind": "NOTE", "text": "The conversation could not be read: %s" % error, "detail": "",
                        "turn": 0, "iteration": 0, "run_folder": "", "run_kind": "", "image": "", "target": "",
                        "ran": False, "failed": True}]
        _pending[:] = [(wm, list(entries))]
        fill_pending()
        runner.chat_reloaded(mode)

    background.submit(lambda: read_conversation(folders), done)


def is_loading():
    return bool(_loading) or bool(_pending)


def fill_pending():
    """Adds at most BATCH lines read earlier (the timer calls it): a long conversation fills
    the list over a few ticks instead of holding the main thread."""
    if not _pending:
        return False
    wm, entries = _pending[0]
    append(wm, entries[:BATCH])
    del entries[:BATCH]
    if not entries:
        _pending.pop(0)
        wm.viga_chat_index = max(0, len(wm.viga_chat) - 1)
    return True


def ran_iterations(wm, run_folder):
    """The iterations of the scene run in `run_folder` whose programs ran, as the chat has read
    them: [(index, its last render path, its program)], oldest first."""
    found = {}
    for entry in wm.viga_chat:
        if entry.run_folder != run_folder:
            continue
        if entry.kind == "ITERATION" and entry.ran:
            found[entry.iteration] = ["", ""]
    for entry in wm.viga_chat:
        if entry.run_folder != run_folder or entry.iteration not in found:
            continue
        if entry.kind == "RENDER":
            found[entry.iteration][0] = entry.image
        elif entry.kind == "CODE":
            found[entry.iteration][1] = entry.detail
    return [(index, render, code) for index, (render, code) in sorted(found.items())]


def visible(chat):
    """Which lines the list shows: a program is shown only under an iteration that is open."""
    shown = []
    open_iteration = True
    for entry in chat:
        if entry.kind == "ITERATION":
            open_iteration = entry.expanded
        elif entry.kind == "REQUEST":
            open_iteration = True
        shown.append(entry.kind != "CODE" or open_iteration)
    return shown


def register():
    global _previews
    _previews = bpy.utils.previews.new()


def unregister():
    global _previews
    _icons.clear()
    _pending.clear()
    _loading.clear()
    if _previews is not None:
        bpy.utils.previews.remove(_previews)
        _previews = None
