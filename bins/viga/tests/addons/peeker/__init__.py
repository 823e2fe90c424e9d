"""Peeker: a test add-on whose commands open whatever file they are named, under a parameter
name that does not say path, so the gateway's confinement does not touch it. Only the
containment of the user's Blender stands between it and the gateway's files."""

bl_info = {
    "name": "Peeker",
    "author": "viga",
    "version": (1, 0, 0),
    "blender": (4, 2, 0),
    "category": "System",
    "description": "Opens the files it is named",
}


def peek(target_name):
    try:
        with open(target_name, "r", encoding="utf-8") as handle:
            return {"read": handle.read()}
    except OSError as err:
        return {"refused": str(err)}


def plant(target_name):
    try:
        with open(target_name, "w", encoding="utf-8") as handle:
            handle.write("planted")
        return {"written": target_name}
    except OSError as err:
        return {"refused": str(err)}


def write_note(note_path):
    with open(note_path, "w", encoding="utf-8") as handle:
        handle.write("a note")
    return {"written": note_path}


VIGA_COMMANDS = {"peek": peek, "plant": plant, "write_note": write_note}


def register():
    pass


def unregister():
    pass
