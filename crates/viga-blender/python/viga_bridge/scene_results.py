"""An attached scene run's result. The worker re-ran the chosen program on the copy of the
person's scene, compared fingerprints of the copy's datablocks before and after it
(scene_fingerprints, in fingerprints.py) and saved the scene it left; viga turned the comparison into a
plan: the objects the run made or changed (with the collections they are in), the objects it
removed, the other datablocks it changed or made, and the scene's camera and world. Here the
plan is applied to the open scene as ONE undo step, without running anything: what it names
is appended from the saved .blend and checked (result_refusal) before anything of the
person's changes. The copy was their scene, so what the run left alone is theirs and stays
(their edits since the copy too): a changed object or datablock replaces theirs of its name
wherever it is used, a new one comes in under its own name (numbered when the name is taken),
a removed object leaves this scene, and what the appended datablocks use that the run left
unchanged is theirs, not a copy. A run that did not start from their scene (no copy) only
adds: nothing of theirs is replaced or removed. Other scenes of their file keep their own
objects, and datablocks linked from libraries are never replaced."""

import bpy

from .common import BridgeError, text_field
from .results import result_append, result_appended_since, result_as_one_undo_step, result_builtin_font, result_check_appended, result_drop_unused, result_file, result_ids, result_name, result_noun, result_own_copies, result_remove, result_use_builtin_fonts, result_use_own

SCENE_RESULT_LIMITS = {"objects": 10000, "remove": 10000, "data": 10000, "collections": 1000,
                       "object_collections": 64}
# bpy.data collections a scene result may bring. Texts (scripts), scenes, cache files, sounds,
# clips, brushes, workspaces and the like are not; libraries only as the entry an append
# leaves, since nothing linked from one may come in.
SCENE_RESULT_COLLECTIONS = (
    "objects", "meshes", "curves", "hair_curves", "pointclouds", "volumes", "materials",
    "node_groups", "images", "textures", "collections", "fonts", "lattices", "metaballs",
    "lights", "lightprobes", "cameras", "speakers", "armatures", "grease_pencils", "annotations",
    "shape_keys", "actions", "particles", "palettes", "worlds", "libraries",
)
# Of those, the ones a plan names datablocks of (changed or new). Objects are named on their
# own; shape keys come with their geometry, collections are made by name.
SCENE_DATA_COLLECTIONS = tuple(c for c in SCENE_RESULT_COLLECTIONS
                               if c not in ("objects", "shape_keys", "collections", "libraries"))
SCENE_LINK_KEYS = ("keep", "clear")


def scene_names(value, what, limit, allow_empty=False):
    if not isinstance(value, list) or len(value) > limit:
        raise BridgeError("bad_request", "%s must be a list of at most %d names" % (what, limit))
    names = [name if allow_empty and name == "" else result_name(name, "%s[%d]" % (what, i))
             for i, name in enumerate(value)]
    if len(set(names)) != len(names):
        raise BridgeError("bad_request", "%s names something twice" % what)
    return names


def scene_link(value, what):
    """A plan's camera or world: "keep", "clear" or {"use": name}."""
    if value in SCENE_LINK_KEYS:
        return value
    if isinstance(value, dict) and set(value) == {"use"}:
        return {"use": result_name(value["use"], what + ".use")}
    raise BridgeError("bad_request", "%s must be \"keep\", \"clear\" or {\"use\": name}, not %r" % (what, value))


def scene_data_names(value, what):
    if not isinstance(value, dict) or any(key not in SCENE_DATA_COLLECTIONS for key in value):
        raise BridgeError("bad_request", "%s must map bpy.data collections (%s) to names"
                          % (what, ", ".join(SCENE_DATA_COLLECTIONS)))
    return {key: scene_names(names, "%s.%s" % (what, key), SCENE_RESULT_LIMITS["data"])
            for key, names in value.items()}


