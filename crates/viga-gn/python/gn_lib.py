# viga-gn: the Geometry Nodes assistant's Blender side.
#
# viga-gn sends this file (with gn_safe.py before it) through the bridge's `execute`
# command, followed by one call `_gn_main("<function>", <json>)`. Everything therefore runs
# on Blender's main thread, where the bridge runs all commands. The answer is one line
# `VIGA_GN_RESULT {"ok": true, "value": ...}` (or `{"ok": false, "error": ...}`), printed
# last; the Rust side reads the last such line.
#
# Functions here must be deterministic (sorted output, rounded floats) so that snapshots
# compare equal across runs, and idempotent where the protocol says so.

import hashlib
import json

import bpy

_GN_MARKER = "VIGA_GN_RESULT "
_GROUP_INPUT = "NodeGroupInput"
_GROUP_OUTPUT = "NodeGroupOutput"
_ZONE_INPUTS = ("GeometryNodeSimulationInput", "GeometryNodeRepeatInput",
                "GeometryNodeForeachGeometryElementInput")


class GnError(Exception):
    """A request the scene cannot satisfy; the message goes back to the model."""


def _round(value, places=4):
    if isinstance(value, float):
        return round(value, places)
    if isinstance(value, (list, tuple)):
        return [_round(v, places) for v in value]
    return value


def _plain(value):
    """A socket or property value as JSON (vectors as lists, IDs by name)."""
    if isinstance(value, (bool, int, str)) or value is None:
        return value
    if isinstance(value, float):
        return round(value, 4)
    if hasattr(value, "name") and isinstance(getattr(value, "name", None), str):
        return value.name
    try:
        return [_plain(v) for v in value]
    except TypeError:
        return str(value)


# --------------------------------------------------------------------------- targets


def _object(name):
    if name is None:
        obj = bpy.context.view_layer.objects.active
        if obj is None:
            raise GnError("no object named and no active object; name the object to edit")
        return obj
    obj = bpy.data.objects.get(name)
    if obj is None:
        names = sorted(o.name for o in bpy.data.objects)[:20]
        raise GnError("no object named %r; objects in the scene: %s" % (name, names))
    return obj


def _new_group(name):
    group = bpy.data.node_groups.new(name, "GeometryNodeTree")
    group.is_modifier = True
    group.interface.new_socket("Geometry", in_out="INPUT", socket_type="NodeSocketGeometry")
    group.interface.new_socket("Geometry", in_out="OUTPUT", socket_type="NodeSocketGeometry")
    group_in = group.nodes.new(_GROUP_INPUT)
    group_in.location = (-300.0, 0.0)
    group_out = group.nodes.new(_GROUP_OUTPUT)
    group_out.location = (300.0, 0.0)
    group.links.new(group_in.outputs[0], group_out.inputs[0])
    return group


def _ensure_target(object_name, modifier_name, group_name):
    """Returns (object, modifier, group, changed); creates what is missing."""
    obj = _object(object_name)
    changed = False
    modifier = obj.modifiers.get(modifier_name)
    if modifier is not None and modifier.type != "NODES":
        raise GnError("modifier %r on %r is a %s modifier, not Geometry Nodes; pick another name"
                      % (modifier_name, obj.name, modifier.type))
    if modifier is None:
        if obj.type not in ("MESH", "CURVE", "CURVES", "POINTCLOUD", "VOLUME", "GREASEPENCIL", "FONT"):
            raise GnError("object %r is a %s, which cannot carry a Geometry Nodes modifier"
                          % (obj.name, obj.type))
        modifier = obj.modifiers.new(modifier_name, "NODES")
        changed = True
    wanted = group_name or (modifier.node_group.name if modifier.node_group else modifier_name)
    group = modifier.node_group
    if group is None or group.name != wanted:
        group = bpy.data.node_groups.get(wanted)
        if group is not None and group.bl_idname != "GeometryNodeTree":
            raise GnError("node group %r is a %s, not a Geometry Nodes tree; pick another group name"
                          % (wanted, group.bl_idname))
        if group is None:
            group = _new_group(wanted)
        modifier.node_group = group
        changed = True
    return obj, modifier, group, changed


def _target_dict(obj, modifier, group):
    return {"object": obj.name, "modifier": modifier.name, "group": group.name}


def _target_from(args):
    target = args.get("target")
    if not target:
        raise GnError("no Geometry Nodes target yet; start the ops with ensure_target")
    obj = _object(target["object"])
    modifier = obj.modifiers.get(target["modifier"])
    if modifier is None or modifier.type != "NODES" or modifier.node_group is None:
        raise GnError("the target modifier %r on %r is gone; run ensure_target again"
                      % (target["modifier"], obj.name))
    return obj, modifier, modifier.node_group


