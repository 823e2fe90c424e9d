# SPDX-License-Identifier: GPL-3.0-or-later
# The add-on's preferences: which model viga talks to, how it renders and loops, the tools,
# assets, containment and Geometry Nodes settings a run takes, and where the viga executable
# and the run folders are. Every setting has the CLI's default. API keys are never stored
# here: the preferences hold the NAME of the variable the key is read from, and a key entered
# with "Set key" goes to viga's key store (the keyring, or a file only you can read).

import os

import bpy
from bpy.props import BoolProperty, EnumProperty, FloatProperty, IntProperty, StringProperty

from . import dialout, keys

PROVIDERS = [
    ("openai", "OpenAI", "OpenAI's API (key in OPENAI_API_KEY by default)"),
    ("anthropic", "Anthropic", "Anthropic's API (key in ANTHROPIC_API_KEY by default)"),
    ("gemini", "Gemini", "Google's Gemini API (key in GEMINI_API_KEY by default)"),
    ("openai_compatible", "OpenAI-compatible", "A local or self-hosted server speaking the OpenAI API "
     "(Ollama, vLLM, llama.cpp server, LM Studio)"),
    ("scripted", "Scripted", "Replays model answers from a script file (tests and demos; no model, no key)"),
]

# The variable viga reads when none is named (viga-provider's default_key_env). Local
# OpenAI-compatible servers usually need no key, so that provider has no default.
DEFAULT_KEY_VARIABLES = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
}

# The verifier's engine. AUTO is the CLI's default: Cycles when there is a target picture
# (Workbench shows neither lights nor materials), Workbench without one.
VERIFIER_ENGINES = [
    ("AUTO", "Auto", "Cycles when there is a target picture, Workbench without one (viga's default)"),
    ("WORKBENCH", "Workbench", "Fast solid shading; enough for layout and colour, blind to lights and materials"),
    ("CYCLES", "Cycles", "Path tracing; slower, shows materials and light"),
    ("EEVEE", "EEVEE", "Real-time rendering; without a GPU it is slow"),
]

GENERATOR_TOOLS = [
    ("AUTO", "Auto", "Tools when the provider can call them (viga's default)"),
    ("ON", "On", "The generator reads the scene, fetches assets and runs programs with its tools"),
    ("OFF", "Off", "The generator answers with one program per iteration"),
]

ASSET_GENERATORS = [
    ("NONE", "None", "No generated assets"),
    ("MESHY", "Meshy", "get_better_assets may generate models with Meshy (key in MESHY_API_KEY; costs credits)"),
]

# How viga contains the Blender of its own that runs model-written programs. There is no
# "off": a run started from this panel is always contained as far as the system allows.
CONTAINMENT = [
    ("AUTO", "Auto", "Model-written programs run contained as far as this system allows; what does "
     "not hold is said in the run's log and its containment.json"),
    ("REQUIRE", "Require", "A run does not start unless every half of containment holds: network, "
     "writes, reads, Unix sockets, processes and environment"),
]

PYTHON_MODES = [
    ("SAFE", "Safe", "Geometry Nodes PYTHON steps pass safe mode's filter first (restricted builtins and "
     "modules); they run in viga's contained worker either way"),
    ("TRUSTED", "Trusted", "Geometry Nodes PYTHON steps run without safe mode's filter, still in viga's "
     "contained worker; you confirm it for every run"),
]

# viga gn's five gates (--gates); all are required by default.
GATES = [
    ("single_group_output", "Single group output", "The node group has exactly one Group Output", 1),
    ("output_connected", "Output connected", "The Group Output's geometry is connected", 2),
    ("no_modifier_error", "No modifier error", "The Geometry Nodes modifier reports no error", 4),
    ("no_unexpected_new_modifier", "No unexpected modifier", "No modifier appeared that the run did not ask for", 8),
    ("no_unexpected_new_node_group", "No unexpected node group", "No node group appeared that the run did not ask for", 16),
]
ALL_GATES = {identifier for identifier, _name, _description, _number in GATES}


def _provider_changed(self, _context):
    # The key variable follows the provider unless the user typed a name of their own.
    if not self.api_key_env or self.api_key_env in DEFAULT_KEY_VARIABLES.values():
        self.api_key_env = DEFAULT_KEY_VARIABLES.get(self.provider, "")
    _key_variable_changed(self, _context)


def _key_variable_changed(self, _context):
    variable = key_variable(self)
    if variable:
        keys.refresh_status(self, variable)


