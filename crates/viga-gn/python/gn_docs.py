
# --------------------------------------------------------------------------- docs index
#
# viga-gn's local docs index, read from the Blender that runs this (sent after gn_lib.py,
# whose `_gn_main` calls these). Every node type a Geometry Nodes tree accepts is added once
# to a temporary group, so its sockets are read as Blender makes them (names, identifiers,
# socket types, default values, for the node's default settings); its enum properties are
# listed with their items, since they decide the sockets. The Python API types a Geometry
# Nodes program uses are described by their docstrings and their RNA properties and
# functions. The temporary group is removed again, whatever happens.

_DOCS_API_TYPES = (
    "NodeTree", "GeometryNodeTree", "Node", "NodeSocket", "NodeLink", "NodeLinks", "Nodes",
    "NodeTreeInterface", "NodeTreeInterfaceItem", "NodeTreeInterfaceSocket",
    "NodeTreeInterfacePanel", "NodeGroupInput", "NodeGroupOutput", "GeometryNodeGroup",
    "NodesModifier", "Modifier", "ObjectModifiers", "Object", "BlendDataNodeTrees",
    "GeometryNodeSimulationInput", "GeometryNodeSimulationOutput",
    "GeometryNodeRepeatInput", "GeometryNodeRepeatOutput", "NodeSocketInterface",
)
# Properties every node has; a node's own list leaves them out.
_DOCS_NODE_BASE = None


def _docs_default(socket):
    if not hasattr(socket, "default_value"):
        return None
    value = socket.default_value
    if isinstance(value, bpy.types.ID):
        return None
    try:
        return _plain(value)
    except Exception:  # noqa: BLE001 - an unreadable default is left out, not an error
        return None


def _docs_socket(socket):
    entry = {
        "name": socket.name,
        "identifier": socket.identifier,
        "socket_type": socket.bl_idname,
    }
    default = _docs_default(socket)
    if default is not None:
        entry["default"] = default
    description = getattr(socket, "description", "")
    if description:
        entry["description"] = description
    if not getattr(socket, "enabled", True):
        entry["enabled"] = False
    return entry


def _docs_property(prop):
    entry = {"identifier": prop.identifier, "kind": prop.type.lower()}
    if prop.description:
        entry["description"] = prop.description
    if prop.type == "ENUM":
        entry["items"] = [item.identifier for item in prop.enum_items]
        if not prop.is_enum_flag:
            entry["default"] = prop.default
    return entry


def _docs_node(cls, group):
    global _DOCS_NODE_BASE
    if _DOCS_NODE_BASE is None:
        _DOCS_NODE_BASE = {p.identifier for p in bpy.types.GeometryNode.bl_rna.properties}
    node = group.nodes.new(cls.__name__)
    try:
        rna = cls.bl_rna
        return {
            "bl_idname": cls.__name__,
            "label": node.bl_label or rna.name,
            "description": node.bl_description or rna.description,
            "inputs": [_docs_socket(s) for s in node.inputs],
            "outputs": [_docs_socket(s) for s in node.outputs],
            "properties": [
                _docs_property(p) for p in rna.properties
                if p.identifier not in _DOCS_NODE_BASE and not p.is_readonly
            ],
        }
    finally:
        group.nodes.remove(node)


def _docs_node_classes():
    """Every node class Blender defines, by name. Which of them a Geometry Nodes tree takes
    is found by adding each: a class's own `poll` does not say it reliably."""
    abstract = {"Node", "NodeInternal", "GeometryNode", "FunctionNode", "ShaderNode",
                "CompositorNode", "TextureNode", "NodeCustomGroup", "GeometryNodeCustomGroup",
                "ShaderNodeCustomGroup", "CompositorNodeCustomGroup"}
    found = []
    for name in sorted(dir(bpy.types)):
        cls = getattr(bpy.types, name, None)
        if isinstance(cls, type) and issubclass(cls, bpy.types.Node) and name not in abstract:
            found.append(cls)
    return found


def _docs_api_type(name):
    cls = getattr(bpy.types, name, None)
    if cls is None:
        return None
    rna = cls.bl_rna
    base = rna.base.identifier if rna.base else None
    return {
        "name": name,
        "base": base,
        "doc": (cls.__doc__ or rna.description or "").strip(),
        "properties": [
            {"identifier": p.identifier, "kind": p.type.lower(), "description": p.description}
            for p in rna.properties if p.identifier != "rna_type"
        ],
        "functions": [
            {
                "identifier": f.identifier,
                "description": f.description,
                "parameters": [p.identifier for p in f.parameters],
            }
            for f in rna.functions
        ],
    }


def docs_version(_args):
    return {"version": bpy.app.version_string,
            "build_hash": bpy.app.build_hash.decode("ascii", "replace")}


def docs_nodes(args):
    """One page of the node types: of the node classes `start` to `start + count`, those a
    Geometry Nodes tree takes. Paged because the bridge keeps at most 256 KB of a program's
    output, and the whole index is larger."""
    start, count = int(args.get("start", 0)), int(args.get("count", 100))
    classes = _docs_node_classes()
    group = bpy.data.node_groups.new(".viga-docs-index", "GeometryNodeTree")
    nodes = []
    try:
        for cls in classes[start:start + count]:
            try:
                nodes.append(_docs_node(cls, group))
            except RuntimeError:
                # Blender refuses a node of another tree type (a shader's, a compositor's).
                continue
    finally:
        bpy.data.node_groups.remove(group)
    return {"classes": len(classes), "nodes": nodes}


def docs_api_types(_args):
    return [entry for entry in (_docs_api_type(n) for n in _DOCS_API_TYPES) if entry]


_GN_FUNCTIONS["docs_version"] = docs_version
_GN_FUNCTIONS["docs_nodes"] = docs_nodes
_GN_FUNCTIONS["docs_api_types"] = docs_api_types
