"""Attached runs work in viga's own (contained) worker, on a copy of the person's scene. Their
results come back as data: a .blend the worker saved, and what to take from it. Everything
in it was written where model code ran, so nothing of it runs: datablocks are appended
(Blender's append runs no script; a file's registered texts run only when a file is opened
with auto-run on), and before any of the person's data changes, every appended datablock is
checked (result_refusal: only the kinds the result may bring, nothing linked from another
file, no text, no driver needing Python, no node tree or node type written in Python, no
script node; result_file_use in result_files.py: nothing that would read or write a file in
the person's Blender). A result that fails is removed again, and the scene is as it was; one that
passes is ONE undo step. Geometry Nodes results and scene results share all of this."""

import os
import stat

import bpy

from .common import BridgeError
from .blend_files import checked_path
from .result_files import RESULT_BUILTIN_FONT, result_file_use, result_noun_of, result_own_paths
from .undo import ensure_undo_base, push_undo_step, undo_one_step

# Node tree types Blender itself defines; a tree of any other type is written in Python.
RESULT_TREE_TYPES = ("GeometryNodeTree", "ShaderNodeTree", "CompositorNodeTree", "TextureNodeTree")
# Nodes that run code of their own: OSL scripts, from a text or a file.
RESULT_CODE_NODES = ("ShaderNodeScript",)
# The longest datablock name Blender keeps, in bytes.
RESULT_NAME_BYTES = 255
# Datablocks that are a file read from a path, which no result brings (said so in plain words).
RESULT_FILE_KINDS = ("sounds", "movieclips", "cache_files")


def result_name(value, what):
    if not isinstance(value, str) or not value or "\x00" in value or len(value.encode("utf-8")) > RESULT_NAME_BYTES:
        raise BridgeError("bad_request", "%s must be a name of 1 to %d bytes without NUL, not %r"
                          % (what, RESULT_NAME_BYTES, value if isinstance(value, str) else type(value).__name__))
    return value


def result_file(args):
    path = checked_path(args, must_exist=False)
    try:
        mode = os.lstat(path).st_mode
    except OSError as exc:
        raise BridgeError("not_found", "the run's result %s cannot be read: %s" % (path, exc)) from None
    if not stat.S_ISREG(mode):
        raise BridgeError("bad_request", "the run's result %s is not a regular file (a link or a device is not read)" % path)
    return os.path.abspath(path)


def result_ids():
    """Every datablock in this Blender, by pointer: (collection name, ID)."""
    found = {}
    for prop in bpy.data.bl_rna.properties:
        if prop.type != "COLLECTION":
            continue
        for block in getattr(bpy.data, prop.identifier):
            found[block.as_pointer()] = (prop.identifier, block)
    return found


def result_python_driver(block):
    """The first driver of `block` (or of a node tree embedded in it) that needs Python."""
    for owner in (block, getattr(block, "node_tree", None)):
        animation = getattr(owner, "animation_data", None) if owner is not None else None
        for curve in (animation.drivers if animation is not None else ()):
            driver = curve.driver
            if driver.type == "SCRIPTED" and not driver.is_simple_expression:
                return "%s[%d]: %r" % (curve.data_path, curve.array_index, driver.expression)
    return None


def result_refusal(collection, block, allowed):
    """Why an appended datablock must not stay in the person's scene, or None. `allowed`:
    the bpy.data collections this kind of result may bring."""
    kind = "%s %r" % (type(block).__name__, block.name)
    if collection not in allowed:
        if collection in RESULT_FILE_KINDS:
            return "the %s \"%s\" would read the file %s in your Blender; a result brings no %ss" % (
                result_noun_of(collection), block.name, getattr(block, "filepath", "") or "it names",
                result_noun_of(collection))
        return "%s (bpy.data.%s) is not part of this kind of result" % (kind, collection)
    if collection != "libraries" and block.library is not None:
        return "%s is linked from another file (%s)" % (kind, block.library.filepath)
    driver = result_python_driver(block)
    if driver is not None:
        return "%s has a driver that needs Python: %s" % (kind, driver)
    trees = [block] if collection == "node_groups" else [getattr(block, "node_tree", None)]
    for tree in trees:
        if tree is None:
            continue
        if tree.bl_idname not in RESULT_TREE_TYPES:
            return "%s is a %s, not one of Blender's own node tree types" % (kind, tree.bl_idname)
        for node in tree.nodes:
            if type(node).__module__ not in ("bpy.types", "_bpy_types"):
                return "%s has node %r of a type written in Python (%s)" % (kind, node.name, node.bl_idname)
            if node.bl_idname in RESULT_CODE_NODES:
                return "%s has a script node %r (%s), which runs code of its own" % (kind, node.name, node.bl_idname)
    return None


def result_check_appended(added, allowed, appended):
    """Refuses the result when one of the appended datablocks `added` ((collection, ID)
    pairs) is refused, or one that stays would read or write a file in this Blender.
    `appended`: what the append left: the scene's own datablocks before it ("before",
    {(collection, name): ID}), the pointers of the appended copies of them that theirs
    replace before anything stays ("own_copies": what theirs use is theirs), and the result
    file's names ("file_names", "path")."""
    own_paths = result_own_paths(appended["before"])
    for collection, block in added:
        refused = result_refusal(collection, block, allowed)
        if not refused and collection != "libraries" and block.as_pointer() not in appended["own_copies"]:
            name = result_original_name(block, collection, appended["file_names"], appended["path"])
            refused = result_file_use(collection, block, name, own_paths)
        if refused:
            raise BridgeError("result_refused", "the run's result was refused: %s" % refused)