# --------------------------------------------------------------------------- nodes and sockets


def _node(group, node_id):
    node = group.nodes.get(node_id)
    if node is None:
        names = sorted(n.name for n in group.nodes)[:40]
        raise GnError("no node %r in group %r; nodes: %s" % (node_id, group.name, names))
    return node


def _socket(node, ref, outputs):
    sockets = node.outputs if outputs else node.inputs
    side = "output" if outputs else "input"
    if isinstance(ref, int):
        if 0 <= ref < len(sockets):
            return sockets[ref]
        raise GnError("node %r has %d %s sockets; index %d is out of range"
                      % (node.name, len(sockets), side, ref))
    # A name may be shared by a hidden socket (e.g. the Switch node's typed inputs), so an
    # enabled socket wins; an identifier is unique and also accepted.
    for socket in sockets:
        if socket.name == ref and socket.enabled:
            return socket
    for socket in sockets:
        if socket.identifier == ref or socket.name == ref:
            return socket
    names = [s.name for s in sockets if s.enabled]
    raise GnError("node %r (%s) has no %s socket %r; its %s sockets: %s"
                  % (node.name, node.bl_idname, side, ref, side, names))


def _same(current, wanted):
    current = _plain(current)
    if isinstance(current, list) and isinstance(wanted, (list, tuple)):
        return len(current) == len(wanted) and all(_same(c, w) for c, w in zip(current, wanted))
    if isinstance(current, float) or isinstance(wanted, float):
        try:
            return abs(float(current) - float(wanted)) < 1e-5
        except (TypeError, ValueError):
            return False
    return current == wanted


_ID_COLLECTIONS = {
    "OBJECT": "objects", "MATERIAL": "materials", "COLLECTION": "collections",
    "IMAGE": "images", "TEXTURE": "textures",
}


def _set_value(owner, attribute, value, what):
    """Sets owner.attribute to a JSON value; returns True when it changed."""
    socket_type = getattr(owner, "type", None)
    if socket_type in _ID_COLLECTIONS and isinstance(value, str):
        datablock = getattr(bpy.data, _ID_COLLECTIONS[socket_type]).get(value)
        if datablock is None:
            raise GnError("%s: no %s named %r" % (what, socket_type.lower(), value))
        value = datablock
        if getattr(owner, attribute) == value:
            return False
    elif _same(getattr(owner, attribute), value):
        return False
    try:
        setattr(owner, attribute, value)
    except (TypeError, ValueError, AttributeError) as exc:
        raise GnError("%s: cannot set %r: %s" % (what, value, exc)) from exc
    return True


def _set_input(node, ref, value):
    socket = _socket(node, ref, outputs=False)
    if not hasattr(socket, "default_value"):
        raise GnError("input %r of node %r (%s) has no value to set; link something to it instead"
                      % (socket.name, node.name, socket.type))
    return _set_value(socket, "default_value", value, "input %r of node %r" % (socket.name, node.name))


def _set_property(node, key, value):
    if key.startswith("_") or not hasattr(node, key):
        raise GnError("node %r (%s) has no property %r" % (node.name, node.bl_idname, key))
    return _set_value(node, key, value, "property %r of node %r" % (key, node.name))


def _add_node(group, node_id, bl_idname, location):
    """Returns (node, changed). An existing node of the same type is kept."""
    node = group.nodes.get(node_id)
    changed = False
    if node is not None and node.bl_idname != bl_idname:
        raise GnError("node %r already exists as a %s; remove_node it first to make it a %s"
                      % (node_id, node.bl_idname, bl_idname))
    if node is None:
        try:
            node = group.nodes.new(bl_idname)
        except RuntimeError as exc:
            raise GnError("cannot add a node of type %r: %s" % (bl_idname, str(exc).strip())) from exc
        node.name = node_id
        changed = True
    if location is not None and not _same(node.location, location):
        node.location = location
        changed = True
    return node, changed


def _link_key(link):
    return (link.from_node.name, link.from_socket.identifier,
            link.to_node.name, link.to_socket.identifier)


def _resolve_link(group, spec):
    from_node = _node(group, spec["from_node"])
    to_node = _node(group, spec["to_node"])
    return (_socket(from_node, spec["from_socket"], outputs=True),
            _socket(to_node, spec["to_socket"], outputs=False))


def _find_link(group, from_socket, to_socket):
    for link in group.links:
        if link.from_socket == from_socket and link.to_socket == to_socket:
            return link
    return None