def scene_plan(args):
    """The plan, checked for shape: names, sizes, and nothing named twice."""
    plan = args.get("plan")
    keys = {"from_open_scene", "objects", "remove", "changed", "added", "collections", "camera", "world"}
    if not isinstance(plan, dict) or set(plan) != keys:
        raise BridgeError("bad_request", "import_scene_result needs a plan with exactly %s" % ", ".join(sorted(keys)))
    if not isinstance(plan["from_open_scene"], bool):
        raise BridgeError("bad_request", "plan.from_open_scene must be true or false")
    entries = plan["objects"]
    if not isinstance(entries, list) or len(entries) > SCENE_RESULT_LIMITS["objects"]:
        raise BridgeError("bad_request", "plan.objects must be a list of at most %d objects" % SCENE_RESULT_LIMITS["objects"])
    objects = []
    for index, entry in enumerate(entries):
        where = "plan.objects[%d]" % index
        if not isinstance(entry, dict) or set(entry) != {"name", "replaces", "collections"} \
                or not isinstance(entry["replaces"], bool):
            raise BridgeError("bad_request", "%s must have exactly name, replaces (true or false) and collections" % where)
        collections = scene_names(entry["collections"], where + ".collections",
                                  SCENE_RESULT_LIMITS["object_collections"], allow_empty=True)
        if not collections:
            raise BridgeError("bad_request", "%s.collections names no collection to put it in" % where)
        objects.append({"name": result_name(entry["name"], where + ".name"),
                        "replaces": entry["replaces"] and plan["from_open_scene"], "collections": collections})
    scene_names([entry["name"] for entry in objects], "plan.objects", SCENE_RESULT_LIMITS["objects"])
    changed = scene_data_names(plan["changed"], "plan.changed")
    added = scene_data_names(plan["added"], "plan.added")
    for collection, names in changed.items():
        twice = set(names) & set(added.get(collection, ()))
        if twice:
            raise BridgeError("bad_request", "plan names %s in bpy.data.%s as changed and as new" % (sorted(twice), collection))
    parents = plan["collections"]
    if not isinstance(parents, dict) or len(parents) > SCENE_RESULT_LIMITS["collections"]:
        raise BridgeError("bad_request", "plan.collections must map at most %d collections to their parents" % SCENE_RESULT_LIMITS["collections"])
    parents = {result_name(name, "plan.collections key"): "" if parent == "" else result_name(parent, "plan.collections[%r]" % name)
               for name, parent in parents.items()}
    return {"from_open_scene": plan["from_open_scene"], "objects": objects,
            "remove": scene_names(plan["remove"], "plan.remove", SCENE_RESULT_LIMITS["remove"]) if plan["from_open_scene"] else [],
            "changed": changed if plan["from_open_scene"] else {}, "added": added,
            "collections": parents, "camera": scene_link(plan["camera"], "plan.camera"),
            "world": scene_link(plan["world"], "plan.world")}


def scene_collections(scene):
    """The collections of `scene` objects can be put in, by name ("" is the scene's own)."""
    found = {"": scene.collection}
    for collection in scene.collection.children_recursive:
        if collection.library is None:
            found.setdefault(collection.name, collection)
    return found


def scene_replaceable(block):
    """Whether a result may replace or remove `block`: not linked from a library, nor a
    library override (appended, an override would bring the linked datablock it overrides)."""
    return block.library is None and block.override_library is None


def scene_object(scene, name):
    """The object of `scene` named `name` that a plan may replace or remove."""
    obj = scene.objects.get(name)
    return obj if obj is not None and scene_replaceable(obj) else None


def scene_checked_result(path, plan):
    """Appends what the plan names and checks every datablock the append added; a result
    that fails is removed again before the refusal is raised, so the person's data is as it
    was. Returns what applying needs."""
    before_ids = result_ids()
    before = {(collection, block.name): block for collection, block in before_ids.values()
              if collection != "libraries" and block.library is None}
    requests = {"objects": [entry["name"] for entry in plan["objects"]]}
    for names in (plan["changed"], plan["added"]):
        for collection, members in names.items():
            requests.setdefault(collection, []).extend(members)
    requests = {collection: names for collection, names in requests.items() if names}
    try:
        appended, file_names = result_append(path, requests)
        added = result_appended_since(before_ids)
        for (collection, name), block in appended.items():
            if block is None:
                raise BridgeError("result_refused", "the run's result %s %r cannot be used here" % (result_noun(collection), name))
        # A result that does not start from the scene keeps its copies: all of it is checked.
        requested = {block.as_pointer() for block in appended.values()}
        own_copies = result_own_copies(added, requested, before, file_names, path) if plan["from_open_scene"] else set()
        result_check_appended(added, SCENE_RESULT_COLLECTIONS, {
            "before": before, "own_copies": own_copies, "file_names": file_names, "path": path})
    except BaseException:
        result_remove(block for _collection, block in result_appended_since(before_ids))
        raise
    return {"before": before, "appended": appended, "added": added, "file_names": file_names,
            "path": path, "plan": plan, "added_pointers": {block.as_pointer() for _collection, block in added}}


