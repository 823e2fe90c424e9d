# viga-gn: the PYTHON step's policy, inside Blender.
#
# `safe` mode checks the snippet's AST against the rules below and then runs it with a
# restricted set of builtins, a guarded __import__ and guarded module objects. This is
# ADVISORY: Python cannot sandbox Python in-process, and a determined snippet may find a way
# around any such policy. The real boundary is the worker process (a separate Blender that
# viga can kill and restart, started with an allowlisted environment so no secret reaches it).
# The policy exists to stop a model's accidental or casual reach for files, processes, the
# network and interpreter internals, and to say clearly why a snippet was refused.
#
# The rules refuse classes, not single snippets:
# - interpreter internals: every name starting with an underscore, and every attribute of a
#   frame, generator, coroutine, async generator or traceback (gi_*, cr_*, ag_*, f_*, tb_*);
#   no builtin that reads or writes attributes by a computed name (getattr, setattr, vars,
#   dir...), and no module function that does (functools.update_wrapper, wraps);
# - modules: each allowed module offers an allowlist of names (_MODULES); a module may only be
#   used as `module.name`, never bound to another name, passed or stored, and at run time the
#   snippet holds guarded stand-ins that offer nothing else, so an alias reaches no more than
#   the module's own name would. bpy.types offers only the types Blender defines, not the
#   Python classes (operators, menus, add-ons) registered into it;
# - bpy.ops: namespaces and operators that reach files, scripts or the window manager are
#   refused by name, and so is any operator with a file path property and any operator written
#   in Python outside a few audited Blender modules; checked statically where the AST shows
#   `bpy.ops.<ns>.<op>` and again at run time through the guarded bpy.ops, whatever name the
#   snippet reached the namespace by;
# - file paths: no keyword argument and no attribute assignment whose name is a file path
#   (filepath=, directory=, image.filepath_raw = ..., and every string property Blender marks
#   as a file or folder path), and no `**mapping` arguments that would hide such a keyword;
# - preferences: every name only Blender's Preferences have is refused, however they are found;
# - code in strings: str.format only called right on a literal without attribute fields (also
#   none nested in a field's format spec), a driver expression only as a literal simple
#   expression (Blender runs drivers as Python, with the full interpreter when the person lets
#   scripts auto-run), and none of Blender's unit parsing (bpy.utils.units.to_value evaluates
#   its text as Python);
# - Blender's types as gadgets: a snippet holds a guarded stand-in for each bpy.types class,
#   which offers no method or property written in Python (called through the class, they take
#   a made-up self: Operator.as_keywords then reads any attribute of any object), cannot be
#   subclassed (a subclass would hand them out again) and cannot be assigned to; and every
#   data path or property name handed to Blender's reflection (driver_add, keyframe_insert,
#   foreach_set, is_property_set, fcurves.new, data_path=, ...) is a literal that passes the
#   attribute rules, so no computed name reaches an attribute the rules refuse.

import ast
import re as _re
import string as _string
import builtins as _builtins_module
import contextlib
import io
import traceback as _traceback
import types as _types

# Modules a snippet may import, and what each offers. "*" means every public name of a C
# module that has no file, process or interpreter access (a submodule among them still has
# to be listed here to be offered). Anything not named is refused: os, sys, subprocess,
# socket, ctypes, importlib, shutil, pathlib and every other module that reaches files,
# processes, the network or the interpreter, and, inside allowed modules, what they import
# (json.codecs, json.decoder, statistics.sys) or what evaluates strings or reads attributes
# by name (functools.update_wrapper, functools.wraps, functools.singledispatch).
_MODULES = {
    "math": "*",
    "itertools": "*",
    "random": frozenset({
        "betavariate", "choice", "choices", "expovariate", "gammavariate", "gauss",
        "getrandbits", "lognormvariate", "normalvariate", "paretovariate", "randbytes",
        "randint", "random", "randrange", "sample", "seed", "shuffle", "triangular", "uniform",
        "vonmisesvariate", "weibullvariate", "Random",
    }),
    "functools": frozenset({"cache", "cmp_to_key", "lru_cache", "partial", "reduce",
                            "total_ordering"}),
    "collections": frozenset({"ChainMap", "Counter", "OrderedDict", "defaultdict", "deque",
                              "namedtuple"}),
    "colorsys": frozenset({"hls_to_rgb", "hsv_to_rgb", "rgb_to_hls", "rgb_to_hsv",
                           "rgb_to_yiq", "yiq_to_rgb"}),
    "statistics": frozenset({
        "NormalDist", "StatisticsError", "correlation", "covariance", "fmean",
        "geometric_mean", "harmonic_mean", "linear_regression", "mean", "median",
        "median_grouped", "median_high", "median_low", "mode", "multimode", "pstdev",
        "pvariance", "quantiles", "stdev", "variance",
    }),
    "json": frozenset({"dumps", "loads", "JSONDecodeError"}),
    "mathutils": frozenset({"Color", "Euler", "Matrix", "Quaternion", "Vector", "bvhtree",
                            "geometry", "interpolate", "kdtree", "noise"}),
    "mathutils.bvhtree": "*",
    "mathutils.geometry": "*",
    "mathutils.interpolate": "*",
    "mathutils.kdtree": "*",
    "mathutils.noise": "*",
    "bmesh": frozenset({"from_edit_mesh", "geometry", "new", "ops", "types",
                        "update_edit_mesh", "utils"}),
    "bmesh.geometry": "*",
    "bmesh.ops": "*",
    "bmesh.types": "*",
    "bmesh.utils": "*",
    "bpy": frozenset({"app", "context", "data", "ops", "path", "props", "types", "utils"}),
    "bpy.app": frozenset({"background", "version", "version_cycle", "version_file",
                          "version_string"}),
    "bpy.ops": "ops",  # namespaces, checked by _ops_namespace_refusal / _operator_refusal
    "bpy.path": frozenset({"basename", "clean_name", "display_name", "ensure_ext"}),
    "bpy.props": "*",
    "bpy.types": "rna",  # native types only, see _native_type
    "bpy.utils": frozenset({"units"}),
    # Not to_value: it evaluates its text as Python, with the caller's builtins and no check.
    "bpy.utils.units": frozenset({"categories", "systems", "to_string"}),
}