def _link(group, spec):
    from_socket, to_socket = _resolve_link(group, spec)
    if _find_link(group, from_socket, to_socket) is not None:
        return False
    link = group.links.new(from_socket, to_socket)
    if not link.is_valid:
        group.links.remove(link)
        raise GnError("cannot link %s.%s (%s) to %s.%s (%s): the socket types do not connect"
                      % (spec["from_node"], from_socket.name, from_socket.type,
                         spec["to_node"], to_socket.name, to_socket.type))
    return True


def _unlink(group, spec):
    from_socket, to_socket = _resolve_link(group, spec)
    link = _find_link(group, from_socket, to_socket)
    if link is None:
        return False
    group.links.remove(link)
    return True


def _group_io(group, bl_idname):
    return sorted((n for n in group.nodes if n.bl_idname == bl_idname), key=lambda n: n.name)


def _ensure_geometry_interface(group):
    changed = False
    for in_out in ("INPUT", "OUTPUT"):
        sockets = [i for i in group.interface.items_tree
                   if i.item_type == "SOCKET" and i.in_out == in_out]
        if not any(s.socket_type == "NodeSocketGeometry" for s in sockets):
            socket = group.interface.new_socket("Geometry", in_out=in_out, socket_type="NodeSocketGeometry")
            # A modifier reads the first output (and feeds the first input) as its geometry.
            group.interface.move(socket, 0)
            changed = True
    return changed


def _ensure_single_group_io(group):
    changed = _ensure_geometry_interface(group)
    for bl_idname, location in ((_GROUP_INPUT, (-300.0, 0.0)), (_GROUP_OUTPUT, (300.0, 0.0))):
        nodes = _group_io(group, bl_idname)
        if not nodes:
            node = group.nodes.new(bl_idname)
            node.location = location
            changed = True
            continue
        keep = nodes[0]
        if bl_idname == _GROUP_OUTPUT:
            keep = next((n for n in nodes if n.is_active_output), nodes[0])
        for node in nodes:
            if node != keep:
                group.nodes.remove(node)
                changed = True
        if bl_idname == _GROUP_OUTPUT and not keep.is_active_output:
            keep.is_active_output = True
            changed = True
    return changed


def _active_output(group):
    outputs = _group_io(group, _GROUP_OUTPUT)
    return next((n for n in outputs if n.is_active_output), outputs[0] if outputs else None)


def _paired_input(node):
    """The zone input node paired with a zone output node, if node is one."""
    for other in node.id_data.nodes:
        if other.bl_idname in _ZONE_INPUTS and getattr(other, "paired_output", None) == node:
            return other
    return None


def _cleanup_unused(group):
    output = _active_output(group)
    if output is None:
        raise GnError("group %r has no Group Output; run ensure_single_group_io first" % group.name)
    feeding = {}
    for link in group.links:
        feeding.setdefault(link.to_node.name, []).append(link.from_node)
    keep, stack = set(), [output]
    while stack:
        node = stack.pop()
        if node.name in keep:
            continue
        keep.add(node.name)
        stack.extend(feeding.get(node.name, []))
        paired = _paired_input(node)
        if paired is not None:
            stack.append(paired)
    removed = []
    for node in sorted(group.nodes, key=lambda n: n.name):
        if node.name in keep or node.bl_idname in (_GROUP_INPUT, _GROUP_OUTPUT, "NodeFrame"):
            continue
        removed.append(node.name)
        group.nodes.remove(node)
    return removed


# --------------------------------------------------------------------------- GN_OPS


def apply_ops(args):
    """Applies ops in order. Returns the target and, per op, whether it changed anything."""
    target = args.get("target")
    results = []
    for position, op in enumerate(args["ops"]):
        kind = op["op"]
        try:
            if kind == "ensure_target":
                obj, modifier, group, changed = _ensure_target(op["object"], op["modifier"], op.get("group"))
                target = _target_dict(obj, modifier, group)
                results.append({"op": kind, "changed": changed})
                continue
            _obj, _modifier, group = _target_from({"target": target})
            if kind == "ensure_single_group_io":
                changed = _ensure_single_group_io(group)
            elif kind == "add_node":
                changed = _add_node(group, op["id"], op["bl_idname"], op.get("location"))[1]
            elif kind == "remove_node":
                node = group.nodes.get(op["id"])
                changed = node is not None
                if changed:
                    group.nodes.remove(node)
            elif kind == "link":
                changed = _link(group, op)
            elif kind == "unlink":
                changed = _unlink(group, op)
            elif kind == "set_input":
                changed = _set_input(_node(group, op["node"]), op["socket"], op["value"])
            elif kind == "cleanup_unused":
                changed = bool(_cleanup_unused(group))
            else:
                raise GnError("unknown op %r" % kind)
        except GnError as exc:
            raise GnError("op %d (%s): %s" % (position, kind, exc)) from exc
        results.append({"op": kind, "changed": changed})
    return {"target": target, "results": results}


