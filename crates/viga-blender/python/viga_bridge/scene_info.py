"""What the scene holds (`scene_info`, paged), and visibility, frames and keyframes."""

import bpy

from .common import BridgeError, object_or_error, rounded, world_bbox

def describe_object(obj):
    low, high = world_bbox(obj)
    entry = {
        "name": obj.name,
        "type": obj.type,
        "location": rounded(obj.location),
        "rotation_euler": rounded(obj.rotation_euler),
        "scale": rounded(obj.scale),
        "dimensions": rounded(obj.dimensions),
        "bbox_min": rounded(low),
        "bbox_max": rounded(high),
        "visible": not obj.hide_render,
    }
    if obj.parent is not None:
        entry["parent"] = obj.parent.name
    materials = [slot.material.name for slot in obj.material_slots if slot.material is not None]
    if materials:
        entry["materials"] = materials
    if obj.modifiers:
        entry["modifiers"] = [{"name": m.name, "type": m.type} for m in obj.modifiers]
    data = obj.data
    if obj.type == "MESH" and data is not None:
        entry["mesh"] = {"vertices": len(data.vertices), "polygons": len(data.polygons)}
        if data.shape_keys is not None:
            entry["shape_keys"] = [
                {"name": key.name, "value": round(key.value, 4)} for key in data.shape_keys.key_blocks
            ]
    elif obj.type == "LIGHT":
        entry["light"] = {"type": data.type, "energy": round(data.energy, 4), "color": rounded(data.color)}
    elif obj.type == "CAMERA":
        entry["camera"] = {"type": data.type, "lens": round(data.lens, 4)}
    source = viga_source(obj)
    if source is not None:
        entry["source"] = source
    return entry


def viga_source(obj):
    """The object's `viga_source` custom property (set by viga's asset and initialisation
    imports) when it is a short string; a program may set anything there, so nothing else."""
    try:
        value = obj.get("viga_source")
    except Exception:
        return None
    if not isinstance(value, str) or not value:
        return None
    return value[:32]


def cmd_scene_info(args):
    offset = int(args.get("offset", 0))
    limit = int(args.get("limit", 50))
    if offset < 0 or limit < 1:
        raise BridgeError("bad_request", "scene_info needs offset >= 0 and limit >= 1")
    scene = bpy.context.scene
    # A program's moves reach matrix_world and the evaluated bounds only when the view layer
    # is updated; without it the boxes are those of the scene before the program.
    bpy.context.view_layer.update()
    objects = sorted(scene.objects, key=lambda o: o.name)
    page = objects[offset:offset + limit]
    next_offset = offset + len(page)
    return {
        "blender_version": bpy.app.version_string,
        "scene": scene.name,
        "unit_system": scene.unit_settings.system,
        "frame_current": scene.frame_current,
        "frame_start": scene.frame_start,
        "frame_end": scene.frame_end,
        "active_camera": scene.camera.name if scene.camera else None,
        "render_engine": scene.render.engine,
        "total_objects": len(objects),
        "offset": offset,
        "next_offset": next_offset if next_offset < len(objects) else None,
        "objects": [describe_object(obj) for obj in page],
        "materials": sorted(m.name for m in bpy.data.materials),
    }


def cmd_set_visibility(args):
    names = args.get("objects")
    if not isinstance(names, list) or not names:
        raise BridgeError("bad_request", "set_visibility needs a non-empty list \"objects\"")
    visible = bool(args.get("visible", True))
    targets = [object_or_error(name) for name in names]
    for obj in targets:
        obj.hide_render = not visible
        obj.hide_viewport = not visible
    return {"objects": sorted(o.name for o in targets), "visible": visible}


def cmd_set_frame(args):
    if "frame" not in args:
        raise BridgeError("bad_request", "set_frame needs an integer \"frame\"")
    scene = bpy.context.scene
    scene.frame_set(int(args["frame"]))
    return {"frame": scene.frame_current, "frame_start": scene.frame_start, "frame_end": scene.frame_end}


def cmd_list_keyframes(_args):
    frames = set()
    per_object = {}
    for obj in bpy.context.scene.objects:
        action = obj.animation_data.action if obj.animation_data else None
        if action is None:
            continue
        object_frames = set()
        for fcurve in iter_fcurves(action):
            for point in fcurve.keyframe_points:
                object_frames.add(int(round(point.co[0])))
        if object_frames:
            per_object[obj.name] = sorted(object_frames)
            frames |= object_frames
    return {"frames": sorted(frames), "objects": per_object}


def iter_fcurves(action):
    # Blender 4.4+ keeps F-curves in layered actions; older releases on the action itself.
    if hasattr(action, "layers") and len(action.layers) > 0:
        for layer in action.layers:
            for strip in layer.strips:
                for bag in getattr(strip, "channelbags", []):
                    yield from bag.fcurves
        return
    yield from getattr(action, "fcurves", [])