# The modules `import` accepts (bpy.app, bpy.ops and bpy.path are reached through bpy).
_SAFE_MODULES = frozenset(name for name in _MODULES
                          if name.split(".")[0] != "bpy" or name in ("bpy", "bpy.types",
                                                                     "bpy.props"))

# Builtins a snippet keeps. Left out on purpose: open, exec, eval, compile, __import__ (replaced
# by a guarded one), getattr/setattr/delattr/vars/dir/globals/locals (they read or write
# attributes by computed names), input, breakpoint, help, exit, quit, memoryview.
_SAFE_BUILTINS = (
    "abs", "all", "any", "bool", "dict", "divmod", "enumerate", "filter", "float", "format",
    "frozenset", "hasattr", "hash", "int", "isinstance", "issubclass", "iter", "len", "list",
    "map", "max", "min", "next", "pow", "print", "range", "repr", "reversed", "round", "set",
    "slice", "sorted", "str", "sum", "tuple", "zip", "True", "False", "None",
    "ArithmeticError", "AssertionError", "AttributeError", "Exception", "IndexError",
    "KeyError", "LookupError", "NameError", "RuntimeError", "StopIteration", "TypeError",
    "ValueError", "ZeroDivisionError", "__build_class__",
)

_DENIED_NAMES = frozenset({
    "open", "exec", "eval", "compile", "__import__", "getattr", "setattr", "delattr", "vars",
    "dir", "globals", "locals", "input", "breakpoint", "help", "exit", "quit", "memoryview",
    "__builtins__", "__loader__", "__spec__", "__file__", "classmethod", "staticmethod",
    "type", "object", "super", "property",
})

# Attribute names refused wherever they appear: module names (so `x.os` cannot reach a
# module some object holds), bpy entry points that run code, write or read files or quit
# Blender, the preferences (every name only Preferences has, so they stay out of reach
# however the Preferences struct is found, e.g. through `context.copy()`), and the ways from
# a Blender type to the Python classes registered into bpy.types (operators, menus: see
# _native_type). RNA functions that take a file path are added from Blender's own type
# information (_rna_paths).
_DENIED_ATTRIBUTES = frozenset({
    "os", "sys", "subprocess", "socket", "ctypes", "importlib", "shutil", "pathlib", "builtins",
    "io", "posix", "nt", "signal", "threading", "multiprocessing", "tempfile", "glob", "pickle",
    "marshal", "runpy", "inspect", "gc", "urllib", "http", "code", "pty",
    "execfile", "driver_namespace", "handlers", "timers", "as_module", "use_module",
    "libraries", "path_resolve", "keyconfigs", "clipboard", "msgbus", "path_menu",
    "draw_preset", "bl_rna_get_subclass_py", "operators", "active_operator",
    "preferences", "addons", "app_template", "apps", "autoexec_paths", "experimental",
    "extensions", "filepaths", "keymap", "studio_lights", "use_preferences_save",
    "use_scripts_auto_execute",
    "quit_blender", "save_mainfile", "save_as_mainfile", "open_mainfile", "read_homefile",
    "read_factory_settings", "url_open", "path_open", "run_script", "python_file_run",
    "addon_install", "addon_enable", "save_render", "save", "load", "unpack", "filepath",
    "system", "popen", "spawn", "fork", "format_map",
    "debug_relations_graphviz", "debug_stats_gnuplot", "load_from_file", "new_image",
    "new_movie", "new_sound", "activate_file_by_relative_path",
    # Python-defined helpers of Blender's types that read or set attributes by a name they
    # are handed, or install a function where Blender's own UI code calls it.
    "as_keywords", "status_text_set",
    # A Python property's functions: called with a made-up self, like methods through a class.
    "fget", "fset", "fdel",
})

# Blender's reflection: methods that take the name of a property or a data path (an RNA path
# such as 'modifiers["GN"].show_viewport') and read, animate or set what it names. The name
# must be a literal that passes the attribute rules.
_NAMED_PROPERTY_METHODS = frozenset({
    "driver_add", "driver_remove", "keyframe_insert", "keyframe_delete", "path_from_id",
    "path_resolve", "is_property_set", "is_property_hidden", "is_property_readonly",
    "is_property_overridable_library", "property_overridable_library_set", "property_unset",
    "foreach_get", "foreach_set",
})
# Collections whose new/find/ensure take a data path first (animation curves and drivers).
_DATA_PATH_COLLECTIONS = frozenset({"fcurves", "drivers"})
_DATA_PATH_KEYWORDS = frozenset({"data_path", "attr", "property"})

