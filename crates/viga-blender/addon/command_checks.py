# SPDX-License-Identifier: GPL-3.0-or-later
# What a viga server may ask of an add-on in this Blender: only a command the add-on's
# manifest declares, with only the parameters it declares, each of the declared JSON type (and
# one of the declared options). The add-on's code may have more handlers than it declares, and
# a server is someone else's machine: what the manifest does not offer, it may not call. The
# types follow viga's own (viga_skills::addons::parameter_schema). No Blender import, so it is
# tested with any Python.

from . import server_files

NAME_TYPES = {"object_name", "material_name", "collection_name"}
STRING_TYPES = {"string", "file_path"} | NAME_TYPES


def declared_names(manifest):
    return sorted(entry["name"] for entry in server_files.declared_tools(manifest) if isinstance(entry.get("name"), str))


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _type_problem(parameter, value):
    """Why `value` does not fit the declared `parameter`, or None."""
    kind = parameter.get("type")
    if kind in STRING_TYPES:
        if not isinstance(value, str) or (kind in NAME_TYPES and not value):
            return "a string" if kind not in NAME_TYPES else "a non-empty name"
    elif kind == "integer":
        if not isinstance(value, int) or isinstance(value, bool):
            return "an integer"
    elif kind == "float":
        if not _is_number(value):
            return "a number"
    elif kind == "boolean":
        if not isinstance(value, bool):
            return "true or false"
    elif kind == "vector3":
        if not (isinstance(value, list) and len(value) == 3 and all(_is_number(item) for item in value)):
            return "three numbers"
    elif kind == "enum":
        options = parameter.get("options") or []
        if value not in options:
            return "one of %s" % ", ".join(repr(option) for option in options)
    return None


def refusal(manifest, addon_id, tool, params):
    """Why a server may not run `tool` with `params` on this add-on, or None when it may."""
    entry = server_files.declared_tool(manifest, tool)
    if entry is None:
        return "add-on %r declares no command %r; it declares: %s" % (
            addon_id, tool, ", ".join(declared_names(manifest)) or "none")
    parameters = {p.get("name"): p for p in entry.get("parameters") or [] if isinstance(p, dict)}
    unknown = sorted(name for name in params if name not in parameters)
    if unknown:
        return "%s of add-on %r takes no parameter %s; it takes: %s" % (
            tool, addon_id, ", ".join(unknown), ", ".join(sorted(str(name) for name in parameters)) or "none")
    for name, parameter in sorted(parameters.items(), key=lambda item: str(item[0])):
        if name not in params:
            if parameter.get("required", True) and "default" not in parameter:
                return "%s of add-on %r needs the parameter %s" % (tool, addon_id, name)
            continue
        wanted = _type_problem(parameter, params[name])
        if wanted is not None:
            return "parameter %s of %s must be %s" % (name, tool, wanted)
    return None