# --------------------------------------------------------------------------- NODE_TREE


def _reconcile_interface(group, declared):
    """Declared sockets exist with their types and defaults; undeclared ones beyond the
    first Geometry input and output are removed."""
    changed = 0
    _ensure_geometry_interface(group)
    keep = set()
    for in_out in ("INPUT", "OUTPUT"):
        first_geometry = next((i for i in group.interface.items_tree
                               if i.item_type == "SOCKET" and i.in_out == in_out
                               and i.socket_type == "NodeSocketGeometry"), None)
        keep.add(first_geometry.identifier)
    for spec in declared:
        in_out = spec["direction"].upper()
        socket = next((i for i in group.interface.items_tree
                       if i.item_type == "SOCKET" and i.in_out == in_out and i.name == spec["name"]
                       and i.identifier not in keep), None)
        if socket is not None and socket.socket_type != spec["socket_type"]:
            group.interface.remove(socket)
            socket = None
        if socket is None:
            try:
                socket = group.interface.new_socket(spec["name"], in_out=in_out, socket_type=spec["socket_type"])
            except (TypeError, RuntimeError) as exc:
                raise GnError("interface socket %r: %s" % (spec["name"], exc)) from exc
            changed += 1
        keep.add(socket.identifier)
        if spec.get("default") is not None:
            if not hasattr(socket, "default_value"):
                raise GnError("interface socket %r (%s) has no default value" % (spec["name"], spec["socket_type"]))
            changed += _set_value(socket, "default_value", spec["default"], "interface socket %r" % spec["name"])
    for item in list(group.interface.items_tree):
        if item.item_type == "SOCKET" and item.identifier not in keep:
            group.interface.remove(item)
            changed += 1
    return changed


def apply_node_tree(args):
    """Reconciles the declared tree by node id: re-applying the same payload changes nothing."""
    payload = args["payload"]
    obj, modifier, group, target_changed = _ensure_target(
        payload.get("object"), payload["modifier"], payload.get("group"))
    counts = {"target": int(target_changed), "interface": 0, "nodes_added": 0, "nodes_removed": 0,
              "nodes_updated": 0, "links_added": 0, "links_removed": 0, "zones_paired": 0}
    counts["interface"] = _reconcile_interface(group, payload.get("interface", []))
    declared = {spec["id"]: spec for spec in payload["nodes"]}
    if len(declared) != len(payload["nodes"]):
        raise GnError("node ids must be unique within a NODE_TREE payload")
    # Group Input/Output nodes always exist once; a declared one takes over the existing node
    # (renamed to its id) instead of adding a second.
    for bl_idname in (_GROUP_INPUT, _GROUP_OUTPUT):
        specs = [s for s in payload["nodes"] if s["bl_idname"] == bl_idname]
        if len(specs) > 1:
            raise GnError("declare at most one %s node" % bl_idname)
        existing = _group_io(group, bl_idname)
        if specs and existing and specs[0]["id"] not in group.nodes:
            existing[0].name = specs[0]["id"]
            counts["nodes_updated"] += 1
    for node in sorted(group.nodes, key=lambda n: n.name):
        spec = declared.get(node.name)
        if node.bl_idname in (_GROUP_INPUT, _GROUP_OUTPUT) and spec is None:
            continue
        if spec is None or spec["bl_idname"] != node.bl_idname:
            group.nodes.remove(node)
            counts["nodes_removed"] += 1
    counts["nodes_updated"] += _ensure_single_group_io(group)
    for spec in payload["nodes"]:
        try:
            node, added = _add_node(group, spec["id"], spec["bl_idname"], spec.get("location"))
            updated = False
            # Properties first: data_type and friends decide which sockets exist.
            for key in sorted(spec.get("properties", {})):
                updated |= _set_property(node, key, spec["properties"][key])
            for ref in sorted(spec.get("inputs", {})):
                socket_ref = int(ref) if ref.isdigit() else ref
                updated |= _set_input(node, socket_ref, spec["inputs"][ref])
        except GnError as exc:
            raise GnError("node %r: %s" % (spec["id"], exc)) from exc
        counts["nodes_added" if added else "nodes_updated"] += int(added or updated)
    for spec in payload["nodes"]:
        partner_id = spec.get("paired_with")
        if partner_id is None:
            continue
        output = group.nodes[spec["id"]]
        zone_input = group.nodes.get(partner_id)
        if zone_input is None or not hasattr(zone_input, "pair_with_output"):
            raise GnError("node %r: paired_with %r must name a zone input node (simulation, repeat)"
                          % (spec["id"], partner_id))
        if zone_input.paired_output != output:
            if not zone_input.pair_with_output(output):
                raise GnError("node %r cannot be paired with %r; pair a zone input with its own kind of output"
                              % (partner_id, spec["id"]))
            counts["zones_paired"] += 1
    wanted = {}
    for position, spec in enumerate(payload.get("links", [])):
        try:
            from_socket, to_socket = _resolve_link(group, spec)
        except GnError as exc:
            raise GnError("link %d: %s" % (position, exc)) from exc
        wanted[(from_socket.node.name, from_socket.identifier,
                to_socket.node.name, to_socket.identifier)] = spec
    for link in list(group.links):
        if _link_key(link) not in wanted:
            group.links.remove(link)
            counts["links_removed"] += 1
    present = {_link_key(link) for link in group.links}
    for key in sorted(wanted):
        if key not in present:
            _link(group, wanted[key])
            counts["links_added"] += 1
    return {"target": _target_dict(obj, modifier, group), "changes": counts}


