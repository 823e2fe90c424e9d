"""The camera and renders: poses, framing objects, framed views from a temporary camera,
renders in the engine asked for (Cycles on a GPU when there is one) with the scene's own
settings given back afterwards."""

import base64
import contextlib
import io
import math
import os
import shutil
import tempfile
import time

import bpy
import mathutils

from . import served
from .common import BridgeError, object_or_error, rounded, world_bbox
from .blend_files import read_as_template

ENGINES = {"WORKBENCH": "BLENDER_WORKBENCH", "CYCLES": "CYCLES", "EEVEE": "BLENDER_EEVEE"}
# Cycles' GPU backends, the fastest first.
GPU_BACKENDS = ("OPTIX", "CUDA", "HIP", "ONEAPI", "METAL")
_cycles_gpu = None
VIEW_CAMERA_NAME = "viga_view_camera"


def look_at_rotation(location, target):
    direction = mathutils.Vector(target) - mathutils.Vector(location)
    if direction.length < 1e-9:
        raise BridgeError("bad_request", "look_at target coincides with the camera location")
    return direction.to_track_quat("-Z", "Y").to_euler()


def ensure_camera(name):
    obj = bpy.data.objects.get(name)
    if obj is not None:
        if obj.type != "CAMERA":
            raise BridgeError("bad_request", "object %r is a %s, not a camera" % (name, obj.type))
        return obj
    data = bpy.data.cameras.new(name)
    obj = bpy.data.objects.new(name, data)
    bpy.context.scene.collection.objects.link(obj)
    return obj


def apply_pose(camera, pose):
    location = pose.get("location")
    if location is not None:
        camera.location = vector3(location, "location")
    if pose.get("look_at") is not None:
        camera.rotation_euler = look_at_rotation(camera.location, vector3(pose["look_at"], "look_at"))
    elif pose.get("rotation_euler") is not None:
        camera.rotation_euler = vector3(pose["rotation_euler"], "rotation_euler")
    if pose.get("lens") is not None:
        camera.data.lens = float(pose["lens"])


def vector3(value, field):
    if not isinstance(value, (list, tuple)) or len(value) != 3:
        raise BridgeError("bad_request", "%s must be a list of three numbers" % field)
    return mathutils.Vector([float(v) for v in value])


def camera_state(camera):
    return {
        "camera": camera.name,
        "location": rounded(camera.location),
        "rotation_euler": rounded(camera.rotation_euler),
        "lens": round(camera.data.lens, 4),
    }


def cmd_set_camera(args):
    camera = ensure_camera(args.get("camera") or VIEW_CAMERA_NAME)
    apply_pose(camera, args)
    if args.get("make_active", True):
        bpy.context.scene.camera = camera
    bpy.context.view_layer.update()
    return camera_state(camera)


def cmd_frame_objects(args):
    """Points a camera at the joint world bounding box of some objects, from a direction,
    far enough that the box's bounding sphere fits the narrower field of view with padding."""
    names = args.get("objects") or []
    if names:
        targets = [object_or_error(name) for name in names]
    else:
        targets = [o for o in bpy.context.scene.objects if o.type == "MESH" and not o.hide_render]
    if not targets:
        raise BridgeError("not_found", "no mesh objects to frame; name the objects to frame")
    padding = float(args.get("padding", 0.1))
    if padding < 0:
        raise BridgeError("bad_request", "padding must be >= 0")
    direction = vector3(args.get("direction", [1.0, -1.0, 0.8]), "direction")
    if direction.length < 1e-9:
        raise BridgeError("bad_request", "direction must not be the zero vector")
    direction.normalize()
    low = mathutils.Vector((math.inf,) * 3)
    high = mathutils.Vector((-math.inf,) * 3)
    for obj in targets:
        obj_low, obj_high = world_bbox(obj)
        for i in range(3):
            low[i] = min(low[i], obj_low[i])
            high[i] = max(high[i], obj_high[i])
    center = (low + high) / 2.0
    radius = max((high - low).length / 2.0, 1e-3)
    camera = ensure_camera(args.get("camera") or VIEW_CAMERA_NAME)
    render = bpy.context.scene.render
    aspect = (render.resolution_x * render.pixel_aspect_x) / max(render.resolution_y * render.pixel_aspect_y, 1e-9)
    sensor_fov = camera.data.angle  # along the sensor-fit axis (the wider one under AUTO)
    if aspect >= 1.0:
        narrow_fov = 2.0 * math.atan(math.tan(sensor_fov / 2.0) / aspect)
    else:
        narrow_fov = 2.0 * math.atan(math.tan(sensor_fov / 2.0) * aspect)
    distance = radius * (1.0 + padding) / math.sin(narrow_fov / 2.0)
    camera.location = center + direction * distance
    camera.rotation_euler = look_at_rotation(camera.location, center)
    camera.data.clip_end = max(camera.data.clip_end, distance + radius * 2.0)
    if args.get("make_active", True):
        bpy.context.scene.camera = camera
    bpy.context.view_layer.update()
    state = camera_state(camera)
    state.update({
        "center": rounded(center),
        "radius": round(radius, 4),
        "distance": round(distance, 4),
        "bbox_min": rounded(low),
        "bbox_max": rounded(high),
        "objects": sorted(o.name for o in targets),
    })
    return state