# Frames, generators, coroutines, async generators and tracebacks: their attributes lead to
# frames, and a frame's f_back / f_globals / f_builtins lead to the real builtins. Refused as
# a class by prefix. The exceptions are Blender properties that happen to share a prefix.
_INTERNAL_PREFIXES = ("gi_", "cr_", "ag_", "f_", "tb_")
_INTERNAL_PREFIX_EXCEPTIONS = frozenset({
    "f_stop", "gi_cubemap_resolution", "gi_diffuse_bounces", "gi_glossy_clamp",
    "gi_irradiance_pool_size", "gi_visibility_resolution",
})

# On an AttributeError, `obj` hands back the object whose lookup failed, which may be one the
# snippet was never given (a real module behind a guarded one).
_EXCEPTION_INTERNALS = frozenset({"obj"})

# bpy.ops namespaces that reach files, scripts, preferences, the clipboard or the window
# manager; every import_*/export_* namespace too.
_DENIED_OPS = frozenset({
    "asset", "buttons", "cachefile", "clip", "console", "ed", "extensions", "file", "image",
    "info", "preferences", "ptcache", "render", "screen", "script", "sound", "text",
    "text_editor", "ui", "wm", "workspace",
})

# Words in an operator's name that mean it reads or writes files (or caches on disk), runs a
# script or writes a preset (a Python file) into the user's configuration.
_DENIED_OPERATOR_WORDS = frozenset({
    "bake", "browse", "export", "exporter", "external", "import", "load", "open", "preset",
    "python", "reload", "save", "screenshot", "script", "unpack", "url", "write",
})

# Operators written in Python run with the full interpreter, and several evaluate strings
# (node.add_node evaluates its settings, anim.update_animated_transform_constraints every
# driver's data path, the wm.context_* family their data_path and value) or reach files.
# Only Python operators from these Blender modules, read and found to do neither, are allowed;
# the others (and every add-on's) are refused. Operators written in C are not affected.
_AUDITED_PYTHON_OPERATORS = frozenset({
    "bl_operators.add_mesh_torus", "bl_operators.constraint", "bl_operators.geometry_nodes",
    "bl_operators.mesh", "bl_operators.object", "bl_operators.object_align",
    "bl_operators.object_quick_effects", "bl_operators.object_randomize_transform",
    "bl_operators.rigidbody", "bl_operators.uvcalc_follow_active",
    "bl_operators.uvcalc_lightmap", "bl_operators.uvcalc_transform", "bl_operators.view3d",
    "bl_operators.vertexpaint_dirt",
})

# Names that carry a file or folder path: refused as keyword arguments and as assignment
# targets. Blender's string properties with a file path subtype are added (_rna_paths).
_PATH_NAMES = frozenset({
    "base_path", "dirname", "dirpath", "directories", "directory", "file", "file_name",
    "file_path", "filename", "filenames", "filepath", "filepath_raw", "filepaths", "files",
    "folder", "output_path", "path",
})
_PATH_SUFFIXES = ("_dir", "_directory", "_file_path", "_filename", "_filepath", "_folder")
_PATH_PREFIXES = ("directory", "filename", "filepath")

# Functions a driver expression may call (Blender evaluates drivers as Python, with the real
# builtins when the person allows scripts to auto-run).
_DRIVER_FUNCTIONS = frozenset({
    "abs", "acos", "asin", "atan", "atan2", "ceil", "clamp", "cos", "degrees", "exp", "floor",
    "fmod", "int", "float", "bool", "lerp", "log", "log10", "max", "min", "pow", "radians",
    "round", "sin", "smoothstep", "sqrt", "tan", "trunc",
})


class PolicyViolation(BaseException):
    """A refusal while the snippet runs. A BaseException, so a snippet's `except Exception`
    does not swallow it and the refusal reaches the model."""


_RNA_PATHS = None


def _rna_paths():
    """(property names, function names) that Blender itself marks as file or folder paths:
    string properties with a FILE_PATH, DIR_PATH or FILE_NAME subtype, and functions with such
    a parameter. Generic names (name, default_value, new, ...) are left to the other rules."""
    global _RNA_PATHS
    if _RNA_PATHS is None:
        subtypes = ("FILE_PATH", "DIR_PATH", "FILE_NAME")
        properties, functions = set(), set()
        for type_name in dir(bpy.types):
            rna = getattr(getattr(bpy.types, type_name, None), "bl_rna", None)
            if rna is None:
                continue
            for prop in rna.properties:
                if prop.type == "STRING" and prop.subtype in subtypes:
                    properties.add(prop.identifier)
            for function in rna.functions:
                for param in function.parameters:
                    if param.type == "STRING" and param.subtype in subtypes:
                        functions.add(function.identifier)
        properties -= {"name", "default_value"}
        functions -= {"new", "remove", "find", "append", "frame_path", "filepath_from_user"}
        _RNA_PATHS = (frozenset(properties), frozenset(functions))
    return _RNA_PATHS


