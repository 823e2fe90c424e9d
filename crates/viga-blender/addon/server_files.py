# SPDX-License-Identifier: GPL-3.0-or-later
# The files a viga server's add-on commands may name in this Blender: one folder the person
# chose (the add-on's "Server files" preference), nothing else. The server is someone else's
# machine; its agent's model reads what people type and what the scene holds, so a path it
# sends is treated as hostile: resolved in the folder, refused with `..`, refused absolute
# elsewhere, refused through a link leading out.
#
# The rule is viga's own (viga_skills::addons::paths): a value is a path when its parameter is
# declared `file_path` in the add-on's manifest or its name's last word says so (`path`,
# `file`, `filename`, `dir`, `directory`, `folder`, ...), at any depth. No Blender import, so
# it is tested with any Python.

import os

PATH_WORDS = {"path", "filepath", "filename", "file", "dir", "dirpath", "directory", "folder"}


class PathRefused(ValueError):
    """A path parameter that names something outside the folder; the message says which."""


def _words(name):
    words, current, previous_lower = [], "", False
    for char in name:
        boundary = not char.isalnum() or (char.isupper() and previous_lower)
        if boundary and current:
            words.append(current)
            current = ""
        if char.isalnum():
            current += char.lower()
        previous_lower = char.islower() or char.isdigit()
    if current:
        words.append(current)
    return words


def looks_like_path(name):
    """Whether a parameter's name says it holds a path: only its last word counts, so
    `file_format` is not one and `image_file` is."""
    words = _words(name)
    if len(words) >= 2 and words[-2] == "file" and words[-1] == "name":
        return True
    return bool(words) and words[-1] in PATH_WORDS


def prepare_folder(folder):
    """Creates the folder (mode 0700) when missing; returns it absolute and without links."""
    os.makedirs(folder, mode=0o700, exist_ok=True)
    real = os.path.realpath(folder)
    if not os.path.isdir(real):
        raise OSError("%s is not a folder" % folder)
    return real


def _inside(path, folder):
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def confine(folder, requested):
    """Where `requested` (relative to `folder`, or absolute inside it) is, following links in
    the part that exists; refuses anything that ends up outside. `folder` comes from
    prepare_folder()."""
    if not isinstance(requested, str) or not requested:
        raise PathRefused("an empty path names no file")
    if ".." in requested.replace("\\", "/").split("/"):
        raise PathRefused("`..` may not appear in a path")
    if os.path.isabs(requested):
        candidate = os.path.normpath(requested)
        if not _inside(candidate, folder):
            raise PathRefused("it is outside the server files folder")
    else:
        candidate = os.path.normpath(os.path.join(folder, requested))
    existing, missing = candidate, []
    while not os.path.lexists(existing):
        parent, name = os.path.split(existing)
        if parent == existing:
            raise PathRefused("it is outside the server files folder")
        missing.append(name)
        existing = parent
    real = os.path.realpath(existing)
    if not os.path.exists(real):
        raise PathRefused("it is a link that leads nowhere")
    if not _inside(real, folder):
        raise PathRefused("it leads out of the server files folder through a link")
    return os.path.join(real, *reversed(missing)) if missing else real


def declared_tools(manifest):
    """The tool entries `manifest` declares (dicts), in its order; none for a manifest without
    them."""
    try:
        tools = manifest["ai_integration"]["tools"]
    except (KeyError, TypeError):
        return []
    return [entry for entry in tools if isinstance(entry, dict)] if isinstance(tools, list) else []


def declared_tool(manifest, tool):
    """The manifest's entry for `tool`, or None when the manifest does not declare it."""
    return next((entry for entry in declared_tools(manifest) if entry.get("name") == tool), None)


def declared_paths(manifest, tool):
    """The parameter names `tool` declares as `file_path` in `manifest`."""
    entry = declared_tool(manifest, tool) or {}
    return {
        parameter.get("name")
        for parameter in entry.get("parameters") or []
        if isinstance(parameter, dict) and parameter.get("type") == "file_path"
    }


def confine_params(params, declared, folder):
    """`params` with every path in them resolved in `folder` (a copy); raises PathRefused
    naming the parameter."""
    return {name: _confine_value(value, name in declared or looks_like_path(name), name, folder)
            for name, value in params.items()}


def _confine_value(value, is_path, at, folder):
    if isinstance(value, str) and is_path:
        try:
            return confine(folder, value)
        except PathRefused as why:
            raise PathRefused(
                "parameter %r (%r) is refused: %s; a path names a file in the server files folder, relative to it"
                % (at, value, why)
            ) from None
    if isinstance(value, list):
        return [_confine_value(item, is_path, "%s[%d]" % (at, index), folder) for index, item in enumerate(value)]
    if isinstance(value, dict):
        return {name: _confine_value(item, is_path or looks_like_path(name), "%s.%s" % (at, name), folder)
                for name, item in value.items()}
    return value