def scene_collection_for(scene, name, parents, collections, made, depth=0):
    """The collection of `scene` named `name`, made (under its parent in the result, or the
    scene's own collection) when the scene has none."""
    found = collections.get(name)
    if found is not None:
        return found
    parent_name = parents.get(name, "")
    if depth > 32 or parent_name == name:
        parent = scene.collection
    else:
        parent = scene_collection_for(scene, parent_name, parents, collections, made, depth + 1)
    collection = bpy.data.collections.new(name)
    parent.children.link(collection)
    collections[name] = collection
    made.append(collection.name)
    return collection


def scene_place(scene, obj, names, parents, collections, made):
    """Puts `obj` in exactly the collections of `scene` the result has it in (its places in
    other scenes stay)."""
    wanted = {scene_collection_for(scene, name, parents, collections, made).as_pointer() for name in names}
    for collection in list(collections.values()):
        inside = collection.objects.get(obj.name) == obj
        if collection.as_pointer() in wanted and not inside:
            collection.objects.link(obj)
        elif collection.as_pointer() not in wanted and inside:
            collection.objects.unlink(obj)


def scene_apply_result(result):
    """Makes the open scene match the checked result (see the section's comment)."""
    scene = bpy.context.scene
    result_use_builtin_fonts(result)
    plan, before, appended = result["plan"], result["before"], result["appended"]
    requested = {block.as_pointer() for block in appended.values()}
    report = {"added": [], "replaced": [], "removed": [], "data_replaced": [], "data_added": [],
              "collections_made": [], "renamed": {}, "camera": None, "world": None, "notes": []}
    # Changed datablocks replace the person's of their name, wherever it is used.
    for collection, names in plan["changed"].items():
        for name in names:
            new = appended[(collection, name)]
            if result_builtin_font(new):
                continue
            old = before.get((collection, name))
            if old is not None and scene_replaceable(old):
                old.user_remap(new)
                result_remove([old])
                report["data_replaced"].append("%s/%s" % (collection, name))
            new.name = name
    for collection, names in plan["added"].items():
        for name in names:
            new = appended[(collection, name)]
            # Blender's built-in font is the scene's own (or Blender's, named by Blender).
            if result_builtin_font(new):
                continue
            new.name = name
            report["data_added"].append("%s/%s" % (collection, new.name))
    # What the appended datablocks use that the run left unchanged is the person's own (a
    # run that did not start from their scene has nothing of theirs).
    if plan["from_open_scene"]:
        result_use_own(result, requested)
    collections = scene_collections(scene)
    brought = {}
    for entry in plan["objects"]:
        name = entry["name"]
        new = appended[("objects", name)]
        old = scene_object(scene, name) if entry["replaces"] else None
        if old is not None:
            # Every use of theirs (its collections in every scene, children, modifiers and
            # constraints pointing at it, a scene's camera) now uses the result's.
            old.user_remap(new)
            result_remove([old])
            report["replaced"].append(name)
        new.name = name
        if old is None:
            report["added"].append(new.name)
        if new.name != name:
            report["renamed"][name] = new.name
        scene_place(scene, new, entry["collections"], plan["collections"], collections, report["collections_made"])
        brought[name] = new
    for name in plan["remove"]:
        obj = scene_object(scene, name)
        if obj is None or name in brought:
            continue
        for collection in collections.values():
            if collection.objects.get(obj.name) == obj:
                collection.objects.unlink(obj)
        if obj.users == 0:
            result_remove([obj])
        report["removed"].append(name)
    camera = plan["camera"]
    if camera == "clear":
        scene.camera = None
    elif camera != "keep":
        obj = brought.get(camera["use"]) or scene.objects.get(camera["use"])
        if obj is None:
            report["notes"].append("the result's camera %r is not in your scene; the scene's camera was left as it was" % camera["use"])
        else:
            scene.camera = obj
    world = plan["world"]
    if world == "clear":
        scene.world = None
    elif world != "keep":
        block = appended.get(("worlds", world["use"])) or bpy.data.worlds.get(world["use"])
        if block is None:
            report["notes"].append("the result's world %r is not in your file; the scene's world was left as it was" % world["use"])
        else:
            scene.world = block
    report["camera"] = scene.camera.name if scene.camera is not None else None
    report["world"] = scene.world.name if scene.world is not None else None
    # Appended copies nothing uses any more, and the library entry the append left behind
    # (removed datablocks are gone from result_ids()).
    placed = {obj.as_pointer() for obj in brought.values()}
    result_drop_unused([block for pointer, (_collection, block) in result_ids().items()
                        if pointer in result["added_pointers"] and pointer not in placed])
    return report


def cmd_import_scene_result(args):
    path = result_file(args)
    plan = scene_plan(args)
    message = text_field(args, "message")
    return result_as_one_undo_step(message, lambda: scene_checked_result(path, plan), scene_apply_result)