def _is_path_name(name):
    lowered = name.lower()
    return (lowered in _PATH_NAMES or lowered.endswith(_PATH_SUFFIXES)
            or lowered.startswith(_PATH_PREFIXES) or name in _rna_paths()[0])


def _is_internal(name):
    return name.startswith(_INTERNAL_PREFIXES) and name not in _INTERNAL_PREFIX_EXCEPTIONS


def _native_type(name):
    """True for the types Blender defines itself (bpy.types.Object, GeometryNodeTree...);
    False for the Python classes registered into bpy.types (operators, panels, menus, add-on
    classes): called with a made-up self, their methods read files or run strings as code
    (WM_OT_context_set_value.execute runs its `value`) with the full interpreter."""
    value = getattr(bpy.types, name, None)
    return isinstance(value, type) and value.__module__ in ("bpy.types", "_bpy_types", "builtins")


def _offers(module, name):
    if name.startswith("_"):
        return False
    offered = _MODULES[module]
    if offered == "ops":
        return _ops_namespace_refusal(name) is None
    if offered == "rna":
        return _native_type(name)
    return offered == "*" or name in offered


def _offer_list(module):
    offered = _MODULES[module]
    if offered == "*":
        return "its public names"
    if offered == "ops":
        return "operator namespaces outside %s" % ", ".join(sorted(_DENIED_OPS))
    if offered == "rna":
        return "the types Blender defines, not operator, panel, menu or add-on classes"
    return ", ".join(sorted(offered))


def _ops_namespace_refusal(namespace):
    if (namespace.startswith("_") or namespace in _DENIED_OPS
            or namespace.startswith(("import", "export"))):
        return ("bpy.ops.%s is not allowed in safe mode: it reaches files, scripts or the "
                "window manager" % namespace)
    return None


def _operator_refusal(namespace, operator):
    """Why bpy.ops.<namespace>.<operator> is refused, or None."""
    refused = _ops_namespace_refusal(namespace)
    if refused:
        return refused
    if operator.startswith("_"):
        return "bpy.ops.%s.%s is not allowed in safe mode" % (namespace, operator)
    words = set(operator.lower().split("_"))
    if words & _DENIED_OPERATOR_WORDS:
        return ("bpy.ops.%s.%s is not allowed in safe mode: operators named %s read or write "
                "files, disk caches or scripts" % (namespace, operator, " or ".join(
                    repr(word) for word in sorted(words & _DENIED_OPERATOR_WORDS))))
    try:
        function = getattr(getattr(bpy.ops, namespace), operator)
        rna = function.get_rna_type()
    except Exception:  # noqa: BLE001 - no such operator: calling it fails on its own
        return None
    for base in (bpy.types.Operator, bpy.types.Macro):
        implementation = base.bl_rna_get_subclass_py(function.idname())
        if (implementation is not None
                and implementation.__module__ not in _AUDITED_PYTHON_OPERATORS):
            return ("bpy.ops.%s.%s is not allowed in safe mode: it is written in Python (%s) and "
                    "runs with the full interpreter; safe mode allows Blender's C operators and a "
                    "few audited Python ones" % (namespace, operator, implementation.__module__))
    for prop in rna.properties:
        # A file list (`files`) or any string property named or marked as a path; a
        # collection called `path` (the mouse path of a lasso) is not one.
        if prop.identifier == "files" or (prop.type == "STRING" and (
                _is_path_name(prop.identifier)
                or prop.subtype in ("FILE_PATH", "DIR_PATH", "FILE_NAME"))):
            return ("bpy.ops.%s.%s is not allowed in safe mode: it has a file path property "
                    "%r" % (namespace, operator, prop.identifier))
    return None


def _describe(node):
    return "line %d" % getattr(node, "lineno", 0)


def _check_import(name, node, problems):
    if name not in _SAFE_MODULES:
        problems.append("%s: import of %r is not allowed in safe mode (allowed: %s)"
                        % (_describe(node), name, ", ".join(sorted(_SAFE_MODULES))))
        return False
    return True


def _module_bindings(tree, problems):
    """Names bound to modules: `bpy` (every snippet has it) and whatever imports bind. One
    name stands for one module, so the static rules know what each `name.attr` reaches."""
    names = {"bpy": "bpy"}

    def bind(name, module, node):
        if names.setdefault(name, module) != module:
            problems.append("%s: %r already names the module %s; safe mode does not let it be "
                            "rebound to %s" % (_describe(node), name, names[name], module))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in _MODULES:
                    if alias.asname:
                        bind(alias.asname, alias.name, node)
                    else:
                        bind(alias.name.split(".")[0], alias.name.split(".")[0], node)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module in _MODULES:
            for alias in node.names:
                full = "%s.%s" % (node.module, alias.name)
                if full in _MODULES:
                    bind(alias.asname or alias.name, full, node)
    return names


def _type_bindings(tree):
    """Names bound to Blender's types by `from bpy.types import X [as Y]`: name -> X."""
    types = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module == "bpy.types":
            for alias in node.names:
                types[alias.asname or alias.name] = alias.name
    return types