# --------------------------------------------------------------------------- context


def _units():
    units = bpy.context.scene.unit_settings
    return {"system": units.system, "length_unit": units.length_unit,
            "scale_length": _round(units.scale_length)}


def _object_summary(obj):
    if obj is None:
        return None
    return {"name": obj.name, "type": obj.type, "location": _round(list(obj.location)),
            "dimensions": _round(list(obj.dimensions)),
            "modifiers": [m.name for m in obj.modifiers]}


def _group_summary(group):
    kinds = {}
    for node in group.nodes:
        kinds[node.bl_idname] = kinds.get(node.bl_idname, 0) + 1
    return {
        "name": group.name, "nodes": len(group.nodes), "links": len(group.links),
        "node_types": dict(sorted(kinds.items())),
        "interface": [{"name": i.name, "direction": i.in_out.lower(), "socket_type": i.socket_type}
                      for i in group.interface.items_tree if i.item_type == "SOCKET"],
    }


def _modifier_stack(obj):
    stack = []
    for modifier in obj.modifiers:
        entry = {"name": modifier.name, "type": modifier.type,
                 "show_viewport": modifier.show_viewport}
        if modifier.type == "NODES":
            entry["node_group"] = modifier.node_group.name if modifier.node_group else None
        stack.append(entry)
    return stack


def _active_modifier(obj, modifier_name):
    """The Geometry Nodes modifier the model is working on: the named one, else the object's
    active modifier, else its first Geometry Nodes modifier."""
    if obj is None:
        return None
    candidates = [obj.modifiers.get(modifier_name or ""), obj.modifiers.active]
    candidates += [m for m in obj.modifiers if m.type == "NODES"]
    return next((m for m in candidates if m is not None and m.type == "NODES"
                 and m.node_group is not None), None)


def _tree_summary(group, max_items):
    """A group's topology: exposed sockets, nodes by name and type, links by socket name (the
    names ops use). Lists hold at most max_items entries; a cut is counted in `truncated`."""
    sockets = [i for i in group.interface.items_tree if i.item_type == "SOCKET"]
    nodes = sorted(group.nodes, key=lambda n: n.name)
    links = sorted((l.from_node.name, l.from_socket.name, l.to_node.name, l.to_socket.name)
                   for l in group.links)
    summary = {
        "group": group.name,
        "inputs": [[s.name, s.socket_type] for s in sockets if s.in_out == "INPUT"],
        "outputs": [[s.name, s.socket_type] for s in sockets if s.in_out == "OUTPUT"],
        "nodes": {n.name: n.bl_idname for n in nodes[:max_items]},
        "links": [list(link) for link in links[:max_items]],
    }
    if len(nodes) > max_items or len(links) > max_items:
        summary["truncated"] = {"nodes": max(0, len(nodes) - max_items),
                                "links": max(0, len(links) - max_items)}
    return summary


def _target_object(args):
    if args.get("object"):
        return bpy.data.objects.get(args["object"])
    return bpy.context.view_layer.objects.active


