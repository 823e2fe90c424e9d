# Run in viga's own worker just before a scene result is saved (the program on the copy has
# run, its fingerprints are taken). The person's Blender takes in no image or font read from
# a file outside the result (import_scene_result refuses one), so those the run loaded from
# its own asset folder (VIGA_ASSETS_DIR: fetched textures, generated pictures, fonts) are
# packed into the result here, and come in with it. What lies elsewhere stays a path and is
# refused there, with the reason. Every other path is made absolute, so a scene saved in the
# worker's scratch folder and moved into the run folder still names the files it used.
import os

import bpy


def viga_assets_folder():
    folder = os.environ.get("VIGA_ASSETS_DIR", "")
    return os.path.realpath(folder) if folder else None


def viga_in_assets(block, assets):
    if assets is None or not block.filepath or block.filepath == "<builtin>":
        return False
    path = os.path.realpath(bpy.path.abspath(block.filepath))
    return os.path.commonpath([path, assets]) == assets and os.path.isfile(path)


def viga_pack_run_assets():
    assets = viga_assets_folder()
    blocks = [image for image in bpy.data.images if image.source == "FILE"] + list(bpy.data.fonts)
    for block in blocks:
        if block.library is None and block.packed_file is None and viga_in_assets(block, assets):
            try:
                block.pack()
            except RuntimeError as exc:
                # Left as a path: the person's Blender refuses it, and says which file.
                print("viga: %s %r was not packed: %s" % (type(block).__name__, block.name, exc))


if bpy.data.filepath:
    bpy.ops.file.make_paths_absolute()
viga_pack_run_assets()