def _blender_type_of(expr, modules, types):
    """The bpy.types class an expression statically is (`bpy.types.Operator`, or a name
    imported from bpy.types), or None."""
    if isinstance(expr, ast.Name) and expr.id in types and expr.id not in modules:
        return types[expr.id]
    if isinstance(expr, ast.Attribute) and _module_of(expr.value, modules) == "bpy.types":
        return expr.attr
    return None


def _python_member(cls, name):
    """True when `name` of the class `cls` is a function, class or static method or property
    written in Python (Blender's own `_bpy_types` adds many to its types), not one of
    Blender's C members. Through the class, such a member runs with a self the caller makes
    up, and the full interpreter."""
    for klass in getattr(cls, "__mro__", ()):
        member = vars(klass).get(name)
        if member is not None:
            return isinstance(member, (_types.FunctionType, classmethod, staticmethod, property))
    return False


def _check_type_attribute(type_name, node, problems):
    if not isinstance(node.ctx, ast.Load):
        problems.append("%s: bpy.types.%s.%s cannot be assigned in safe mode: Blender's types "
                        "are read-only" % (_describe(node), type_name, node.attr))
    elif _python_member(getattr(bpy.types, type_name, None), node.attr):
        problems.append("%s: %s" % (_describe(node), _python_member_refusal(type_name, node.attr)))


def _python_member_refusal(type_name, name):
    return ("bpy.types.%s.%s is written in Python: reached through the class it runs on any "
            "object as its self, which safe mode does not allow (call it on a real object "
            "instead)" % (type_name, name))


def _module_of(expr, modules):
    """The module an expression statically is (`json`, `bpy.ops`, `mathutils.noise`)."""
    if isinstance(expr, ast.Name):
        return modules.get(expr.id)
    if isinstance(expr, ast.Attribute):
        base = _module_of(expr.value, modules)
        if base is not None and "%s.%s" % (base, expr.attr) in _MODULES:
            return "%s.%s" % (base, expr.attr)
    return None


def _used_as_base(node, parents):
    parent = parents.get(node)
    return (isinstance(parent, ast.Attribute) and parent.value is node
            and isinstance(parent.ctx, ast.Load))


def _check_attribute_name(attr, node, problems):
    """The rules on an attribute's name alone; True when it passes."""
    if attr.startswith("_"):
        problems.append("%s: attribute %r is not allowed in safe mode: names starting with an "
                        "underscore reach interpreter internals" % (_describe(node), attr))
    elif _is_internal(attr):
        problems.append("%s: attribute %r is not allowed in safe mode: frame, generator, "
                        "coroutine and traceback attributes reach interpreter internals"
                        % (_describe(node), attr))
    elif attr in _EXCEPTION_INTERNALS:
        problems.append("%s: attribute %r is not allowed in safe mode: an AttributeError's .obj "
                        "hands back objects the snippet was not given (name your own attribute "
                        "differently)" % (_describe(node), attr))
    elif attr in _DENIED_ATTRIBUTES or attr in _rna_paths()[1]:
        problems.append("%s: attribute %r is not allowed in safe mode: it reaches files, "
                        "processes, code execution, preferences or the interpreter"
                        % (_describe(node), attr))
    else:
        return True
    return False


def _driver_expression_problems(value):
    if not (isinstance(value, ast.Constant) and isinstance(value.value, str)):
        return ["a driver expression must be a string literal in safe mode"]
    try:
        tree = ast.parse(value.value, "<driver>", "eval")
    except SyntaxError as exc:
        return ["the driver expression does not parse: %s" % exc.msg]
    allowed = (ast.Expression, ast.Name, ast.Load, ast.BinOp, ast.UnaryOp, ast.BoolOp,
               ast.Compare, ast.IfExp, ast.Call, ast.operator, ast.unaryop, ast.boolop,
               ast.cmpop)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant):
            if not isinstance(node.value, (int, float)):
                return ["a driver expression may only hold numbers, names and arithmetic"]
        elif not isinstance(node, allowed):
            return ["a driver expression may only hold numbers, names, arithmetic and calls "
                    "of math functions (found %s)" % type(node).__name__]
        elif isinstance(node, ast.Name) and (node.id.startswith("_") or node.id in _DENIED_NAMES):
            return ["the driver expression names %r" % node.id]
        elif isinstance(node, ast.Call) and (node.keywords or not isinstance(node.func, ast.Name)
                                             or node.func.id not in _DRIVER_FUNCTIONS):
            return ["a driver expression may only call %s" % ", ".join(sorted(_DRIVER_FUNCTIONS))]
    return []