def requested_size(args):
    width, height = int(args.get("width", 512)), int(args.get("height", 512))
    if not (1 <= width <= 16384 and 1 <= height <= 16384):
        raise BridgeError("bad_request", "width and height must be between 1 and 16384")
    return width, height


def cmd_render_framed_views(args):
    """Frames the same objects from each direction on the view camera and renders that
    view: what frame_objects and render do, for several views in one round trip."""
    directions = args.get("directions")
    if not isinstance(directions, list) or not directions:
        raise BridgeError("bad_request", "render_framed_views needs a non-empty list \"directions\"")
    paths = args.get("output_paths") or []
    if paths and len(paths) != len(directions):
        raise BridgeError(
            "bad_request",
            "give one output path per direction (%d directions, %d paths)" % (len(directions), len(paths)),
        )
    width, height = requested_size(args)
    with render_settings_kept(bpy.context.scene), view_camera_kept_out():
        return framed_views(args, directions, paths, width, height)


@contextlib.contextmanager
def view_camera_kept_out():
    """In a person's Blender, looking leaves nothing behind: the view camera a look makes
    (object and camera data) is removed again. viga's own workers keep it, as they keep
    the render settings."""
    existed = bpy.data.objects.get(VIEW_CAMERA_NAME) is not None
    try:
        yield
    finally:
        made = bpy.data.objects.get(VIEW_CAMERA_NAME)
        if served.user_scene and not existed and made is not None:
            remove_camera(made)


def remove_camera(camera):
    """Removes a camera object viga made, and its camera data when nothing else uses it."""
    data = camera.data
    bpy.data.objects.remove(camera, do_unlink=True)
    if data is not None and data.users == 0:
        bpy.data.cameras.remove(data)


def framed_views(args, directions, paths, width, height):
    # Framing fits the output's aspect ratio, so the output size is set before framing.
    render = bpy.context.scene.render
    render.resolution_x, render.resolution_y, render.resolution_percentage = width, height, 100
    frame_args = {"camera": VIEW_CAMERA_NAME, "objects": args.get("objects") or [], "make_active": False}
    if args.get("padding") is not None:
        frame_args["padding"] = args["padding"]
    render_args = {"camera": VIEW_CAMERA_NAME, "engine": args.get("engine", "WORKBENCH"), "width": width, "height": height}
    if args.get("samples") is not None:
        render_args["samples"] = args["samples"]
    views = []
    for index, direction in enumerate(directions):
        framing = cmd_frame_objects(dict(frame_args, direction=direction))
        rendered = cmd_render(dict(render_args, output_path=paths[index]) if paths else render_args)
        views.append({"framing": framing, "render": rendered})
    return {"views": views}


# The render settings a render sets for itself. In a person's Blender each is put back
# afterwards, so looking at their scene never changes how it renders for them. viga's own
# workers keep them: later framing (investigate, set_camera) fits the last render's size.
KEPT_RENDER_SETTINGS = (
    ("render", "engine"), ("render", "resolution_x"), ("render", "resolution_y"),
    ("render", "resolution_percentage"), ("render", "filepath"),
    ("render.image_settings", "file_format"), ("render.image_settings", "color_mode"),
    ("cycles", "samples"), ("cycles", "device"), ("cycles", "use_denoising"),
    ("cycles", "denoising_prefilter"),
    ("eevee", "taa_render_samples"),
)


@contextlib.contextmanager
def render_settings_kept(scene):
    if not served.user_scene:
        yield
        return

    def owner(path):
        target = scene
        for part in path.split("."):
            target = getattr(target, part, None)
        return target

    saved = [(owner(path), name, getattr(owner(path), name)) for path, name in KEPT_RENDER_SETTINGS if owner(path) is not None]
    try:
        yield
    finally:
        for target, name, value in saved:
            with contextlib.suppress(AttributeError, TypeError, ValueError):
                setattr(target, name, value)


def cmd_render(args):
    with render_settings_kept(bpy.context.scene):
        return render_with(args)


