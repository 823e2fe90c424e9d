# viga-gn: the PYTHON step's policy, inside Blender.
#
# `safe` mode checks the snippet's AST against the rules below and then runs it with a
# restricted set of builtins and a guarded __import__. This is ADVISORY: Python cannot sandbox
# Python in-process, and a determined snippet may find a way around any such policy. The real
# boundary is the worker process (a separate Blender that viga can kill and restart). The
# policy exists to stop a model's accidental or casual reach for files, processes, the network
# and interpreter internals, and to say clearly why a snippet was refused.

import ast
import string as _string
import builtins as _builtins_module
import contextlib
import io
import traceback as _traceback

# Modules a snippet may import. An allowlist: anything not named here is refused, which
# covers os, sys, subprocess, socket, ctypes, importlib, shutil, pathlib and every other
# module that reaches files, processes, the network or the interpreter.
_SAFE_MODULES = frozenset({
    "bpy", "bmesh", "mathutils", "mathutils.noise", "mathutils.geometry", "math", "random",
    "itertools", "functools", "collections", "colorsys", "statistics", "json",
})

# Builtins a snippet keeps. Left out on purpose: open, exec, eval, compile, __import__ (replaced
# by a guarded one), getattr/setattr/delattr/vars/globals/locals (they bypass the attribute
# rules with computed names), input, breakpoint, help, exit, quit, memoryview.
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
    "globals", "locals", "input", "breakpoint", "help", "exit", "quit", "memoryview",
    "__builtins__", "__loader__", "__spec__", "__file__", "classmethod", "staticmethod",
    "type", "object", "super", "property",
})

# Attribute names refused wherever they appear: module names (so `x.os` cannot reach a
# module some allowed module imported) and bpy entry points that run code, write or read
# files, or quit Blender.
_DENIED_ATTRIBUTES = frozenset({
    "os", "sys", "subprocess", "socket", "ctypes", "importlib", "shutil", "pathlib", "builtins",
    "io", "posix", "nt", "signal", "threading", "multiprocessing", "tempfile", "glob", "pickle",
    "marshal", "runpy", "inspect", "gc", "urllib", "http", "code", "pty",
    "execfile", "driver_namespace", "handlers", "timers", "as_module", "libraries",
    "quit_blender", "save_mainfile", "save_as_mainfile", "open_mainfile", "read_homefile",
    "read_factory_settings", "url_open", "path_open", "run_script", "python_file_run",
    "addon_install", "addon_enable", "save_render", "save", "load", "filepath", "system",
    "popen", "spawn", "fork", "format_map",
})

# bpy.ops namespaces that reach files, scripts, preferences or the window manager.
_DENIED_OPS = frozenset({"wm", "script", "text", "preferences", "extensions", "file", "image",
                         "render", "sound", "screen", "ed"})


class PolicyViolation(Exception):
    pass


def _describe(node):
    return "line %d" % getattr(node, "lineno", 0)


def _check_module(name, node, problems):
    if name not in _SAFE_MODULES and name.split(".")[0] not in ("bpy",):
        problems.append("%s: import of %r is not allowed in safe mode (allowed: %s)"
                        % (_describe(node), name, ", ".join(sorted(_SAFE_MODULES))))
    elif name.startswith("bpy.") and any(part in _DENIED_ATTRIBUTES or part.startswith("_")
                                         for part in name.split(".")):
        problems.append("%s: import of %r is not allowed in safe mode" % (_describe(node), name))


def _check_attribute(node, problems):
    attr = node.attr
    if attr.startswith("_"):
        problems.append("%s: attribute %r is not allowed in safe mode: names starting with an "
                        "underscore reach interpreter internals" % (_describe(node), attr))
    elif attr in _DENIED_ATTRIBUTES:
        problems.append("%s: attribute %r is not allowed in safe mode: it reaches files, "
                        "processes, code execution or the interpreter" % (_describe(node), attr))
    elif (isinstance(node.value, ast.Attribute) and node.value.attr == "ops"
          and (attr in _DENIED_OPS or attr.startswith("import") or attr.startswith("export"))):
        problems.append("%s: bpy.ops.%s is not allowed in safe mode: it reaches files, scripts "
                        "or the window manager" % (_describe(node), attr))


def _check_format_call(node, problems):
    # str.format resolves attribute and index lookups written inside the format string, out
    # of the AST's sight; only literal format strings without them are allowed.
    func = node.func
    if not (isinstance(func, ast.Attribute) and func.attr == "format"):
        return
    if not (isinstance(func.value, ast.Constant) and isinstance(func.value.value, str)):
        problems.append("%s: .format() is only allowed on a string literal in safe mode; use an "
                        "f-string" % _describe(node))
        return
    for _text, field, _spec, _conv in _string.Formatter().parse(func.value.value):
        if field and ("." in field or "[" in field):
            problems.append("%s: format field {%s} looks up attributes or items, which safe "
                            "mode does not allow" % (_describe(node), field))


def check_policy(code):
    """Returns the list of rule violations of a snippet (empty when it may run)."""
    try:
        tree = ast.parse(code, "<snippet>", "exec")
    except SyntaxError as exc:
        return ["line %s: syntax error: %s" % (exc.lineno, exc.msg)]
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                _check_module(alias.name, node, problems)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                problems.append("%s: relative imports are not allowed in safe mode" % _describe(node))
            else:
                _check_module(node.module or "", node, problems)
            for alias in node.names:
                if alias.name == "*" or alias.name.startswith("_") or alias.name in _DENIED_ATTRIBUTES:
                    problems.append("%s: importing %r is not allowed in safe mode"
                                    % (_describe(node), alias.name))
        elif isinstance(node, ast.Name):
            if node.id in _DENIED_NAMES or node.id.startswith("__"):
                problems.append("%s: %r is not available in safe mode" % (_describe(node), node.id))
        elif isinstance(node, ast.Attribute):
            _check_attribute(node, problems)
        elif isinstance(node, ast.Call):
            _check_format_call(node, problems)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            problems.append("%s: global and nonlocal are not allowed in safe mode" % _describe(node))
    # ast.walk is breadth-first; the model reads the refusals in source order.
    return sorted(problems, key=lambda text: int(text.split(":")[0].split()[-1]))


def _guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
    # Second line of defence, for imports the AST check cannot see statically.
    if level or (name not in _SAFE_MODULES and name.split(".")[0] != "bpy"):
        raise ImportError("import of %r is not allowed in safe mode" % name)
    return __import__(name, globals, locals, fromlist, level)


def _safe_globals():
    safe = {name: getattr(_builtins_module, name) for name in _SAFE_BUILTINS}
    safe["__import__"] = _guarded_import
    return {"__builtins__": safe, "__name__": "viga_gn_snippet", "bpy": bpy}


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
    except Exception as exc:  # noqa: BLE001 - the snippet may raise anything; it is a step error
        frames = [f for f in _traceback.extract_tb(exc.__traceback__) if f.filename == "<snippet>"]
        line = (" at line %d" % frames[-1].lineno) if frames else ""
        raise GnError("the snippet raised %s%s: %s\noutput so far:\n%s"
                      % (type(exc).__name__, line, exc, output.getvalue()[-2000:])) from exc
    return {"output": output.getvalue()[-8000:]}
