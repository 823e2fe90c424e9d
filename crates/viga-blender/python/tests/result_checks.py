# Checks of what a run's result may bring into a person's Blender, run inside the bpy module:
#
#   .viga/venv/bin/python crates/viga-blender/python/tests/result_checks.py
#
# One bpy plays both parts, as the Rust suites do: viga's worker while a result is made (a
# program runs on the person's scene saved as a copy, with fingerprints before and after it,
# the worker's packing of the run's own assets, and the scene saved), then the person's
# Blender when the bridge's import_scene_result or import_gn_result takes it in. Each check
# is one kind of thing that would read (or write) a file in the person's Blender, refused
# with the scene as it was, or one that must come in. Prints one line per check and ends
# with "N passed, M failed"; exits 1 if anything failed.

import contextlib
import os
import shutil
import sys
import tempfile
import traceback

import bpy

HERE = os.path.dirname(os.path.abspath(__file__))
# The bridge is imported from the source tree, which is left as it is.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(HERE))

from viga_bridge.common import BridgeError  # noqa: E402 - found through the path above
from viga_bridge.fingerprints import cmd_scene_fingerprints  # noqa: E402
from viga_bridge.gn_results import cmd_import_gn_result  # noqa: E402
from viga_bridge.scene_results import cmd_import_scene_result  # noqa: E402

PACK_RESULT_ASSETS = os.path.join(os.path.dirname(HERE), "result_assets.py")
TMP = tempfile.mkdtemp(prefix="viga_result_checks_")
ASSETS = os.path.join(TMP, "run", "assets")
OUTSIDE = os.path.join(TMP, "home")
SECRET = os.path.join(OUTSIDE, "secret.txt")
CHECKS = []


def check(function):
    CHECKS.append(function)
    return function


# --------------------------------------------------------------------------- the two parts

# The person's scene: a plane, a material "Shared" with an image of theirs read from a file
# in their home folder, and Blender's built-in font (a text object uses it).
PERSON = """
import bpy
bpy.ops.mesh.primitive_plane_add(size=4.0)
plane = bpy.context.object
plane.name = 'Plane'
shared = bpy.data.materials.new('Shared')
shared.use_nodes = True
texture = shared.node_tree.nodes.new('ShaderNodeTexImage')
texture.image = bpy.data.images.load(%(own)r)
plane.data.materials.append(shared)
bpy.context.scene.collection.objects.link(bpy.data.objects.new('Label', bpy.data.curves.new('Label', 'FONT')))
"""


def png(path, color):
    """Writes a 4x4 PNG of `color` at `path`."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    image = bpy.data.images.new("png", 4, 4)
    image.pixels[:] = list(color) * 16
    image.filepath_raw = path
    image.file_format = "PNG"
    image.save()
    bpy.data.images.remove(image)


def person_scene(extra=""):
    """Makes the person's scene and keeps it as their file's copy: its path."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    exec(PERSON % {"own": os.path.join(OUTSIDE, "own.png")} + extra, {})
    base = os.path.join(TMP, "base.blend")
    bpy.ops.wm.save_as_mainfile(filepath=base, copy=True)
    return base


def plan_of(before, after):
    """The plan viga makes of fingerprints before and after a run on the person's scene
    (viga_core::attached::plan_result, camera and world kept)."""
    objects = [{"name": name, "replaces": name in before["objects"], "collections": entry["collections"]}
               for name, entry in sorted(after["objects"].items()) if before["objects"].get(name) != entry]
    changed, added = {}, {}
    for kind, blocks in after["data"].items():
        for name, digest in sorted(blocks.items()):
            was = before["data"].get(kind, {}).get(name)
            if was != digest:
                (changed if was is not None else added).setdefault(kind, []).append(name)
    return {"from_open_scene": True, "objects": objects,
            "remove": sorted(set(before["objects"]) - set(after["objects"])), "changed": changed,
            "added": added, "collections": after["collections"], "camera": "keep", "world": "keep"}


