"""A Geometry Nodes run's result: the node groups the run made or changed, appended from the
.blend the worker saved, and the Geometry Nodes modifiers with their input values, whose
names and values are checked against what the groups declare."""

import math

import bpy

from .common import BridgeError, text_field
from .results import RESULT_TREE_TYPES, result_append, result_appended_since, result_as_one_undo_step, result_check_appended, result_drop_unused, result_file, result_ids, result_name, result_own_copies, result_remove, result_use_builtin_fonts, result_use_own

GN_RESULT_LIMITS = {"node_groups": 64, "modifiers": 64, "inputs": 512}
GN_STRING_CHARS = 4096
# bpy.data collections a node group's dependencies may be appended into. Texts (scripts),
# scenes, cache files (they read Alembic/USD files), sounds, clips, brushes and the like are not.
GN_DEPENDENCY_COLLECTIONS = (
    "node_groups", "objects", "meshes", "curves", "hair_curves", "pointclouds", "volumes",
    "materials", "images", "textures", "collections", "fonts", "lattices", "metaballs",
    "lights", "cameras", "armatures", "grease_pencils", "annotations", "shape_keys", "actions",
    "libraries",
)
# A modifier input's datablock kind -> the bpy.data collection it names a member of.
GN_DATABLOCK_KINDS = {"object": "objects", "collection": "collections", "material": "materials",
                      "image": "images"}
GN_SOCKET_VALUES = {
    "NodeSocketFloat": "number", "NodeSocketInt": "integer", "NodeSocketBool": "boolean",
    "NodeSocketMenu": "integer", "NodeSocketString": "string", "NodeSocketVector": "vector",
    "NodeSocketColor": "vector", "NodeSocketRotation": "vector",
    "NodeSocketObject": "object", "NodeSocketCollection": "collection",
    "NodeSocketMaterial": "material", "NodeSocketImage": "image",
}


def gn_list(args, field, limit):
    value = args.get(field)
    if not isinstance(value, list) or len(value) > limit:
        raise BridgeError("bad_request", "import_gn_result needs a list %r of at most %d entries" % (field, limit))
    return value


def gn_modifier_requests(entries, groups):
    """The modifiers of the result, checked for shape: object, modifier and group names, and
    inputs as {key: value}. Whether they fit the scene and the groups is checked later."""
    requests = []
    seen = set()
    for index, entry in enumerate(entries):
        where = "modifiers[%d]" % index
        if not isinstance(entry, dict) or set(entry) != {"object", "modifier", "node_group", "inputs"}:
            raise BridgeError("bad_request", "%s must have exactly object, modifier, node_group and inputs" % where)
        obj = result_name(entry["object"], where + ".object")
        modifier = result_name(entry["modifier"], where + ".modifier")
        if len(modifier.encode("utf-8")) > 63:
            raise BridgeError("bad_request", "%s.modifier %r is longer than Blender's 63 bytes" % (where, modifier))
        group = result_name(entry["node_group"], where + ".node_group")
        if group not in groups:
            raise BridgeError("bad_request", "%s uses node group %r, which the result does not bring" % (where, group))
        if (obj, modifier) in seen:
            raise BridgeError("bad_request", "%s repeats the modifier %r on %r" % (where, modifier, obj))
        seen.add((obj, modifier))
        inputs = entry["inputs"]
        if not isinstance(inputs, dict) or len(inputs) > GN_RESULT_LIMITS["inputs"]:
            raise BridgeError("bad_request", "%s.inputs must be an object of at most %d values" % (where, GN_RESULT_LIMITS["inputs"]))
        requests.append((obj, modifier, group, inputs))
    return requests


def gn_input_value(value, expected, where, length):
    """A modifier input value as Blender stores it, or a refusal."""
    if expected == "boolean" and isinstance(value, bool):
        return value
    if expected == "integer" and isinstance(value, int) and not isinstance(value, bool):
        return value
    if expected == "number" and isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    if expected == "string" and isinstance(value, str) and len(value) <= GN_STRING_CHARS:
        return value
    if expected == "vector" and isinstance(value, list) and len(value) == length and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value):
        return [float(v) for v in value]
    if expected in GN_DATABLOCK_KINDS and isinstance(value, dict) and set(value) == {"kind", "name"} \
            and value["kind"] == expected:
        if value["name"] is None:
            return None
        name = result_name(value["name"], where)
        block = getattr(bpy.data, GN_DATABLOCK_KINDS[expected]).get(name)
        if block is None:
            raise BridgeError("result_refused", "%s names the %s %r, which is not in this scene" % (where, expected, name))
        return block
    raise BridgeError("result_refused", "%s must be a %s%s, not %r" % (
        where, expected, " of %d numbers" % length if expected == "vector" else "", value))


