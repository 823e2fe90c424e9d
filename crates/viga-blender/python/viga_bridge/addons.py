"""An add-on takes part when it ships `addon_ai.json` (seed 004's manifest) beside its
`__init__.py` and exposes `VIGA_COMMANDS = {"tool_name": function}`. viga validates the
manifest and checks its requirements; the bridge only finds it, says which of its Python
dependencies are missing here, and routes commands to the functions on this thread."""

import hashlib
import json
import os
import re
import sys

import bpy

from .common import BridgeError
from .undo import ensure_undo_base, push_undo_step, undo_one_step

ADDON_MANIFEST = "addon_ai.json"
MAX_SCENE_LINES = 100
# Add-on id -> its module, rebuilt by every listing, so the commands of an add-on disabled
# since are refused instead of reaching a module Blender no longer runs.
_addons = {}
# Folders list_addons was given. Loading a folder's packages is like enabling them in this
# Blender (they stay loaded), so every later listing rescans these folders too.
_addon_folders = []
# `__init__.py` -> (mtime, problem) of folder packages that failed to load: a broken package
# is tried again once it changed, not on every listing (a listing runs every few seconds).
_addon_load_failures = {}


def load_addon_package(folder, name):
    import importlib.util
    module_name = "viga_addon_" + "".join(c if c.isalnum() else "_" for c in name)
    if module_name in sys.modules:
        return sys.modules[module_name]
    init = os.path.join(folder, name, "__init__.py")
    spec = importlib.util.spec_from_file_location(module_name, init, submodule_search_locations=[os.path.join(folder, name)])
    if spec is None or spec.loader is None:
        raise ImportError("cannot load %s" % init)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
        if hasattr(module, "register"):
            module.register()
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return module


def read_manifest(path):
    with open(path, "r", encoding="utf-8") as handle:
        return json.load(handle)


def enabled_addon_modules():
    """The modules of the add-ons enabled in this Blender, legacy add-ons and extensions
    (`bl_ext.<repo>.<id>`) alike. `addon_utils.modules()` does not serve here: it lists every
    installed add-on, enabled or not, as a stand-in module parsed from the source (so without
    VIGA_COMMANDS), and with refresh=False from a cache that misses add-ons installed since."""
    modules = []
    for name in bpy.context.preferences.addons.keys():
        module = sys.modules.get(name)
        if getattr(module, "__file__", None):
            modules.append(module)
    return modules


def folder_addon_modules(folder, problems):
    modules = []
    for name in sorted(os.listdir(folder)):
        package = os.path.join(folder, name)
        if not os.path.isfile(os.path.join(package, ADDON_MANIFEST)):
            continue
        init = os.path.join(package, "__init__.py")
        if not os.path.isfile(init):
            problems.append("%s: has %s but no __init__.py" % (name, ADDON_MANIFEST))
            continue
        changed = os.stat(init).st_mtime_ns
        failure = _addon_load_failures.get(init)
        if failure is not None and failure[0] == changed:
            problems.append(failure[1])
            continue
        try:
            modules.append(load_addon_package(folder, name))
            _addon_load_failures.pop(init, None)
        except BaseException as exc:  # noqa: BLE001 - a broken add-on must not stop discovery
            problem = "%s: cannot be loaded: %s: %s" % (name, type(exc).__name__, exc)
            _addon_load_failures[init] = (changed, problem)
            problems.append(problem)
    return modules


def remembered_folder_modules(folder, problems):
    """The add-on modules of `folder` (remembered for later listings) and of every folder
    given before."""
    if folder:
        if not os.path.isdir(folder):
            raise BridgeError("not_found", "no add-on folder at %s" % folder)
        folder = os.path.normpath(os.path.abspath(folder))
        if folder not in _addon_folders:
            _addon_folders.append(folder)
    modules = []
    for remembered in list(_addon_folders):
        if os.path.isdir(remembered):
            modules.extend(folder_addon_modules(remembered, problems))
        else:
            _addon_folders.remove(remembered)
            problems.append("add-on folder %s is gone; its add-ons are no longer offered" % remembered)
    return modules


def dependency_present(requirement):
    """Whether a manifest dependency ("numpy", "numpy>=1.24", "opencv-python") can be used
    here: importable under that name, or installed as a distribution of that name (whose
    import name may differ). Version bounds are not checked."""
    import importlib.metadata
    import importlib.util
    import re
    name = re.split(r"[\s<>=!~;\[(]", requirement.strip(), maxsplit=1)[0]
    if not name:
        return False
    try:
        if importlib.util.find_spec(name) is not None:
            return True
    except (ImportError, ValueError):
        pass
    try:
        importlib.metadata.distribution(name)
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