def made(base, program, name):
    """Runs `program` on the copy as viga's worker does (its assets in VIGA_ASSETS_DIR,
    packed before the result is saved): (the result file, the plan)."""
    bpy.ops.wm.open_mainfile(filepath=base)
    before = cmd_scene_fingerprints({})
    exec(program, {"ASSETS": ASSETS, "OUTSIDE": OUTSIDE, "SECRET": SECRET})
    after = cmd_scene_fingerprints({})
    os.environ["VIGA_ASSETS_DIR"] = ASSETS
    try:
        with open(PACK_RESULT_ASSETS, encoding="utf-8") as handle:
            exec(handle.read(), {})
    finally:
        del os.environ["VIGA_ASSETS_DIR"]
    result = os.path.join(TMP, name + ".blend")
    bpy.ops.wm.save_as_mainfile(filepath=result, copy=True)
    return result, plan_of(before, after)


def scene_state():
    """What must not change when a result is refused: every datablock by collection, and
    every object's modifiers with their node groups."""
    skip = {"window_managers", "screens", "workspaces"}
    names = {prop.identifier: sorted(block.name for block in getattr(bpy.data, prop.identifier))
             for prop in bpy.data.bl_rna.properties if prop.type == "COLLECTION" and prop.identifier not in skip}
    modifiers = {obj.name: [(m.name, getattr(getattr(m, "node_group", None), "name", None)) for m in obj.modifiers]
                 for obj in bpy.data.objects}
    return sorted((key, value) for key, value in names.items() if value), modifiers


def refused(importing, *needles):
    """Runs `importing` on the person's scene: it must be refused, its message must say
    each of `needles`, and the scene must be as it was."""
    before = scene_state()
    try:
        importing()
    except BridgeError as exc:
        assert exc.kind == "result_refused", (exc.kind, exc.message)
        for needle in needles:
            assert needle in exc.message, (needle, exc.message)
        print("refused: %s" % exc.message)
    else:
        raise AssertionError("the result was taken in")
    assert scene_state() == before, "the scene changed"


def import_scene(result, plan):
    return cmd_import_scene_result({"path": result, "plan": plan, "message": "viga: checks"})


def import_gn(result, group, obj="Plane"):
    modifiers = [{"object": obj, "modifier": group, "node_group": group, "inputs": {}}]
    return cmd_import_gn_result({"path": result, "node_groups": [group], "modifiers": modifiers,
                                 "message": "viga: checks"})


# A Geometry Nodes group "NAME" on the plane whose output is `node`'s geometry (KIND, its Path
# set to PATH), as a run writes it.
READER = """
import bpy
tree = bpy.data.node_groups.new(%(name)r, 'GeometryNodeTree')
tree.interface.new_socket('Geometry', in_out='INPUT', socket_type='NodeSocketGeometry')
tree.interface.new_socket('Geometry', in_out='OUTPUT', socket_type='NodeSocketGeometry')
node = tree.nodes.new(%(kind)r)
node.inputs['Path'].default_value = %(path)r
output = tree.nodes.new('NodeGroupOutput')
if %(kind)r == 'GeometryNodeImportText':
    curves = tree.nodes.new('GeometryNodeStringToCurves')
    tree.links.new(node.outputs[0], curves.inputs['String'])
    tree.links.new(curves.outputs[0], output.inputs[0])
else:
    tree.links.new(node.outputs[0], output.inputs[0])
bpy.data.objects['Plane'].modifiers.new(%(name)r, 'NODES').node_group = tree
"""


def reader(name, kind, path):
    return READER % {"name": name, "kind": kind, "path": path}


# --------------------------------------------------------------------------- refused


@check
def gn_result_with_an_import_text_node_is_refused():
    base = person_scene()
    result, _plan = made(base, reader("Reader", "GeometryNodeImportText", SECRET), "import_text")
    bpy.ops.wm.open_mainfile(filepath=base)
    refused(lambda: import_gn(result, "Reader"), 'the node group "Reader" holds an Import Text node',
            "would read a file in your Blender")


@check
def scene_result_with_an_import_obj_node_is_refused():
    base = person_scene()
    result, plan = made(base, reader("Reader", "GeometryNodeImportOBJ", os.path.expanduser("~")), "import_obj")
    assert plan["added"].get("node_groups") == ["Reader"], plan
    bpy.ops.wm.open_mainfile(filepath=base)
    refused(lambda: import_scene(result, plan), 'the node group "Reader" holds an Import OBJ node',
            "would read a file in your Blender")


