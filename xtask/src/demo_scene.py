# The interim demo: build a small scene in real Blender and render it with Workbench.
import json
import sys

import bpy

out_path = sys.argv[sys.argv.index("--") + 1] if "--" in sys.argv and len(sys.argv) > sys.argv.index("--") + 1 else None

bpy.ops.wm.read_factory_settings(use_empty=True)
bpy.ops.mesh.primitive_plane_add(size=8)
bpy.ops.mesh.primitive_cube_add(size=1.5, location=(-1.2, 0, 0.75))
bpy.ops.mesh.primitive_uv_sphere_add(radius=0.8, location=(1.3, 0.4, 0.8))
bpy.ops.object.light_add(type="SUN", location=(4, -4, 6))
bpy.ops.object.camera_add(location=(7.0, -7.0, 5.0))
camera = bpy.context.object
target = bpy.data.objects.new("Target", None)
bpy.context.scene.collection.objects.link(target)
constraint = camera.constraints.new("TRACK_TO")
constraint.target = target
scene = bpy.context.scene
scene.camera = camera
scene.render.engine = "BLENDER_WORKBENCH"
scene.render.resolution_x = 320
scene.render.resolution_y = 240
scene.render.resolution_percentage = 100
scene.render.filepath = out_path
bpy.ops.render.render(write_still=True)
print("VIGA_RESULT:" + json.dumps({
    "blender": bpy.app.version_string,
    "objects": sorted(o.name for o in bpy.data.objects),
    "render": out_path,
}))
