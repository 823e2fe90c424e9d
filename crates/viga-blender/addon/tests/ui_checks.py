# UI checks for viga's Blender add-on, run inside the bpy module (no windows, background mode):
#
#   .viga/venv/bin/python crates/viga-blender/addon/tests/ui_checks.py -- --package-dir DIR
#
# DIR holds the complete package `viga_blender/`. Every panel's and the preferences' draw()
# runs against a recording stand-in for `layout` that checks each call against Blender's own
# UILayout API (method, keyword arguments, icon names, property and operator names), in every
# mode and run state. Every bpy.ops.viga operator runs at least once; runs use a fake `viga`
# (a Python script generated here) that prints the event protocol. Timers do not fire in
# background mode, so the checks pump the runner themselves. Prints one line per check and
# ends with "N passed, M failed"; exits 1 if anything failed.

import argparse
import contextlib
import functools
import json
import os
import shutil
import stat
import sys
import tempfile
import textwrap
import time
import traceback
import types

import bpy

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
FIXTURE_ADDONS = os.path.join(REPO, "fixtures", "addons")
RUN_TIMEOUT_S = 15.0


def parse_args():
    argv = sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else sys.argv[1:]
    parser = argparse.ArgumentParser(description="UI checks for viga's Blender add-on")
    parser.add_argument("--package-dir", required=True, help="a folder holding the package viga_blender/")
    return parser.parse_args(argv)


ARGS = parse_args()
sys.path.insert(0, os.path.abspath(ARGS.package_dir))

import viga_blender  # noqa: E402 - found through --package-dir
from viga_blender import background, chat, history, keys, operators, panels, preferences, properties, runner, viga_bridge  # noqa: E402

PACKAGE = viga_blender.__name__
TMP = tempfile.mkdtemp(prefix="viga_ui_checks_")


# --------------------------------------------------------------------------- a recording layout

LAYOUT_FUNCTIONS = {f.identifier: f for f in bpy.types.UILayout.bl_rna.functions}
LAYOUT_PROPERTIES = {p.identifier: p for p in bpy.types.UILayout.bl_rna.properties}
ICONS = set(LAYOUT_FUNCTIONS["label"].parameters["icon"].enum_items.keys())
CHILD_LAYOUTS = {"row", "column", "box", "split", "grid_flow", "column_flow"}


class OperatorButton:
    """What layout.operator() returns: checks that assigned properties exist on the operator."""

    def __init__(self, idname):
        module, name = idname.split(".")
        rna = getattr(getattr(bpy.ops, module), name).get_rna_type()
        object.__setattr__(self, "idname", idname)
        object.__setattr__(self, "rna", rna)
        object.__setattr__(self, "values", {})

    def __setattr__(self, name, value):
        if name not in self.rna.properties:
            raise AttributeError("operator %s has no property %r" % (self.idname, name))
        self.values[name] = value


class Recorder:
    """A stand-in for bpy.types.UILayout. Every call is checked against UILayout's RNA
    definition and appended to one flat list shared by all child layouts."""

    def __init__(self, calls):
        object.__setattr__(self, "calls", calls)
        object.__setattr__(self, "attributes", {})

    def __setattr__(self, name, value):
        if name not in LAYOUT_PROPERTIES:
            raise AttributeError("UILayout has no attribute %r" % name)
        self.attributes[name] = value

    def __getattr__(self, name):
        if name in LAYOUT_PROPERTIES:
            return self.attributes.get(name, LAYOUT_PROPERTIES[name].default)
        if name not in LAYOUT_FUNCTIONS:
            raise AttributeError("UILayout has no method %r" % name)
        return functools.partial(self._call, name)

    def _call(self, name, *args, **kwargs):
        parameters = LAYOUT_FUNCTIONS[name].parameters
        names = [p.identifier for p in parameters if not p.is_output]
        if len(args) > len(names):
            raise TypeError("%s takes at most %d positional arguments" % (name, len(names)))
        bound = dict(zip(names, args))
        for key, value in kwargs.items():
            if key not in names:
                raise TypeError("%s() has no keyword %r" % (name, key))
            bound[key] = value
        missing = [p.identifier for p in parameters if p.is_required and not p.is_output and p.identifier not in bound]
        if missing:
            raise TypeError("%s() misses %s" % (name, ", ".join(missing)))
        for key in ("icon",):
            if key in bound and bound[key] not in ICONS:
                raise ValueError("%s(): unknown icon %r" % (name, bound[key]))
        if "text" in bound and not isinstance(bound["text"], str):
            raise TypeError("%s(): text must be a str, got %r" % (name, bound["text"]))
        self._check_references(name, bound)
        record = {"method": name, "args": bound, "layout": self}
        self.calls.append(record)
        if name in CHILD_LAYOUTS:
            return Recorder(self.calls)
        if name == "operator":
            record["button"] = OperatorButton(bound["operator"])
            return record["button"]
        return None

    @staticmethod
    def _check_references(name, bound):
        if name in ("prop", "template_ID"):
            if bound["property"] not in bound["data"].bl_rna.properties:
                raise AttributeError("%s(): %s has no property %r" % (name, bound["data"], bound["property"]))
        if name == "template_list":
            if not hasattr(bpy.types, bound["listtype_name"]):
                raise AttributeError("template_list(): no UIList %r is registered" % bound["listtype_name"])
            for data, prop in (("dataptr", "propname"), ("active_dataptr", "active_propname")):
                if bound[prop] not in bound[data].bl_rna.properties:
                    raise AttributeError("template_list(): no property %r" % bound[prop])
        if name == "template_ID":
            for key in ("new", "open"):
                if bound.get(key):
                    module, op = bound[key].split(".")
                    getattr(getattr(bpy.ops, module), op).get_rna_type()


class DrawSelf:
    """`self` for an unbound draw(): the recording layout, everything else from `source`
    (the panel class for its helpers, the preferences for their properties)."""

    def __init__(self, layout, source):
        object.__setattr__(self, "layout", layout)
        object.__setattr__(self, "_source", source)

    def __getattr__(self, name):
        return getattr(self._source, name)


def draw(cls, source=None, context=None):
    """The calls cls.draw() made, or None when the panel's poll() hides it."""
    context = context or bpy.context
    if hasattr(cls, "poll") and not cls.poll(context):
        return None
    calls = []
    cls.draw(DrawSelf(Recorder(calls), source if source is not None else cls), context)
    return calls


def labels(calls):
    return [c["args"].get("text", "") for c in calls if c["method"] == "label"]


def buttons(calls):
    return {c["args"]["operator"]: c for c in calls if c["method"] == "operator"}


def has_label(calls, fragment):
    return any(fragment in text for text in labels(calls))


def drawn_props(calls):
    return [c["args"]["property"] for c in calls if c["method"] in ("prop", "template_ID")]


# --------------------------------------------------------------------------- a fake viga

FAKE_VIGA = '''#!{python}
# A stand-in for viga: records its argv, writes a run folder and prints a scripted event stream.
import json, os, shutil, signal, struct, sys, time, zlib

SCENARIO = json.loads({scenario!r})
args = sys.argv[1:]
stdin = sys.stdin.read() if SCENARIO.get("read_stdin") else ""
# Written whole, then renamed into place: a check that waits for the file reads all of it.
with open(SCENARIO["argv_file"] + ".partial", "w") as handle:
    json.dump({{"argv": args, "pid": os.getpid(), "containment": os.environ.get("VIGA_CONTAINMENT"),
               "test_without": os.environ.get("VIGA_CONTAIN_TEST_WITHOUT"), "stdin": stdin}}, handle)
os.replace(SCENARIO["argv_file"] + ".partial", SCENARIO["argv_file"])
# Like viga, which installs its own SIGINT handler: a fake started from a shell that ignores
# SIGINT (a background job, nohup, CI) would otherwise inherit the ignored signal.
signal.signal(signal.SIGINT, signal.SIG_IGN if SCENARIO.get("ignore_sigint") else signal.default_int_handler)


def png(width, height):
    rows = b"".join(b"\\x00" + b"\\x80\\x40\\x20" * width for _ in range(height))
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


output = args[args.index("--output") + 1] if "--output" in args else args[1] if args[0] in ("resume", "apply") else "."
run = os.path.join(output, SCENARIO["run_subdir"]) if SCENARIO.get("run_subdir") else output


def fill(value):
    if isinstance(value, str):
        return value.replace("{{run}}", run)
    if isinstance(value, list):
        return [fill(v) for v in value]
    if isinstance(value, dict):
        return {{k: fill(v) for k, v in value.items()}}
    return value


os.makedirs(run, exist_ok=True)
for name, content in SCENARIO.get("files", {{}}).items():
    path = os.path.join(run, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(png(8, 6) if content == "PNG" else fill(content).encode("utf-8"))
if "--target" in args:
    shutil.copyfile(args[args.index("--target") + 1], os.path.join(run, "target.png"))
for line in SCENARIO.get("stderr", []):
    print(line, file=sys.stderr, flush=True)
for line in SCENARIO.get("lines", []):
    if isinstance(line, dict):
        line = dict({{"v": 1}}, **line)  # every line of viga's stream carries its version
    print(fill(line) if isinstance(line, str) else json.dumps(fill(line)), flush=True)
time.sleep(SCENARIO.get("sleep", 0))
sys.exit(SCENARIO.get("exit_code", 0))
'''


def fake_viga(name, **scenario):
    """Writes an executable fake viga playing `scenario`; returns (its path, its argv file)."""
    folder = os.path.join(TMP, "fakes")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, name)
    scenario["argv_file"] = path + ".argv.json"
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(FAKE_VIGA.format(python=sys.executable, scenario=json.dumps(scenario)))
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path, scenario["argv_file"]


def recorded_argv(argv_file):
    with open(argv_file, "r", encoding="utf-8") as handle:
        return json.load(handle)


def event(seq, kind, **fields):
    return {"kind": "event", "event": dict({"seq": seq, "unix_ms": 1700000000000 + seq, "type": kind}, **fields)}


def timed(seq, kind, **fields):
    return json.dumps(dict({"seq": seq, "unix_ms": 1700000000000 + seq, "type": kind}, **fields))