def snapshot(args):
    """The compact context sent with every request: the scene settings, the object, its
    modifiers and the active node group's topology (its lists bounded by max_items)."""
    scene = bpy.context.scene
    obj = _target_object(args)
    groups = sorted((g for g in bpy.data.node_groups if g.bl_idname == "GeometryNodeTree"),
                    key=lambda g: g.name)
    modifier = _active_modifier(obj, args.get("modifier"))
    active = None
    if modifier is not None:
        active = dict(_tree_summary(modifier.node_group, args["max_items"]), modifier=modifier.name)
    result = {
        "blender_version": bpy.app.version_string,
        "units": _units(),
        "frame_range": {"start": scene.frame_start, "end": scene.frame_end,
                        "current": scene.frame_current, "fps": scene.render.fps},
        "active_object": _object_summary(obj),
        "modifiers": _modifier_stack(obj) if obj is not None else [],
        "active_node_group": active,
        "node_groups": [{"name": g.name, "nodes": len(g.nodes), "users": g.users} for g in groups],
    }
    if args.get("object") and obj is None:
        result["missing_object"] = args["object"]
    return result


def baseline(_args):
    return {
        "modifiers": {o.name: sorted(m.name for m in o.modifiers) for o in bpy.data.objects},
        "node_groups": sorted(g.name for g in bpy.data.node_groups),
    }


def _node_ir(node, max_items):
    entry = {"id": node.name, "bl_idname": node.bl_idname,
             "location": _round(list(node.location), 1)}
    inputs = {}
    for socket in node.inputs:
        if socket.enabled and not socket.is_linked and hasattr(socket, "default_value"):
            inputs[socket.name] = _plain(socket.default_value)
    if inputs:
        entry["inputs"] = dict(list(sorted(inputs.items()))[:max_items])
    paired = getattr(node, "paired_output", None)
    if paired is not None:
        entry["paired_output"] = paired.name
    return entry


def _tree_ir(group, max_items):
    nodes = sorted(group.nodes, key=lambda n: n.name)
    links = sorted(_link_key(l) for l in group.links)
    ir = {"group": group.name,
          "interface": _group_summary(group)["interface"],
          "nodes": [_node_ir(n, max_items) for n in nodes[:max_items]],
          "links": [{"from_node": a, "from_socket": b, "to_node": c, "to_socket": d}
                    for a, b, c, d in links[:max_items]]}
    if len(nodes) > max_items or len(links) > max_items:
        ir["truncated"] = {"nodes": max(0, len(nodes) - max_items), "links": max(0, len(links) - max_items)}
    return ir


def context_slice(args):
    """One on-demand slice; `max_items` bounds every list so the caller can fit a budget."""
    kind = args["kind"]
    max_items = args["max_items"]
    obj = _target_object(args)
    if kind == "modifier_stack":
        if obj is None:
            raise GnError("no object to describe")
        return {"object": obj.name, "modifiers": _modifier_stack(obj)[:max_items]}
    if kind in ("node_tree_summary", "node_tree_ir"):
        modifier = _active_modifier(obj, args.get("modifier"))
        if modifier is None:
            raise GnError("no Geometry Nodes modifier to describe on %r" % (obj.name if obj else None))
        if kind == "node_tree_summary":
            return dict(_tree_summary(modifier.node_group, max_items), modifier=modifier.name)
        return _tree_ir(modifier.node_group, max_items)
    if kind == "scene_summary":
        objects = sorted(bpy.data.objects, key=lambda o: o.name)
        return {"objects": [_object_summary(o) for o in objects[:max_items]],
                "total_objects": len(objects),
                "node_groups": [_group_summary(g) for g in sorted(bpy.data.node_groups, key=lambda g: g.name)
                                if g.bl_idname == "GeometryNodeTree"][:max_items]}
    if kind == "geometry_stats":
        if obj is None:
            raise GnError("no object to measure")
        evaluated = obj.evaluated_get(bpy.context.evaluated_depsgraph_get())
        stats = {"object": obj.name, "evaluated_dimensions": _round(list(evaluated.dimensions))}
        mesh = evaluated.data if obj.type == "MESH" else None
        if mesh is not None:
            stats.update(vertices=len(mesh.vertices), edges=len(mesh.edges), faces=len(mesh.polygons))
        instances = [i for i in bpy.context.evaluated_depsgraph_get().object_instances
                     if i.is_instance and i.parent and i.parent.original == obj]
        stats["instances"] = len(instances)
        return stats
    raise GnError("unknown context slice %r; use modifier_stack, node_tree_summary, node_tree_ir, "
                  "scene_summary or geometry_stats" % kind)


# --------------------------------------------------------------------------- gates


def _gate(passed, messages):
    return {"passed": passed, "messages": messages}