def _check_attribute(node, parents, modules, types, problems):
    attr = node.attr
    if not _check_attribute_name(attr, node, problems):
        return
    if attr == "format":
        _check_format(node, parents, problems)
    if isinstance(node.ctx, (ast.Store, ast.Del)):
        if _is_path_name(attr):
            problems.append("%s: assigning .%s is not allowed in safe mode: it sets a file or "
                            "folder path" % (_describe(node), attr))
            return
        parent = parents.get(node)
        value = parent.value if isinstance(parent, ast.Assign) else None
        if attr == "expression":
            for text in _driver_expression_problems(value):
                problems.append("%s: %s" % (_describe(node), text))
        elif attr == "data_path":
            for text in _data_path_problems(value, "a data path"):
                problems.append("%s: %s" % (_describe(node), text))
    blender_type = _blender_type_of(node.value, modules, types)
    if blender_type is not None:
        _check_type_attribute(blender_type, node, problems)
        return
    module = _module_of(node.value, modules)
    if module is None:
        return
    if not isinstance(node.ctx, ast.Load):
        problems.append("%s: %s.%s cannot be assigned in safe mode: modules are read-only"
                        % (_describe(node), module, attr))
    elif not _offers(module, attr):
        if _MODULES[module] == "ops":
            problems.append("%s: %s" % (_describe(node), _ops_namespace_refusal(attr)))
        else:
            problems.append("%s: %s.%s is not offered in safe mode (%s offers: %s)"
                            % (_describe(node), module, attr, module, _offer_list(module)))
    elif "%s.%s" % (module, attr) in _MODULES:
        if not _used_as_base(node, parents):
            problems.append("%s: %s.%s is a module: safe mode allows it only as %s.%s.<name>, "
                            "not bound to a name, passed or stored"
                            % (_describe(node), module, attr, module, attr))
    elif _MODULES[module] == "ops":
        parent = parents.get(node)
        if _used_as_base(node, parents) and not parent.attr.startswith("_"):
            refused = _operator_refusal(attr, parent.attr)
            if refused:
                problems.append("%s: %s" % (_describe(node), refused))


def _check_format(node, parents, problems):
    # str.format resolves attribute and index lookups written inside the format string, out
    # of the AST's sight; only a literal format string without them, called right there, is
    # allowed (`f = template.format`, `str.format(template, x)` are refused).
    parent = parents.get(node)
    if not (isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
            and isinstance(parent, ast.Call) and parent.func is node):
        problems.append("%s: .format() is only allowed on a string literal in safe mode; use an "
                        "f-string" % _describe(node))
        return
    try:
        fields = _format_fields(node.value.value)
    except ValueError as exc:
        problems.append("%s: the format string does not parse: %s" % (_describe(node), exc))
        return
    for field in fields:
        if "." in field or "[" in field:
            problems.append("%s: format field {%s} looks up attributes or items, which safe "
                            "mode does not allow" % (_describe(node), field))


def _format_fields(template):
    """Every field name str.format would look up in `template`, those nested in a field's
    format spec too (`{0:{1.x}}` looks up `1.x` to build the spec)."""
    fields = []
    for _text, field, spec, _conversion in _string.Formatter().parse(template):
        if field is not None:
            fields.append(field)
        if spec:
            fields.extend(_format_fields(spec))
    return fields


def _data_path_problems(value, what):
    """Why `value` may not be handed to Blender's reflection as a property name or data path:
    it must be a string literal, and every name in it must pass the attribute rules (so
    'location', 'modifiers["GN"].show_viewport' and '["my_prop"]' pass; a computed name,
    'use_module' or 'filepath' does not)."""
    if not (isinstance(value, ast.Constant) and isinstance(value.value, str)):
        return ["%s must be a string literal in safe mode: a computed name could reach any "
                "attribute" % what]
    path = value.value
    position = 0
    problems = []
    while position < len(path):
        match = _DATA_PATH_TOKEN.match(path, position)
        if match is None or match.end() == position:
            return ["%s %r is not a plain data path (names, [index] and [\"key\"] only)"
                    % (what, path)]
        name = match.group("name")
        if name is not None:
            refusals = []
            _check_attribute_name(name, value, refusals)
            if refusals or _is_path_name(name):
                problems.append("%s %r names %r, which safe mode does not let a snippet reach"
                                % (what, path, name))
        position = match.end()
    return problems


# One step of a data path: `.name`, `name` at the start, `[3]` or `["key"]`.
_DATA_PATH_TOKEN = _re.compile(
    r"""(?:^|\.)(?P<name>[A-Za-z_][A-Za-z0-9_]*)|\[(?:\d+|"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')\]""")


def _data_path_argument(call):
    """The argument of `call` that Blender reads as a property name or data path, when the
    call is one of its reflection methods; else None."""
    func = call.func
    if not isinstance(func, ast.Attribute):
        return None
    position = None
    if func.attr in _NAMED_PROPERTY_METHODS:
        position = 0
    elif (func.attr in ("new", "find", "ensure") and isinstance(func.value, ast.Attribute)
          and func.value.attr in _DATA_PATH_COLLECTIONS):
        position = 0
    elif func.attr == "add" and isinstance(func.value, ast.Attribute) and func.value.attr == "paths":
        position = 1  # a keying set's paths.add(target_id, data_path)
    if position is None:
        return None
    for keyword in call.keywords:
        if keyword.arg in _DATA_PATH_KEYWORDS:
            return keyword.value
    if len(call.args) > position:
        return call.args[position]
    return None


def _check_data_paths(call, problems):
    for keyword in call.keywords:
        if keyword.arg == "data_path":
            for text in _data_path_problems(keyword.value, "data_path="):
                problems.append("%s: %s" % (_describe(keyword), text))
    argument = _data_path_argument(call)
    if argument is not None and not any(k.value is argument for k in call.keywords
                                        if k.arg == "data_path"):
        for text in _data_path_problems(argument, "the property name or data path of .%s()"
                                        % call.func.attr):
            problems.append("%s: %s" % (_describe(call), text))