SCENE_TASK = "a red cube on a grey floor"
SCENE_LINES = [
    "[scripted provider] every model answer is replayed from demo.json",
    {"kind": "run_folder", "path": "{run}"},
    event(1, "run_started", run_id="r1", task=SCENE_TASK, protocol_version=1),
    event(2, "iteration_started", index=1),
    event(3, "model_called", index=1, role="generator", latency_ms=12.0, usage={"input_tokens": 100, "output_tokens": 20}),
    event(4, "code_produced", index=1, attempt=0, code="bpy.ops.mesh.primitive_cube_add(\nfoo)"),
    event(5, "execution_finished", index=1, attempt=0, failure="E1",
          result={"stdout": "", "stderr": "", "duration_ms": 1.0,
                  "error": {"error_type": "NameError", "message": "name 'foo' is not defined", "traceback": "", "line": 2}}),
    event(6, "fast_retry", index=1, attempt=1, failure="E1", error="NameError: name 'foo' is not defined"),
    event(7, "model_called", index=1, role="fast_fix", latency_ms=5.0, usage={"input_tokens": 10, "output_tokens": 5}),
    event(8, "render_produced", index=1, render_id="renders/1/front.png", view="front", width=8, height=6, render_ms=3.0),
    event(9, "model_called", index=1, role="verifier", latency_ms=9.0, usage={"input_tokens": 30, "output_tokens": 3}),
    event(10, "feedback_produced", index=1, feedback={"visual_differences": ["the cube is blue"], "suggestions": ["paint it red"], "accepted": False}),
    event(11, "iteration_finished", record={"index": 1}),
    event(12, "iteration_started", index=2),
    event(13, "future_event_type", index=2, something="new"),
    {"kind": "telemetry", "note": "a kind this add-on does not know"},
    event(14, "model_called", index=2, role="investigate", latency_ms=9.0, usage={"input_tokens": 10, "output_tokens": 2}),
    event(15, "tool_invoked", index=2, tool="set_camera", ok=True, summary="camera moved"),
    event(16, "render_produced", index=2, render_id="renders/2/front.png", view="front", width=8, height=6, render_ms=3.0),
    event(17, "render_produced", index=2, render_id="renders/2/top.png", view="top", width=8, height=6, render_ms=3.0),
    event(18, "warning", message="the verifier looked twice"),
    event(19, "feedback_produced", index=2, feedback={"visual_differences": [], "suggestions": [], "accepted": True}),
    event(20, "run_finished", stop={"reason": "accepted"}, iterations=2),
    {"kind": "report", "path": "{run}/report.html"},
    {"kind": "finished", "stop": {"reason": "accepted"}, "message": "accepted after 2 iterations",
     "final_program": "{run}/final.py", "exit_code": 0},
]
SCENE_FILES = {
    "args.json": json.dumps({"task": SCENE_TASK, "max_iterations": 5}),
    "events.jsonl": timed(1, "run_started", run_id="r1", task=SCENE_TASK, protocol_version=1) + "\n"
    + timed(20, "run_finished", stop={"reason": "accepted"}, iterations=2) + "\n",
    "renders/1/front.png": "PNG",
    "renders/2/front.png": "PNG",
    "renders/2/top.png": "PNG",
    "final.py": "import bpy\nbpy.ops.mesh.primitive_cube_add()\n",
    "report.html": "<html>report</html>",
}


# --------------------------------------------------------------------------- set-up helpers

SCRIPT_FILE = os.path.join(TMP, "session.json")
CONNECTION_FILE = os.path.join(TMP, "addon-connection.json")
RUNS = os.path.join(TMP, "runs")


def prefs():
    return preferences.get(bpy.context)


def status():
    return bpy.context.window_manager.viga_run


def settings():
    return bpy.context.scene.viga


def configure(**overrides):
    """Preferences for a scripted run through a fake viga; provider first, since changing it
    resets the key variable."""
    values = dict(
        provider="scripted", model="", base_url="", api_key_env="", script=SCRIPT_FILE,
        verifier_engine="AUTO", render_size=512, samples=0, max_iterations=5, memory_window=3,
        program_timeout=60.0, plan_each_iteration=True, generator_tools="AUTO", generator_max_turns=6,
        assets_folder="", polyhaven=False, assets_generate="NONE", gn_max_rounds=6,
        gn_gates=set(preferences.ALL_GATES), gn_cache=False, presets_folder="", agent_max_steps=12,
        python_mode="SAFE", containment="AUTO", viga_path="", runs_folder=RUNS,
    )
    values.update(overrides)
    for key, value in values.items():
        setattr(prefs(), key, value)


def reset():
    """A clean slate between checks: no run, idle status, default inputs, real bridge hooks."""
    while runner.is_running():
        runner.cancel()
        wait_for_run()
    st = status()
    st.state = "IDLE"
    for key in ("task", "step", "verdict", "run_folder", "report_path", "final_program", "message"):
        setattr(st, key, "")
    st.iteration = st.max_iterations = st.tokens_in = st.tokens_out = st.applied_iteration = 0
    st.applied = st.applying = False
    st.streaming_text = st.streaming_role = ""
    runner.clear_thumbnails()
    wait_until_idle()
    sc = settings()
    sc.mode = "SCENE"
    sc.task = sc.request = sc.command = sc.target_file = sc.addons_folder = sc.target_folder = ""
    sc.target_camera = sc.frames = sc.preset = sc.preset_name = ""
    sc.target_views.clear()
    for runs in (sc.scene_runs, sc.gn_runs, sc.agent_runs):
        runs.clear()
    chat.clear(bpy.context.window_manager)
    bpy.context.window_manager.viga_chat_mode = ""
    sc.target_source = "FILE"
    sc.target_image = None
    keys._status.clear()
    bpy.context.window_manager.viga_gn_in_this_blender = False
    configure()
    viga_bridge.addon_connection_path = lambda: CONNECTION_FILE
    operators.open_in_browser = ORIGINAL_OPENER
    cube = bpy.data.objects.get("Cube")
    bpy.context.view_layer.objects.active = cube


def wait_until_idle(timeout=RUN_TIMEOUT_S):
    """Pumps until no background job (a key command, an apply, reading a conversation) is left."""
    deadline = time.monotonic() + timeout
    while background.busy() or chat.is_loading():
        if time.monotonic() > deadline:
            raise AssertionError("background work did not end within %.0f s" % timeout)
        runner.pump()
        time.sleep(0.005)


def wait_for_run(timeout=RUN_TIMEOUT_S, on_pump=None):
    """Pumps the runner (timers do not fire in background mode) until the run has ended."""
    deadline = time.monotonic() + timeout
    while runner.is_running():
        if time.monotonic() > deadline:
            raise AssertionError("the run did not end within %.0f s" % timeout)
        runner.pump(max_lines=1 if on_pump else runner.MAX_LINES_PER_TICK)
        if on_pump:
            on_pump()
        time.sleep(0.005)


def expect_refusal(call, fragment):
    """call() must raise RuntimeError (an operator's ERROR report or a failed poll) saying fragment."""
    try:
        call()
    except RuntimeError as exc:
        if fragment not in str(exc):
            raise AssertionError("expected %r in the refusal, got %r" % (fragment, str(exc))) from exc
        return str(exc)
    raise AssertionError("expected a refusal saying %r, but the call went through" % fragment)


def log_texts():
    return [line.text for line in status().log]


def start_scene_run(name="fake_scene", lines=SCENE_LINES, files=SCENE_FILES, **scenario):
    path, argv_file = fake_viga(name, run_subdir="scene/20250101-000000/red_cube", lines=lines, files=files, **scenario)
    configure(viga_path=path)
    settings().task = SCENE_TASK
    bpy.ops.viga.start_run("EXEC_DEFAULT")
    return argv_file


# --------------------------------------------------------------------------- the checks

CHECKS = []


def check(function):
    CHECKS.append(function)
    return function


@check
def registration():
    for name in ("start_run", "cancel_run", "apply_result", "discard_result", "refresh_addon_tools",
                 "refresh_history", "open_report", "resume_run", "clear_log", "new_conversation", "reload_chat",
                 "show_program", "add_target_view", "remove_target_view", "refresh_presets", "import_preset",
                 "export_preset", "set_key", "forget_key"):
        getattr(bpy.ops.viga, name).get_rna_type()
    for name in ("VIGA_PT_main", "VIGA_PT_status", "VIGA_PT_history", "VIGA_PT_log", "VIGA_UL_log",
                 "VIGA_UL_chat", "VIGA_PT_presets"):
        assert hasattr(bpy.types, name), name
    assert hasattr(bpy.types.Scene, "viga") and hasattr(bpy.types.WindowManager, "viga_run")
    assert bpy.app.timers.is_registered(runner.tick), "the runner's tick is not a registered timer"
    assert runner.tick() == runner.TICK_INTERVAL_S
    assert preferences.VigaPreferences.bl_idname == PACKAGE


@check
def preferences_never_store_a_key():
    names = set(preferences.VigaPreferences.__annotations__)
    assert "api_key_env" in names
    assert not {n for n in names if "key" in n and n != "api_key_env"} and "token" not in names, names
    p = prefs()
    p.provider = "openai"
    assert p.api_key_env == "OPENAI_API_KEY"
    p.provider = "anthropic"
    assert p.api_key_env == "ANTHROPIC_API_KEY", "the key variable should follow the provider"
    p.api_key_env = "MY_OWN_KEY"
    p.provider = "gemini"
    assert p.api_key_env == "MY_OWN_KEY", "a variable the user named must be kept"
    p.api_key_env = "GEMINI_API_KEY"
    p.provider = "openai_compatible"
    assert p.api_key_env == "", "a local server needs no key by default"