def verify(args):
    """Evaluates all five gates; the caller decides which are required."""
    depsgraph = bpy.context.evaluated_depsgraph_get()
    depsgraph.update()
    targets, missing = [], []
    for target in args["targets"]:
        obj = bpy.data.objects.get(target["object"])
        modifier = obj.modifiers.get(target["modifier"]) if obj else None
        if modifier is None or modifier.type != "NODES":
            missing.append("the Geometry Nodes modifier %r on %r is gone" % (target["modifier"], target["object"]))
        else:
            targets.append((obj, modifier))
    none_yet = ["no Geometry Nodes target yet; create one with ensure_target or a NODE_TREE step"]

    single, connected, errors = [], [], list(missing)
    for obj, modifier in targets:
        group = modifier.node_group
        where = "modifier %r on %r" % (modifier.name, obj.name)
        if group is None:
            errors.append("%s has no node group" % where)
            single.append("%s has no node group" % where)
            connected.append("%s has no node group" % where)
            continue
        outputs = _group_io(group, _GROUP_OUTPUT)
        if len(outputs) != 1:
            single.append("group %r of %s has %d Group Output nodes (%s); keep exactly one (ensure_single_group_io)"
                          % (group.name, where, len(outputs), ", ".join(n.name for n in outputs) or "none"))
        output = _active_output(group)
        first = next((i for i in group.interface.items_tree
                      if i.item_type == "SOCKET" and i.in_out == "OUTPUT"), None)
        if first is None or first.socket_type != "NodeSocketGeometry":
            errors.append("group %r: the first output must be a Geometry socket" % group.name)
        if output is None or not output.inputs or not any(
                l.is_valid and not l.is_muted for l in output.inputs[0].links):
            connected.append("group %r of %s: nothing valid is linked to the Group Output's %r input"
                             % (group.name, where, output.inputs[0].name if output and output.inputs else "Geometry"))
        for link in group.links:
            if not link.is_valid:
                errors.append("group %r: invalid link %s.%s -> %s.%s (types do not connect)"
                              % (group.name, link.from_node.name, link.from_socket.name,
                                 link.to_node.name, link.to_socket.name))
        for warning in modifier.node_warnings:
            if warning.type == "ERROR":
                errors.append("%s: %s" % (where, warning.message))

    base_mods = args["baseline"]["modifiers"]
    allowed_mods = {(a["object"], a["modifier"]) for a in args["allowed"]["modifiers"]}
    new_mods = []
    for obj in sorted(bpy.data.objects, key=lambda o: o.name):
        for modifier in obj.modifiers:
            key = (obj.name, modifier.name)
            if modifier.name not in base_mods.get(obj.name, []) and key not in allowed_mods:
                new_mods.append("unexpected new modifier %r (%s) on %r; only the run's targets may be added: remove it"
                                % (modifier.name, modifier.type, obj.name))
    base_groups = set(args["baseline"]["node_groups"])
    allowed_groups = set(args["allowed"]["node_groups"])
    new_groups = ["unexpected new node group %r; only the targets' groups may be added: remove it" % g.name
                  for g in sorted(bpy.data.node_groups, key=lambda g: g.name)
                  if g.name not in base_groups and g.name not in allowed_groups]
    if not targets and not missing:
        single, connected = list(none_yet), list(none_yet)
    return {
        "SINGLE_GROUP_OUTPUT": _gate(not single, single),
        "OUTPUT_CONNECTED": _gate(not connected, connected),
        "NO_MODIFIER_ERROR": _gate(not errors, errors),
        "NO_UNEXPECTED_NEW_MODIFIER": _gate(not new_mods, new_mods),
        "NO_UNEXPECTED_NEW_NODE_GROUP": _gate(not new_groups, new_groups),
    }


# --------------------------------------------------------------------------- assertions (E2E)


def scene_facts(_args):
    """What E2E assertions look at: objects, their modifiers and the node types in use."""
    facts = {}
    for obj in sorted(bpy.data.objects, key=lambda o: o.name):
        mods = {}
        for modifier in obj.modifiers:
            types = sorted({n.bl_idname for n in modifier.node_group.nodes}) if (
                modifier.type == "NODES" and modifier.node_group) else []
            mods[modifier.name] = {"type": modifier.type, "node_types": types}
        facts[obj.name] = {"type": obj.type, "modifiers": mods}
    return {"objects": facts}


# --------------------------------------------------------------------------- the result of a run
#
# An attached run works on a copy of the person's scene; what it made is brought back by the
# bridge's import_gn_result. These describe what to bring: the node groups the run made or
# changed (by a fingerprint of every group taken before the run) and the targets' modifiers
# with their input values.

# Properties left out of a fingerprint: the struct's type, back references, and what Blender
# recomputes (dimensions, select state, evaluation results).
_STATE_SKIPPED = frozenset({
    "rna_type", "id_data", "bl_rna", "original", "is_evaluated", "users", "select",
    "is_active_output", "dimensions", "internal_links", "is_updated", "session_uid",
})


