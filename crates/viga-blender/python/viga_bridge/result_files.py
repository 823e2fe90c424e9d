"""What in a result would read (or write) a file once it is in the person's Blender.

A result's .blend was written where model code ran, so every file path in it is the model's
choice, and the person's Blender is not contained: a Geometry Nodes Import node evaluated
there reads the file it names (Import Text and String to Curves turn it into geometry), an
image, font or volume by path is loaded from that path, a File Output node writes where it
points. So a result brings no node that works with files (the node kind is refused, whatever
its path: a path can be built while the tree is evaluated), and no datablock or setting that
names a file, except:
- images and fonts packed into the result (the worker packs those a run loaded from its own
  asset folder before it saves the result) and images Blender generates;
- Blender's built-in font;
- a file the person's own file already uses (an image of theirs the run changed still reads
  the file theirs read);
- copies of the person's own datablocks, which their own replace before anything stays."""

import itertools
import os

import bpy

# Node types that read or write the file a path names. Geometry Nodes' importers are
# matched by name, so one a later Blender adds is refused too; a node with a file path
# input or setting (File Output, IES Texture, an importer of any other name) is refused as well.
RESULT_IMPORT_NODE_PREFIX = "GeometryNodeImport"
RESULT_FILE_NODES = ("CompositorNodeOutputFile",)
# String subtypes Blender gives properties that name a file or a folder.
RESULT_PATH_SUBTYPES = ("FILE_PATH", "DIR_PATH", "FILE_NAME")
RESULT_PATH_SOCKET = "NodeSocketStringFilePath"
# Nodes that only pass a path on: what they lead to is checked where it is used.
RESULT_PASSING_NODES = ("NodeGroupInput", "NodeGroupOutput", "NodeReroute")
# The file path Blender's built-in font has.
RESULT_BUILTIN_FONT = "<builtin>"
# Image sources that read a file (generated and viewer images read none).
RESULT_FILE_IMAGE_SOURCES = ("FILE", "SEQUENCE", "MOVIE", "TILED")
# Datablocks whose own file path is checked by kind (packed, built in, the person's), not by
# the walk over settings; a library's path is the result file itself.
RESULT_OWN_PATH_KINDS = ("images", "fonts", "volumes", "sounds", "movieclips", "cache_files", "libraries")
# Settings are walked this deep, and this many members of a collection (modifiers,
# particle systems, constraints), so a huge datablock costs little.
RESULT_WALK_DEPTH = 3
RESULT_WALK_ITEMS = 256
# What the walk skips: where the append left the result file's own path, and geometry.
RESULT_WALK_SKIPPED = frozenset({
    "rna_type", "bl_rna", "id_data", "original", "library_weak_reference", "vertices", "edges",
    "polygons", "loops", "attributes", "points", "curves", "splines", "layers", "frames",
    "strokes", "keyframe_points", "fcurves", "nodes", "links", "interface", "uv_layers",
    "vertex_colors", "color_attributes", "corner_normals", "polygon_normals", "vertex_normals",
    "loop_triangles", "loop_triangle_polygons", "curve_offset_data", "position_data",
})
# Path settings Blender reads only when another setting says so: an Ocean modifier's cache
# folder (set to a temporary folder by default) is read only once it is baked.
RESULT_PATH_USED_WHEN = {("OceanModifier", "filepath"): "is_cached"}
_node_file_uses = {}




def result_node_label(node):
    return node.bl_label or node.bl_rna.name or node.bl_idname


def result_node_file_use(node):
    """Why a node of `node`'s kind works with files, or None (by kind: cached per type)."""
    kind = node.bl_idname
    if kind in RESULT_PASSING_NODES or hasattr(node, "node_tree"):
        return None
    if kind not in _node_file_uses:
        why = None
        if kind.startswith(RESULT_IMPORT_NODE_PREFIX):
            why = "which would read a file in your Blender"
        elif kind in RESULT_FILE_NODES:
            why = "which would write files from your Blender"
        elif any(socket.bl_idname == RESULT_PATH_SOCKET for socket in node.inputs):
            why = "which has a file path input and would read that file in your Blender"
        elif any(prop.type == "STRING" and prop.subtype in RESULT_PATH_SUBTYPES
                 for prop in node.bl_rna.properties):
            why = "which has a file path and would use that file in your Blender"
        _node_file_uses[kind] = why
    return _node_file_uses[kind]


def result_tree_file_use(collection, block, name):
    """The first node of `block`'s node tree (a node group, or one embedded in a material,
    world, light, texture) that works with files, as a refusal."""
    tree = block if collection == "node_groups" else getattr(block, "node_tree", None)
    if tree is None:
        return None
    for node in tree.nodes:
        why = result_node_file_use(node)
        if why:
            label = result_node_label(node)
            named = "" if node.name == label else " (named %r)" % node.name
            return "the %s \"%s\" holds %s %s node%s, %s" % (
                result_noun_of(collection), name, "an" if label[:1] in "AEIOU" else "a", label, named, why)
    return None