@check
def preferences_draw():
    saved = {k: os.environ.get(k) for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY")}
    try:
        for variable in saved:
            os.environ.pop(variable, None)
        for provider, _name, _description in preferences.PROVIDERS:
            configure(provider=provider, model="m")
            calls = draw(preferences.VigaPreferences, source=prefs())
            drawn = drawn_props(calls)
            for name in ("provider", "verifier_engine", "render_size", "samples", "max_iterations",
                         "memory_window", "program_timeout", "plan_each_iteration", "generator_tools",
                         "generator_max_turns", "assets_folder", "polyhaven", "assets_generate", "gn_max_rounds",
                         "gn_gates", "gn_cache", "presets_folder", "agent_max_steps", "python_mode",
                         "containment", "viga_path", "runs_folder"):
                assert name in drawn, (provider, name)
            assert ("script" in drawn) == (provider == "scripted"), provider
            variable = preferences.DEFAULT_KEY_VARIABLES.get(provider)
            ops = buttons(calls)
            if variable:
                assert ops["viga.set_key"]["button"].values["variable"] == variable, (provider, ops)
                assert not has_label(calls, "No key for"), "nothing is known of the key store yet"
                keys._status[variable] = (False, "%s: not kept, and not set in the environment" % variable)
                calls = draw(preferences.VigaPreferences, source=prefs())
                assert has_label(calls, "No key for " + variable) and has_label(calls, "not kept"), (provider, labels(calls))
                os.environ[variable] = "sk-test"
                assert not has_label(draw(preferences.VigaPreferences, source=prefs()), "No key for")
                os.environ.pop(variable)
                keys._status[variable] = (True, "%s: kept in the Secret Service keyring" % variable)
                calls = draw(preferences.VigaPreferences, source=prefs())
                assert not has_label(calls, "No key for") and has_label(calls, "kept in the Secret Service"), labels(calls)
            else:
                assert "viga.set_key" not in ops and not has_label(calls, "No key for"), (provider, labels(calls))
        configure(provider="openai_compatible", model="", base_url="")
        calls = draw(preferences.VigaPreferences, source=prefs())
        assert has_label(calls, "base URL") and has_label(calls, "Name the model"), labels(calls)
        configure(provider="openai_compatible", model="qwen", base_url="http://localhost:11434/v1", api_key_env="LOCAL_KEY")
        keys._status["LOCAL_KEY"] = (False, "LOCAL_KEY: not kept")
        assert has_label(draw(preferences.VigaPreferences, source=prefs()), "No key for LOCAL_KEY")
    finally:
        for variable, value in saved.items():
            if value is None:
                os.environ.pop(variable, None)
            else:
                os.environ[variable] = value


@check
def main_panel_every_mode_and_state():
    main = panels.VIGA_PT_main
    for state in ("IDLE", "RUNNING", "CANCELLING", "FINISHED", "FAILED", "CANCELLED"):
        status().state = state
        for mode in ("SCENE", "GEOMETRY_NODES", "ADDON_TOOLS"):
            settings().mode = mode
            calls = draw(main)
            ops = buttons(calls)
            assert "mode" in drawn_props(calls)
            if mode == "ADDON_TOOLS":
                assert "viga.refresh_addon_tools" in ops, (state, ops)
                assert {"command", "addons_folder"} <= set(drawn_props(calls)), drawn_props(calls)
                assert not has_label(calls, "later release") and has_label(calls, "one undo step"), labels(calls)
                assert all(c["layout"].attributes.get("enabled", True) for c in calls if c["method"] == "prop"), "the command must be editable"
            if state in ("RUNNING", "CANCELLING"):
                assert "viga.cancel_run" in ops and "viga.start_run" not in ops, (state, mode, ops)
                assert ops["viga.cancel_run"]["layout"].enabled == (state == "RUNNING")
            else:
                assert "viga.start_run" in ops and "viga.cancel_run" not in ops, (state, mode, ops)
    status().state = "IDLE"
    settings().mode = "SCENE"
    assert "target_file" in drawn_props(draw(main))
    settings().target_source = "IMAGE"
    assert any(c["method"] == "template_ID" for c in draw(main))
    settings().mode = "GEOMETRY_NODES"
    calls = draw(main)
    assert "request" in drawn_props(calls) and has_label(calls, "Object: Cube"), labels(calls)
    assert "viga_gn_in_this_blender" in drawn_props(calls), drawn_props(calls)
    assert has_label(calls, "on a copy in viga's contained worker") and not has_label(calls, "as you"), labels(calls)
    bpy.context.window_manager.viga_gn_in_this_blender = True
    calls = draw(main)
    assert has_label(calls, "Trusted: the model's Python runs") and not has_label(calls, "contained worker"), labels(calls)
    bpy.context.window_manager.viga_gn_in_this_blender = False
    bpy.context.view_layer.objects.active = None
    assert has_label(draw(main), "Select the object")
    configure(python_mode="TRUSTED")
    assert has_label(draw(main), "skip safe mode's filter")
    configure(provider="openai", model="gpt-4o", api_key_env="VIGA_UNSET_TEST_VARIABLE")
    keys._status["VIGA_UNSET_TEST_VARIABLE"] = (False, "not kept")
    assert has_label(draw(main), "No key for VIGA_UNSET_TEST_VARIABLE")


@check
def main_panel_without_preferences():
    addons = bpy.context.preferences.addons
    addons.remove(addons[PACKAGE])
    try:
        assert preferences.get(bpy.context) is None
        assert has_label(draw(panels.VIGA_PT_main), "Enable viga")
        settings().mode = "GEOMETRY_NODES"
        draw(panels.VIGA_PT_main)
        expect_refusal(lambda: bpy.ops.viga.start_run("EXEC_DEFAULT"), "preferences are missing")
    finally:
        addons.new().module = PACKAGE


@check
def status_panel_every_state():
    panel = panels.VIGA_PT_status
    assert draw(panel) is None, "the status panel must hide while idle"
    st = status()
    st.state, st.kind, st.iteration, st.max_iterations = "RUNNING", "SCENE", 2, 5
    st.step, st.verdict, st.tokens_in, st.tokens_out = "verifying", "Needs changes: the cube is blue", 1234, 56
    fake = [runner.Thumbnail("front", "/x/front.png", 7), runner.Thumbnail("top", "/x/top.png", 8)]
    real = runner.thumbnails
    runner.thumbnails = lambda: fake
    try:
        calls = draw(panel)
    finally:
        runner.thumbnails = real
    for fragment in ("Iteration 2 of 5", "Step: verifying", "the cube is blue", "Tokens: 1234 in, 56 out", "front", "top"):
        assert has_label(calls, fragment), (fragment, labels(calls))
    icons = [c["args"]["icon_value"] for c in calls if c["method"] == "template_icon"]
    assert icons == [7, 8], icons
    assert not {"viga.apply_result", "viga.discard_result"} & set(buttons(calls))
    st.state, st.final_program, st.report_path, st.run_folder = "FINISHED", "/x/final.py", "/x/report.html", "/x"
    ops = buttons(draw(panel))
    assert {"viga.apply_result", "viga.discard_result", "viga.open_report"} <= set(ops), ops
    assert ops["viga.open_report"]["button"].values["path"] == "/x"
    st.applied = True
    calls = draw(panel)
    assert "viga.apply_result" not in buttons(calls) and has_label(calls, "Applied")
    st.applied, st.kind, st.max_iterations, st.iteration = False, "GN", 0, 3
    calls = draw(panel)
    assert "viga.apply_result" not in buttons(calls) and has_label(calls, "Round 3"), labels(calls)
    st.state, st.message = "FAILED", "viga exited with code 3 without finishing. thread 'main' panicked"
    calls = draw(panel)
    assert has_label(calls, "panicked") and "viga.discard_result" in buttons(calls)
    assert any(c["layout"].alert for c in calls if c["method"] == "label" and "panicked" in c["args"]["text"])
    st.state, st.message = "CANCELLED", "Cancelled"
    assert has_label(draw(panel), "cancelled")
    st.state, st.kind, st.iteration, st.max_iterations, st.step = "RUNNING", "AGENT", 2, 0, "last tool: place_object_relative"
    calls = draw(panel)
    for fragment in ("Add-on agent run: running", "Step 2", "Last tool: place_object_relative"):
        assert has_label(calls, fragment), (fragment, labels(calls))
    st.state, st.message = "FINISHED", "The lamp is left of the table."
    calls = draw(panel)
    assert has_label(calls, "The lamp is left of the table.") and has_label(calls, "Each command the agent ran"), labels(calls)
    assert "viga.apply_result" not in buttons(calls) and "viga.discard_result" in buttons(calls)


@check
def history_log_and_list_draw():
    root = os.path.join(TMP, "drawn_runs")
    make_run(root, "scene/t1/done", task="finished task", stop="accepted", age=30)
    make_run(root, "scene/t2/killed", task="killed task", stop=None, age=20)
    make_run(root, "gn/g1", task="", stop="failed", age=10)
    make_run(root, "agent/20250101-000000/lamp", task="put the lamp left", stop="cancelled", age=5)
    configure(runs_folder=root)
    bpy.ops.viga.refresh_history("EXEC_DEFAULT")
    calls = draw(panels.VIGA_PT_history)
    reports = [c["button"].values["path"] for c in calls if c["method"] == "operator" and c["args"]["operator"] == "viga.open_report"]
    resumes = [c["button"].values["path"] for c in calls if c["method"] == "operator" and c["args"]["operator"] == "viga.resume_run"]
    assert len(reports) == 4 and resumes == [os.path.join(root, "scene/t2/killed")], (reports, resumes)
    assert has_label(calls, "finished task") and has_label(calls, "unfinished") and has_label(calls, "g1")
    agent_rows = [c for c in calls if c["method"] == "label" and c["args"].get("text") == "put the lamp left"]
    assert agent_rows and agent_rows[0]["args"]["icon"] == "TOOL_SETTINGS", agent_rows
    configure(runs_folder=os.path.join(TMP, "empty_runs"))
    bpy.ops.viga.refresh_history("EXEC_DEFAULT")
    assert has_label(draw(panels.VIGA_PT_history), "No runs found")
    properties.append_log(status(), "a warning line", "WARNING")
    calls = draw(panels.VIGA_PT_log)
    assert any(c["method"] == "template_list" for c in calls) and "viga.clear_log" in buttons(calls)
    rows = []
    line = status().log[-1]
    panels.VIGA_UL_log.draw_item(None, bpy.context, Recorder(rows), status(), line, 0, status(), "log_index", 0)
    assert labels(rows) == ["a warning line"] and rows[0]["args"]["icon"] == "ERROR"


def make_run(root, relative, task, stop, age, extra_lines=()):
    folder = os.path.join(root, relative)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "args.json"), "w", encoding="utf-8") as handle:
        json.dump({"task": task, "max_iterations": 7}, handle)
    lines = [timed(1, "run_started", run_id="x", task=task, protocol_version=1)]
    if stop is not None:
        lines.append(timed(2, "run_finished", stop={"reason": stop}, iterations=1))
    lines.extend(extra_lines)
    events = os.path.join(folder, "events.jsonl")
    with open(events, "w", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    moment = time.time() - age
    os.utime(events, (moment, moment))
    return folder


@check
def history_listing():
    root = os.path.join(TMP, "listed_runs")
    newest = make_run(root, "scene/t1/newest", task="newest", stop="max_iterations", age=1)
    resumed = make_run(root, "scene/t1/resumed", task="resumed", stop="cancelled", age=5,
                       extra_lines=[timed(3, "run_started", run_id="x", task="resumed", protocol_version=1)])
    gn = make_run(root, "gn/20250101-1", task="", stop="accepted", age=9)
    agent = make_run(root, "agent/20250101-000000/put-the-lamp", task="put the lamp", stop="accepted", age=10)
    broken = make_run(root, "scene/t2/broken", task="broken", stop=None, age=12,
                      extra_lines=["not json at all", '{"type": "run_finished", "stop": {"reas'])
    with open(os.path.join(broken, "args.json"), "w", encoding="utf-8") as handle:
        handle.write("{ not json")
    make_run(root, "a/b/c/too_deep", task="deep", stop="accepted", age=0)
    runs = history.list_runs(root)
    assert [r.path for r in runs] == [newest, resumed, gn, agent, broken], [r.path for r in runs]
    assert [r.stop for r in runs] == ["max_iterations", "", "accepted", "accepted", ""], [r.stop for r in runs]
    assert [r.kind for r in runs] == ["scene", "scene", "gn", "agent", "scene"]
    assert [r.task for r in runs] == ["newest", "resumed", "", "put the lamp", ""]
    # A user's folder named like viga's run kinds does not make a run one of them.
    assert history.run_kind(os.path.join(root, "agent", "scene", "20250101-000000", "task")) == "scene"
    assert history.run_kind(os.path.join(root, "agent", "gn", "20250101-1")) == "gn"
    many = os.path.join(TMP, "many_runs")
    for number in range(25):
        make_run(many, "scene/t/run%02d" % number, task="run %d" % number, stop="accepted", age=number)
    listed = history.list_runs(many)
    assert len(listed) == history.MAX_RUNS and listed[0].task == "run 0", (len(listed), listed[0])
    assert history.list_runs(os.path.join(TMP, "no_such_folder")) == []
    configure(runs_folder=root)
    assert history.runs_root(bpy.context) == root
    configure(runs_folder="")
    assert history.runs_root(bpy.context) == os.path.join(os.path.expanduser("~"), ".viga", "runs")
    blend = os.path.join(TMP, "saved", "scene.blend")
    os.makedirs(os.path.dirname(blend), exist_ok=True)
    bpy.ops.wm.save_as_mainfile(filepath=blend)
    assert history.runs_root(bpy.context) == os.path.join(os.path.dirname(blend), "viga_runs")


@check
def command_lines():
    configure(provider="openai_compatible", model="-odd-model", base_url="http://localhost:11434/v1",
              api_key_env="LOCAL_KEY", verifier_engine="EEVEE", render_size=256, samples=16,
              max_iterations=4, memory_window=2, program_timeout=12.5, generator_tools="OFF",
              generator_max_turns=3, plan_each_iteration=False, assets_folder=TMP, polyhaven=True,
              assets_generate="MESHY")
    argv = runner.scene_command("/bin/viga", "/c.json", "-a task", ["/t.png", "Side=/s.png"], prefs(), "/runs",
                                continue_from="/runs/scene/1/a", camera="Front", frames="1,24")
    assert argv == [
        "/bin/viga", "run", "--attach", "--connection", "/c.json", "--apply", "never", "--events", "jsonl",
        "--task=-a task", "--target", "/t.png", "--target", "Side=/s.png", "--camera", "Front", "--frames", "1,24",
        "--continue", "/runs/scene/1/a", "--provider", "openai_compatible", "--model=-odd-model",
        "--base-url", "http://localhost:11434/v1", "--api-key-env", "LOCAL_KEY", "--engine", "eevee",
        "--resolution", "256", "--samples", "16", "--max-iterations", "4", "--memory", "2",
        "--program-timeout", "12.5", "--generator-tools", "off", "--generator-max-turns", "3", "--no-plan",
        "--assets", TMP, "--polyhaven", "--assets-generate", "meshy", "--output", "/runs",
    ], argv
    # The verifier's engine is viga's choice by default: Cycles when there is a target.
    configure(verifier_engine="AUTO")
    assert "--engine" not in runner.scene_command("/bin/viga", "/c.json", "t", ["/t.png"], prefs(), "/runs")
    configure()
    argv = runner.gn_command("/bin/viga", "/c.json", "scatter cubes", "Plane", prefs(), "/runs")
    assert argv == [
        "/bin/viga", "gn", "--attach", "--connection", "/c.json", "--events", "jsonl",
        "--object", "Plane", "--provider", "scripted", "--script", SCRIPT_FILE, "--output", "/runs",
        "--max-rounds", "6", "--", "scatter cubes",
    ], argv
    configure(gn_max_rounds=3, gn_gates={"output_connected", "no_modifier_error"}, gn_cache=True)
    argv = runner.gn_command("/bin/viga", "/c.json", "more", "Plane", prefs(), "/runs", continue_from="/runs/gn/1",
                             save_preset="dense", presets_root="/presets")
    assert argv[-13:] == ["--max-rounds", "3", "--gates", "no_modifier_error,output_connected", "--cache",
                          "--continue", "/runs/gn/1", "--save-preset", "dense", "--presets-dir", "/presets",
                          "--", "more"], argv
    # A preset is applied as a run of its own: no model, so no cache and no follow-up.
    argv = runner.gn_command("/bin/viga", "/c.json", "grid", "Plane", prefs(), "/runs", continue_from="/runs/gn/1",
                             preset="/presets/grid.json", presets_root="/presets")
    assert "--continue" not in argv and "--cache" not in argv, argv
    assert argv[-6:] == ["--preset", "/presets/grid.json", "--presets-dir", "/presets", "--", "grid"], argv
    configure()
    assert runner.apply_command("/bin/viga", "/c.json", "/runs/r", 0) == [
        "/bin/viga", "apply", "/runs/r", "--attach", "--connection", "/c.json", "--events", "jsonl"]
    assert runner.apply_command("/bin/viga", "/c.json", "/runs/r", 2)[-2:] == ["--iteration", "2"]
    # A request that is one of `viga gn`'s own words still reaches it as the request.
    argv = runner.gn_command("/bin/viga", "/c.json", "preset", "Plane", prefs(), "/runs")
    assert argv[-2:] == ["--", "preset"], argv
    argv = runner.gn_command("/bin/viga", "/c.json", "-x", "Plane", prefs(), "/runs", unrestricted=True)
    assert argv[1] == "gn" and argv[2] == "--attach" and argv[-4:] == ["--trusted-python", "--confirm-trusted", "--", "-x"], argv
    argv = runner.gn_command("/bin/viga", "/c.json", "x", "Plane", prefs(), "/runs", in_this_blender=True)
    assert argv[-4:] == ["--trusted", "--confirm-trusted", "--", "x"], argv
    argv = runner.gn_command("/bin/viga", "/c.json", "x", "Plane", prefs(), "/runs", unrestricted=True, in_this_blender=True)
    assert argv[-5:] == ["--trusted-python", "--trusted", "--confirm-trusted", "--", "x"], argv
    assert runner.resume_command("/bin/viga", "/r") == ["/bin/viga", "resume", "/r", "--events", "jsonl"]
    argv = runner.agent_command("/bin/viga", "/c.json", "put the lamp left", "", prefs(), "/runs",
                                continue_from="/runs/agent/1/a")
    assert argv == [
        "/bin/viga", "agent", "put the lamp left", "--attach", "--connection", "/c.json", "--events", "jsonl",
        "--continue", "/runs/agent/1/a", "--provider", "scripted", "--script", SCRIPT_FILE,
        "--max-steps", "12", "--resolution", "512", "--output", "/runs",
    ], argv
    argv = runner.agent_command("/bin/viga", "/c.json", "-x", "/addons", prefs(), "/runs")
    assert argv[1:3] == ["agent", "--attach"] and argv[-2:] == ["--", "-x"] and argv[7:9] == ["--addons", "/addons"], argv


@check
def finding_viga():
    fake, _argv = fake_viga("viga")
    configure(viga_path=os.path.join(TMP, "missing", "viga"))
    try:
        runner.find_viga(prefs())
        raise AssertionError("a missing viga path was accepted")
    except runner.RunnerError as exc:
        assert "preferences" in str(exc), exc
    configure(viga_path=fake)
    assert runner.find_viga(prefs()) == fake
    saved_path = os.environ.get("PATH", "")
    try:
        configure(viga_path="")
        os.environ["PATH"] = os.path.dirname(fake)
        assert runner.find_viga(prefs()) == fake, "viga on PATH was not found"
        os.environ["PATH"] = os.path.join(TMP, "empty_path")
        try:
            runner.find_viga(prefs())
            raise AssertionError("no viga anywhere was accepted")
        except runner.RunnerError as exc:
            assert "Preferences > Add-ons > viga > viga executable" in str(exc), exc
    finally:
        os.environ["PATH"] = saved_path


@check
def start_run_refusals():
    start = lambda: bpy.ops.viga.start_run("EXEC_DEFAULT")  # noqa: E731
    fake, _argv = fake_viga("never_started")
    configure(viga_path=fake)
    expect_refusal(start, "task field")
    settings().task = "   "
    expect_refusal(start, "task field")
    settings().task = SCENE_TASK
    settings().target_file = os.path.join(TMP, "no_such_target.png")
    expect_refusal(start, "target file does not exist")
    settings().target_file = ""
    settings().target_source = "IMAGE"
    empty = bpy.data.images.new("no pixels", 4, 4)
    empty.source = "FILE"
    empty.filepath = os.path.join(TMP, "vanished.png")
    settings().target_image = empty
    expect_refusal(start, "has no pixels")
    settings().target_source = "FILE"
    viga_bridge.addon_connection_path = lambda: None
    expect_refusal(start, "bridge is not serving")
    viga_bridge.addon_connection_path = lambda: CONNECTION_FILE
    configure(viga_path=os.path.join(TMP, "nowhere", "viga"))
    expect_refusal(start, "not an executable file")
    configure(provider="openai", model="gpt-4o", api_key_env="VIGA_UNSET_TEST_VARIABLE", viga_path=fake)
    keys._status["VIGA_UNSET_TEST_VARIABLE"] = (False, "not kept")
    expect_refusal(start, "No key for VIGA_UNSET_TEST_VARIABLE")
    configure(viga_path=fake)
    settings().mode = "GEOMETRY_NODES"
    expect_refusal(start, "request field")
    settings().request = "scatter cubes on the plane"
    bpy.context.view_layer.objects.active = None
    expect_refusal(start, "Select an object")
    bpy.context.view_layer.objects.active = bpy.data.objects["Cube"]
    configure(python_mode="TRUSTED", viga_path=fake)
    expect_refusal(start, "Trusted Python needs your confirmation")
    configure(viga_path=fake)
    bpy.context.window_manager.viga_gn_in_this_blender = True
    expect_refusal(start, "Running the steps in this Blender needs your confirmation")
    bpy.context.window_manager.viga_gn_in_this_blender = False
    settings().mode = "ADDON_TOOLS"
    expect_refusal(start, "command field")
    settings().command = "put the lamp to the left of the table"
    settings().addons_folder = os.path.join(TMP, "no_such_addons")
    expect_refusal(start, "add-on folder does not exist")
    settings().addons_folder = ""
    viga_bridge.addon_connection_path = lambda: None
    expect_refusal(start, "bridge is not serving")
    viga_bridge.addon_connection_path = lambda: CONNECTION_FILE
    configure(script="", viga_path=fake)
    expect_refusal(start, "needs a script file")
    assert not runner.is_running()
    assert not os.path.exists(fake + ".argv.json"), "a refused start must not run viga"


@check
def scene_run_streams_events():
    steps = []
    argv_file = start_scene_run()
    assert status().state == "RUNNING" and runner.is_running()
    wait_for_run(on_pump=lambda: steps.append((status().state, status().step, status().iteration)))
    recorded = recorded_argv(argv_file)["argv"]
    assert recorded == [
        "run", "--attach", "--connection", CONNECTION_FILE, "--apply", "never", "--events", "jsonl",
        "--task", SCENE_TASK, "--provider", "scripted", "--script", SCRIPT_FILE,
        "--resolution", "512", "--max-iterations", "5", "--memory", "3", "--program-timeout", "60",
        "--generator-tools", "auto", "--generator-max-turns", "6", "--output", RUNS,
    ], recorded
    seen = [step for state, step, _ in steps if state == "RUNNING"]
    for step in ("planning", "writing code", "fast retry (attempt 1)", "fast retry", "verifying"):
        assert step in seen, (step, seen)
    assert (1 in [i for _, _, i in steps]) and (2 in [i for _, _, i in steps])
    run = os.path.join(RUNS, "scene/20250101-000000/red_cube")
    st = status()
    assert st.state == "FINISHED" and st.kind == "SCENE", (st.state, st.message)
    assert (st.iteration, st.max_iterations, st.tokens_in, st.tokens_out) == (2, 5, 150, 30), (st.iteration, st.tokens_in, st.tokens_out)
    assert st.verdict == "Accepted" and st.message == "accepted after 2 iterations"
    assert st.run_folder == run and st.report_path == os.path.join(run, "report.html")
    assert st.final_program == os.path.join(run, "final.py")
    log = "\n".join(log_texts())
    for fragment in ("[scripted provider]", "NameError at line 2: name 'foo' is not defined", "Fast retry 1",
                     "Verdict: Needs changes: the cube is blue (and 1 more)", "the verifier looked twice",
                     "Tool set_camera: camera moved", "Run stopped: accepted", "Run finished"):
        assert fragment in log, (fragment, log)
    assert "future_event_type" not in log and "telemetry" not in log
    shots = runner.thumbnails()
    assert [s.view for s in shots] == ["front", "top"], shots
    assert [s.path for s in shots] == [os.path.join(run, "renders/2/front.png"), os.path.join(run, "renders/2/top.png")]
    assert run in [r.path for r in history.cached_runs()], "a finished run must refresh the history"
    assert "viga.apply_result" in buttons(draw(panels.VIGA_PT_status))


@check
def panel_runs_are_always_contained():
    # Blender started with containment off (and the tests' switch) does not pass either on:
    # viga runs with the preferences' choice.
    inherited = {name: os.environ.get(name) for name in ("VIGA_CONTAINMENT", "VIGA_CONTAIN_TEST_WITHOUT")}
    os.environ["VIGA_CONTAINMENT"] = "off"
    os.environ["VIGA_CONTAIN_TEST_WITHOUT"] = "reads"
    try:
        for choice, expected in (("AUTO", "auto"), ("REQUIRE", "require")):
            path, argv_file = fake_viga("fake_contained_" + expected, run_subdir="scene/c/" + expected,
                                        lines=[{"kind": "run_folder", "path": "{run}"}])
            configure(viga_path=path, containment=choice)
            settings().task = SCENE_TASK
            bpy.ops.viga.start_run("EXEC_DEFAULT")
            wait_for_run()
            recorded = recorded_argv(argv_file)
            assert (recorded["containment"], recorded["test_without"]) == (expected, None), recorded
    finally:
        for name, value in inherited.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    configure()


@check
def image_datablock_targets():
    generated = bpy.data.images.new("generated target", 16, 12)
    generated.generated_color = (0.8, 0.1, 0.1, 1.0)
    source = os.path.join(TMP, "packed_source.png")
    generated.filepath_raw = source
    generated.file_format = "PNG"
    generated.save()
    packed = bpy.data.images.load(source)
    packed.pack()
    os.remove(source)
    for name, image in (("generated", generated), ("packed", packed)):
        reset()
        settings().target_source = "IMAGE"
        settings().target_image = image
        kept = (image.filepath_raw, image.file_format)
        argv_file = start_scene_run(name="fake_target_" + name)
        wait_for_run()
        argv = recorded_argv(argv_file)["argv"]
        target = argv[argv.index("--target") + 1]
        assert target.endswith(".png") and not os.path.exists(target), "the temporary PNG must be removed after the run"
        copied = bpy.data.images.load(os.path.join(status().run_folder, "target.png"))
        assert tuple(copied.size) == (16, 12), (name, tuple(copied.size))
        assert abs(copied.pixels[0] - 0.8) < 0.02, (name, copied.pixels[0])
        assert (image.filepath_raw, image.file_format) == kept, "the user's image must keep its path and format"
    reset()
    target_file = write_png(os.path.join(TMP, "target_file.png"))
    settings().target_file = target_file
    argv_file = start_scene_run(name="fake_target_file")
    wait_for_run()
    argv = recorded_argv(argv_file)["argv"]
    assert argv[argv.index("--target") + 1] == target_file


def write_png(path):
    image = bpy.data.images.new("file target", 8, 8)
    image.filepath_raw = path
    image.file_format = "PNG"
    image.save()
    bpy.data.images.remove(image)
    return path


@check
def gn_run_trusted_and_no_apply():
    lines = [
        {"kind": "run_folder", "path": "{run}"},
        event(1, "run_started", run_id="g", task="scatter cubes", protocol_version=1),
        event(2, "gn_state_changed", round=1, **{"from": "idle", "to": "generating"}),
        event(3, "model_called", index=1, role="gn_assistant", latency_ms=3.0, usage={"input_tokens": 7, "output_tokens": 9}),
        event(4, "gn_state_changed", round=1, **{"from": "generating", "to": "requesting_context"}),
        event(5, "gn_step_finished", record={"round": 1, "step_id": "s1", "action_type": "GN_OPS", "status": "succeeded", "message": "added nodes", "started_at": 1}),
        event(6, "gates_checked", index=1, report={"success": False, "failed_gates": ["OUTPUT_CONNECTED"], "messages": ["the output is not linked"]}),
        event(7, "gn_state_changed", round=2, **{"from": "verifying", "to": "done"}),
        {"kind": "finished", "stop": {"reason": "accepted"}, "message": "built in 2 rounds", "final_program": None, "exit_code": 0},
    ]
    path, argv_file = fake_viga("fake_gn", run_subdir="gn/20250101-1", lines=lines,
                                files={"events.jsonl": timed(1, "run_started", run_id="g", task="scatter", protocol_version=1) + "\n"})
    configure(viga_path=path, python_mode="TRUSTED")
    settings().mode = "GEOMETRY_NODES"
    settings().request = "scatter cubes"
    steps = []
    bpy.ops.viga.start_run("EXEC_DEFAULT", confirmed_trusted=True)
    wait_for_run(on_pump=lambda: steps.append(status().step))
    argv = recorded_argv(argv_file)["argv"]
    assert argv == [
        "gn", "--attach", "--connection", CONNECTION_FILE, "--events", "jsonl", "--object", "Cube",
        "--provider", "scripted", "--script", SCRIPT_FILE, "--output", RUNS, "--max-rounds", "6",
        "--trusted-python", "--confirm-trusted", "--", "scatter cubes",
    ], argv
    assert "requesting context" in steps and "generating" in steps, steps
    st = status()
    assert (st.state, st.kind, st.iteration, st.final_program) == ("FINISHED", "GN", 2, ""), (st.state, st.kind, st.iteration)
    log = "\n".join(log_texts())
    assert "Gates failed: OUTPUT_CONNECTED. the output is not linked" in log and "Step s1 (GN_OPS): succeeded added nodes" in log, log
    expect_refusal(lambda: bpy.ops.viga.apply_result("EXEC_DEFAULT"), "scene run")
    assert history.run_kind(st.run_folder) == "gn"


AGENT_COMMAND = "put the lamp to the left of the table"
AGENT_ANSWER = "The lamp now stands to the left of the table."
AGENT_LINES = [
    {"kind": "run_folder", "path": "{run}"},
    event(1, "run_started", run_id="a1", task=AGENT_COMMAND, protocol_version=1),
    event(2, "model_called", index=1, role="agent", latency_ms=8.0, usage={"input_tokens": 300, "output_tokens": 20}),
    event(3, "tool_invoked", index=1, tool="place_object_relative", ok=False,
          summary='place_object_relative({"side":"west"}) refused: invalid arguments for place_object_relative'),
    event(4, "model_called", index=2, role="agent", latency_ms=8.0, usage={"input_tokens": 350, "output_tokens": 20}),
    event(5, "tool_invoked", index=2, tool="place_object_relative", ok=True,
          summary='place_object_relative({"side":"left"}) -> {"object":"Lamp"}'),
    event(6, "model_called", index=3, role="agent", latency_ms=8.0, usage={"input_tokens": 400, "output_tokens": 15}),
    event(7, "run_finished", stop={"reason": "accepted"}, iterations=3),
    {"kind": "report", "path": "{run}/report.html"},
    {"kind": "finished", "stop": {"reason": "accepted"}, "message": AGENT_ANSWER, "final_program": None, "exit_code": 0},
]


@check
def agent_run_streams_steps_and_tools():
    settings().mode = "ADDON_TOOLS"
    settings().command = AGENT_COMMAND
    settings().addons_folder = FIXTURE_ADDONS
    path, argv_file = fake_viga("fake_agent", run_subdir="agent/20250101-000000/put-the-lamp", lines=AGENT_LINES,
                                files={"args.json": json.dumps({"task": AGENT_COMMAND, "mode": "agent"}),
                                       "events.jsonl": timed(1, "run_started", run_id="a1", task=AGENT_COMMAND, protocol_version=1) + "\n",
                                       "report.html": "<html>agent</html>"})
    configure(viga_path=path)
    steps = []
    bpy.ops.viga.start_run("EXEC_DEFAULT")
    wait_for_run(on_pump=lambda: steps.append((status().iteration, status().step)))
    argv = recorded_argv(argv_file)["argv"]
    assert argv == [
        "agent", AGENT_COMMAND, "--attach", "--connection", CONNECTION_FILE, "--events", "jsonl",
        "--addons", FIXTURE_ADDONS, "--provider", "scripted", "--script", SCRIPT_FILE, "--max-steps", "12",
        "--resolution", "512", "--output", RUNS,
    ], argv
    for seen in ((1, "last tool: place_object_relative (refused)"), (2, "last tool: place_object_relative"), (3, "choosing the next command")):
        assert seen in steps, (seen, steps)
    st = status()
    assert (st.state, st.kind, st.iteration, st.message) == ("FINISHED", "AGENT", 3, AGENT_ANSWER), (st.state, st.kind, st.iteration, st.message)
    assert (st.tokens_in, st.tokens_out) == (1050, 55) and st.report_path.endswith("report.html")
    log = "\n".join(log_texts())
    assert "Tool place_object_relative: place_object_relative" in log and "Run stopped: accepted" in log, log
    assert history.run_kind(st.run_folder) == "agent"
    calls = draw(panels.VIGA_PT_status)
    assert has_label(calls, "The lamp now stands") and "viga.open_report" in buttons(calls), labels(calls)
    expect_refusal(lambda: bpy.ops.viga.apply_result("EXEC_DEFAULT"), "scene run")


@check
def cancel_run_interrupts_then_kills():
    expect_refusal(lambda: bpy.ops.viga.cancel_run("EXEC_DEFAULT"), "No viga run is running")
    path, argv_file = fake_viga("fake_sleeper", run_subdir="scene/s/sleep", lines=[{"kind": "run_folder", "path": "{run}"}], sleep=60)
    configure(viga_path=path)
    settings().task = "sleep"
    bpy.ops.viga.start_run("EXEC_DEFAULT")
    wait_until(lambda: os.path.exists(argv_file))
    expect_refusal(lambda: bpy.ops.viga.start_run("EXEC_DEFAULT"), "already running")
    expect_refusal(lambda: bpy.ops.viga.resume_run("EXEC_DEFAULT", path=RUNS), "already running")
    began = time.monotonic()
    bpy.ops.viga.cancel_run("EXEC_DEFAULT")
    assert status().state == "CANCELLING"
    assert buttons(draw(panels.VIGA_PT_main))["viga.cancel_run"]["args"]["text"] == "Cancelling..."
    wait_for_run(timeout=3.0)
    assert time.monotonic() - began < 0.8, "SIGINT should end a cooperative viga at once"
    assert status().state == "CANCELLED", status().state
    assert not any("killed it" in text for text in log_texts()), "a cooperative viga must not be killed"
    reset()
    path, argv_file = fake_viga("fake_stubborn", run_subdir="scene/s/stubborn", lines=[], sleep=60, ignore_sigint=True)
    configure(viga_path=path)
    settings().task = "stubborn"
    bpy.ops.viga.start_run("EXEC_DEFAULT")
    wait_until(lambda: os.path.exists(argv_file))
    time.sleep(0.3)  # let the fake install its SIGINT handler
    began = time.monotonic()
    bpy.ops.viga.cancel_run("EXEC_DEFAULT")
    wait_for_run(timeout=4.0)
    elapsed = time.monotonic() - began
    assert 1.0 <= elapsed < 2.0, "a viga ignoring SIGINT must be killed about 1 s after the cancel, took %.2f s" % elapsed
    assert status().state == "CANCELLED" and any("killed it" in text for text in log_texts())
    assert_dead(recorded_argv(argv_file)["pid"])


def start_stubborn_run(name, mode, field, text, **start):
    """Starts a run through a fake viga that ignores SIGINT (so the cancel ends in a kill),
    once the fake is up, with the user's last edit on an undo step; returns its argv file."""
    bpy.ops.ed.undo_push(message="the user's last edit")
    path, argv_file = fake_viga(name, run_subdir="stubborn/" + name, lines=[], sleep=60, ignore_sigint=True)
    configure(viga_path=path)
    settings().mode = mode
    setattr(settings(), field, text)
    bpy.ops.viga.start_run("EXEC_DEFAULT", **start)
    wait_until(lambda: os.path.exists(argv_file))
    time.sleep(0.3)  # let the fake install its SIGINT handler
    return argv_file


@check
def a_killed_gn_run_is_undone():
    # In trusted mode a Geometry Nodes run edits the scene through the bridge as it goes. One
    # that ignores the cancel is killed after the grace, before it can take its changes back
    # itself: the add-on takes them back, so the scene is as it was before the run.
    before = sorted(o.name for o in bpy.data.objects)
    bpy.context.window_manager.viga_gn_in_this_blender = True
    start_stubborn_run("fake_stubborn_gn", "GEOMETRY_NODES", "request", "scatter cubes", confirmed_trusted=True)
    bpy.data.objects.new("EditOfTheRun", None)  # what the run did, on no undo step of its own
    bpy.context.scene.collection.objects.link(bpy.data.objects["EditOfTheRun"])
    bpy.ops.viga.cancel_run("EXEC_DEFAULT")
    wait_for_run(timeout=4.0)
    assert status().state == "CANCELLED" and any("undone" in text for text in log_texts()), log_texts()
    assert sorted(o.name for o in bpy.data.objects) == before, sorted(o.name for o in bpy.data.objects)


@check
def a_killed_gn_run_on_a_copy_undoes_nothing():
    # On a copy, a run changes this scene only in its last bridge command, whole or not at all:
    # killed, there is nothing of it to undo, and what the person did meanwhile stays.
    argv_file = start_stubborn_run("fake_stubborn_gn_copy", "GEOMETRY_NODES", "request", "scatter cubes")
    assert "--trusted" not in recorded_argv(argv_file)["argv"]
    bpy.context.scene.collection.objects.link(bpy.data.objects.new("EditOfThePerson", None))
    bpy.ops.viga.cancel_run("EXEC_DEFAULT")
    wait_for_run(timeout=4.0)
    this_run = log_texts()[max(i for i, text in enumerate(log_texts()) if text.startswith("Started:")):]
    assert status().state == "CANCELLED" and not any("undone" in text for text in this_run), this_run
    assert "EditOfThePerson" in bpy.data.objects


@check
def gn_run_in_this_blender_is_confirmed_every_run():
    settings().mode = "GEOMETRY_NODES"
    settings().request = "scatter cubes"
    wm = bpy.context.window_manager
    assert operators.trust_confirmation(bpy.context) is None, "a run on a copy under safe mode asks nothing"
    configure(python_mode="TRUSTED")
    title, message = operators.trust_confirmation(bpy.context)
    assert "without safe mode" in title and "contained worker" in message, (title, message)
    configure()
    wm.viga_gn_in_this_blender = True
    title, message = operators.trust_confirmation(bpy.context)
    assert "in this Blender" in title, title
    for words in ("as you", "your files", "API keys", "not contained", "this run only"):
        assert words in message, (words, message)
    # Start opens that dialog, and only its confirm button runs the operator.
    asked = []
    fake_wm = types.SimpleNamespace(
        viga_gn_in_this_blender=True,
        invoke_confirm=lambda op, event, **options: asked.append(options) or {"RUNNING_MODAL"},
    )
    context = types.SimpleNamespace(scene=bpy.context.scene, window_manager=fake_wm, preferences=bpy.context.preferences)
    started = []
    operator = types.SimpleNamespace(confirmed_trusted=False, execute=lambda _context: started.append(1))
    assert operators.VIGA_OT_start_run.invoke(operator, context, None) == {"RUNNING_MODAL"}
    assert asked and asked[0]["title"] == title and asked[0]["confirm_text"] == "Start", asked
    assert operator.confirmed_trusted and not started
    # Confirmed, the run is trusted with this Blender; the next run asks again.
    path, argv_file = fake_viga("fake_gn_live", run_subdir="gn/live", lines=[
        {"kind": "finished", "stop": {"reason": "accepted"}, "message": "done", "final_program": None, "exit_code": 0},
    ])
    configure(viga_path=path)
    bpy.ops.viga.start_run("EXEC_DEFAULT", confirmed_trusted=True)
    wait_for_run()
    argv = recorded_argv(argv_file)["argv"]
    assert argv[-4:] == ["--trusted", "--confirm-trusted", "--", "scatter cubes"], argv
    expect_refusal(lambda: bpy.ops.viga.start_run("EXEC_DEFAULT"), "needs your confirmation for every run")


@check
def a_killed_agent_run_keeps_its_finished_commands():
    # The agent pushes one undo step after every command it finishes. Killed in the middle of
    # a command, that command's partial change is on no step: the add-on undoes it, and the
    # finished commands stay.
    bpy.ops.ed.undo_push(message="the user's last edit")
    bpy.context.scene.collection.objects.link(bpy.data.objects.new("FinishedCommand", None))
    bpy.ops.ed.undo_push(message="viga: place_object_relative")
    after_finished = sorted(o.name for o in bpy.data.objects)
    start_stubborn_run("fake_stubborn_agent", "ADDON_TOOLS", "command", "move everything")
    bpy.context.scene.collection.objects.link(bpy.data.objects.new("HalfDoneCommand", None))
    bpy.ops.viga.cancel_run("EXEC_DEFAULT")
    wait_for_run(timeout=4.0)
    assert status().state == "CANCELLED" and any("command in flight was undone" in text for text in log_texts()), log_texts()
    assert sorted(o.name for o in bpy.data.objects) == after_finished, sorted(o.name for o in bpy.data.objects)


def wait_until(condition, timeout=RUN_TIMEOUT_S):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        runner.pump()
        time.sleep(0.01)


def assert_dead(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return
    raise AssertionError("process %d is still alive" % pid)


@check
def failed_runs_say_why():
    path, _ = fake_viga("fake_crash", run_subdir="scene/c/crash", lines=[{"kind": "run_folder", "path": "{run}"}],
                        stderr=["INFO starting", "thread 'main' panicked at src/main.rs:1"], exit_code=3)
    configure(viga_path=path)
    settings().task = "crash"
    bpy.ops.viga.start_run("EXEC_DEFAULT")
    wait_for_run()
    st = status()
    assert st.state == "FAILED" and "code 3" in st.message and "panicked" in st.message, (st.state, st.message)
    assert has_label(draw(panels.VIGA_PT_status), "panicked")
    reset()
    path, _ = fake_viga("fake_refuse", lines=[{"kind": "error", "message": "model is empty; name the openai model"}], exit_code=2)
    configure(viga_path=path)
    settings().task = "refused"
    bpy.ops.viga.start_run("EXEC_DEFAULT")
    wait_for_run()
    assert (status().state, status().message) == ("FAILED", "model is empty; name the openai model"), status().message
    reset()
    path, _ = fake_viga("fake_failed", lines=[{"kind": "finished", "stop": {"reason": "failed", "message": "", "kind": "other"}, "message": "", "final_program": None, "exit_code": 1}],
                        stderr=["Error: Blender went away"], exit_code=1)
    configure(viga_path=path)
    settings().task = "failed"
    bpy.ops.viga.start_run("EXEC_DEFAULT")
    wait_for_run()
    assert status().state == "FAILED" and "Blender went away" in status().message, status().message


def scene_summary():
    return sorted((o.name, o.type, tuple(round(v, 4) for v in o.location)) for o in bpy.context.scene.objects)


def finished_scene_run(code):
    folder = tempfile.mkdtemp(prefix="apply_", dir=TMP)
    program = os.path.join(folder, "final.py")
    with open(program, "w", encoding="utf-8") as handle:
        handle.write(code)
    with open(os.path.join(folder, "args.json"), "w", encoding="utf-8") as handle:
        json.dump({"task": "a torus", "max_iterations": 3}, handle)
    st = status()
    st.state, st.kind, st.task, st.run_folder, st.final_program, st.applied = "FINISHED", "SCENE", "a torus", folder, program, False
    return program


CHAT_TASK = "a red crate"
CHAT_EVENTS = [
    ("run_started", dict(run_id="c1", task=CHAT_TASK, protocol_version=1)),
    ("iteration_started", dict(index=1)),
    ("plan_produced", dict(index=1, plan="1. a crate\n2. paint it red")),
    ("code_produced", dict(index=1, attempt=0, code="import bpy\nbpy.ops.mesh.primitive_cube_add()\n")),
    ("execution_finished", dict(index=1, attempt=0, result={"stdout": "", "stderr": "", "duration_ms": 4.0})),
    ("tool_invoked", dict(index=1, tool="set_camera", ok=True, summary="camera moved")),
    ("render_produced", dict(index=1, render_id="renders/1/front.png", view="front", width=8, height=6,
                             render_ms=3.0, engine="CYCLES")),
    ("feedback_produced", dict(index=1, feedback={"visual_differences": ["it is grey"], "suggestions": [], "accepted": False})),
    ("iteration_finished", dict(record={"index": 1, "code": "import bpy\nbpy.ops.mesh.primitive_cube_add()\n",
                                        "failure": "E3"})),
    ("iteration_started", dict(index=2)),
    ("code_produced", dict(index=2, attempt=0, code="raise ValueError('no')\n")),
    ("execution_finished", dict(index=2, attempt=0, failure="E1", result={"stdout": "", "stderr": "", "duration_ms": 1.0,
                                "error": {"error_type": "ValueError", "message": "no", "traceback": "", "line": 1}})),
    ("iteration_finished", dict(record={"index": 2, "code": "raise ValueError('no')\n", "failure": "E1"})),
    ("run_finished", dict(stop={"reason": "max_iterations"}, iterations=2)),
]


def chat_run(name, task=CHAT_TASK, subdir="scene/20250101-000000/red_crate"):
    """A fake scene run whose stream and events.jsonl hold CHAT_EVENTS, with model text."""
    lines = [{"kind": "run_folder", "path": "{run}"},
             {"kind": "model_text", "index": 1, "role": "planner", "delta": "1. a cr"},
             {"kind": "model_text", "index": 1, "role": "planner", "delta": "ate"}]
    lines += [event(seq, kind, **fields) for seq, (kind, fields) in enumerate(CHAT_EVENTS, start=1)]
    lines.append({"kind": "finished", "stop": {"reason": "max_iterations"}, "message": "budget spent",
                  "final_program": "{run}/final.py", "exit_code": 0})
    files = {
        "args.json": json.dumps({"task": task, "max_iterations": 2}),
        "events.jsonl": "".join(timed(seq, kind, **fields) + "\n" for seq, (kind, fields) in enumerate(CHAT_EVENTS, start=1)),
        "renders/1/front.png": "PNG",
        "target.png": "PNG",
        "final.py": "import bpy\n",
    }
    path, argv_file = fake_viga(name, run_subdir=subdir, lines=lines, files=files)
    configure(viga_path=path)
    settings().task = task
    return argv_file


def chat_kinds():
    return [entry.kind for entry in bpy.context.window_manager.viga_chat]


@check
def the_chat_follows_a_run_then_reads_it_back_from_its_folder():
    argv_file = chat_run("fake_chat")
    seen_streaming = []
    bpy.ops.viga.start_run("EXEC_DEFAULT")
    wait_for_run(on_pump=lambda: seen_streaming.append(status().streaming_text))
    assert "1. a crate" in seen_streaming, seen_streaming
    assert "--continue" not in recorded_argv(argv_file)["argv"], "the first message starts the conversation"
    run = os.path.join(RUNS, "scene/20250101-000000/red_crate")
    assert [r.path for r in settings().scene_runs] == [run], "the turn joins the .blend's conversation"
    wait_until_idle()  # the chat is read again from the run folder
    wm = bpy.context.window_manager
    assert wm.viga_chat_mode == "SCENE"
    kinds = chat_kinds()
    assert kinds[:9] == ["REQUEST", "ITERATION", "PLAN", "CODE", "RESULT", "TOOL", "RENDER", "VERDICT", "ITERATION"], kinds
    assert kinds[-1] == "END", kinds
    entries = list(wm.viga_chat)
    assert entries[0].text == CHAT_TASK and entries[0].turn == 1
    assert entries[1].ran and not entries[8].ran, "iteration 1 ran (E3), iteration 2 failed (E1)"
    render = entries[6]
    assert render.image == os.path.join(run, "renders/1/front.png") and render.target == os.path.join(run, "target.png")
    assert "Cycles" in render.text, render.text
    assert entries[3].detail.startswith("import bpy") and "2. paint it red" in entries[2].detail
    # Programs fold under their iteration.
    shown = chat.visible(wm.viga_chat)
    assert [k for k, v in zip(kinds, shown) if not v] == ["CODE", "CODE"], (kinds, shown)
    entries[1].expanded = True
    assert chat.visible(wm.viga_chat)[3], "an open iteration shows its program"
    # Every line draws; an iteration that ran offers Apply, the render shows beside the target.
    for entry in entries:
        rows = []
        panels.VIGA_UL_chat.draw_item(None, bpy.context, Recorder(rows), wm, entry, 0, wm, "viga_chat_index", 0)
        assert rows, entry.kind
        if entry.kind == "ITERATION" and entry.ran:
            apply = buttons(rows)["viga.apply_result"]["button"].values
            assert apply == {"run_folder": run, "iteration": 1}, apply
    main = draw(panels.VIGA_PT_main)
    assert any(c["method"] == "template_list" and c["args"]["listtype_name"] == "VIGA_UL_chat" for c in main)
    wm.viga_chat_index = 6
    assert has_label(draw(panels.VIGA_PT_main), "target")
    wm.viga_chat_index = 3
    assert has_label(draw(panels.VIGA_PT_main), "bpy.ops.mesh.primitive_cube_add()"), "the program shows whole"
    # The review before applying: the plan, and each iteration that ran with Apply.
    calls = draw(panels.VIGA_PT_status)
    assert has_label(calls, "Review before applying") and has_label(calls, "Plan: 1. a crate"), labels(calls)
    assert has_label(calls, "Iteration 1 (the result)"), labels(calls)
    applies = [c["button"].values for c in calls if c["method"] == "operator" and c["args"]["operator"] == "viga.apply_result"]
    assert {"run_folder": run, "iteration": 1} in applies and {} in applies, applies
    bpy.ops.viga.show_program("EXEC_DEFAULT", run_folder=run, iteration=1)
    assert wm.viga_chat[wm.viga_chat_index].kind == "CODE"


@check
def a_new_message_continues_the_conversation():
    chat_run("fake_chat_first", subdir="scene/1/first")
    bpy.ops.viga.start_run("EXEC_DEFAULT")
    wait_for_run()
    first = os.path.join(RUNS, "scene/1/first")
    argv_file = chat_run("fake_chat_second", task="now make it red", subdir="scene/2/second")
    assert buttons(draw(panels.VIGA_PT_main))["viga.start_run"]["args"]["text"] == "Send"
    bpy.ops.viga.start_run("EXEC_DEFAULT")
    wait_for_run()
    wait_until_idle()
    argv = recorded_argv(argv_file)["argv"]
    assert argv[argv.index("--continue") + 1] == first, argv
    assert [r.path for r in settings().scene_runs] == [first, os.path.join(RUNS, "scene/2/second")]
    requests = [(e.turn, e.text) for e in bpy.context.window_manager.viga_chat if e.kind == "REQUEST"]
    assert requests == [(1, CHAT_TASK), (2, "now make it red")], requests
    # Each mode has its own conversation.
    settings().mode = "ADDON_TOOLS"
    wait_until_idle()
    assert len(bpy.context.window_manager.viga_chat) == 0 and bpy.context.window_manager.viga_chat_mode == "ADDON_TOOLS"
    settings().mode = "SCENE"
    wait_until_idle()
    assert chat_kinds().count("REQUEST") == 2
    # A new conversation: the next message continues nothing.
    bpy.ops.viga.new_conversation("EXEC_DEFAULT")
    assert len(settings().scene_runs) == 0 and len(bpy.context.window_manager.viga_chat) == 0
    argv_file = chat_run("fake_chat_third", subdir="scene/3/third")
    bpy.ops.viga.start_run("EXEC_DEFAULT")
    wait_for_run()
    assert "--continue" not in recorded_argv(argv_file)["argv"]


@check
def the_conversation_survives_saving_and_opening_the_blend():
    chat_run("fake_chat_saved", subdir="scene/4/saved")
    bpy.ops.viga.start_run("EXEC_DEFAULT")
    wait_for_run()
    wait_until_idle()
    blend = os.path.join(TMP, "conversation.blend")
    bpy.ops.wm.save_as_mainfile(filepath=blend, compress=False)
    bpy.ops.wm.read_homefile(use_empty=True)
    wait_until_idle()
    assert len(settings().scene_runs) == 0
    bpy.ops.wm.open_mainfile(filepath=blend)
    wait_until_idle()
    assert [r.path for r in settings().scene_runs] == [os.path.join(RUNS, "scene/4/saved")]
    assert chat_kinds()[:2] == ["REQUEST", "ITERATION"], chat_kinds()
    with open(blend, "rb") as handle:
        assert b"scene/4/saved" in handle.read(), "the .blend keeps the run folder list"


@check
def a_key_given_in_the_preferences_goes_to_viga_on_its_standard_input():
    secret = "sk-panel-canary-5150"
    path, argv_file = fake_viga("fake_key", read_stdin=True, lines=["OPENAI_API_KEY: kept in the Secret Service keyring"])
    configure(provider="openai", model="gpt-4o", api_key_env="OPENAI_API_KEY", viga_path=path)
    wait_until_idle()
    keys._status.clear()
    bpy.ops.viga.set_key("EXEC_DEFAULT", variable="OPENAI_API_KEY", key=secret)
    wait_until_idle()
    recorded = recorded_argv(argv_file)
    # The last command the fake saw is the status check after the set; the set came first.
    assert recorded["argv"][:2] == ["key", "status"], recorded["argv"]
    log = "\n".join(log_texts())
    assert "OPENAI_API_KEY: kept in the Secret Service keyring" in log, log
    assert secret not in log
    assert keys.cached_status("OPENAI_API_KEY") is True
    last = bpy.context.window_manager.operator_properties_last("viga.set_key")
    assert last.key == "", "the dialog must not remember the key"
    for name in preferences.VigaPreferences.__annotations__:
        assert secret not in str(getattr(prefs(), name)), name
    settings().task = "a marker the saved file must hold"
    blend = os.path.join(TMP, "after_key.blend")
    bpy.ops.wm.save_as_mainfile(filepath=blend, compress=False)
    with open(blend, "rb") as handle:
        saved = handle.read()
    assert b"a marker the saved file must hold" in saved, "the file is not readable as text: the check below would see nothing"
    assert secret.encode() not in saved, "the key reached the .blend"


@check
def a_key_goes_in_on_stdin_never_on_the_command_line():
    secret = "sk-stdin-canary-77"
    path, argv_file = fake_viga("fake_key_set", read_stdin=True, lines=["X_KEY: kept"])
    configure(provider="openai", model="gpt-4o", api_key_env="X_KEY", viga_path=path)
    wait_until_idle()
    done = []
    keys._key_command(prefs(), "X_KEY", "set", secret, lambda level, text: done.append((level, text)))
    while not done:
        runner.pump()
        time.sleep(0.005)
    # Read before the status check that follows overwrites the fake's record.
    recorded = recorded_argv(argv_file)
    assert recorded["argv"] == ["key", "set", "X_KEY"] and recorded["stdin"] == secret, recorded
    assert done == [("INFO", "X_KEY: kept")], done
    wait_until_idle()


@check
def geometry_nodes_presets_from_the_panel():
    store = os.path.join(TMP, "presets")
    os.makedirs(store, exist_ok=True)
    with open(os.path.join(store, "grid.json"), "w", encoding="utf-8") as handle:
        handle.write("{}")
    configure(presets_folder=store)
    bpy.ops.viga.refresh_presets("EXEC_DEFAULT")
    assert operators.cached_presets() == ["grid"]
    settings().mode = "GEOMETRY_NODES"
    settings().request = "a grid"
    settings().preset = "grid"
    calls = draw(panels.VIGA_PT_presets)
    assert has_label(calls, "Stored: grid") and has_label(calls, "applies the preset 'grid'"), labels(calls)
    path, argv_file = fake_viga("fake_gn_preset", run_subdir="gn/p1", lines=[
        {"kind": "run_folder", "path": "{run}"},
        {"kind": "finished", "stop": {"reason": "accepted"}, "message": "preset applied", "final_program": None, "exit_code": 0},
    ], files={"request.json": json.dumps({"request": "a grid"})})
    configure(viga_path=path, presets_folder=store)
    bpy.ops.viga.start_run("EXEC_DEFAULT")
    wait_for_run()
    argv = recorded_argv(argv_file)["argv"]
    assert argv[argv.index("--preset") + 1] == os.path.join(store, "grid.json") and "--continue" not in argv, argv
    settings().preset = "missing"
    expect_refusal(lambda: bpy.ops.viga.start_run("EXEC_DEFAULT"), "There is no preset 'missing'")
    path, argv_file = fake_viga("fake_preset_import", lines=["imported preset \"dense\""])
    configure(viga_path=path, presets_folder=store)
    bpy.ops.viga.import_preset("EXEC_DEFAULT", filepath=os.path.join(TMP, "dense.json"))
    wait_until_idle()
    assert recorded_argv(argv_file)["argv"] == ["gn", "preset", "import", os.path.join(TMP, "dense.json"), "--presets-dir", store]
    settings().preset = "grid"
    bpy.ops.viga.export_preset("EXEC_DEFAULT", filepath=os.path.join(TMP, "out.json"))
    wait_until_idle()
    assert recorded_argv(argv_file)["argv"] == ["gn", "preset", "export", "grid", os.path.join(TMP, "out.json"), "--presets-dir", store]


@check
def scene_targets_views_folders_and_frames():
    first = write_png(os.path.join(TMP, "front.png"))
    side = write_png(os.path.join(TMP, "side.png"))
    settings().target_file = first
    settings().target_camera = "Front"
    settings().frames = "1,12"
    bpy.ops.viga.add_target_view("EXEC_DEFAULT")
    view = settings().target_views[0]
    view.camera, view.file = "Side", side
    calls = draw(panels.VIGA_PT_main)
    assert {"target_camera", "frames", "camera", "file"} <= set(drawn_props(calls)), drawn_props(calls)
    argv_file = start_scene_run(name="fake_views")
    wait_for_run()
    argv = recorded_argv(argv_file)["argv"]
    targets = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--target"]
    assert targets == [first, "Side=" + side] and argv[argv.index("--camera") + 1] == "Front", argv
    assert argv[argv.index("--frames") + 1] == "1,12"
    bpy.ops.viga.remove_target_view("EXEC_DEFAULT", index=0)
    settings().target_source = "FOLDER"
    settings().target_folder = os.path.join(TMP, "no_such_views")
    expect_refusal(lambda: bpy.ops.viga.start_run("EXEC_DEFAULT"), "target folder does not exist")


@check
def undo_steps_are_named_after_the_task_cut_short():
    assert viga_bridge.undo_name("a torus") == "viga: a torus"
    long_task = "a very long task " * 10
    assert viga_bridge.undo_name(long_task) == "viga: " + long_task[:60] + "\u2026"


@check
def apply_goes_through_viga_apply():
    # The panel applies a result the way viga does (`viga apply`), whatever that is; the one
    # undo step it makes is checked against the real viga (bins/viga/tests/suite/panel.rs).
    program = finished_scene_run("import bpy\n")
    folder = os.path.dirname(program)
    applied = [{"kind": "finished", "stop": {"reason": "accepted"}, "message": "applied iteration 1", "exit_code": 0}]
    path, argv_file = fake_viga("fake_apply", lines=applied)
    configure(viga_path=path)
    before = scene_summary()
    bpy.ops.viga.apply_result("EXEC_DEFAULT", iteration=1)
    assert status().applying
    expect_refusal(lambda: bpy.ops.viga.apply_result("EXEC_DEFAULT"), "applying a result")
    wait_until_idle()
    assert recorded_argv(argv_file)["argv"] == [
        "apply", folder, "--attach", "--connection", CONNECTION_FILE, "--events", "jsonl", "--iteration", "1"]
    st = status()
    assert (st.applied, st.applied_iteration, st.applying) == (True, 1, False), (st.applied, st.applied_iteration)
    assert scene_summary() == before, "the fake applies nothing; the panel must not apply anything itself"
    assert has_label(draw(panels.VIGA_PT_status), "Applied iteration 1")
    assert "applied iteration 1" in log_texts()[-1], "the log says what viga applied: %s" % log_texts()
    # Refused by viga (the program failed on this scene and was undone): not applied.
    finished_scene_run("import bpy\n")
    refused = [{"kind": "error", "message": "the result failed on your current scene and was undone (ZeroDivisionError at line 3: division by zero); your scene is as it was"}]
    path, _argv = fake_viga("fake_apply_refused", lines=refused, exit_code=1)
    configure(viga_path=path)
    bpy.ops.viga.apply_result("EXEC_DEFAULT")
    wait_until_idle()
    assert not status().applied
    assert any("Apply failed: the result failed" in text for text in log_texts()), log_texts()
    status().run_folder = os.path.join(TMP, "no_such_run")
    expect_refusal(lambda: bpy.ops.viga.apply_result("EXEC_DEFAULT"), "no finished scene run")


@check
def apply_result_in_this_blender_is_trusted_confirmed_and_one_undo_step():
    bpy.ops.ed.undo_push(message="before viga")
    before = scene_summary()
    finished_scene_run("import bpy\nbpy.ops.mesh.primitive_torus_add(location=(0, 0, 3))\nbpy.context.active_object.name = 'viga_torus'\n")
    expect_refusal(lambda: bpy.ops.viga.apply_result("EXEC_DEFAULT", trusted=True), "needs your confirmation")
    assert "viga_torus" not in bpy.data.objects
    title, message = operators.apply_trust_confirmation()
    assert "this Blender" in title and "not contained" in message, (title, message)
    bpy.ops.viga.apply_result("EXEC_DEFAULT", trusted=True, confirmed_trusted=True)
    assert "viga_torus" in bpy.data.objects and status().applied
    assert scene_summary() != before
    bpy.ops.ed.undo()
    assert scene_summary() == before, "one undo must restore the scene"
    bpy.ops.ed.undo_push(message="before failing viga")
    before = scene_summary()
    finished_scene_run("import bpy\nbpy.ops.mesh.primitive_cube_add(location=(5, 5, 5))\n1 / 0\n")
    expect_refusal(lambda: bpy.ops.viga.apply_result("EXEC_DEFAULT", trusted=True, confirmed_trusted=True),
                   "ZeroDivisionError at line 3")
    assert scene_summary() == before, "a failed program must leave the scene as it was"
    assert not status().applied
    program = finished_scene_run("")
    os.remove(program)
    expect_refusal(lambda: bpy.ops.viga.apply_result("EXEC_DEFAULT", trusted=True, confirmed_trusted=True),
                   "Cannot read the program")
    # Another iteration's program is read from the run folder's codes/.
    folder = os.path.dirname(finished_scene_run(""))
    os.makedirs(os.path.join(folder, "codes"))
    with open(os.path.join(folder, "codes", "1.py"), "w", encoding="utf-8") as handle:
        handle.write("import bpy\nbpy.ops.mesh.primitive_monkey_add()\nbpy.context.active_object.name = 'viga_first'\n")
    bpy.ops.viga.apply_result("EXEC_DEFAULT", iteration=1, trusted=True, confirmed_trusted=True)
    assert "viga_first" in bpy.data.objects
    bpy.ops.ed.undo()


@check
def discard_result_forgets():
    expect_refusal(lambda: bpy.ops.viga.discard_result("EXEC_DEFAULT"), "no ended run")
    finished_scene_run("")
    before = scene_summary()
    bpy.ops.viga.discard_result("EXEC_DEFAULT")
    st = status()
    assert (st.state, st.final_program, st.applied) == ("IDLE", "", False)
    assert runner.thumbnails() == [] and scene_summary() == before
    assert draw(panels.VIGA_PT_status) is None


@check
def refresh_addon_tools():
    settings().mode = "ADDON_TOOLS"
    bpy.ops.viga.refresh_addon_tools("EXEC_DEFAULT", folder=FIXTURE_ADDONS)
    tools = bpy.context.window_manager.viga_tools
    found = sorted((t.addon_id, t.name, t.available) for t in tools)
    assert found == [
        ("material_painter", "list_materials", True), ("material_painter", "paint_object", True),
        ("object_placer", "list_scene_objects", True), ("object_placer", "place_object_relative", True),
    ], found
    assert all(t.description for t in tools)
    calls = draw(panels.VIGA_PT_main)
    assert any(c["method"] == "template_list" for c in calls) and has_label(calls, "(4)")
    rows = []
    panels.VIGA_UL_addon_tools.draw_item(None, bpy.context, Recorder(rows), None, tools[0], 0, None, "", 0)
    assert tools[0].name in labels(rows)
    expect_refusal(lambda: bpy.ops.viga.refresh_addon_tools("EXEC_DEFAULT", folder=os.path.join(TMP, "nope")), "Cannot list add-ons")
    bpy.ops.viga.refresh_addon_tools("EXEC_DEFAULT")  # installed add-ons only: none of them has a manifest here


@check
def open_report_uses_the_opener():
    opened = []
    operators.open_in_browser = opened.append
    folder = os.path.join(TMP, "report_run")
    os.makedirs(folder, exist_ok=True)
    expect_refusal(lambda: bpy.ops.viga.open_report("EXEC_DEFAULT", path=folder), "There is no report.html")
    expect_refusal(lambda: bpy.ops.viga.open_report("EXEC_DEFAULT", path=""), "run folder is empty")
    with open(os.path.join(folder, "report.html"), "w", encoding="utf-8") as handle:
        handle.write("<html></html>")
    bpy.ops.viga.open_report("EXEC_DEFAULT", path=folder)
    assert opened == [os.path.join(folder, "report.html")], opened


@check
def resume_run_streams_events():
    expect_refusal(lambda: bpy.ops.viga.resume_run("EXEC_DEFAULT", path=os.path.join(TMP, "not_a_run")), "Not a viga run folder")
    agent = make_run(os.path.join(TMP, "agent_runs"), "agent/20250101-000000/lamp", task="lamp", stop="cancelled", age=0)
    expect_refusal(lambda: bpy.ops.viga.resume_run("EXEC_DEFAULT", path=agent), "cannot be resumed")
    folder = make_run(os.path.join(TMP, "resumable"), "scene/t/killed", task="killed task", stop=None, age=0)
    lines = [
        event(1, "run_started", run_id="x", task="killed task", protocol_version=1, resumed_from_iteration=2),
        event(2, "iteration_started", index=3),
        {"kind": "finished", "stop": {"reason": "max_iterations"}, "message": "budget spent", "final_program": os.path.join(folder, "final.py"), "exit_code": 0},
    ]
    path, argv_file = fake_viga("fake_resume", lines=lines)
    configure(viga_path=path)
    bpy.ops.viga.resume_run("EXEC_DEFAULT", path=folder)
    wait_for_run()
    assert recorded_argv(argv_file)["argv"] == ["resume", folder, "--events", "jsonl"]
    st = status()
    assert (st.state, st.kind, st.iteration, st.max_iterations, st.task) == ("FINISHED", "SCENE", 3, 7, "killed task"), (st.state, st.iteration, st.max_iterations)
    assert any("resumed after iteration 2" in text for text in log_texts())


@check
def refresh_history_and_clear_log():
    root = os.path.join(TMP, "history_op")
    run = make_run(root, "scene/t/one", task="one", stop="accepted", age=0)
    configure(runs_folder=root)
    bpy.ops.viga.refresh_history("EXEC_DEFAULT")
    assert [r.path for r in history.cached_runs()] == [run] and history.cached_root() == root
    properties.append_log(status(), "something")
    bpy.ops.viga.clear_log("EXEC_DEFAULT")
    assert len(status().log) == 0


@check
def log_is_bounded():
    st = status()
    st.log.clear()
    for number in range(properties.MAX_LOG_LINES + 50):
        properties.append_log(st, "line %d" % number)
    assert len(st.log) == properties.MAX_LOG_LINES and st.log[0].text == "line 50"
    assert st.log_index == properties.MAX_LOG_LINES - 1
    properties.append_log(st, "first\nsecond", "ERROR")
    assert [st.log[-2].text, st.log[-1].text] == ["first", "second"] and st.log[-1].level == "ERROR"


@check
def unregister_kills_a_running_child():
    path, argv_file = fake_viga("fake_orphan", lines=[], sleep=60)
    configure(viga_path=path)
    settings().task = "orphan"
    bpy.ops.viga.start_run("EXEC_DEFAULT")
    wait_until(lambda: os.path.exists(argv_file))
    viga_blender.unregister()
    try:
        assert_dead(recorded_argv(argv_file)["pid"])
        assert not bpy.app.timers.is_registered(runner.tick)
        assert not hasattr(bpy.types.WindowManager, "viga_run")
    finally:
        viga_blender.register()
    assert bpy.app.timers.is_registered(runner.tick) and not runner.is_running()


# --------------------------------------------------------------------------- main


@contextlib.contextmanager
def captured_stdout():
    """Holds back what a check prints, Blender's operator reports included (written by C code
    straight to file descriptor 1), so a passing check is one line; a failing one shows it."""
    result = types.SimpleNamespace(text="")
    sys.stdout.flush()
    saved = os.dup(1)
    with tempfile.TemporaryFile(mode="w+b") as sink:
        os.dup2(sink.fileno(), 1)
        try:
            yield result
        finally:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)
            sink.seek(0)
            result.text = sink.read().decode("utf-8", "replace")

ORIGINAL_OPENER = operators.open_in_browser


def main():
    with open(SCRIPT_FILE, "w", encoding="utf-8") as handle:
        handle.write("{}")
    with open(CONNECTION_FILE, "w", encoding="utf-8") as handle:
        handle.write("{}")
    os.makedirs(os.path.join(TMP, "empty_path"), exist_ok=True)
    viga_blender.register()
    if bpy.context.preferences.addons.get(PACKAGE) is None:
        # Enabling through the preferences is what gives an add-on its preferences entry.
        bpy.context.preferences.addons.new().module = PACKAGE
    passed = failed = 0
    for function in CHECKS:
        with captured_stdout() as output:
            try:
                reset()
                function()
                problem = None
            except Exception:  # noqa: BLE001 - report every failing check, then carry on
                problem = traceback.format_exc()
        if problem is None:
            passed += 1
            print("ok   %s" % function.__name__)
        else:
            failed += 1
            print("FAIL %s\n%s%s" % (function.__name__, textwrap.indent(problem, "    "),
                                     textwrap.indent(output.text, "    | ")))
    reset()
    viga_blender.unregister()
    shutil.rmtree(TMP, ignore_errors=True)
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


main()