def _check_keywords(node, problems):
    for keyword in node.keywords:
        if keyword.arg is None:
            problems.append("%s: **mapping arguments are not allowed in safe mode: write each "
                            "keyword out" % _describe(keyword))
        elif _is_path_name(keyword.arg):
            problems.append("%s: keyword argument %r is not allowed in safe mode: it passes a "
                            "file or folder path" % (_describe(keyword), keyword.arg))


def check_policy(code):
    """Returns the list of rule violations of a snippet (empty when it may run)."""
    try:
        tree = ast.parse(code, "<snippet>", "exec")
    except SyntaxError as exc:
        return ["line %s: syntax error: %s" % (exc.lineno, exc.msg)]
    parents = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
    problems = []
    modules = _module_bindings(tree, problems)
    types = _type_bindings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                _check_import(alias.name, node, problems)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                problems.append("%s: relative imports are not allowed in safe mode" % _describe(node))
                continue
            module = node.module or ""
            if not _check_import(module, node, problems):
                continue
            for alias in node.names:
                if alias.name == "*" or alias.name.startswith("_"):
                    problems.append("%s: importing %r is not allowed in safe mode"
                                    % (_describe(node), alias.name))
                elif not _offers(module, alias.name):
                    problems.append("%s: importing %r from %s is not allowed in safe mode (%s "
                                    "offers: %s)" % (_describe(node), alias.name, module,
                                                     module, _offer_list(module)))
        elif isinstance(node, ast.Name):
            if node.id in _DENIED_NAMES or node.id.startswith("__"):
                problems.append("%s: %r is not available in safe mode" % (_describe(node), node.id))
            elif node.id in modules and not _used_as_base(node, parents):
                problems.append("%s: %r is a module: safe mode allows it only as %s.<name>, not "
                                "bound to another name, passed or stored"
                                % (_describe(node), node.id, node.id))
        elif isinstance(node, ast.arg) and node.arg in modules:
            problems.append("%s: %r names a module; safe mode does not let it be rebound"
                            % (_describe(node), node.arg))
        elif isinstance(node, ast.Attribute):
            _check_attribute(node, parents, modules, types, problems)
        elif isinstance(node, ast.MatchClass):
            # `case C(attr=x)` reads the attribute `attr`: the same rules as `value.attr`.
            for attr in node.kwd_attrs:
                _check_attribute_name(attr, node, problems)
        elif isinstance(node, ast.Call):
            _check_keywords(node, problems)
            _check_data_paths(node, problems)
        elif isinstance(node, ast.ClassDef):
            _check_keywords(node, problems)
            for base in node.bases:
                blender_type = _blender_type_of(base, modules, types)
                if blender_type is not None:
                    problems.append("%s: subclassing bpy.types.%s is not allowed in safe mode: "
                                    "the subclass would hand out its methods written in Python"
                                    % (_describe(node), blender_type))
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            problems.append("%s: global and nonlocal are not allowed in safe mode" % _describe(node))
    # ast.walk is breadth-first; the model reads the refusals in source order, each once.
    problems = list(dict.fromkeys(problems))
    return sorted(problems, key=lambda text: int(text.split(":")[0].split()[-1]))


class _SafeModule:
    """What a snippet holds instead of a module: only the names _MODULES offers, read-only.
    Whatever name or container the snippet keeps it under, it reaches nothing more."""

    __slots__ = ("_viga_path", "_viga_real", "_viga_proxies")

    def __init__(self, path, real, proxies):
        object.__setattr__(self, "_viga_path", path)
        object.__setattr__(self, "_viga_real", real)
        object.__setattr__(self, "_viga_proxies", proxies)

    def __getattr__(self, name):
        path = object.__getattribute__(self, "_viga_path")
        proxies = object.__getattribute__(self, "_viga_proxies")
        full = "%s.%s" % (path, name)
        if full in _MODULES and _offers(path, name):
            return proxies.module(full)
        if _offers(path, name):
            try:
                value = getattr(object.__getattribute__(self, "_viga_real"), name)
            except AttributeError:
                # A fresh error: the real one would carry the real module as `.obj`.
                raise AttributeError("module %r has no attribute %r" % (path, name)) from None
            if path == "bpy.types" and isinstance(value, type):
                return _SafeType(name, value)
            if not isinstance(value, _types.ModuleType):
                return value
        raise PolicyViolation("%s is not offered in safe mode (%s offers: %s)"
                              % (full, path, _offer_list(path)))

    def __setattr__(self, name, value):
        raise PolicyViolation("%s.%s cannot be assigned in safe mode: modules are read-only"
                              % (object.__getattribute__(self, "_viga_path"), name))

    def __delattr__(self, name):
        self.__setattr__(name, None)

    def __dir__(self):
        return []

    def __repr__(self):
        return "<module %r (safe mode)>" % object.__getattribute__(self, "_viga_path")


