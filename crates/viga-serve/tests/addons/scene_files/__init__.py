"""Scene Files: a test add-on for the gateway. Its commands take file paths (one declared
`file_path`, one a plain string whose name says path), which the gateway confines to the
user's folder, and it tells which Blender process serves the user."""

bl_info = {
    "name": "Scene Files",
    "author": "viga",
    "version": (1, 0, 0),
    "blender": (4, 2, 0),
    "category": "System",
    "description": "Save the scene and notes to files",
}

import os

import bpy


def save_copy(target):
    bpy.ops.wm.save_as_mainfile(filepath=target, copy=True)
    return {"saved": target}


def write_note(note_path, text):
    with open(note_path, "w", encoding="utf-8") as note:
        note.write(text)
    return {"written": note_path}


def process_id():
    return os.getpid()


VIGA_COMMANDS = {"save_copy": save_copy, "write_note": write_note, "process_id": process_id}


def register():
    pass


def unregister():
    pass
