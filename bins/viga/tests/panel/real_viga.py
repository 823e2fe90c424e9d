# The panel against the REAL viga binary, inside the bpy module (run by bins/viga/tests/suite/panel.rs):
#
#   python real_viga.py -- --zip Z --work DIR --scripts DIR --server URL --key-file FILE
#
# The add-on is unpacked from the zip `viga addon build` wrote and enabled as in a person's
# Blender: its bridge serves this process (background mode fires no timers, so the checks
# drive the bridge's poll and the runner's tick themselves), and every run is a real
# `viga run|gn|apply|key` child process with a scripted provider (or a local replay server).
# Each check prints one line; the last line is "N passed, M failed".

import argparse
import json
import os
import sys
import time
import traceback
import zipfile

import bpy

RUN_TIMEOUT_S = 240.0


def parse_args():
    argv = sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else sys.argv[1:]
    parser = argparse.ArgumentParser()
    for name in ("--zip", "--work", "--scripts", "--server", "--key-file"):
        parser.add_argument(name, required=True)
    return parser.parse_args(argv)


ARGS = parse_args()
# The key a person would paste; read from a file, since on this process's command line every
# process could read it (the check below looks at all of them).
with open(ARGS.key_file, "r", encoding="utf-8") as key_file:
    KEY = key_file.read().strip()
PACKAGE_DIR = os.path.join(ARGS.work, "package")
with zipfile.ZipFile(ARGS.zip) as archive:
    archive.extractall(os.path.join(PACKAGE_DIR, "viga_blender"))
sys.path.insert(0, PACKAGE_DIR)

import viga_blender  # noqa: E402 - unpacked just above
from viga_blender import background, chat, keys, preferences, runner  # noqa: E402

RUNS = os.path.join(ARGS.work, "runs")


def script(name):
    return os.path.join(ARGS.scripts, name)


def prefs():
    return preferences.get(bpy.context)


def settings():
    return bpy.context.scene.viga


def status():
    return bpy.context.window_manager.viga_run