def result_own_copies(added, requested, before, file_names, path):
    """The pointers of the appended datablocks that are copies of the scene's own and that
    result_use_own will replace by theirs: not asked for (`requested`, pointers), and of a
    name the scene had (`before`)."""
    return {block.as_pointer() for collection, block in added
            if collection != "libraries" and block.as_pointer() not in requested
            and (collection, result_original_name(block, collection, file_names, path)) in before}


def result_original_name(block, collection, file_names, path):
    """The name an appended datablock had in the result file: Blender renames one whose name
    was taken, and keeps the original in its weak reference (objects have none: their
    numbered suffix is dropped when the file has the bare name and not the numbered one)."""
    reference = getattr(block, "library_weak_reference", None)
    if reference is not None and os.path.abspath(bpy.path.abspath(reference.filepath)) == path:
        return reference.id_name[2:]
    names = file_names.get(collection, ())
    if block.name in names:
        return block.name
    base, dot, suffix = block.name.rpartition(".")
    if dot and suffix.isdigit() and base in names:
        return base
    return block.name


def result_noun(collection):
    """What one member of a bpy.data collection is called: node_groups -> node group."""
    return {"meshes": "mesh", "libraries": "library"}.get(collection, collection[:-1].replace("_", " "))


def result_append(path, requests):
    """Appends the datablocks `requests` names ({bpy.data collection: [names]}) from `path`,
    with what they use: ({(collection, name): the appended ID}, the file's names by
    collection)."""
    with bpy.data.libraries.load(path, link=False) as (data_from, data_to):
        file_names = {attr: set(getattr(data_from, attr)) for attr in dir(data_from)
                      if isinstance(getattr(data_from, attr), list)}
        for collection, names in requests.items():
            missing = [name for name in names if name not in file_names.get(collection, ())]
            if missing:
                raise BridgeError("result_refused", "the run's result has no %s %s"
                                  % (result_noun(collection), ", ".join(repr(n) for n in missing)))
            setattr(data_to, collection, list(names))
    appended = {}
    for collection, names in requests.items():
        for name, block in zip(names, getattr(data_to, collection)):
            appended[(collection, name)] = block
    return appended, file_names


def result_use_own(result, requested):
    """What the appended datablocks use that the scene already had (an object a node points
    at, a material) is the scene's own: each copy the append brought of one is replaced by
    the scene's and removed. `requested`: the pointers of the datablocks the result asked
    for, which stay. Returns the removed copies."""
    duplicates = []
    for collection, block in result["added"]:
        if collection == "libraries" or block.as_pointer() in requested:
            continue
        name = result_original_name(block, collection, result["file_names"], result["path"])
        original = result["before"].get((collection, name))
        if original is not None:
            block.user_remap(original)
            duplicates.append(block)
    result_remove(duplicates)
    return duplicates


def result_builtin_font(block):
    return isinstance(block, bpy.types.VectorFont) and block.filepath == RESULT_BUILTIN_FONT


def result_use_builtin_fonts(result):
    """Blender's built-in font is Blender's own, not the result's: an appended copy of it is
    replaced by the scene's built-in font when it has one (Blender keeps that font's name
    read-only, so it is never renamed). `result["appended"]` ({key: ID}) then names the
    scene's font, and `result["added"]` no longer holds the copy."""
    own = next((block for (collection, _name), block in result["before"].items()
                if collection == "fonts" and result_builtin_font(block)), None)
    if own is None:
        return
    copies = [block for collection, block in result["added"]
              if collection == "fonts" and result_builtin_font(block)]
    pointers = {block.as_pointer() for block in copies}
    for block in copies:
        block.user_remap(own)
    for key, block in list(result["appended"].items()):
        if block is not None and block.as_pointer() in pointers:
            result["appended"][key] = own
    result["added"] = [(collection, block) for collection, block in result["added"]
                       if block.as_pointer() not in pointers]
    result_remove(copies)


def result_remove(blocks):
    blocks = list(blocks)
    if blocks:
        bpy.data.batch_remove(blocks)


def result_appended_since(before_ids):
    """The datablocks that are new since `before_ids` (result_ids()), as (collection, ID)."""
    return [(collection, block) for pointer, (collection, block) in result_ids().items()
            if pointer not in before_ids]


def result_drop_unused(kept):
    """Removes the appended datablocks `kept` that nothing uses any more (copies replaced by
    the scene's own, the library entry the append left behind), until none is left."""
    while True:
        unused = [block for block in kept
                  if (block.users_id == () if isinstance(block, bpy.types.Library) else block.users == 0)]
        if not unused:
            return
        result_remove(unused)
        kept = [block for block in kept if block not in unused]


def result_as_one_undo_step(message, check, apply):
    """Brings a result in as ONE undo step named `message`: check() appends and checks it
    (removing it again when it refuses it), apply(checked) puts it in place; a failure while
    applying goes back to the step before."""
    ensure_undo_base()
    checked = check()
    try:
        applied = apply(checked)
    except Exception:
        push_undo_step(message + " (failed)")
        undo_one_step()
        raise
    push_undo_step(message)
    return applied
