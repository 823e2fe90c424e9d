# SPDX-License-Identifier: GPL-3.0-or-later
# The add-on's operators (bpy.ops.viga.*). They check what the user asked for, build the viga
# command line and hand it to the runner; the run itself happens in a child process. A new
# message continues its mode's conversation (`--continue` the last run); Apply asks
# `viga apply` to apply a chosen iteration, whatever way viga applies a result.

import json
import os
import pathlib
import tempfile
import webbrowser

import bpy
import numpy
from bpy.props import BoolProperty, IntProperty, StringProperty

from . import background, chat, history, preferences, properties, runner, viga_bridge

REPORT_FILE = "report.html"
ENDED_STATES = {"FINISHED", "FAILED", "CANCELLED"}


class Refused(Exception):
    """The operator cannot do what was asked; the message says why, for the user."""


def open_in_browser(path):
    """Opens a local HTML file in the web browser. Module-level so tests can replace it."""
    webbrowser.open(pathlib.Path(path).as_uri())


def _refuse(operator, message):
    operator.report({"ERROR"}, message)
    return {"CANCELLED"}


def _status(context):
    return context.window_manager.viga_run


def _preferences(context):
    prefs = preferences.get(context)
    if prefs is None:
        raise Refused("viga's preferences are missing: enable the add-on in Preferences > Add-ons")
    return prefs


def _check_setup(prefs):
    problems = preferences.setup_problems(prefs)
    if problems:
        raise Refused(problems[0] + " (Preferences > Add-ons > viga)")


def _connection():
    path = viga_bridge.addon_connection_path()
    if not path:
        raise Refused(
            "viga's bridge is not serving in this Blender, so viga cannot attach to it: "
            "disable and enable the viga add-on again"
        )
    return path


def _runs_root(context):
    root = history.runs_root(context)
    try:
        os.makedirs(root, exist_ok=True)
    except OSError as exc:
        raise Refused("Cannot create the runs folder %s: %s (set another in the add-on preferences)" % (root, exc.strerror or exc)) from exc
    return root


def _rgba(pixels, channels):
    """Pixels of any channel count as RGBA, the layout of a new image."""
    if channels == 4:
        return pixels
    rows = pixels.reshape(-1, channels)
    colour = rows[:, :3] if channels == 3 else numpy.repeat(rows[:, :1], 3, axis=1)
    alpha = rows[:, 1:2] if channels == 2 else numpy.ones((len(rows), 1), numpy.float32)
    return numpy.hstack([colour, alpha]).ravel()