def result_noun_of(collection):
    return {"node_groups": "node group", "movieclips": "movie clip", "cache_files": "cache file",
            "images": "image", "fonts": "font", "volumes": "volume", "sounds": "sound"}.get(
                collection, collection[:-1].replace("_", " "))


def result_abspath(path):
    return os.path.normpath(os.path.abspath(bpy.path.abspath(path)))


def result_packed(block):
    return getattr(block, "packed_file", None) is not None or len(getattr(block, "packed_files", ())) > 0


def result_block_path_use(collection, block, name, own_paths):
    """Why a datablock that is loaded from its own file path (image, font, volume, sound,
    movie clip, cache file) must not come in, or None."""
    if collection not in RESULT_OWN_PATH_KINDS or collection == "libraries":
        return None
    path = getattr(block, "filepath", "")
    if collection == "images" and block.source not in RESULT_FILE_IMAGE_SOURCES:
        return None
    if collection == "fonts" and path == RESULT_BUILTIN_FONT:
        return None
    if not path or result_packed(block) and collection in ("images", "fonts", "volumes", "sounds"):
        return None
    if collection in ("images", "fonts", "volumes") and result_abspath(path) in own_paths:
        return None
    return ("the %s \"%s\" is read from the file %s, which your Blender would read; a result brings "
            "only images and fonts packed into it" % (result_noun_of(collection), name, path))


def result_setting(struct, key):
    """A setting's value, or None where Blender cannot give it here."""
    try:
        return getattr(struct, key, None)
    except (AttributeError, RuntimeError, TypeError, ValueError):
        return None


def result_walk_paths(struct, where, depth, seen):
    """The first non-empty file path setting, or disk cache, of `struct` and the settings
    under it (not other datablocks), as (where, value)."""
    if struct is None or depth > RESULT_WALK_DEPTH:
        return None
    # A struct at the start of another shares its address: the type tells them apart.
    identity = (struct.as_pointer(), struct.bl_rna.identifier)
    if identity in seen:
        return None
    seen.add(identity)
    if isinstance(struct, bpy.types.PointCache) and (struct.use_disk_cache or struct.use_external):
        return (where, "a cache on disk")
    for prop in struct.bl_rna.properties:
        key = prop.identifier
        if key in RESULT_WALK_SKIPPED:
            continue
        if prop.type == "STRING" and prop.subtype in RESULT_PATH_SUBTYPES:
            value = result_setting(struct, key)
            used_when = RESULT_PATH_USED_WHEN.get((struct.bl_rna.identifier, key))
            if used_when is not None and not result_setting(struct, used_when):
                continue
            if isinstance(value, str) and value.strip():
                return (where + key, value)
        elif prop.type == "POINTER":
            value = result_setting(struct, key)
            # Other datablocks are checked on their own (or are the person's).
            if value is not None and not isinstance(value, bpy.types.ID):
                found = result_walk_paths(value, "%s%s." % (where, key), depth + 1, seen)
                if found:
                    return found
        elif prop.type == "COLLECTION":
            members = result_setting(struct, key)
            for index, member in enumerate(itertools.islice(members or (), RESULT_WALK_ITEMS)):
                if isinstance(member, bpy.types.ID):
                    break
                # A member is named by its name where it has one (a modifier), as in Blender's UI.
                label = getattr(member, "name", None)
                label = '"%s"' % label if isinstance(label, str) and label else str(index)
                found = result_walk_paths(member, "%s%s[%s]." % (where, key, label), depth + 1, seen)
                if found:
                    return found
    return None


def result_setting_path_use(collection, block, name):
    """A setting of `block` (a modifier's cache file, a fluid's cache folder, a camera's
    shader file) that names a file, as a refusal."""
    if collection in RESULT_OWN_PATH_KINDS:
        return None
    found = result_walk_paths(block, "", 0, set())
    if found is None:
        return None
    where, value = found
    return "the %s \"%s\" has a file path (%s: %s), which your Blender would use" % (
        result_noun_of(collection), name, where.rstrip("."), value)


def result_file_use(collection, block, name, own_paths):
    """Why an appended datablock (`name`: its name in the result) that stays in the person's
    Blender would read or write a file there, or None. `own_paths`: the files the person's
    own file already uses."""
    return (result_block_path_use(collection, block, name, own_paths)
            or result_tree_file_use(collection, block, name)
            or result_setting_path_use(collection, block, name))


def result_own_paths(before):
    """The files the person's own images, fonts and volumes read ({(collection, name): ID})."""
    return {result_abspath(block.filepath) for (collection, _name), block in before.items()
            if collection in ("images", "fonts", "volumes") and block.filepath
            and block.filepath != RESULT_BUILTIN_FONT}
