"""Run in viga's own worker, before and after a program: what the program changed is what
differs. A fingerprint covers what Blender stores and a program sets: settings, references
to other datablocks (by name), custom properties, node trees, geometry (as attributes),
keyframes, drivers, edited pixels; not what Blender derives (matrices, bounds, normals,
selection) or a datablock's own user count."""

import hashlib
import json
import os
import socket
import struct

import bpy

from .scene_results import SCENE_DATA_COLLECTIONS, scene_replaceable
from .scene_info import iter_fcurves

FP_SKIPPED = frozenset({
    "rna_type", "bl_rna", "id_data", "original", "users", "session_uid", "matrix_world",
    "matrix_local", "matrix_basis", "bound_box", "preview", "library_weak_reference",
    "users_collection", "users_scene", "animation_data", "pixels", "internal_links",
    "uv_layer_clone", "uv_layer_stencil",
    # What is selected: editing state, not the scene (adding a node selects it alone).
    "select", "select_head", "select_tail", "select_control_point", "select_left_handle",
    "select_right_handle",
})
# Scalars Blender derives even though a datablock offers them as read-only properties; the
# read-only ones it stores are kept.
FP_STORED_READONLY = frozenset({"type", "bl_idname"})
# Collections Blender offers as views of a geometry's attributes, which are hashed instead.
FP_ATTRIBUTE_VIEWS = frozenset({
    "vertices", "edges", "polygons", "loops", "uv_layers", "vertex_colors", "color_attributes",
    "attributes", "points", "curves", "corner_normals", "polygon_normals", "vertex_normals",
    "loop_triangles", "loop_triangle_polygons", "curve_offset_data", "position_data",
})
# Collections longer than this are hashed as arrays, not walked item by item.
FP_WALKED_ITEMS = 64
FP_ARRAY_TYPES = {"FLOAT": "float32", "INT": "int32", "BOOLEAN": "bool_"}
FP_ATTRIBUTE_VALUES = {
    "FLOAT": ("value", 1, "float32"), "INT": ("value", 1, "int32"), "INT8": ("value", 1, "int32"),
    "BOOLEAN": ("value", 1, "bool_"), "FLOAT2": ("vector", 2, "float32"),
    "FLOAT_VECTOR": ("vector", 3, "float32"), "FLOAT_COLOR": ("color", 4, "float32"),
    "BYTE_COLOR": ("color", 4, "float32"), "INT32_2D": ("value", 2, "int32"),
    "QUATERNION": ("value", 4, "float32"), "FLOAT4X4": ("value", 16, "float32"),
}
_fp_properties = {}


def fp_properties(struct):
    """The properties of `struct`'s type a fingerprint reads, as (identifier, type, subtype,
    fixed array length or 1), cached by type."""
    rna = struct.bl_rna
    found = _fp_properties.get(rna.identifier)
    if found is None:
        found = []
        for prop in rna.properties:
            key = prop.identifier
            if key in FP_SKIPPED or prop.is_runtime:
                continue
            scalar = prop.type not in ("POINTER", "COLLECTION")
            if scalar and prop.is_readonly and key not in FP_STORED_READONLY:
                continue
            length = getattr(prop, "array_length", 0) if getattr(prop, "is_array", False) else 1
            if length == 0:
                continue  # an array of any length (pixels): read only where hashed on purpose
            found.append((key, prop.type, prop.subtype, length))
        _fp_properties[rna.identifier] = found
    return found


def fp_plain(value):
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, bpy.types.ID):
        return [type(value).__name__, value.name]
    if hasattr(value, "to_dict"):
        return {key: fp_plain(item) for key, item in value.items()}
    try:
        return [fp_plain(item) for item in value]
    except TypeError:
        return str(value)


def fp_custom(struct):
    """A struct's custom properties, or None for a struct that has none."""
    try:
        keys = struct.keys()
    except TypeError:
        return None
    return {key: fp_plain(struct[key]) for key in keys} if keys else None


def fp_digest(value):
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode("utf-8")).hexdigest()[:32]