def pump_until(condition, timeout=RUN_TIMEOUT_S, what="the run"):
    """Serves the bridge and pumps the panel (Blender's timers would) until condition()."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("%s did not end within %.0f s; log:\n%s" % (what, timeout, log()))
        for poll in viga_blender._bridge_poll:
            poll()
        runner.pump()
        time.sleep(0.01)


def settled():
    return not runner.is_running() and not background.busy() and not chat.is_loading()


def log():
    return "\n".join(line.text for line in status().log)


def object_names():
    return sorted(o.name for o in bpy.context.scene.objects)


def send(mode, message, **overrides):
    """Types `message` in `mode` and presses Send/Start; waits for the run and the chat."""
    settings().mode = mode
    field = {"SCENE": "task", "GEOMETRY_NODES": "request", "ADDON_TOOLS": "command"}[mode]
    setattr(settings(), field, message)
    for key, value in overrides.items():
        setattr(prefs(), key, value)
    pump_until(settled, what="reading the conversation")
    bpy.ops.viga.start_run("EXEC_DEFAULT")
    pump_until(settled)
    assert status().state == "FINISHED", (status().state, status().message, log())
    return status().run_folder


def events_of(folder):
    with open(os.path.join(folder, "events.jsonl"), "r", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def argv_of_last_start():
    started = [line.text for line in status().log if line.text.startswith("Started: ")]
    return started[-1]


CHECKS = []


def check(function):
    CHECKS.append(function)
    return function


@check
def a_two_turn_scene_conversation_with_a_target_renders_in_cycles_and_applies_any_iteration():
    settings().target_source = "FILE"
    settings().target_file = os.path.join(ARGS.scripts, "target.png")
    first = send("SCENE", "a crate", provider="scripted", script=script("scene_first.json"))
    started = argv_of_last_start()
    assert "--engine" not in started and "--continue" not in started, started
    engines = {e.get("engine") for e in events_of(first) if e.get("type") == "render_produced"}
    assert engines == {"CYCLES"}, "a run with a target verifies in Cycles: %s" % engines
    pump_until(settled)
    renders = [e for e in bpy.context.window_manager.viga_chat if e.kind == "RENDER"]
    assert renders and all(e.target.endswith("target.png") for e in renders), [(e.text, e.target) for e in renders]
    ran = [index for index, _render, _code in chat.ran_iterations(bpy.context.window_manager, first)]
    assert ran == [1, 2], ran
    # Apply an earlier iteration than the result: one undo step, taken back by one undo.
    bpy.ops.ed.undo_push(message="before applying")
    before = object_names()
    bpy.ops.viga.apply_result("EXEC_DEFAULT", run_folder=first, iteration=1)
    pump_until(lambda: not status().applying, what="viga apply")
    assert status().applied and status().applied_iteration == 1, log()
    assert object_names() == sorted(before + ["CrateA"]), object_names()
    bpy.ops.ed.undo()
    assert object_names() == before, "one undo must take the applied iteration back: %s" % object_names()
    # The second turn continues the first: the model is shown its request, plan and verdict
    # (the script expects them), and it starts from the scene as it is now.
    second = send("SCENE", "now make it twice as big", script=script("scene_second.json"),
                  max_iterations=1)
    started = argv_of_last_start()
    assert "--continue " + first in started, started
    with open(os.path.join(second, "args.json"), "r", encoding="utf-8") as handle:
        conversation = json.load(handle)["conversation"]
    assert [turn["run"] for turn in conversation] == [first], conversation
    assert [r.path for r in settings().scene_runs] == [first, second]
    requests = [e.text for e in bpy.context.window_manager.viga_chat if e.kind == "REQUEST"]
    assert requests == ["a crate", "now make it twice as big"], requests


@check
def a_two_turn_geometry_nodes_conversation():
    bpy.context.view_layer.objects.active = bpy.data.objects["Cube"]
    first = send("GEOMETRY_NODES", "scatter points on the cube", script=script("gn_first.json"))
    assert "Scatter" in [m.name for m in bpy.data.objects["Cube"].modifiers], "the result came back"
    second = send("GEOMETRY_NODES", "now make them denser", script=script("gn_second.json"))
    assert "--continue " + first in argv_of_last_start(), argv_of_last_start()
    with open(os.path.join(second, "request.json"), "r", encoding="utf-8") as handle:
        request = json.load(handle)
    assert request["conversation"][0]["run"] == first, request
    assert [r.path for r in settings().gn_runs] == [first, second]
    answers = [e.text for e in bpy.context.window_manager.viga_chat if e.kind == "ANSWER"]
    assert answers == ["points on the cube", "denser"], answers


def command_lines():
    lines = []
    for pid in os.listdir("/proc"):
        try:
            with open(os.path.join("/proc", pid, "cmdline"), "rb") as handle:
                lines.append(handle.read().replace(b"\0", b" ").decode("utf-8", "replace"))
        except OSError:
            continue
    return lines


def files_holding(root, secret):
    found = []
    for folder, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            try:
                with open(path, "rb") as handle:
                    if secret.encode() in handle.read():
                        found.append(path)
            except OSError:
                continue
    return found


@check
def a_key_entered_in_the_preferences_reaches_the_provider_and_nothing_else():
    variable = "VIGA_PANEL_TEST_KEY"
    assert variable not in os.environ
    settings().target_file = ""
    prefs().provider = "openai_compatible"
    for key, value in dict(model="replay", base_url=ARGS.server + "/v1", api_key_env=variable,
                           plan_each_iteration=False, generator_tools="OFF", max_iterations=1).items():
        setattr(prefs(), key, value)
    pump_until(settled, what="the key status")
    assert keys.cached_status(variable) is False, keys.status_text(variable)
    bpy.ops.viga.set_key("EXEC_DEFAULT", variable=variable, key=KEY)
    pump_until(settled, what="viga key set")
    assert keys.cached_status(variable) is True, (keys.status_text(variable), log())
    settings().mode = "SCENE"
    settings().task = "print the environment"
    pump_until(settled)
    bpy.ops.viga.start_run("EXEC_DEFAULT")
    on_a_command_line = []

    def watch():
        on_a_command_line.extend(line for line in command_lines() if KEY in line)
        return settled()

    pump_until(watch)
    assert status().state == "FINISHED", (status().message, log())
    assert not on_a_command_line, "the key was on a command line: %s" % on_a_command_line[:3]
    assert KEY not in log()
    run = status().run_folder
    assert not files_holding(run, KEY), files_holding(run, KEY)
    blend = os.path.join(ARGS.work, "after.blend")
    bpy.ops.wm.save_as_mainfile(filepath=blend, compress=False)
    with open(blend, "rb") as handle:
        saved = handle.read()
    assert b"print the environment" in saved and KEY.encode() not in saved
    bpy.ops.wm.save_userpref()
    config = os.environ["BLENDER_USER_CONFIG"]
    assert os.listdir(config), "the preferences were not saved where the check looks"
    assert not files_holding(config, KEY), files_holding(config, KEY)
    print("KEY_RUN %s" % run)


def main():
    viga_blender.register()
    if bpy.context.preferences.addons.get("viga_blender") is None:
        bpy.context.preferences.addons.new().module = "viga_blender"
    p = prefs()
    p.provider = "scripted"
    for key, value in dict(render_size=32, max_iterations=2, runs_folder=RUNS, samples=4,
                           containment="AUTO").items():
        setattr(p, key, value)
    passed = failed = 0
    for function in CHECKS:
        try:
            function()
            passed += 1
            print("ok   %s" % function.__name__, flush=True)
        except Exception:  # noqa: BLE001 - report every failing check, then carry on
            failed += 1
            print("FAIL %s\n%s" % (function.__name__, traceback.format_exc()), flush=True)
    viga_blender.unregister()
    print("%d passed, %d failed" % (passed, failed), flush=True)
    sys.exit(1 if failed else 0)


main()