def key_variable(prefs):
    """The environment variable viga will read the key from, or None when the provider needs
    no key (scripted, or an OpenAI-compatible server without a named variable)."""
    if prefs.provider == "scripted":
        return None
    return prefs.api_key_env.strip() or DEFAULT_KEY_VARIABLES.get(prefs.provider)


def setup_problems(prefs):
    """What would make viga refuse to start with these settings, as sentences for the user.
    Reads only the preferences, os.environ and the key store's cached answer, so draw() may
    call it."""
    problems = []
    variable = key_variable(prefs)
    if variable and not os.environ.get(variable, "").strip() and keys.cached_status(variable) is False:
        problems.append("No key for %s: press Set key in Preferences > Add-ons > viga (it is kept in your "
                        "keyring or a file only you can read, never in Blender), or set the variable in "
                        "the environment Blender starts from" % variable)
    if prefs.provider == "scripted":
        if not prefs.script.strip():
            problems.append("The scripted provider needs a script file")
    elif not prefs.model.strip():
        problems.append("Name the model to use (for example gpt-4o)")
    if prefs.provider == "openai_compatible" and not prefs.base_url.strip():
        problems.append("An OpenAI-compatible provider needs the server's base URL "
                        "(Ollama: http://localhost:11434/v1)")
    return problems


def get(context):
    """This add-on's preferences, or None when the add-on is not enabled in the preferences
    (its classes may still be registered, e.g. by a test host)."""
    addon = context.preferences.addons.get(__package__)
    return addon.preferences if addon is not None else None