class _SafeType:
    """What a snippet holds instead of a class of bpy.types: its C members (bl_rna,
    is_registered_node_type, ...), isinstance and issubclass, and nothing written in Python.
    It cannot be assigned to or subclassed, whatever name it travelled under."""

    __slots__ = ("_viga_name", "_viga_real")

    def __init__(self, name, real):
        object.__setattr__(self, "_viga_name", name)
        object.__setattr__(self, "_viga_real", real)

    def __getattr__(self, name):
        type_name = object.__getattribute__(self, "_viga_name")
        real = object.__getattribute__(self, "_viga_real")
        if name.startswith("_") or name in _DENIED_ATTRIBUTES:
            raise PolicyViolation("bpy.types.%s.%s is not offered in safe mode" % (type_name, name))
        if _python_member(real, name):
            raise PolicyViolation(_python_member_refusal(type_name, name))
        try:
            return getattr(real, name)
        except AttributeError:
            raise AttributeError("bpy.types.%s has no attribute %r" % (type_name, name)) from None

    def __setattr__(self, name, value):
        raise PolicyViolation("bpy.types.%s.%s cannot be assigned in safe mode: Blender's types "
                              "are read-only" % (object.__getattribute__(self, "_viga_name"), name))

    def __delattr__(self, name):
        self.__setattr__(name, None)

    def __instancecheck__(self, instance):
        return isinstance(instance, object.__getattribute__(self, "_viga_real"))

    def __subclasscheck__(self, subclass):
        if isinstance(subclass, _SafeType):
            subclass = object.__getattribute__(subclass, "_viga_real")
        return issubclass(subclass, object.__getattribute__(self, "_viga_real"))

    def __mro_entries__(self, bases):
        raise PolicyViolation("subclassing bpy.types.%s is not allowed in safe mode: the "
                              "subclass would hand out its methods written in Python"
                              % object.__getattribute__(self, "_viga_name"))

    def __dir__(self):
        return []

    def __repr__(self):
        return "<class bpy.types.%s (safe mode)>" % object.__getattribute__(self, "_viga_name")


class _SafeOps(_SafeModule):
    """bpy.ops: each namespace is checked when it is reached, each operator when it is."""

    __slots__ = ()

    def __getattr__(self, name):
        refused = _ops_namespace_refusal(name)
        if refused:
            raise PolicyViolation(refused)
        return _SafeOpsNamespace(name)


class _SafeOpsNamespace:
    __slots__ = ("_viga_namespace",)

    def __init__(self, namespace):
        object.__setattr__(self, "_viga_namespace", namespace)

    def __getattr__(self, name):
        namespace = object.__getattribute__(self, "_viga_namespace")
        refused = _operator_refusal(namespace, name)
        if refused:
            raise PolicyViolation(refused)
        return getattr(getattr(bpy.ops, namespace), name)

    def __setattr__(self, name, value):
        raise PolicyViolation("bpy.ops cannot be assigned in safe mode")

    def __repr__(self):
        return "<bpy.ops.%s (safe mode)>" % object.__getattribute__(self, "_viga_namespace")


class _SafeModules:
    """The guarded modules of one snippet run, made when first imported."""

    def __init__(self):
        self._made = {}

    def module(self, path):
        if path not in self._made:
            real = __import__(path.split(".")[0])
            for part in path.split(".")[1:]:
                real = getattr(real, part)
            kind = _SafeOps if _MODULES[path] == "ops" else _SafeModule
            self._made[path] = kind(path, real, self)
        return self._made[path]

    def import_(self, name, globals=None, locals=None, fromlist=(), level=0):
        # Also what `import` does at run time: the AST check refuses these statically first.
        if level or name not in _SAFE_MODULES:
            raise ImportError("import of %r is not allowed in safe mode" % name)
        return self.module(name if fromlist else name.split(".")[0])


def _safe_globals():
    safe = {name: getattr(_builtins_module, name) for name in _SAFE_BUILTINS}
    modules = _SafeModules()
    safe["__import__"] = modules.import_
    return {"__builtins__": safe, "__name__": "viga_gn_snippet", "bpy": modules.module("bpy")}


def _snippet_line(exc):
    frames = [f for f in _traceback.extract_tb(exc.__traceback__) if f.filename == "<snippet>"]
    return (" at line %d" % frames[-1].lineno) if frames else ""


def _gn_run_python(args):
    code, mode = args["code"], args["mode"]
    if mode == "safe":
        problems = check_policy(code)
        if problems:
            shown = problems[:10]
            more = "" if len(problems) <= 10 else "\n  (and %d more)" % (len(problems) - 10)
            raise GnError("safe mode refused this snippet:\n  " + "\n  ".join(shown) + more)
        program_globals = _safe_globals()
    elif mode == "trusted":
        program_globals = {"__name__": "viga_gn_snippet", "bpy": bpy}
    else:
        raise GnError("unknown Python mode %r" % mode)
    output = io.StringIO()
    try:
        compiled = compile(code, "<snippet>", "exec")
        with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
            exec(compiled, program_globals)
    except PolicyViolation as exc:
        raise GnError("safe mode refused this snippet while it ran%s: %s\noutput so far:\n%s"
                      % (_snippet_line(exc), exc, output.getvalue()[-2000:])) from None
    except Exception as exc:  # noqa: BLE001 - the snippet may raise anything; it is a step error
        raise GnError("the snippet raised %s%s: %s\noutput so far:\n%s"
                      % (type(exc).__name__, _snippet_line(exc), exc,
                         output.getvalue()[-2000:])) from exc
    return {"output": output.getvalue()[-8000:]}