@check
def an_importer_whose_path_is_built_while_evaluating_is_refused():
    # The path is no default value: a String node and a Join Strings make it, so the node
    # kind is what is refused, not a path.
    program = reader("Builder", "GeometryNodeImportSTL", "") + """
tree = bpy.data.node_groups['Builder']
join = tree.nodes.new('GeometryNodeStringJoin')
part = tree.nodes.new('FunctionNodeInputString')
part.string = %r
tree.links.new(part.outputs[0], join.inputs['Strings'])
tree.links.new(join.outputs[0], node.inputs['Path'])
""" % OUTSIDE
    base = person_scene()
    result, plan = made(base, program, "import_stl")
    bpy.ops.wm.open_mainfile(filepath=base)
    refused(lambda: import_scene(result, plan), "Import STL", "would read a file")
    bpy.ops.wm.open_mainfile(filepath=base)
    refused(lambda: import_gn(result, "Builder"), "Import STL", "would read a file")


@check
def every_importer_blender_offers_is_refused():
    kinds = [name for name in dir(bpy.types) if name.startswith("GeometryNodeImport")]
    assert len(kinds) >= 6, kinds
    base = person_scene()
    for kind in kinds:
        result, plan = made(base, reader("Reader", kind, SECRET), kind)
        bpy.ops.wm.open_mainfile(filepath=base)
        refused(lambda: import_scene(result, plan), "would read a file")


@check
def a_compositor_file_output_node_is_refused():
    program = """
import bpy
tree = bpy.data.node_groups.new('Compositing', 'CompositorNodeTree')
node = tree.nodes.new('CompositorNodeOutputFile')
node.directory = OUTSIDE
bpy.context.scene.compositing_node_group = tree
bpy.data.objects['Plane'].location.x = 1.0
"""
    base = person_scene()
    result, plan = made(base, program, "file_output")
    assert plan["added"].get("node_groups") == ["Compositing"], plan
    bpy.ops.wm.open_mainfile(filepath=base)
    refused(lambda: import_scene(result, plan), 'the node group "Compositing" holds a File Output node',
            "would write files")


@check
def an_image_read_from_a_file_outside_the_result_is_refused():
    png(os.path.join(OUTSIDE, "elsewhere.png"), (1, 0, 0, 1))
    program = """
import bpy, os
material = bpy.data.materials.new('Peek')
material.use_nodes = True
material.node_tree.nodes.new('ShaderNodeTexImage').image = bpy.data.images.load(os.path.join(OUTSIDE, 'elsewhere.png'))
bpy.data.objects['Plane'].data.materials.append(material)
"""
    base = person_scene()
    result, plan = made(base, program, "outside_image")
    bpy.ops.wm.open_mainfile(filepath=base)
    refused(lambda: import_scene(result, plan), 'the image "elsewhere.png" is read from the file',
            "which your Blender would read")


def font_file(folder):
    """A copy of one of Blender's own fonts in `folder`: its path."""
    fonts = bpy.utils.system_resource("DATAFILES", path="fonts")
    name = sorted(f for f in os.listdir(fonts) if f.endswith((".ttf", ".otf", ".woff2")))[0]
    os.makedirs(folder, exist_ok=True)
    shutil.copy(os.path.join(fonts, name), os.path.join(folder, "label" + os.path.splitext(name)[1]))
    return os.path.join(folder, "label" + os.path.splitext(name)[1])


@check
def a_font_read_from_a_file_outside_the_result_is_refused():
    program = "import bpy\nbpy.data.objects['Label'].data.font = bpy.data.fonts.load(%r)\n" % font_file(OUTSIDE)
    base = person_scene()
    result, plan = made(base, program, "outside_font")
    bpy.ops.wm.open_mainfile(filepath=base)
    refused(lambda: import_scene(result, plan), "the font", "is read from the file")


@check
def a_volume_read_from_a_file_is_refused():
    program = """
import bpy, os
volume = bpy.data.volumes.new('Cloud')
volume.filepath = os.path.join(OUTSIDE, 'cloud.vdb')
bpy.context.scene.collection.objects.link(bpy.data.objects.new('Cloud', volume))
"""
    base = person_scene()
    result, plan = made(base, program, "volume")
    bpy.ops.wm.open_mainfile(filepath=base)
    refused(lambda: import_scene(result, plan), 'the volume "Cloud" is read from the file')