class VigaPreferences(bpy.types.AddonPreferences):
    bl_idname = __package__

    provider: EnumProperty(name="Provider", items=PROVIDERS, default="openai", update=_provider_changed)
    model: StringProperty(name="Model", description="The provider's model name, e.g. gpt-4o or qwen2.5vl:7b")
    base_url: StringProperty(
        name="Base URL",
        description="API root including its version path; needed for OpenAI-compatible servers, "
        "optional for the others",
    )
    api_key_env: StringProperty(
        name="Key variable",
        description="The NAME of the variable the API key is read from: the environment Blender started "
        "from, else viga's key store (Set key). The key itself is never stored in Blender",
        default="OPENAI_API_KEY", update=_key_variable_changed,
    )
    script: StringProperty(
        name="Script", subtype="FILE_PATH",
        description="The scripted provider's script file (tests and demos)",
    )
    verifier_engine: EnumProperty(name="Verifier engine", items=VERIFIER_ENGINES, default="AUTO")
    render_size: IntProperty(
        name="Render size", description="Side of the square verifier renders, in pixels",
        default=512, min=16, max=8192, soft_min=128, soft_max=2048,
    )
    samples: IntProperty(
        name="Samples", description="Verifier render samples with Cycles or EEVEE; 0 = viga's default (16 for Cycles)",
        default=0, min=0,
    )
    max_iterations: IntProperty(
        name="Max iterations", description="Iterations a scene run may take before it stops",
        default=10, min=1, max=100,
    )
    memory_window: IntProperty(
        name="Memory window", description="How many recent iterations the model is reminded of",
        default=3, min=1, max=20,
    )
    program_timeout: FloatProperty(
        name="Program timeout", description="Seconds one program may run in Blender before it is stopped "
        "and the model is asked for a fix", default=60.0, min=1.0, max=86400.0, unit="TIME_ABSOLUTE",
    )
    plan_each_iteration: BoolProperty(
        name="Plan each iteration", description="Ask for a plan before each program", default=True,
    )
    generator_tools: EnumProperty(name="Generator tools", items=GENERATOR_TOOLS, default="AUTO")
    generator_max_turns: IntProperty(
        name="Generator turns", description="Model turns the generator may take per iteration when it has tools",
        default=6, min=1, max=50,
    )
    assets_folder: StringProperty(
        name="Assets folder", subtype="DIR_PATH",
        description="A folder of models (.blend, .glb, .gltf, .fbx, .obj with .txt descriptions) the "
        "generator's get_better_assets searches (optional)",
    )
    polyhaven: BoolProperty(
        name="Poly Haven", description="get_better_assets also searches Poly Haven's free models (downloaded "
        "into a cache on first use)",
    )
    assets_generate: EnumProperty(name="Generate assets", items=ASSET_GENERATORS, default="NONE")
    gn_max_rounds: IntProperty(
        name="Rounds", description="Model replies a Geometry Nodes run may take before it gives up",
        default=6, min=1, max=50,
    )
    gn_gates: EnumProperty(
        name="Required gates", items=GATES, options={"ENUM_FLAG"}, default=ALL_GATES,
        description="The gates that must pass before a Geometry Nodes run is done; the others only warn",
    )
    gn_cache: BoolProperty(
        name="Reuse replies", description="Replay the stored reply of an identical Geometry Nodes request "
        "(same scene, conversation and model) instead of asking the model again",
    )
    presets_folder: StringProperty(
        name="Presets folder", subtype="DIR_PATH",
        description="Where Geometry Nodes presets are stored; empty = presets beside the runs folder",
    )
    agent_max_steps: IntProperty(
        name="Agent steps", description="Model calls the add-on agent may make before it is stopped",
        default=12, min=1, max=100,
    )
    python_mode: EnumProperty(name="Python steps", items=PYTHON_MODES, default="SAFE")
    containment: EnumProperty(name="Containment", items=CONTAINMENT, default="AUTO")
    viga_path: StringProperty(
        name="viga executable", subtype="FILE_PATH",
        description="Path of the viga program; empty = viga on the PATH Blender started with",
    )
    runs_folder: StringProperty(
        name="Runs folder", subtype="DIR_PATH",
        description="Where run folders go; empty = viga_runs beside the saved .blend, else ~/.viga/runs",
    )
    # A viga server this Blender dials out to (dialout.py); its token is kept by server_login.
    server_url: StringProperty(name="Server", description="The viga server's address, e.g. wss://viga.example.org")
    server_username: StringProperty(name="User name", description="Your user name on the viga server")
    server_files: StringProperty(
        name="Server files", subtype="DIR_PATH",
        description="The folder the file paths in the server's add-on commands are kept in (an add-on's "
        "own code can still open other files); empty = viga-server-files in your home folder",
    )
    server_connect_on_start: BoolProperty(
        name="Connect on start", description="Connect to the server when Blender starts", default=False,
    )

    def draw(self, _context):
        layout = self.layout
        layout.use_property_split = True
        layout.use_property_decorate = False
        self._draw_model(layout.box())
        self._draw_loop(layout.box())
        self._draw_tools(layout.box())
        self._draw_gn(layout.box())
        paths = layout.box()
        paths.label(text="Paths", icon="FILE_FOLDER")
        paths.prop(self, "viga_path")
        paths.prop(self, "runs_folder")
        dialout.draw_preferences(self, layout)

    def _draw_model(self, box):
        box.label(text="Model", icon="LIGHT")
        box.prop(self, "provider")
        if self.provider == "scripted":
            box.prop(self, "script")
        else:
            box.prop(self, "model")
            box.prop(self, "base_url")
            box.prop(self, "api_key_env")
            variable = key_variable(self)
            if variable:
                row = box.row(align=True)
                row.operator("viga.set_key", icon="KEY_HLT").variable = variable
                row.operator("viga.forget_key", icon="X").variable = variable
                box.label(text=keys.status_text(variable), icon="INFO")
        for problem in setup_problems(self):
            box.label(text=problem, icon="ERROR")

    def _draw_loop(self, box):
        box.label(text="Loop and renders", icon="RENDER_STILL")
        box.prop(self, "verifier_engine")
        box.prop(self, "render_size")
        box.prop(self, "samples")
        box.prop(self, "max_iterations")
        box.prop(self, "memory_window")
        box.prop(self, "program_timeout")
        box.prop(self, "plan_each_iteration")
        box.prop(self, "containment")

    def _draw_tools(self, box):
        box.label(text="Generator tools and assets", icon="TOOL_SETTINGS")
        box.prop(self, "generator_tools")
        box.prop(self, "generator_max_turns")
        box.prop(self, "assets_folder")
        box.prop(self, "polyhaven")
        box.prop(self, "assets_generate")
        box.prop(self, "agent_max_steps")

    def _draw_gn(self, box):
        box.label(text="Geometry Nodes", icon="NODETREE")
        box.prop(self, "gn_max_rounds")
        box.prop(self, "gn_gates")
        box.prop(self, "gn_cache")
        box.prop(self, "python_mode")
        box.prop(self, "presets_folder")


def register():
    bpy.utils.register_class(VigaPreferences)


def unregister():
    bpy.utils.unregister_class(VigaPreferences)