def render_with(args):
    scene = bpy.context.scene
    engine_name = args.get("engine", "WORKBENCH")
    if engine_name not in ENGINES:
        raise BridgeError("bad_request", "unknown engine %r; use one of %s" % (engine_name, ", ".join(ENGINES)))
    width, height = requested_size(args)
    previous_camera = scene.camera
    temporary = None
    if args.get("pose") is not None:
        temporary = ensure_camera(VIEW_CAMERA_NAME + "_render")
        apply_pose(temporary, args["pose"])
        scene.camera = temporary
    elif args.get("camera"):
        camera = object_or_error(args["camera"])
        if camera.type != "CAMERA":
            raise BridgeError("bad_request", "object %r is a %s, not a camera" % (camera.name, camera.type))
        scene.camera = camera
    if scene.camera is None:
        raise BridgeError("bad_request", "the scene has no camera; pass \"camera\" or a \"pose\"")
    render = scene.render
    render.engine = ENGINES[engine_name]
    render.resolution_x, render.resolution_y, render.resolution_percentage = width, height, 100
    render.image_settings.file_format = "PNG"
    render.image_settings.color_mode = "RGB"
    if engine_name == "CYCLES":
        scene.cycles.samples = int(args.get("samples", 16))
        scene.cycles.device = args.get("device") or ("GPU" if cycles_gpu() else "CPU")
        # Denoised (OpenImageDenoise) whatever the scene or a program set: at the
        # low sample counts renders are made with, noise would otherwise swamp what a light
        # or a material changed, and make scores vary from render to render.
        scene.cycles.use_denoising = True
        # The guiding passes (albedo, normal) denoised together with the colour, not each
        # first on its own (Blender's default, ACCURATE), which on a CPU costs about as much
        # as the 16 samples: a 512x512 render of the demo scene took 8.4 s of CPU time with
        # it and 5.3 s without, and differs from a 256-sample render by a photometric loss
        # of 1.1e-5 instead of 0.6e-5 (a 100 W and a 1000 W lamp differ by over 1e-3).
        scene.cycles.denoising_prefilter = "FAST"
    elif engine_name == "EEVEE" and args.get("samples") is not None:
        scene.eevee.taa_render_samples = int(args["samples"])
    # With output_path (a client sharing this machine's filesystem), the PNG stays on disk and
    # only its path travels; otherwise it goes inline as base64. An output path Blender would
    # read as a template is rendered to a plain temporary file and moved there afterwards.
    output_path = args.get("output_path")
    direct = bool(output_path) and not read_as_template(output_path)
    if direct:
        path = output_path
    else:
        handle, path = tempfile.mkstemp(prefix="viga-render-", suffix=".png")
        os.close(handle)
    camera_name = scene.camera.name
    try:
        if read_as_template(path):
            raise BridgeError(
                "bad_request",
                "the temporary file %s has characters Blender reads as a path template ({ } # or a "
                "leading //); set TMPDIR to a folder without them" % path,
            )
        render.filepath = path
        started = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            bpy.ops.render.render(write_still=True)
        render_ms = (time.perf_counter() - started) * 1000.0
        png = None
        if output_path and not direct:
            shutil.move(path, output_path)
        elif not output_path:
            with open(path, "rb") as handle_png:
                png = handle_png.read()
    finally:
        if not direct:
            with contextlib.suppress(OSError):
                os.remove(path)  # gone already when it was moved into place
        scene.camera = previous_camera
        if temporary is not None:
            remove_camera(temporary)
    delivered = (
        {"path": output_path}
        if output_path
        else {"image": {"media_type": "image/png", "data": base64.b64encode(png).decode("ascii")}}
    )
    return {
        **delivered,
        "width": width,
        "height": height,
        "engine": engine_name,
        "camera": camera_name,
        "render_ms": round(render_ms, 3),
    }


def cycles_gpu():
    """Whether Cycles renders on a GPU here; decided once per process. viga's own Blender
    (factory settings) turns on the fastest GPU backend with a device; a person's Blender is
    asked only what its own preferences chose, and they are never changed."""
    global _cycles_gpu
    if _cycles_gpu is not None:
        return _cycles_gpu
    _cycles_gpu = False
    try:
        prefs = bpy.context.preferences.addons["cycles"].preferences
        if served.user_scene:
            _cycles_gpu = prefs.compute_device_type != "NONE" and any(d.use and d.type != "CPU" for d in prefs.devices)
            return _cycles_gpu
        for backend in GPU_BACKENDS:
            try:
                prefs.compute_device_type = backend
            except TypeError:
                continue  # not built into this Blender
            prefs.get_devices_for_type(backend)
            gpus = [device for device in prefs.devices if device.type == backend]
            if gpus:
                for device in gpus:
                    device.use = True
                _cycles_gpu = True
                return True
        prefs.compute_device_type = "NONE"
    except Exception:  # no Cycles add-on, or a driver that fails to enumerate: the CPU it is
        _cycles_gpu = False
    return _cycles_gpu