@check
def a_sound_and_a_movie_clip_are_refused():
    program = """
import bpy, os
speaker = bpy.data.speakers.new('Speaker')
speaker.sound = bpy.data.sounds.load(SECRET, check_existing=False)
bpy.context.scene.collection.objects.link(bpy.data.objects.new('Speaker', speaker))
"""
    base = person_scene()
    result, plan = made(base, program, "sound")
    bpy.ops.wm.open_mainfile(filepath=base)
    refused(lambda: import_scene(result, plan), 'the sound "secret.txt" would read the file')
    program = """
import bpy
tree = bpy.data.node_groups.new('Tracks', 'CompositorNodeTree')
tree.nodes.new('CompositorNodeMovieClip').clip = bpy.data.movieclips.load(SECRET)
bpy.context.scene.compositing_node_group = tree
"""
    result, plan = made(base, program, "movie_clip")
    bpy.ops.wm.open_mainfile(filepath=base)
    refused(lambda: import_scene(result, plan), 'the movie clip "secret.txt" would read the file')


@check
def a_setting_that_names_a_file_is_refused():
    program = """
import bpy
modifier = bpy.data.objects['Plane'].modifiers.new('Cache', 'MESH_CACHE')
modifier.filepath = SECRET
"""
    base = person_scene()
    result, plan = made(base, program, "mesh_cache")
    bpy.ops.wm.open_mainfile(filepath=base)
    refused(lambda: import_scene(result, plan), 'the object "Plane" has a file path', 'modifiers["Cache"].filepath', "which your Blender would use")


# --------------------------------------------------------------------------- taken in


@check
def an_image_and_a_font_from_the_runs_assets_come_in_packed():
    png(os.path.join(ASSETS, "wood.png"), (0.4, 0.2, 0.1, 1))
    program = """
import bpy, os
material = bpy.data.materials.new('Wood')
material.use_nodes = True
material.node_tree.nodes.new('ShaderNodeTexImage').image = bpy.data.images.load(os.path.join(ASSETS, 'wood.png'))
bpy.data.objects['Plane'].data.materials.append(material)
bpy.data.objects['Label'].data.font = bpy.data.fonts.load(%r)
""" % font_file(ASSETS)
    base = person_scene()
    result, plan = made(base, program, "assets_image")
    bpy.ops.wm.open_mainfile(filepath=base)
    import_scene(result, plan)
    font = bpy.data.objects["Label"].data.font
    assert font.packed_file is not None, "the run's font did not come packed"
    image = bpy.data.images["wood.png"]
    assert image.packed_file is not None, "the run's image did not come packed"
    assert abs(image.pixels[0] - 0.4) < 0.05 and image.size[0] == 4, list(image.pixels[:4])
    assert "Wood" in [slot.material.name for slot in bpy.data.objects["Plane"].material_slots]


@check
def the_persons_own_image_by_its_path_stays_theirs():
    # The plane (with the material using their image) changes, and a new group uses it too.
    program = """
import bpy
bpy.data.objects['Plane'].location.x = 2.0
tree = bpy.data.node_groups.new('Textured', 'GeometryNodeTree')
tree.interface.new_socket('Geometry', in_out='INPUT', socket_type='NodeSocketGeometry')
tree.interface.new_socket('Geometry', in_out='OUTPUT', socket_type='NodeSocketGeometry')
tree.nodes.new('GeometryNodeImageTexture').inputs['Image'].default_value = bpy.data.images['own.png']
bpy.data.objects['Plane'].modifiers.new('Textured', 'NODES').node_group = tree
"""
    base = person_scene()
    result, plan = made(base, program, "own_image")
    for importing in (lambda: import_scene(result, plan), lambda: import_gn(result, "Textured")):
        bpy.ops.wm.open_mainfile(filepath=base)
        own = bpy.data.images["own.png"]
        importing()
        assert [image.name for image in bpy.data.images] == ["own.png"], list(bpy.data.images)
        assert bpy.data.images["own.png"] == own and own.packed_file is None