def gn_modifier_inputs(group, inputs, where):
    """Checks every input against the group's interface: {key: value as Blender stores it}."""
    sockets = {}
    for item in group.interface.items_tree:
        if item.item_type == "SOCKET" and item.in_out == "INPUT" and item.socket_type in GN_SOCKET_VALUES:
            default = getattr(item, "default_value", None)
            length = len(default) if GN_SOCKET_VALUES[item.socket_type] == "vector" and default is not None else 0
            sockets[item.identifier] = (GN_SOCKET_VALUES[item.socket_type], length)
    values = {}
    for key, value in inputs.items():
        place = "%s.inputs[%r]" % (where, key)
        identifier, expected, length = key, None, 0
        for suffix, kind in (("_use_attribute", "boolean"), ("_attribute_name", "string")):
            if key.endswith(suffix) and key[:-len(suffix)] in sockets:
                identifier, expected = key[:-len(suffix)], kind
        if identifier not in sockets:
            raise BridgeError("result_refused", "%s: node group %r has no input %r" % (place, group.name, key))
        if expected is None:
            expected, length = sockets[identifier]
        values[key] = gn_input_value(value, expected, place, length)
    return values


def gn_checked_result(path, names, modifiers):
    """Appends the result and checks all of it; a result that fails is removed again before
    the refusal is raised, so the person's data is as it was. Returns what applying needs."""
    before_ids = result_ids()
    before = {(collection, block.name): block for collection, block in before_ids.values()
              if collection != "libraries" and block.library is None}
    try:
        appended, file_names = result_append(path, {"node_groups": names})
        appended = {name: appended[("node_groups", name)] for name in names}
        added = result_appended_since(before_ids)
        for name, group in appended.items():
            if group is None or group.bl_idname not in RESULT_TREE_TYPES:
                raise BridgeError("result_refused", "the run's result %r is not a node group Blender can use here" % name)
        requested = {group.as_pointer() for group in appended.values()}
        own_copies = result_own_copies(added, requested, before, file_names, path)
        result_check_appended(added, GN_DEPENDENCY_COLLECTIONS, {
            "before": before, "own_copies": own_copies, "file_names": file_names, "path": path})
        plan = []
        for obj_name, modifier_name, group_name, inputs in modifiers:
            where = "modifier %r on %r" % (modifier_name, obj_name)
            obj = before.get(("objects", obj_name))
            if obj is None:
                raise BridgeError("result_refused", "%s: there is no object %r in this scene (renamed or deleted during the run?)" % (where, obj_name))
            existing = obj.modifiers.get(modifier_name)
            if existing is not None and existing.type != "NODES":
                raise BridgeError("result_refused", "%s: the scene's modifier of that name is a %s modifier" % (where, existing.type))
            if existing is None and obj.type not in ("MESH", "CURVE", "CURVES", "POINTCLOUD", "VOLUME", "GREASEPENCIL", "FONT"):
                raise BridgeError("result_refused", "%s: a %s cannot carry a Geometry Nodes modifier" % (where, obj.type))
            group = appended[group_name]
            plan.append((obj, modifier_name, group, gn_modifier_inputs(group, inputs, where)))
    except BaseException:
        result_remove(block for _collection, block in result_appended_since(before_ids))
        raise
    return {"before": before, "appended": appended, "added": added, "file_names": file_names,
            "path": path, "plan": plan}


def gn_apply_result(result):
    """Puts a checked result into the person's data: groups of a name the scene has replace
    it (wherever it is used), what the groups use that the scene already has is the scene's,
    and the modifiers get their groups and input values."""
    result_use_builtin_fonts(result)
    before, appended, added = result["before"], result["appended"], result["added"]
    requested = list(appended.values())
    replaced = []
    for name, group in appended.items():
        old = before.get(("node_groups", name))
        if old is not None:
            old.user_remap(group)
            replaced.append(old)
    result_remove(replaced)
    for name, group in appended.items():
        group.name = name
    duplicates = result_use_own(result, {group.as_pointer() for group in requested})
    changed = []
    for obj, modifier_name, group, values in result["plan"]:
        modifier = obj.modifiers.get(modifier_name) or obj.modifiers.new(modifier_name, "NODES")
        modifier.node_group = group
        for key, value in values.items():
            modifier[key] = value
        obj.update_tag()
        changed.append("%s/%s" % (obj.name, modifier.name))
    # Appended copies nothing uses any more, and the library entry the append left behind.
    result_drop_unused([block for _collection, block in added if block not in duplicates and block not in requested])
    return {"node_groups": sorted(appended), "replaced": sorted(old_name for old_name in appended
                                                                if ("node_groups", old_name) in before),
            "modifiers": changed}


def cmd_import_gn_result(args):
    path = result_file(args)
    names = [result_name(name, "node_groups[%d]" % i)
             for i, name in enumerate(gn_list(args, "node_groups", GN_RESULT_LIMITS["node_groups"]))]
    if len(set(names)) != len(names):
        raise BridgeError("bad_request", "node_groups names a group twice")
    modifiers = gn_modifier_requests(gn_list(args, "modifiers", GN_RESULT_LIMITS["modifiers"]), set(names))
    message = text_field(args, "message")
    return result_as_one_undo_step(message, lambda: gn_checked_result(path, names, modifiers), gn_apply_result)