def fp_array_hash(items):
    """The numbers of a long collection (a curve's points, keyframes), hashed."""
    import numpy  # only viga's own workers fingerprint; Blender ships numpy
    digest = hashlib.sha256(str(len(items)).encode())
    if len(items):
        for key, kind, _subtype, length in fp_properties(items[0]):
            dtype = FP_ARRAY_TYPES.get(kind)
            if dtype is None:
                if key == "name":
                    digest.update("\0".join(item.name for item in items).encode("utf-8"))
                continue
            buffer = numpy.empty(len(items) * length, dtype=dtype)
            try:
                items.foreach_get(key, buffer)
            except (RuntimeError, TypeError, AttributeError):
                continue
            digest.update(key.encode())
            digest.update(buffer.tobytes())
    return digest.hexdigest()


def fp_attributes(attributes):
    """Every attribute of a geometry, hashed (selection and UV selection state left out)."""
    import numpy
    found = []
    for attribute in sorted(attributes, key=lambda a: a.name):
        if attribute.name.startswith((".select", ".uv_select")):
            continue
        digest = hashlib.sha256()
        spec = FP_ATTRIBUTE_VALUES.get(attribute.data_type)
        if spec is not None:
            key, width, dtype = spec
            buffer = numpy.empty(len(attribute.data) * width, dtype=dtype)
            attribute.data.foreach_get(key, buffer)
            digest.update(buffer.tobytes())
        elif attribute.data_type == "STRING":
            digest.update("\0".join(item.value for item in attribute.data).encode("utf-8"))
        found.append([attribute.name, attribute.domain, attribute.data_type, digest.hexdigest()])
    return found


def fp_state(struct, depth, skip=()):
    """A struct's settings as plain data: values, datablocks by name (embedded ones and shape
    keys whole), nested structs and collections down to `depth` levels, long collections
    hashed."""
    state = {}
    for key, kind, subtype, _length in fp_properties(struct):
        if key in skip:
            continue
        try:
            value = getattr(struct, key)
        except Exception:  # noqa: BLE001 - some properties exist only in some states
            continue
        if kind == "POINTER":
            if isinstance(value, bpy.types.ID):
                if value.is_embedded_data or key == "shape_keys":
                    state[key] = fp_id(value)
                else:
                    state[key] = [type(value).__name__, value.name,
                                  value.library.filepath if value.library is not None else None]
            elif value is None or depth > 0:
                state[key] = None if value is None else fp_state(value, depth - 1)
        elif kind == "COLLECTION":
            if len(value) and isinstance(value[0], bpy.types.ID):
                state[key] = [item.name for item in value]
            elif depth > 0 and len(value) <= FP_WALKED_ITEMS:
                # A collection can hold empty members (particle settings' unused texture slots).
                state[key] = [None if item is None else fp_state(item, depth - 1) for item in value]
            else:
                state[key] = fp_array_hash(value)
        elif kind == "STRING" and subtype in ("FILE_PATH", "DIR_PATH") and value:
            library = getattr(struct.id_data, "library", None)
            state[key] = os.path.normpath(bpy.path.abspath(value, library=library))
        else:
            state[key] = fp_plain(value)
    custom = fp_custom(struct)
    if custom:
        state["<custom>"] = custom
    return state


def fp_animation(block):
    animation = getattr(block, "animation_data", None)
    if animation is None:
        return None
    drivers = []
    for curve in animation.drivers:
        driver = curve.driver
        variables = [[variable.name, variable.type,
                      [[target.id.name if target.id is not None else None, target.data_path,
                        target.transform_type, target.transform_space, target.bone_target]
                       for target in variable.targets]]
                     for variable in driver.variables]
        drivers.append([curve.data_path, curve.array_index, driver.type, driver.expression,
                        driver.use_self, variables])
    tracks = [[track.name, track.mute, [[strip.name, strip.action.name if strip.action else None,
                                         strip.frame_start, strip.frame_end] for strip in track.strips]]
              for track in animation.nla_tracks]
    return [animation.action.name if animation.action is not None else None, drivers, tracks]