@check
def a_point_cache_on_disk_is_refused():
    program = """
import bpy
bpy.data.objects['Plane'].modifiers.new('Cloth', 'CLOTH').point_cache.use_disk_cache = True
"""
    base = person_scene()
    result, plan = made(base, program, "point_cache")
    bpy.ops.wm.open_mainfile(filepath=base)
    refused(lambda: import_scene(result, plan), 'the object "Plane" has a file path',
            'modifiers["Cloth"].point_cache: a cache on disk')


@check
def a_particle_system_comes_in():
    # Fingerprints once failed on particle settings' empty texture slots.
    program = """
import bpy
bpy.context.view_layer.objects.active = bpy.data.objects['Plane']
bpy.ops.object.particle_system_add()
"""
    base = person_scene()
    result, plan = made(base, program, "particles")
    bpy.ops.wm.open_mainfile(filepath=base)
    import_scene(result, plan)
    assert len(bpy.data.objects["Plane"].particle_systems) == 1


@check
def an_ocean_that_is_not_baked_comes_in():
    # Its cache folder (a temporary folder by default) is read only once it is baked.
    program = "import bpy\nbpy.data.objects['Plane'].modifiers.new('Ocean', 'OCEAN')\n"
    base = person_scene()
    result, plan = made(base, program, "ocean")
    bpy.ops.wm.open_mainfile(filepath=base)
    import_scene(result, plan)
    assert bpy.data.objects["Plane"].modifiers["Ocean"].filepath


@check
def string_to_curves_with_the_builtin_font_comes_in():
    program = """
import bpy
tree = bpy.data.node_groups.new('Title', 'GeometryNodeTree')
tree.interface.new_socket('Geometry', in_out='INPUT', socket_type='NodeSocketGeometry')
tree.interface.new_socket('Geometry', in_out='OUTPUT', socket_type='NodeSocketGeometry')
curves = tree.nodes.new('GeometryNodeStringToCurves')
curves.inputs['String'].default_value = 'viga'
tree.links.new(curves.outputs[0], tree.nodes.new('NodeGroupOutput').inputs[0])
bpy.data.objects['Plane'].modifiers.new('Title', 'NODES').node_group = tree
"""
    for person_has_a_font in (True, False):
        base = person_scene("" if person_has_a_font else "bpy.data.objects.remove(bpy.data.objects['Label'])\n"
                            "bpy.data.curves.remove(bpy.data.curves['Label'])\n")
        result, plan = made(base, program, "builtin_font")
        for importing in (lambda: import_scene(result, plan), lambda: import_gn(result, "Title")):
            bpy.ops.wm.open_mainfile(filepath=base)
            importing()
            fonts = [(font.name, font.filepath) for font in bpy.data.fonts]
            assert fonts == [("Bfont Regular", "<builtin>")], fonts
            evaluated = bpy.data.objects["Plane"].evaluated_get(bpy.context.evaluated_depsgraph_get())
            assert bpy.data.objects["Plane"].modifiers["Title"].node_group.name == "Title"
            assert evaluated is not None


# --------------------------------------------------------------------------- running them


@contextlib.contextmanager
def captured_stdout():
    """Prints of a check are shown only when it fails."""
    lines = []
    real = sys.stdout

    class Lines:
        def write(self, text):
            lines.append(text)

        def flush(self):
            pass

    sys.stdout = Lines()
    try:
        yield lines
    finally:
        sys.stdout = real


def main():
    png(os.path.join(OUTSIDE, "own.png"), (0, 0, 1, 1))
    with open(SECRET, "w", encoding="utf-8") as handle:
        handle.write("the person's secret\n")
    wanted = sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else []
    passed = failed = 0
    for function in CHECKS:
        if wanted and function.__name__ not in wanted:
            continue
        with captured_stdout() as output:
            try:
                function()
                problem = None
            except Exception:  # noqa: BLE001 - report every failing check, then carry on
                problem = traceback.format_exc()
        if problem is None:
            passed += 1
            print("ok   %s" % function.__name__)
        else:
            failed += 1
            print("FAIL %s\n%s%s" % (function.__name__, problem, "".join(output)))
    shutil.rmtree(TMP, ignore_errors=True)
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


main()