def save_image_png(image):
    """Writes an Image datablock (file, packed, generated) to a temporary PNG; returns its path.
    The pixels go to a fresh image, so the user's image keeps its own path and format."""
    width, height = image.size
    count = len(image.pixels)
    if not width or not height or not count:
        raise Refused(
            "The target image '%s' has no pixels to save (is its file missing? a render must be "
            "saved as an image first)" % image.name
        )
    pixels = numpy.empty(count, dtype=numpy.float32)
    image.pixels.foreach_get(pixels)
    fd, path = tempfile.mkstemp(prefix="viga_target_", suffix=".png")
    os.close(fd)
    copy = bpy.data.images.new("viga target (temporary)", width, height, alpha=True, float_buffer=image.is_float)
    try:
        copy.colorspace_settings.name = image.colorspace_settings.name
        copy.pixels.foreach_set(_rgba(pixels, count // (width * height)))
        copy.filepath_raw = path
        copy.file_format = "PNG"
        copy.save()
    except RuntimeError as exc:
        os.remove(path)
        raise Refused("The target image '%s' cannot be saved as a PNG: %s" % (image.name, exc)) from exc
    finally:
        bpy.data.images.remove(copy)
    return path


def _target(settings):
    """(the targets as viga's --target takes them, temporary files to delete when the run
    ends): the main picture (a file, an image of this .blend, or a folder of views or frames),
    then the further views, each CAMERA=PICTURE."""
    targets, cleanup = [], []
    if settings.target_source == "IMAGE":
        if settings.target_image is not None:
            path = save_image_png(settings.target_image)
            targets.append(path)
            cleanup.append(path)
    elif settings.target_source == "FOLDER":
        if settings.target_folder.strip():
            folder = os.path.normpath(bpy.path.abspath(settings.target_folder.strip()))
            if not os.path.isdir(folder):
                raise Refused("The target folder does not exist: %s" % folder)
            targets.append(folder)
    elif settings.target_file.strip():
        path = os.path.normpath(bpy.path.abspath(settings.target_file.strip()))
        if not os.path.isfile(path):
            raise Refused("The target file does not exist: %s" % path)
        targets.append(path)
    for view in settings.target_views:
        camera = view.camera.strip()
        path = os.path.normpath(bpy.path.abspath(view.file.strip())) if view.file.strip() else ""
        if not camera or not path:
            runner.remove_files(cleanup)
            raise Refused("Each further target view needs a camera and a picture (remove the empty one)")
        if "=" in camera:
            runner.remove_files(cleanup)
            raise Refused("The camera name %r has an '=' in it, which viga reads as the end of the name" % camera)
        if not os.path.isfile(path):
            runner.remove_files(cleanup)
            raise Refused("The target picture of %s does not exist: %s" % (camera, path))
        targets.append("%s=%s" % (camera, path))
    return targets, cleanup


def continue_from(settings, mode):
    """The last run folder of the conversation of `mode`, which a new message continues; ""
    when the conversation is new, or its last run folder is gone (the message then starts a
    new conversation)."""
    runs = properties.conversation(settings, mode)
    if not len(runs):
        return ""
    last = runs[-1].path
    readable = any(os.path.isfile(os.path.join(last, name)) for name in (chat.ARGS_FILE, chat.REQUEST_FILE))
    return last if readable else ""


def presets_root(context):
    """Where Geometry Nodes presets are stored: the preference, else viga_presets beside the
    runs folder."""
    prefs = preferences.get(context)
    configured = prefs.presets_folder.strip() if prefs is not None else ""
    if configured:
        return os.path.normpath(bpy.path.abspath(os.path.expanduser(configured)))
    return os.path.join(os.path.dirname(history.runs_root(context).rstrip(os.sep)), "viga_presets")


def trust_confirmation(context):
    """(title, message) of the dialog that confirms what a Geometry Nodes run is trusted with,
    or None when it is trusted with nothing (it runs on a copy in viga's contained worker,
    under safe mode's filter)."""
    if context.scene.viga.mode != "GEOMETRY_NODES":
        return None
    prefs = preferences.get(context)
    unrestricted = prefs is not None and prefs.python_mode == "TRUSTED"
    if context.window_manager.viga_gn_in_this_blender:
        message = ("Trusted mode runs this run's steps in this Blender: the model's Python runs as you, with "
                   "your files, your network and the API keys in Blender's environment, and it is not "
                   "contained. For this run only.")
        if unrestricted:
            message += " Its Python steps also skip safe mode's filter."
        return "Run the model's steps in this Blender?", message
    if unrestricted:
        return ("Run Python steps without safe mode?",
                "Trusted Python lets the model's Python steps run without safe mode's filter, in viga's "
                "contained worker on a copy of your scene, for this run only.")
    return None


class VIGA_OT_start_run(bpy.types.Operator):
    bl_idname = "viga.start_run"
    bl_label = "Start"
    bl_description = (
        "Start viga: in Scene mode it builds the scene the task describes (and the target shows); "
        "in Geometry Nodes mode it builds a node tree on the active object; in Add-on tools mode "
        "an agent carries out the command with the add-ons' tools, one undo step per command"
    )

    confirmed_trusted: BoolProperty(
        name="Trusted mode confirmed",
        description="The user confirmed what this run is trusted with (its Python steps unrestricted, "
        "or run in this Blender)",
        options={"HIDDEN", "SKIP_SAVE"},
    )

    @classmethod
    def poll(cls, context):
        if runner.is_running():
            cls.poll_message_set("A viga run is already running; cancel it or wait for it to finish")
            return False
        return True

    def invoke(self, context, event):
        dialog = trust_confirmation(context)
        if dialog is not None:
            # execute() only runs if the user presses the dialog's confirm button.
            self.confirmed_trusted = True
            title, message = dialog
            return context.window_manager.invoke_confirm(
                self, event, title=title, message=message, confirm_text="Start", icon="WARNING",
            )
        return self.execute(context)

    def execute(self, context):
        try:
            argv, kind, task, max_iterations, cleanup = self._prepare(context)
            runner.start(argv, kind, task, max_iterations, _preferences(context), cleanup)
        except (Refused, runner.RunnerError) as exc:
            return _refuse(self, str(exc))
        self.report({"INFO"}, "viga started")
        return {"FINISHED"}

    def _prepare(self, context):
        """(argv, kind, task, max_iterations, temporary files) of the run to start."""
        prefs = _preferences(context)
        if runner.is_running():
            raise Refused("A viga run is already running; cancel it or wait for it to finish")
        settings = context.scene.viga
        if settings.mode == "SCENE":
            return self._scene_run(context, prefs, settings)
        if settings.mode == "GEOMETRY_NODES":
            return self._gn_run(context, prefs, settings)
        return self._agent_run(context, prefs, settings)

    def _scene_run(self, context, prefs, settings):
        task = settings.task.strip()
        if not task:
            raise Refused("Describe the scene you want in the task field first")
        _check_setup(prefs)
        connection = _connection()
        viga = runner.find_viga(prefs)
        root = _runs_root(context)
        targets, cleanup = _target(settings)
        argv = runner.scene_command(
            viga, connection, task, targets, prefs, root, continue_from=continue_from(settings, "SCENE"),
            camera=settings.target_camera.strip(), frames=settings.frames.strip(),
        )
        return argv, "SCENE", task, prefs.max_iterations, cleanup

    def _gn_run(self, context, prefs, settings):
        request = settings.request.strip()
        if not request:
            raise Refused("Say what to build in the request field first")
        active = context.view_layer.objects.active
        if active is None:
            raise Refused("Select an object first: Geometry Nodes mode works on the active object")
        unrestricted = prefs.python_mode == "TRUSTED"
        in_this_blender = context.window_manager.viga_gn_in_this_blender
        if in_this_blender and not self.confirmed_trusted:
            raise Refused(
                "Running the steps in this Blender needs your confirmation for every run: press Start in "
                "the viga panel and confirm, or untick Run in this Blender"
            )
        if unrestricted and not self.confirmed_trusted:
            raise Refused(
                "Trusted Python needs your confirmation for every run: press Start in the viga panel "
                "and confirm, or switch the preferences back to Safe"
            )
        if not prefs.gn_gates:
            raise Refused("Require at least one gate in Preferences > Add-ons > viga > Geometry Nodes")
        _check_setup(prefs)
        connection = _connection()
        viga = runner.find_viga(prefs)
        root = _runs_root(context)
        preset = ""
        if settings.preset.strip():
            preset = os.path.join(presets_root(context), settings.preset.strip() + ".json")
            if not os.path.isfile(preset):
                raise Refused("There is no preset %r in %s (refresh the preset list)" % (settings.preset, presets_root(context)))
        argv = runner.gn_command(
            viga, connection, request, active.name, prefs, root, unrestricted=unrestricted,
            in_this_blender=in_this_blender, continue_from=continue_from(settings, "GEOMETRY_NODES"),
            preset=preset, save_preset=settings.preset_name.strip(), presets_root=presets_root(context),
        )
        return argv, "GN", request, 0, []

    def _agent_run(self, context, prefs, settings):
        command = settings.command.strip()
        if not command:
            raise Refused("Say what to do with the add-on tools in the command field first")
        folder = _addons_folder(settings)
        _check_setup(prefs)
        connection = _connection()
        viga = runner.find_viga(prefs)
        root = _runs_root(context)
        argv = runner.agent_command(viga, connection, command, folder, prefs, root,
                                    continue_from=continue_from(settings, "ADDON_TOOLS"))
        # The agent has a step budget of its own (viga agent --max-steps); the panel shows the step.
        return argv, "AGENT", command, 0, []


def _addons_folder(settings):
    """The add-on folder of Add-on tools mode as an absolute path, or "" when none is set."""
    if not settings.addons_folder.strip():
        return ""
    folder = os.path.normpath(bpy.path.abspath(settings.addons_folder.strip()))
    if not os.path.isdir(folder):
        raise Refused("The add-on folder does not exist: %s" % folder)
    return folder


class VIGA_OT_cancel_run(bpy.types.Operator):
    bl_idname = "viga.cancel_run"
    bl_label = "Cancel"
    bl_description = "Stop the running viga run (it is killed if it has not stopped a second later)"

    @classmethod
    def poll(cls, context):
        if not runner.is_running():
            cls.poll_message_set("No viga run is running")
            return False
        return True

    def execute(self, context):
        try:
            runner.cancel()
        except runner.RunnerError as exc:
            return _refuse(self, str(exc))
        self.report({"INFO"}, "Cancelling the viga run")
        return {"FINISHED"}


class VIGA_OT_apply_result(bpy.types.Operator):
    # No 'UNDO' in bl_options: viga apply makes its change one undo step itself.
    bl_idname = "viga.apply_result"
    bl_label = "Apply"
    bl_description = (
        "Bring this iteration's result (by default the run's result) into this scene as one step you can "
        "undo: viga runs its program again in its contained worker, on the run's copy of your scene, and "
        "brings in what it built as data; no model-written program runs in this Blender"
    )

    run_folder: StringProperty(name="Run folder", subtype="DIR_PATH", options={"SKIP_SAVE"},
                               description="The scene run (default: the run that just finished)")
    iteration: IntProperty(name="Iteration", min=0, options={"SKIP_SAVE"},
                           description="The iteration whose program to apply; 0 = the run's result")
    trusted: BoolProperty(
        name="Run in this Blender (trusted)", options={"SKIP_SAVE"},
        description="Run the program in this Blender instead (trusted mode): it runs as you, uncontained; "
        "you confirm it for each apply",
    )
    confirmed_trusted: BoolProperty(
        name="Trusted mode confirmed", options={"HIDDEN", "SKIP_SAVE"},
        description="The user confirmed running the program in this Blender, for this apply",
    )

    @classmethod
    def poll(cls, context):
        status = _status(context)
        if runner.is_running():
            cls.poll_message_set("A viga run is going on; apply when it has ended")
            return False
        if status.applying:
            cls.poll_message_set("viga is applying a result")
            return False
        return True

    def invoke(self, context, event):
        if self.trusted:
            # execute() only runs if the user presses the dialog's confirm button.
            self.confirmed_trusted = True
            title, message = apply_trust_confirmation(self.iteration)
            return context.window_manager.invoke_confirm(
                self, event, title=title, message=message, confirm_text="Run it here", icon="WARNING",
            )
        return self.execute(context)

    def execute(self, context):
        status = _status(context)
        folder = self.run_folder or status.run_folder
        if not folder or not os.path.isfile(os.path.join(folder, chat.ARGS_FILE)):
            return _refuse(self, "Which run? There is no finished scene run to apply (%s)" % (folder or "none"))
        if chat.kind_of(folder) != "scene":
            return _refuse(self, "Only a scene run's result is applied; a Geometry Nodes run brings its own back")
        if self.trusted:
            return self._run_here(status, folder)
        try:
            prefs = _preferences(context)
            argv = runner.apply_command(runner.find_viga(prefs), _connection(), folder, self.iteration)
            environment = runner.child_environment(prefs)
        except (Refused, runner.RunnerError) as exc:
            return _refuse(self, str(exc))
        status.applying = True
        which = "iteration %d" % self.iteration if self.iteration else "the result"
        properties.append_log(status, "Applying %s of %s" % (which, folder))
        iteration = self.iteration

        def done(result, error):
            status = bpy.context.window_manager.viga_run
            status.applying = False
            problem = apply_problem(result, error)
            if problem is None:
                status.applied = True
                status.applied_iteration = iteration
                said = applied_message(result) or "Applied %s to the scene (Edit > Undo takes it back)" % which
                properties.append_log(status, said)
            else:
                properties.append_log(status, "Apply failed: " + problem, "ERROR")
            runner.tag_redraw()

        background.submit(lambda: background.run_command(argv, environment), done)
        self.report({"INFO"}, "Applying %s (one undo step)" % which)
        return {"FINISHED"}

    def _run_here(self, status, folder):
        """Trusted mode: the program runs in this Blender, as one undo step."""
        if not self.confirmed_trusted:
            return _refuse(self, "Running the program in this Blender needs your confirmation for every apply: "
                                 "press Apply and confirm, or apply without trusted mode")
        path = _program_path(folder, self.iteration)
        try:
            with open(path, "r", encoding="utf-8") as handle:
                code = handle.read()
        except (OSError, UnicodeDecodeError) as exc:
            return _refuse(self, "Cannot read the program %s: %s" % (path, exc))
        result = viga_bridge.apply_program(code, viga_bridge.undo_name(status.task))
        error = result.get("error")
        if error:
            message = chat.describe_error(error)
            properties.append_log(status, "Apply failed: " + message, "ERROR")
            return _refuse(self, "The program failed (%s); the scene was left as it was" % message)
        status.applied = True
        status.applied_iteration = self.iteration
        properties.append_log(status, "Ran the program in this Blender (trusted mode)")
        self.report({"INFO"}, "Applied viga's result (Edit > Undo takes it back)")
        return {"FINISHED"}


def apply_trust_confirmation(iteration=0):
    """(title, message) of the dialog that confirms running a run's program in this Blender
    (trusted mode), for one apply."""
    which = "the run's final program" if iteration == 0 else "iteration %d's program" % iteration
    return ("Run the model's program in this Blender?",
            "Trusted mode runs %s in this Blender: the model's Python runs as you, with your files, "
            "your network and the API keys in Blender's environment, and it is not contained. For this "
            "apply only. Without it, viga makes the result in its contained worker and brings it in as "
            "data." % which)


def _program_path(folder, iteration):
    """The program a trusted apply runs: the run's result, or iteration `iteration`'s."""
    if iteration == 0:
        return os.path.join(folder, "final.py")
    return os.path.join(folder, "codes", "%d.py" % iteration)


def _stream_lines(stdout):
    """The JSON objects among `viga ... --events jsonl`'s stdout lines."""
    for line in stdout.splitlines():
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict):
            yield message


def applied_message(result):
    """What `viga apply` said it changed (its `finished` line), or None."""
    for message in _stream_lines(result[1]):
        if message.get("kind") == "finished" and message.get("message"):
            return str(message["message"])
    return None


def apply_problem(result, error):
    """None when viga applied the result; else why not, in words."""
    if error is not None:
        return "viga apply could not run: %s" % error
    code, stdout, stderr = result
    for message in _stream_lines(stdout):
        if message.get("kind") == "error":
            return str(message.get("message") or "viga refused")
    if code != 0:
        return (stderr.strip().splitlines() or ["viga apply ended with code %d" % code])[-1]
    return None


class VIGA_OT_discard_result(bpy.types.Operator):
    bl_idname = "viga.discard_result"
    bl_label = "Discard"
    bl_description = "Forget the last run's result; the scene is not touched and the run folder stays on disk"

    @classmethod
    def poll(cls, context):
        if _status(context).state not in ENDED_STATES:
            cls.poll_message_set("There is no ended run to discard")
            return False
        return True

    def execute(self, context):
        status = _status(context)
        status.state = "IDLE"
        status.step = ""
        status.verdict = ""
        status.message = ""
        status.final_program = ""
        status.applied = False
        status.applied_iteration = 0
        status.iteration = 0
        status.tokens_in = 0
        status.tokens_out = 0
        runner.clear_thumbnails()
        return {"FINISHED"}


def _tools_of(manifest):
    integration = manifest.get("ai_integration")
    tools = integration.get("tools") if isinstance(integration, dict) else None
    return [tool for tool in tools if isinstance(tool, dict)] if isinstance(tools, list) else []


class VIGA_OT_refresh_addon_tools(bpy.types.Operator):
    bl_idname = "viga.refresh_addon_tools"
    bl_label = "Refresh tools"
    bl_description = "Look for installed add-ons that offer tools to viga (an addon_ai.json beside their code)"

    folder: StringProperty(
        name="Extra folder", subtype="DIR_PATH", options={"SKIP_SAVE"},
        description="Also load add-on packages with an addon_ai.json from this folder "
        "(default: the add-on folder of Add-on tools mode, so the list shows what the agent gets)",
    )

    def execute(self, context):
        folder = self.folder or context.scene.viga.addons_folder.strip()
        args = {"folder": os.path.normpath(bpy.path.abspath(folder))} if folder else {}
        try:
            listing = viga_bridge.cmd_list_addons(args)
        except viga_bridge.BridgeError as exc:
            return _refuse(self, "Cannot list add-ons: %s" % exc.message)
        tools = context.window_manager.viga_tools
        tools.clear()
        addons = listing.get("addons", [])
        for entry in addons:
            self._add_tools(tools, entry)
        status = _status(context)
        for problem in listing.get("problems", []):
            properties.append_log(status, "Add-on tools: " + str(problem), "WARNING")
        summary = "Found %d tools in %d add-ons" % (len(tools), len(addons))
        if listing.get("problems"):
            self.report({"WARNING"}, summary + "; some add-ons have problems (see the viga log)")
        else:
            self.report({"INFO"}, summary)
        return {"FINISHED"}

    @staticmethod
    def _add_tools(tools, entry):
        manifest = entry.get("manifest")
        if not isinstance(manifest, dict):
            return
        info = manifest.get("addon_info") if isinstance(manifest.get("addon_info"), dict) else {}
        for tool in _tools_of(manifest):
            item = tools.add()
            item.name = str(tool.get("name", "?"))
            item.addon_id = str(info.get("id", ""))
            item.addon_name = str(info.get("name", item.addon_id))
            item.description = str(tool.get("description", ""))
            item.available = entry.get("has_handlers") is True


class VIGA_OT_refresh_history(bpy.types.Operator):
    bl_idname = "viga.refresh_history"
    bl_label = "Refresh history"
    bl_description = "Read the list of earlier runs from the runs folder again"

    def execute(self, context):
        history.refresh(context)
        self.report({"INFO"}, "%d runs in %s" % (len(history.cached_runs()), history.cached_root()))
        return {"FINISHED"}


class VIGA_OT_open_report(bpy.types.Operator):
    bl_idname = "viga.open_report"
    bl_label = "Open report"
    bl_description = "Open the run's HTML report (report.html in its run folder) in your web browser"

    path: StringProperty(name="Run folder", subtype="DIR_PATH", options={"SKIP_SAVE"})

    def execute(self, context):
        if not self.path:
            return _refuse(self, "Which run? The run folder is empty")
        report = os.path.join(self.path, REPORT_FILE)
        if not os.path.isfile(report):
            return _refuse(
                self,
                "There is no %s in %s yet (viga writes it when a run ends; `viga report <folder>` "
                "writes it again)" % (REPORT_FILE, self.path),
            )
        try:
            open_in_browser(report)
        except webbrowser.Error as exc:
            return _refuse(self, "Cannot open a web browser: %s (the report is %s)" % (exc, report))
        self.report({"INFO"}, "Opened %s" % report)
        return {"FINISHED"}


class VIGA_OT_resume_run(bpy.types.Operator):
    bl_idname = "viga.resume_run"
    bl_label = "Resume"
    bl_description = "Continue a stopped or killed run from its next iteration (viga resume)"

    path: StringProperty(name="Run folder", subtype="DIR_PATH", options={"SKIP_SAVE"})

    @classmethod
    def poll(cls, context):
        if runner.is_running():
            cls.poll_message_set("A viga run is already running; cancel it or wait for it to finish")
            return False
        return True

    def execute(self, context):
        if not os.path.isfile(os.path.join(self.path, history.EVENTS_FILE)):
            return _refuse(self, "Not a viga run folder (it has no %s): %s" % (history.EVENTS_FILE, self.path))
        if history.run_kind(self.path) == "agent":
            return _refuse(self, "An add-on agent run cannot be resumed; start a new one with its command")
        try:
            viga = runner.find_viga(_preferences(context))
            args = history.read_args(self.path)
            kind = "GN" if history.run_kind(self.path) == "gn" else "SCENE"
            budget = args.get("max_iterations")
            runner.start(
                runner.resume_command(viga, self.path), kind, history.read_task(self.path),
                budget if isinstance(budget, int) else 0, _preferences(context),
            )
        except (Refused, runner.RunnerError) as exc:
            return _refuse(self, str(exc))
        self.report({"INFO"}, "Resuming %s" % self.path)
        return {"FINISHED"}


class VIGA_OT_clear_log(bpy.types.Operator):
    bl_idname = "viga.clear_log"
    bl_label = "Clear log"
    bl_description = "Empty the viga log in this panel (run folders keep their own events)"

    def execute(self, context):
        status = _status(context)
        status.log.clear()
        status.log_index = 0
        return {"FINISHED"}


class VIGA_OT_new_conversation(bpy.types.Operator):
    bl_idname = "viga.new_conversation"
    bl_label = "New conversation"
    bl_description = ("Start this mode's next message afresh: it no longer continues the earlier turns (their "
                      "run folders stay on disk and in the History)")

    @classmethod
    def poll(cls, context):
        if runner.is_running():
            cls.poll_message_set("A viga run is going on; wait for it or cancel it first")
            return False
        return True

    def execute(self, context):
        mode = context.scene.viga.mode
        properties.conversation(context.scene.viga, mode).clear()
        chat.clear(context.window_manager)
        context.window_manager.viga_chat_mode = mode
        return {"FINISHED"}


class VIGA_OT_reload_chat(bpy.types.Operator):
    bl_idname = "viga.reload_chat"
    bl_label = "Read the conversation again"
    bl_description = "Read this mode's conversation from its run folders again"

    def execute(self, context):
        if runner.is_running():
            return _refuse(self, "A viga run is going on; the chat follows it, and is read again when it ends")
        chat.reload(context)
        return {"FINISHED"}


class VIGA_OT_show_program(bpy.types.Operator):
    bl_idname = "viga.show_program"
    bl_label = "Show the program"
    bl_description = "Open the iteration in the chat and select its program"

    run_folder: StringProperty(options={"HIDDEN", "SKIP_SAVE"})
    iteration: IntProperty(options={"HIDDEN", "SKIP_SAVE"})

    def execute(self, context):
        wm = context.window_manager
        found = None
        for at, entry in enumerate(wm.viga_chat):
            if entry.run_folder == self.run_folder and entry.iteration == self.iteration:
                if entry.kind == "ITERATION":
                    entry.expanded = True
                elif entry.kind == "CODE":
                    found = at
        if found is None:
            return _refuse(self, "The chat has no program of iteration %d of that run" % self.iteration)
        wm.viga_chat_index = found
        return {"FINISHED"}


class VIGA_OT_add_target_view(bpy.types.Operator):
    bl_idname = "viga.add_target_view"
    bl_label = "Add a view"
    bl_description = "Add a further target picture and the camera whose view it shows"

    def execute(self, context):
        view = context.scene.viga.target_views.add()
        camera = context.scene.camera
        view.camera = camera.name if camera is not None else ""
        return {"FINISHED"}


class VIGA_OT_remove_target_view(bpy.types.Operator):
    bl_idname = "viga.remove_target_view"
    bl_label = "Remove the view"
    bl_description = "Remove this target view"

    index: IntProperty(options={"HIDDEN", "SKIP_SAVE"})

    def execute(self, context):
        views = context.scene.viga.target_views
        if not 0 <= self.index < len(views):
            return _refuse(self, "There is no target view %d" % self.index)
        views.remove(self.index)
        return {"FINISHED"}


_presets = {"root": "", "names": []}


def list_presets(root):
    """The stored presets' names (a preset is <name>.json in the store), cached for draw()."""
    try:
        names = sorted(name[:-5] for name in os.listdir(root) if name.endswith(".json"))
    except OSError:
        names = []
    _presets["root"], _presets["names"] = root, names
    return names


def cached_presets():
    return list(_presets["names"])


class VIGA_OT_refresh_presets(bpy.types.Operator):
    bl_idname = "viga.refresh_presets"
    bl_label = "Refresh presets"
    bl_description = "Read the list of stored Geometry Nodes presets again"

    def execute(self, context):
        found = list_presets(presets_root(context))
        self.report({"INFO"}, "%d presets in %s" % (len(found), presets_root(context)))
        return {"FINISHED"}


class PresetCommand:
    """Runs `viga gn preset ...` on a thread and says how it went in the log."""

    def run_preset_command(self, context, args):
        try:
            prefs = _preferences(context)
            root = presets_root(context)
            argv = [runner.find_viga(prefs), "gn", "preset"] + args + ["--presets-dir", root]
            environment = runner.child_environment(prefs)
        except (Refused, runner.RunnerError) as exc:
            return _refuse(self, str(exc))

        def done(result, error):
            status = bpy.context.window_manager.viga_run
            if error is not None:
                properties.append_log(status, "Presets: %s" % error, "ERROR")
                return
            code, stdout, stderr = result
            said = (stdout.strip() or stderr.strip() or "done").splitlines()[-1]
            properties.append_log(status, "Presets: " + said, "INFO" if code == 0 else "ERROR")
            list_presets(root)
            runner.tag_redraw()

        background.submit(lambda: background.run_command(argv, environment), done)
        return {"FINISHED"}


class VIGA_OT_import_preset(PresetCommand, bpy.types.Operator):
    bl_idname = "viga.import_preset"
    bl_label = "Import preset"
    bl_description = "Check a Geometry Nodes preset file and copy it into the preset store"

    filepath: StringProperty(subtype="FILE_PATH", options={"SKIP_SAVE"})
    filter_glob: StringProperty(default="*.json", options={"HIDDEN"})

    def invoke(self, context, _event):
        context.window_manager.fileselect_add(self)
        return {"RUNNING_MODAL"}

    def execute(self, context):
        if not self.filepath:
            return _refuse(self, "Choose a preset file to import")
        return self.run_preset_command(context, ["import", bpy.path.abspath(self.filepath)])


class VIGA_OT_export_preset(PresetCommand, bpy.types.Operator):
    bl_idname = "viga.export_preset"
    bl_label = "Export preset"
    bl_description = "Write the chosen stored Geometry Nodes preset to a file"

    filepath: StringProperty(subtype="FILE_PATH", options={"SKIP_SAVE"})
    filter_glob: StringProperty(default="*.json", options={"HIDDEN"})

    def invoke(self, context, _event):
        self.filepath = (context.scene.viga.preset or "preset") + ".json"
        context.window_manager.fileselect_add(self)
        return {"RUNNING_MODAL"}

    def execute(self, context):
        name = context.scene.viga.preset.strip()
        if not name:
            return _refuse(self, "Choose the preset to export first")
        if not self.filepath:
            return _refuse(self, "Choose where to write the preset")
        return self.run_preset_command(context, ["export", name, bpy.path.abspath(self.filepath)])


CLASSES = (
    VIGA_OT_new_conversation,
    VIGA_OT_reload_chat,
    VIGA_OT_show_program,
    VIGA_OT_add_target_view,
    VIGA_OT_remove_target_view,
    VIGA_OT_refresh_presets,
    VIGA_OT_import_preset,
    VIGA_OT_export_preset,
    VIGA_OT_start_run,
    VIGA_OT_cancel_run,
    VIGA_OT_apply_result,
    VIGA_OT_discard_result,
    VIGA_OT_refresh_addon_tools,
    VIGA_OT_refresh_history,
    VIGA_OT_open_report,
    VIGA_OT_resume_run,
    VIGA_OT_clear_log,
)


register, unregister = bpy.utils.register_classes_factory(CLASSES)