def missing_dependencies(manifest):
    # The manifest is not validated here (viga does that), so every level is checked.
    integration = manifest.get("ai_integration") if isinstance(manifest, dict) else None
    requirements = integration.get("requirements") if isinstance(integration, dict) else None
    dependencies = requirements.get("dependencies") if isinstance(requirements, dict) else None
    if not isinstance(dependencies, list):
        return []
    return [d for d in dependencies if isinstance(d, str) and not dependency_present(d)]


def describe_addons(modules, problems):
    """Each module's manifest as listed to viga, and the routes for its commands. A package
    both enabled and in a folder is listed once; of two manifests with one id, the first
    gets the commands (viga keeps the first too and reports the second)."""
    found, routes, seen = [], {}, set()
    for module in modules:
        manifest_path = os.path.join(os.path.dirname(module.__file__), ADDON_MANIFEST)
        if manifest_path in seen or not os.path.isfile(manifest_path):
            continue
        seen.add(manifest_path)
        try:
            manifest = read_manifest(manifest_path)
        except (OSError, ValueError) as exc:
            problems.append("%s: manifest is not readable JSON: %s" % (manifest_path, exc))
            continue
        addon_id = manifest.get("addon_info", {}).get("id") if isinstance(manifest, dict) else None
        if isinstance(addon_id, str):
            routes.setdefault(addon_id, module)
        found.append({
            "path": manifest_path,
            "manifest": manifest,
            "has_handlers": isinstance(getattr(module, "VIGA_COMMANDS", None), dict),
            "missing_dependencies": missing_dependencies(manifest),
        })
    return found, routes


def cmd_list_addons(args):
    import hashlib
    problems = []
    modules = enabled_addon_modules() + remembered_folder_modules(args.get("folder"), problems)
    found, routes = describe_addons(modules, problems)
    _addons.clear()
    _addons.update(routes)
    blender_version = ".".join(str(part) for part in bpy.app.version)
    # Everything viga decides from, hashed: an equal fingerprint means viga can keep what it
    # derived last time instead of validating every manifest again.
    listed = json.dumps([found, problems, blender_version], sort_keys=True, default=str)
    return {
        "addons": found,
        "problems": problems,
        "blender_version": blender_version,
        "fingerprint": hashlib.sha256(listed.encode("utf-8")).hexdigest()[:32],
    }


def scene_lines():
    lines = []
    for obj in sorted(bpy.context.scene.objects, key=lambda o: o.name)[:MAX_SCENE_LINES]:
        lines.append("%s [%s] at (%s)" % (obj.name, obj.type, ", ".join("%.3f" % v for v in obj.location)))
    extra = len(bpy.context.scene.objects) - MAX_SCENE_LINES
    if extra > 0:
        lines.append("... and %d more objects" % extra)
    return lines


def cmd_addon_command(args):
    addon_id, tool, params = args.get("addon_id"), args.get("tool"), args.get("params")
    module = _addons.get(addon_id)
    if module is None:
        raise BridgeError(
            "not_found",
            "no registered add-on %r (registered: %s); list_addons finds add-ons"
            % (addon_id, ", ".join(sorted(_addons)) or "none"),
        )
    handlers = getattr(module, "VIGA_COMMANDS", None) or {}
    handler = handlers.get(tool)
    if handler is None:
        raise BridgeError("not_found", "add-on %r has no command %r (it has: %s)" % (addon_id, tool, ", ".join(sorted(handlers)) or "none"))
    if not isinstance(params, dict):
        raise BridgeError("bad_request", "params must be a JSON object")
    step = args.get("undo_step")
    if step is None:
        result = handler(**params)
    else:
        # The command and its undo step in one main-thread call, so no other request (and no
        # lost connection) can come between them: a command that ran is one step, and one that
        # raised is taken back before anything else happens.
        if not isinstance(step, str) or not step:
            raise BridgeError("bad_request", "undo_step must be a non-empty string")
        ensure_undo_base()
        try:
            result = handler(**params)
        except Exception:
            push_undo_step(step + " (failed)")
            undo_one_step()
            raise
        push_undo_step(step)
    try:
        json.dumps(result)
    except (TypeError, ValueError):
        result = repr(result)
    return {"result": result, "scene": scene_lines()}