def _rna_state(struct, depth):
    """A struct's settings as plain data: values, datablocks by name, nested structs and
    collections down to `depth` levels."""
    state = {}
    for prop in struct.bl_rna.properties:
        key = prop.identifier
        if key in _STATE_SKIPPED:
            continue
        try:
            value = getattr(struct, key)
        except Exception:  # noqa: BLE001 - some properties only exist in some states
            continue
        if prop.type == "POINTER":
            if isinstance(value, bpy.types.ID) or value is None:
                state[key] = None if value is None else [type(value).__name__, value.name]
            elif depth > 0:
                state[key] = _rna_state(value, depth - 1)
        elif prop.type == "COLLECTION":
            if depth > 0:
                state[key] = [_rna_state(item, depth - 1) for item in value]
        elif isinstance(value, set):
            state[key] = sorted(value)
        else:
            state[key] = _plain(value)
    return state


def _group_fingerprint(group):
    # Two levels take in a node's sockets with their values and its items (capture, zone).
    nodes = [_rna_state(node, 2) for node in sorted(group.nodes, key=lambda n: n.name)]
    links = sorted((l.from_node.name, l.from_socket.identifier, l.to_node.name,
                    l.to_socket.identifier, l.is_muted) for l in group.links)
    items = [_rna_state(item, 0) for item in group.interface.items_tree]
    text = json.dumps([group.bl_idname, _rna_state(group, 0), items, nodes, links],
                      sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def group_fingerprints(_args):
    """Every node group's fingerprint, by name: taken before a run, so that the groups the
    run changed can be told from the ones it left alone."""
    return {group.name: _group_fingerprint(group) for group in bpy.data.node_groups}


_DATABLOCK_KINDS = {"NodeSocketObject": "object", "NodeSocketCollection": "collection",
                    "NodeSocketMaterial": "material", "NodeSocketImage": "image"}


def _modifier_inputs(modifier):
    """The modifier's input values by key (`Socket_2`, `Socket_2_use_attribute`, ...), as the
    bridge's import takes them: datablocks as {"kind", "name"}, arrays as lists."""
    kinds = {item.identifier: _DATABLOCK_KINDS.get(item.socket_type)
             for item in modifier.node_group.interface.items_tree
             if item.item_type == "SOCKET" and item.in_out == "INPUT"}
    inputs = {}
    for key in modifier.keys():
        value = modifier[key]
        if kinds.get(key) is not None:
            inputs[key] = {"kind": kinds[key], "name": None if value is None else value.name}
        elif hasattr(value, "to_list"):
            inputs[key] = value.to_list()
        elif isinstance(value, (bool, int, float, str)):
            inputs[key] = value
    return inputs


def describe_result(args):
    """What an attached run brings back: the node groups it made or changed (the targets'
    groups always) and the targets' modifiers with their groups and input values."""
    before = args["fingerprints"]
    groups = {group.name for group in bpy.data.node_groups
              if before.get(group.name) != _group_fingerprint(group)}
    modifiers = []
    for target in args["targets"]:
        obj = bpy.data.objects.get(target["object"])
        modifier = obj.modifiers.get(target["modifier"]) if obj else None
        if modifier is None or modifier.type != "NODES" or modifier.node_group is None:
            raise GnError("the run's target modifier %r on %r is gone" % (target["modifier"], target["object"]))
        groups.add(modifier.node_group.name)
        modifiers.append({"object": obj.name, "modifier": modifier.name,
                          "node_group": modifier.node_group.name,
                          "inputs": _modifier_inputs(modifier)})
    return {"node_groups": sorted(groups), "modifiers": modifiers}


# --------------------------------------------------------------------------- entry


_GN_FUNCTIONS = {
    "apply_ops": apply_ops,
    "apply_node_tree": apply_node_tree,
    "snapshot": snapshot,
    "baseline": baseline,
    "context_slice": context_slice,
    "verify": verify,
    "scene_facts": scene_facts,
    "group_fingerprints": group_fingerprints,
    "describe_result": describe_result,
    "run_python": lambda args: _gn_run_python(args),
}


def _gn_main(function, args):
    try:
        result = {"ok": True, "value": _GN_FUNCTIONS[function](args)}
    except GnError as exc:
        result = {"ok": False, "error": str(exc)}
    except Exception as exc:  # noqa: BLE001 - bpy raises many kinds; all go back as step errors
        result = {"ok": False, "error": "%s: %s" % (type(exc).__name__, str(exc).strip())}
    print(_GN_MARKER + json.dumps(result, sort_keys=True))
