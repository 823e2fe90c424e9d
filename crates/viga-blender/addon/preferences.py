# The add-on's preferences: which model viga talks to, how it renders and loops, and where
# the viga executable and the run folders are. API keys are never stored here: only the
# NAME of the environment variable viga reads the key from.

import os

import bpy
from bpy.props import BoolProperty, EnumProperty, IntProperty, StringProperty

from . import dialout

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

ENGINES = [
    ("WORKBENCH", "Workbench", "Fast solid shading; enough for layout and colour"),
    ("CYCLES", "Cycles", "Path tracing; slow, for materials and light"),
    ("EEVEE", "EEVEE", "Real-time rendering; a middle ground"),
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


def _provider_changed(self, _context):
    # The key variable follows the provider unless the user typed a name of their own.
    if not self.api_key_env or self.api_key_env in DEFAULT_KEY_VARIABLES.values():
        self.api_key_env = DEFAULT_KEY_VARIABLES.get(self.provider, "")


def key_variable(prefs):
    """The environment variable viga will read the key from, or None when the provider needs
    no key (scripted, or an OpenAI-compatible server without a named variable)."""
    if prefs.provider == "scripted":
        return None
    return prefs.api_key_env.strip() or DEFAULT_KEY_VARIABLES.get(prefs.provider)


def setup_problems(prefs):
    """What would make viga refuse to start with these settings, as sentences for the user.
    Reads only the preferences and os.environ, so draw() may call it."""
    problems = []
    variable = key_variable(prefs)
    if variable and not os.environ.get(variable, "").strip():
        problems.append("%s is not set: set it in the environment Blender starts from "
                        "(viga reads the key from it; it is never stored in Blender)" % variable)
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
        description="The NAME of the environment variable holding the API key (the key itself is "
        "never stored in Blender)",
        default="OPENAI_API_KEY",
    )
    script: StringProperty(
        name="Script", subtype="FILE_PATH",
        description="The scripted provider's script file (tests and demos)",
    )
    render_engine: EnumProperty(name="Engine", items=ENGINES, default="WORKBENCH")
    render_size: IntProperty(
        name="Render size", description="Side of the square verifier renders, in pixels",
        default=512, min=16, max=8192, soft_min=128, soft_max=2048,
    )
    samples: IntProperty(name="Samples", description="Render samples; 0 = the engine's default", default=0, min=0)
    max_iterations: IntProperty(
        name="Max iterations", description="Iterations a scene run may take before it stops",
        default=10, min=1, max=100,
    )
    memory_window: IntProperty(
        name="Memory window", description="How many recent iterations the model is reminded of",
        default=3, min=1, max=20,
    )
    python_mode: EnumProperty(name="Python steps", items=PYTHON_MODES, default="SAFE")
    containment: EnumProperty(name="Containment", items=CONTAINMENT, default="AUTO")
    viga_path: StringProperty(
        name="viga executable", subtype="FILE_PATH",
        description="Path of the viga program; empty = the one the add-on was built with, "
        "else viga on PATH",
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
        description="The only folder the server's add-on commands may read and write; "
        "empty = viga-server-files in your home folder",
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
        for problem in setup_problems(self):
            box.label(text=problem, icon="ERROR")

    def _draw_loop(self, box):
        box.label(text="Loop and renders", icon="RENDER_STILL")
        box.prop(self, "render_engine")
        box.prop(self, "render_size")
        box.prop(self, "samples")
        box.prop(self, "max_iterations")
        box.prop(self, "memory_window")
        box.prop(self, "python_mode")
        box.prop(self, "containment")


def register():
    bpy.utils.register_class(VigaPreferences)


def unregister():
    bpy.utils.unregister_class(VigaPreferences)
