"""What every part of the bridge shares: the protocol version, the error a refused request raises, and small helpers for reading requests and objects."""

import bpy
import mathutils

PROTOCOL_VERSION = 1


class BridgeError(Exception):
    """A request the bridge refuses; `kind` tells the client which."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind
        self.message = message


class FrameError(Exception):
    """The connection carried something that is not a frame; it is closed."""


def rounded(values, places=4):
    return [round(float(v), places) for v in values]


def object_or_error(name):
    obj = bpy.data.objects.get(name)
    if obj is None:
        known = sorted(o.name for o in bpy.data.objects)[:20]
        raise BridgeError("not_found", "no object named %r; objects are: %s" % (name, ", ".join(known) or "(none)"))
    return obj


def world_bbox(obj):
    corners = [obj.matrix_world @ mathutils.Vector(corner) for corner in obj.bound_box]
    low = mathutils.Vector((min(c[i] for c in corners) for i in range(3)))
    high = mathutils.Vector((max(c[i] for c in corners) for i in range(3)))
    return low, high


def text_field(args, field, default=None):
    value = args.get(field, default)
    if not isinstance(value, str) or not value:
        raise BridgeError("bad_request", "%s needs a non-empty string field %r" % (args.get("command"), field))
    return value