def fp_node_tree(tree):
    def sockets(items):
        return [[socket.identifier, fp_plain(getattr(socket, "default_value", None))] for socket in items]
    nodes = []
    for node in sorted(tree.nodes, key=lambda n: n.name):
        state = fp_state(node, 2, skip=("inputs", "outputs"))
        nodes.append([state, sockets(node.inputs), sockets(node.outputs)])
    links = sorted((l.from_node.name, l.from_socket.identifier, l.to_node.name, l.to_socket.identifier, l.is_muted)
                   for l in tree.links)
    items = [fp_state(item, 0) for item in tree.interface.items_tree]
    return [fp_state(tree, 0, skip=("nodes", "links", "interface")), items, nodes, links]


def fp_id(block):
    """A datablock's state, as plain data."""
    import numpy
    if isinstance(block, bpy.types.NodeTree):
        state = {"<tree>": fp_node_tree(block)}
    elif isinstance(block, (bpy.types.Mesh, bpy.types.Curves, bpy.types.PointCloud)):
        state = fp_state(block, 2, skip=FP_ATTRIBUTE_VIEWS)
        state["<attributes>"] = fp_attributes(block.attributes)
        if isinstance(block, bpy.types.Mesh):
            starts = numpy.empty(len(block.polygons), dtype="int32")
            block.polygons.foreach_get("loop_start", starts)
            state["<faces>"] = hashlib.sha256(starts.tobytes()).hexdigest()
    elif isinstance(block, bpy.types.Action):
        state = fp_state(block, 0)
        state["<fcurves>"] = [[curve.data_path, curve.array_index,
                               [[tuple(k.co), tuple(k.handle_left), tuple(k.handle_right), k.interpolation,
                                 k.easing, k.handle_left_type, k.handle_right_type] for k in curve.keyframe_points]]
                              for curve in iter_fcurves(block)]
    elif isinstance(block, bpy.types.Image):
        state = fp_state(block, 1, skip=("size", "bindcode", "has_data", "is_dirty", "depth", "channels",
                                         "is_float", "frame_duration", "resolution"))
        if block.is_dirty and block.has_data:
            pixels = numpy.empty(len(block.pixels), dtype="float32")
            block.pixels.foreach_get(pixels)
            state["<pixels>"] = hashlib.sha256(pixels.tobytes()).hexdigest()
        if block.packed_file is not None:
            state["<packed>"] = hashlib.sha256(bytes(block.packed_file.data)).hexdigest()
    else:
        state = fp_state(block, 2)
    state["<animation>"] = fp_animation(block)
    return state


def fp_scene_places(scene):
    """({object name: the collections of the scene it is in, "" for the scene's own},
    {collection name: its parent, "" for the scene's own})."""
    places, parents = {}, {}
    pending = [("", scene.collection)]
    seen = set()
    while pending:
        name, collection = pending.pop(0)
        if collection.as_pointer() in seen:
            continue
        seen.add(collection.as_pointer())
        for obj in collection.objects:
            places.setdefault(obj.name, []).append(name)
        for child in collection.children:
            if child.library is None:
                parents.setdefault(child.name, name)
                pending.append((child.name, child))
    return places, parents


def cmd_scene_fingerprints(_args):
    scene = bpy.context.scene
    places, parents = fp_scene_places(scene)
    objects = {}
    for obj in scene.objects:
        if not scene_replaceable(obj) or obj.name not in places:
            continue
        state = fp_id(obj)
        state["<collections>"] = sorted(places[obj.name])
        objects[obj.name] = {"fingerprint": fp_digest(state), "collections": sorted(places[obj.name])}
    data = {}
    for collection in SCENE_DATA_COLLECTIONS:
        # A datablock nothing uses is not saved with the scene, so no result can bring it.
        blocks = {block.name: fp_digest(fp_id(block)) for block in getattr(bpy.data, collection)
                  if scene_replaceable(block) and block.users > 0}
        if blocks:
            data[collection] = blocks
    return {"scene": scene.name, "camera": scene.camera.name if scene.camera is not None else None,
            "world": scene.world.name if scene.world is not None else None,
            "objects": objects, "collections": parents, "data": data}
