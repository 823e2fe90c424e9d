//! A Blender scene written down, to compare before and after: what a refused result must
//! leave as it was, and what one undo must give back.

/// A Blender program that prints the open scene and its file as one line of JSON, a list
/// of: every object of the scene (name -> type, location, rotation, scale, data, materials,
/// parent, collections, custom properties); the scene's camera and world; each collection's
/// children; each material's viewport colour; and the names in every bpy.data collection.
pub const SCENE_DUMP: &str = r#"import bpy, json
scene = bpy.context.scene
def r(v):
    return [round(x, 4) for x in v]
def plain(value):
    return value if isinstance(value, (bool, int, float, str)) else str(value)
objects = {o.name: [o.type, r(o.location), r(o.rotation_euler), r(o.scale),
                    o.data.name if o.data else None,
                    [s.material.name if s.material else None for s in o.material_slots],
                    o.parent.name if o.parent else None, sorted(c.name for c in o.users_collection),
                    {k: plain(o[k]) for k in o.keys()}]
           for o in scene.objects}
skip = {'window_managers', 'screens', 'workspaces'}
names = {p.identifier: sorted(b.name for b in getattr(bpy.data, p.identifier))
         for p in bpy.data.bl_rna.properties if p.type == 'COLLECTION' and p.identifier not in skip}
colours = {m.name: r(m.diffuse_color) for m in bpy.data.materials}
children = {c.name: sorted(x.name for x in c.children) for c in [scene.collection] + list(scene.collection.children_recursive)}
print(json.dumps([objects, scene.camera.name if scene.camera else None,
                  scene.world.name if scene.world else None, children, colours,
                  sorted((k, v) for k, v in names.items() if v)], sort_keys=True))
"#;
