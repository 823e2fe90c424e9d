//! PYTHON steps: safe mode runs ordinary bpy snippets and refuses escapes with a clear
//! message before any of the snippet runs; trusted mode needs both switches.

use serde_json::json;
use viga_gn::{ExecContext, ExecutorRegistry, GnBlender, GnError, PythonPolicy};

use super::{PLANE, fresh, on_blender, step};

async fn run(blender: &GnBlender, policy: PythonPolicy, code: &str) -> Result<String, GnError> {
    let snippet = step(json!({"id": "py", "type": "PYTHON", "payload": {"code": code}}));
    let outcome = ExecutorRegistry::with_defaults(policy)
        .execute(blender, &mut ExecContext::default(), &snippet)
        .await?;
    Ok(outcome.detail["output"].as_str().unwrap().to_owned())
}

/// A made-up self for `Operator.as_keywords`, which returns `getattr(self, name)` for every
/// name its `self.properties.rna_type.properties.keys()` lists: here `__globals__`.
macro_rules! as_keywords_self {
    () => {
        r#"class Keys:
    def keys(self):
        return ['__globals__']
class Rna:
    properties = Keys()
class Props:
    rna_type = Rna()
"#
    };
}

/// Escape attempts and a word the refusal must contain. Each first moves the Plane, so a
/// refusal that let any of the snippet run would show. The first 42 are single snippets; the
/// rest stand for classes of escape (frames, module attributes, aliases of denied namespaces,
/// file path keywords and assignments, strings run as code, Python classes registered into
/// bpy.types, Python-defined methods of Blender's types and its reflection by name, nested
/// format fields, unit parsing), each with a snippet that escaped the policy before the class
/// was closed.
const ESCAPES: &[(&str, &str)] = &[
    ("import os", "import of 'os'"),
    ("import subprocess", "import of 'subprocess'"),
    ("import socket", "import of 'socket'"),
    ("import sys", "import of 'sys'"),
    ("import ctypes", "import of 'ctypes'"),
    ("import importlib", "import of 'importlib'"),
    ("import shutil", "import of 'shutil'"),
    ("import pathlib", "import of 'pathlib'"),
    ("import os.path as p", "import of 'os.path'"),
    ("from os import system", "import of 'os'"),
    ("from subprocess import run as r", "import of 'subprocess'"),
    ("import builtins", "import of 'builtins'"),
    ("from . import anything", "relative imports"),
    ("from math import *", "importing '*'"),
    ("__import__('os')", "'__import__' is not available"),
    ("open('/etc/passwd').read()", "'open' is not available"),
    ("exec('import os')", "'exec' is not available"),
    ("eval('1 + 1')", "'eval' is not available"),
    ("compile('1', 'x', 'eval')", "'compile' is not available"),
    ("getattr(bpy, 'ops')", "'getattr' is not available"),
    ("globals()['__builtins__']", "'globals' is not available"),
    ("vars(bpy)", "'vars' is not available"),
    ("breakpoint()", "'breakpoint' is not available"),
    (
        "().__class__.__bases__[0].__subclasses__()",
        "attribute '__class__'",
    ),
    ("(lambda: 0).__globals__", "attribute '__globals__'"),
    ("__builtins__", "'__builtins__' is not available"),
    (
        "import random\nrandom._os.system('true')",
        "attribute '_os'",
    ),
    ("bpy.utils.execfile('/tmp/x.py')", "attribute 'execfile'"),
    (
        "bpy.app.driver_namespace['x'] = 1",
        "attribute 'driver_namespace'",
    ),
    (
        "bpy.app.handlers.load_post.append(print)",
        "attribute 'handlers'",
    ),
    (
        "bpy.data.texts.new('t').as_module()",
        "attribute 'as_module'",
    ),
    (
        "bpy.data.libraries.load('/tmp/x.blend')",
        "attribute 'libraries'",
    ),
    ("bpy.ops.wm.quit_blender()", "attribute 'quit_blender'"),
    ("bpy.ops.wm.read_homefile()", "bpy.ops.wm"),
    ("bpy.ops.script.reload()", "bpy.ops.script"),
    (
        "bpy.ops.export_scene.gltf(filepath='/tmp/x.glb')",
        "bpy.ops.export_scene",
    ),
    (
        "bpy.context.scene.render.filepath = '/tmp/x'",
        "attribute 'filepath'",
    ),
    ("'{0.__class__}'.format(1)", "format field {0.__class__}"),
    ("'{0[0]}'.format(['x'])", "format field {0[0]}"),
    (
        "template = '{}'\ntemplate.format(1)",
        ".format() is only allowed on a string literal",
    ),
    ("type(bpy)", "'type' is not available"),
    ("def f():\n    global bpy\n", "global and nonlocal"),
    // Classes closed in issue 16 (each escaped before: it wrote a file, read /etc/hostname,
    // ran code with the real builtins, listed a folder or changed a security preference).
    // A generator's frame leads to the real builtins.
    (
        r#"def walk():
    yield me.gi_frame.f_back
me = walk()
real = next(me).f_back.f_builtins
real['open']('/tmp/viga-escape', 'w').write(real['open']('/etc/hostname').read())"#,
        "attribute 'gi_frame'",
    ),
    // A coroutine's frame.
    (
        r#"async def walk():
    return me.cr_frame.f_back
me = walk()
try:
    me.send(None)
except StopIteration as done:
    real = done.value.f_back.f_builtins
real['open']('/tmp/viga-escape', 'w').write('escaped')"#,
        "attribute 'cr_frame'",
    ),
    // An async generator's frame.
    (
        r#"async def walk():
    yield me.ag_frame.f_back
me = walk()
step = me.asend(None)
try:
    step.send(None)
except StopIteration as done:
    real = done.value.f_back.f_builtins
real['open']('/tmp/viga-escape', 'w').write('escaped')"#,
        "attribute 'ag_frame'",
    ),
    // A traceback handed to __exit__.
    (
        r#"class Catch:
    def __enter__(self):
        return self
    def __exit__(self, kind, error, tb):
        caught.append(tb)
        return True
caught = []
with Catch():
    1 / 0
real = caught[0].tb_frame.f_back.f_builtins
real['open']('/tmp/viga-escape', 'w').write('escaped')"#,
        "attribute 'tb_frame'",
    ),
    // functools.update_wrapper reads attributes by name.
    (
        r#"import functools
class Box:
    def __setattr__(self, name, value):
        got[name] = value
got = {}
def grab(obj, name):
    functools.update_wrapper(Box(), obj, assigned=(name,), updated=())
    return got[name]
def walk():
    yield grab(grab(me, 'gi' + '_frame'), 'f' + '_back')
me = walk()
real = grab(grab(next(me), 'f' + '_back'), 'f' + '_builtins')
real['open']('/tmp/viga-escape', 'w').write('escaped')"#,
        "functools.update_wrapper is not offered",
    ),
    // functools.singledispatch evaluates string annotations.
    (
        r#"import functools
@functools.singledispatch
def f(x):
    pass
def g(x: "[c for c in ().__class__.__base__.__subclasses__() if c.__name__ == '_wrap_close'][0].__init__.__globals__['system']('touch /tmp/viga-escape')"):
    pass
f.register(g)"#,
        "functools.singledispatch is not offered",
    ),
    // json.codecs is the codecs module.
    (
        r#"import json
json.codecs.open('/tmp/viga-escape', 'w').write(json.codecs.open('/etc/hostname').read())"#,
        "json.codecs is not offered",
    ),
    // `from json import codecs`.
    (
        r#"from json import codecs
codecs.open('/tmp/viga-escape', 'w').write('escaped')"#,
        "importing 'codecs' from json",
    ),
    // A bound str.format evaluates fields unseen.
    (
        r#"show = '{0.utils._os.environ[HOME]}'.format
print(show(bpy))"#,
        ".format() is only allowed on a string literal",
    ),
    // bpy.ops bound by assignment.
    (
        r#"o = bpy.ops
o.wm.obj_export(filepath='/tmp/viga-escape.obj')"#,
        "bpy.ops is a module",
    ),
    // bpy.ops bound by walrus.
    (
        "(o := bpy.ops).wm.obj_export(filepath='/tmp/viga-escape.obj')",
        "bpy.ops is a module",
    ),
    // bpy.ops as a default argument.
    (
        r#"def export(o=bpy.ops):
    o.wm.obj_export(filepath='/tmp/viga-escape.obj')
export()"#,
        "bpy.ops is a module",
    ),
    // bpy.ops as a for target.
    (
        r#"for o in [bpy.ops]:
    o.wm.obj_export(filepath='/tmp/viga-escape.obj')"#,
        "bpy.ops is a module",
    ),
    // bpy.ops by tuple unpacking.
    (
        r#"a, o = 1, bpy.ops
o.wm.obj_export(filepath='/tmp/viga-escape.obj')"#,
        "bpy.ops is a module",
    ),
    // bpy.ops in a comprehension.
    (
        "[o.wm.obj_export(filepath='/tmp/viga-escape.obj') for o in (bpy.ops,)]",
        "bpy.ops is a module",
    ),
    // bpy.ops by with-as.
    (
        r#"class Give:
    def __enter__(self):
        return bpy.ops
    def __exit__(self, *args):
        return False
with Give() as o:
    o.wm.obj_export(filepath='/tmp/viga-escape.obj')"#,
        "bpy.ops is a module",
    ),
    // bpy.ops by import-as.
    (
        r#"from bpy import ops as o
o.wm.obj_export(filepath='/tmp/viga-escape.obj')"#,
        "bpy.ops.wm is not allowed",
    ),
    // A filepath keyword.
    (
        r#"ks = bpy.context.scene.keying_sets.new(idname='k', name='k')
bpy.context.scene.keying_sets.active = ks
bpy.ops.anim.keying_set_export(filepath='/tmp/viga-escape.py')"#,
        "keyword argument 'filepath'",
    ),
    // An RNA function that takes a file path.
    (
        "bpy.context.evaluated_depsgraph_get().debug_relations_graphviz(filepath='/tmp/viga-escape')",
        "attribute 'debug_relations_graphviz'",
    ),
    // A keyword hidden in **mapping.
    (
        r#"ks = bpy.context.scene.keying_sets.new(idname='k', name='k')
bpy.context.scene.keying_sets.active = ks
bpy.ops.anim.keying_set_export(**{'file' + 'path': '/tmp/viga-escape.py'})"#,
        "**mapping arguments",
    ),
    // Assigning a folder path, then baking to it.
    (
        r#"plane = bpy.data.objects['Plane']
mod = plane.modifiers.new('GN', 'NODES')
tree = bpy.data.node_groups.new('G', 'GeometryNodeTree')
tree.interface.new_socket('Geometry', in_out='INPUT', socket_type='NodeSocketGeometry')
tree.interface.new_socket('Geometry', in_out='OUTPUT', socket_type='NodeSocketGeometry')
gi = tree.nodes.new('NodeGroupInput')
go = tree.nodes.new('NodeGroupOutput')
bake = tree.nodes.new('GeometryNodeBake')
tree.links.new(gi.outputs[0], bake.inputs[0])
tree.links.new(bake.outputs[0], go.inputs[0])
mod.node_group = tree
mod.bake_directory = '/tmp/viga-escape'
mod.bake_target = 'DISK'
bpy.context.view_layer.objects.active = plane
bpy.ops.object.geometry_node_bake_single(session_uid=plane.session_uid, modifier_name='GN', bake_id=mod.bakes[0].bake_id)"#,
        "assigning .bake_directory",
    ),
    // path_resolve reaches denied names by string.
    (
        "bpy.data.path_resolve('libraries').write('/tmp/viga-escape.blend', set())",
        "attribute 'path_resolve'",
    ),
    // A preset operator writes a Python file.
    (
        "bpy.ops.camera.preset_add(name='viga_escape')",
        "bpy.ops.camera.preset_add is not allowed",
    ),
    // A driver expression runs as Python.
    (
        r#"fc = bpy.data.objects['Plane'].driver_add('location', 0)
fc.driver.type = 'SCRIPTED'
fc.driver.expression = "__import__('os').system('touch /tmp/viga-escape') or 1.0"
"#,
        "driver expression",
    ),
    // Preferences through context.copy().
    (
        r#"prefs = bpy.context.copy()['preferences']
prefs.filepaths.use_scripts_auto_execute = True"#,
        "attribute 'filepaths'",
    ),
    // A Python operator class called with a made-up self.
    (
        r#"class Fake:
    data_path = "scene"
    value = "__import__('os').system('touch /tmp/viga-escape') or context.scene"
bpy.types.WM_OT_context_set_value.execute(Fake(), bpy.context)"#,
        "bpy.types.WM_OT_context_set_value is not offered",
    ),
    // The same class found from a Blender type.
    (
        r#"class Fake:
    data_path = "scene"
    value = "__import__('os').system('touch /tmp/viga-escape') or context.scene"
bpy.types.Operator.bl_rna_get_subclass_py('WM_OT_context_set_value').execute(Fake(), bpy.context)"#,
        "attribute 'bl_rna_get_subclass_py'",
    ),
    // Menu.path_menu lists any folder.
    (
        r#"class Layout:
    def __init__(self):
        self.layout = self
    def column(self, **options):
        return self
    def row(self, **options):
        return self
    def label(self, **options):
        pass
    def operator(self, *args, **options):
        return Props()
found = []
class Props:
    def __setattr__(self, name, value):
        found.append(value)
bpy.types.Menu.path_menu(Layout(), ['/etc'], 'x')
print(found)"#,
        "attribute 'path_menu'",
    ),
    // A Python operator evaluates every driver's data path.
    (
        r#"fc = bpy.data.objects['Plane'].driver_add('location', 0)
fc.driver.variables.new().targets[0].id = bpy.data.objects['Plane']
fc.driver.variables[0].targets[0].data_path = "x if __import__('os').system('touch /tmp/viga-escape') else 0"
bpy.ops.anim.update_animated_transform_constraints()"#,
        "written in Python (bl_operators.anim)",
    ),
    // Classes closed in issue 26. Python-defined methods of Blender's types that read or set
    // attributes by a name they are handed: Operator.as_keywords, inherited by a subclass and
    // called on a Blender function, hands out that function's globals, and with them the
    // real builtins (it wrote a file).
    (
        concat!(
            as_keywords_self!(),
            r#"class Sub(bpy.types.Operator):
    pass
fn = Sub.as_keywords
fn.properties = Props()
real = Sub.as_keywords(fn)['__globals__']['__builtins__']
real['open']('/tmp/viga-escape', 'w').write('escaped')"#
        ),
        "subclassing bpy.types.Operator",
    ),
    // The same through the class, with another of Blender's Python functions as the self.
    (
        concat!(
            as_keywords_self!(),
            r#"fn = bpy.types.Mesh.from_pydata
fn.properties = Props()
real = bpy.types.Operator.as_keywords(fn)['__globals__']['__builtins__']
real['open']('/tmp/viga-escape', 'w').write('escaped')"#
        ),
        "bpy.types.Mesh.from_pydata is written in Python",
    ),
    // A Python property's getter called with a made-up self: Sound.factory hands its
    // as_pointer() to the audio library, which reads memory there (it crashed Blender).
    (
        r#"class Fake:
    def as_pointer(self):
        return 8
bpy.types.Sound.factory.fget(Fake())"#,
        "attribute 'fget'",
    ),
    // A property name computed for Blender's reflection: foreach_set turned a text into a
    // registered script, which runs when the saved .blend is opened with auto-run on.
    (
        r#"t = bpy.data.texts.new('viga_escape.py')
t.from_string("open('/tmp/viga-escape', 'w').write('escaped')")
bpy.data.texts.foreach_set('use_' + 'module', [True])"#,
        "property name or data path of .foreach_set() must be a string literal",
    ),
    // Assigning to a Blender type replaced its method for every later caller in that Blender.
    (
        "bpy.types.Mesh.from_pydata = print",
        "bpy.types.Mesh.from_pydata cannot be assigned",
    ),
    // A helper that installs the snippet's function as the status bar's draw function.
    (
        "bpy.context.workspace.status_text_set(print)",
        "attribute 'status_text_set'",
    ),
    // A format field nested in another field's format spec is looked up too: it read the
    // process environment (a person's API keys, attached) through bpy.path's module globals.
    (
        "print('{0:{1.__globals__[_os].environ}}'.format('', bpy.path.basename))",
        "format field {1.__globals__[_os].environ}",
    ),
    // Blender's unit parsing evaluates its text as Python, underscores and all (it wrote a
    // file).
    (
        r#"bpy.utils.units.to_value('NONE', 'NONE', "[c for c in ().__class__.__base__.__subclasses__() if c.__name__ == '_wrap_close'][0].__init__.__globals__['__builtins__']['open']('/tmp/viga-escape', 'w').write('escaped')")"#,
        "bpy.utils.units.to_value is not offered",
    ),
];

#[test]
fn safe_mode_refuses_every_escape_before_running_anything() {
    on_blender(|blender| async move {
        assert!(ESCAPES.len() >= 79);
        fresh(&blender, PLANE).await;
        for (escape, needle) in ESCAPES {
            let code = format!("bpy.data.objects['Plane'].location.x = 7.0\n{escape}\n");
            let err = run(&blender, PythonPolicy::safe(), &code)
                .await
                .unwrap_err();
            let GnError::Step(message) = &err else {
                panic!("{escape}: not a step error: {err}");
            };
            assert!(
                message.starts_with("safe mode refused this snippet:"),
                "{escape}: {message}"
            );
            assert!(message.contains(needle), "{escape}: {message}");
            assert!(message.contains("line "), "{escape}: {message}");
        }
        let moved = run(
            &blender,
            PythonPolicy::safe(),
            "print(bpy.data.objects['Plane'].location.x)",
        )
        .await
        .unwrap();
        assert_eq!(moved.trim(), "0.0", "a refused snippet ran in part");
    });
}

#[test]
fn safe_mode_runs_ordinary_snippets() {
    on_blender(|blender| async move {
        fresh(&blender, PLANE).await;
        let code = "import math\nfrom mathutils import Vector\nimport random\n\
                    plane = bpy.data.objects['Plane']\n\
                    plane.location = Vector((1.0, 2.0, 0.0))\n\
                    print(f'{math.pi:.2f}', '{:.1f}'.format(plane.location.y), len([random.random() for _ in range(3)]))\n";
        let output = run(&blender, PythonPolicy::safe(), code).await.unwrap();
        assert_eq!(output, "3.14 2.0 3\n");
        let raised = run(
            &blender,
            PythonPolicy::safe(),
            "print('before')\nx = 1 / 0\n",
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(
            raised.contains("the snippet raised ZeroDivisionError at line 2"),
            "{raised}"
        );
        assert!(
            raised.contains("before"),
            "the output so far is kept: {raised}"
        );
    });
}

/// What the AST cannot follow (a namespace of bpy.ops kept under another name) is refused when
/// it is reached: the snippet holds a guarded bpy.ops, not the real one. The refusal is not an
/// ordinary exception, so `except Exception` in the snippet does not swallow it.
#[test]
fn safe_mode_refuses_at_run_time_what_the_ast_cannot_see() {
    on_blender(|blender| async move {
        fresh(&blender, PLANE).await;
        let cases = [
            (
                // A Python operator that evaluates every driver's data path as code.
                "anim = bpy.ops.anim\ntry:\n    anim.update_animated_transform_constraints()\n\
                 except Exception:\n    print('swallowed')\nprint('after')\n",
                "while it ran at line 3: bpy.ops.anim.update_animated_transform_constraints is not allowed",
            ),
            (
                // An operator that writes a Python preset into the user's configuration.
                "camera = bpy.ops.camera\nprint('before')\ncamera.preset_add(name='viga_escape')\n",
                "while it ran at line 3: bpy.ops.camera.preset_add is not allowed",
            ),
            (
                // A Blender type kept in a list: its Python-defined method is still refused.
                "kinds = [bpy.types.Mesh]\nkinds[0].from_pydata\n",
                "while it ran at line 2: bpy.types.Mesh.from_pydata is written in Python",
            ),
            (
                // ... and so is subclassing it,
                "kinds = [bpy.types.Operator]\nclass Sub(kinds[0]):\n    pass\n",
                "while it ran at line 2: subclassing bpy.types.Operator is not allowed",
            ),
            (
                // ... and assigning to it.
                "kinds = [bpy.types.Object]\nkinds[0].viga_flag = 1\n",
                "while it ran at line 2: bpy.types.Object.viga_flag cannot be assigned",
            ),
        ];
        for (code, needle) in cases {
            let message = run(&blender, PythonPolicy::safe(), code)
                .await
                .unwrap_err()
                .to_string();
            assert!(
                message.contains("safe mode refused this snippet while it ran"),
                "{code}: {message}"
            );
            assert!(message.contains(needle), "{code}: {message}");
            assert!(!message.contains("swallowed"), "{code}: {message}");
            assert!(!message.contains("after"), "{code}: {message}");
        }
        let output = run(
            &blender,
            PythonPolicy::safe(),
            "objects = bpy.ops.object\nprint(objects.select_all.poll())",
        )
        .await
        .unwrap();
        assert_eq!(
            output.trim(),
            "True",
            "an allowed namespace under another name still works"
        );
    });
}

/// Safe mode still runs what node-building snippets do: node groups and links, bmesh,
/// mathutils submodules, the allowed standard modules, operators of allowed namespaces (also
/// under another name), a simple driver expression, bpy.types checks (isinstance,
/// issubclass, bl_rna), literal data paths and property names (data_path=, a custom
/// property, foreach_get), a format spec from an argument, and unit formatting.
#[test]
fn safe_mode_runs_node_building_snippets() {
    on_blender(|blender| async move {
        fresh(&blender, PLANE).await;
        let code = r#"import bmesh
import json, itertools, functools, collections, colorsys, statistics, random
import mathutils.noise as mn
from mathutils import Matrix, Vector, noise
from bpy.types import GeometryNodeTree
plane = bpy.data.objects['Plane']
mod = plane.modifiers.new(name='Scatter', type='NODES')
tree = bpy.data.node_groups.new('Scatter', 'GeometryNodeTree')
tree.interface.new_socket(name='Geometry', in_out='INPUT', socket_type='NodeSocketGeometry')
tree.interface.new_socket(name='Geometry', in_out='OUTPUT', socket_type='NodeSocketGeometry')
mod.node_group = tree
nodes, links = tree.nodes, tree.links
group_in = nodes.new('NodeGroupInput')
group_out = nodes.new('NodeGroupOutput')
points = nodes.new(type='GeometryNodeDistributePointsOnFaces')
points.inputs['Density'].default_value = 5.0
instances = nodes.new('GeometryNodeInstanceOnPoints')
cube = nodes.new('GeometryNodeMeshCube')
cube.inputs['Size'].default_value = (0.1, 0.1, 0.1)
links.new(group_in.outputs['Geometry'], points.inputs['Mesh'])
links.new(points.outputs['Points'], instances.inputs['Points'])
links.new(cube.outputs['Mesh'], instances.inputs['Instance'])
links.new(instances.outputs['Instances'], group_out.inputs['Geometry'])
for index, node in enumerate(nodes):
    node.location = (index * 200, 0)
mesh_ops = bpy.ops.mesh
mesh_ops.primitive_cube_add(size=1, location=(0, 0, 3))
bpy.ops.mesh.primitive_torus_add()
block = bpy.data.objects['Cube']
bm = bmesh.new()
bm.from_mesh(block.data)
bmesh.ops.subdivide_edges(bm, edges=bm.edges[:], cuts=1)
for vert in bm.verts:
    vert.co += mn.noise_vector(vert.co) * 0.01 + noise.random_unit_vector() * 0
bm.to_mesh(block.data)
bm.free()
block.matrix_world = Matrix.Translation((1, 0, 0)) @ block.matrix_world
block.keyframe_insert(data_path='location', frame=1)
curve = block.driver_add('rotation_euler', 2)
curve.driver.type = 'SCRIPTED'
curve.driver.expression = 'sin(frame / 10) * 2'
bpy.context.scene.eevee.gi_diffuse_bounces = 2
counts = collections.Counter(node.bl_idname.startswith('GeometryNode') for node in nodes)
print(isinstance(tree, GeometryNodeTree), len(nodes), counts[True], len(block.data.vertices),
      json.dumps({'pairs': len(list(itertools.combinations(range(4), 2)))}),
      functools.reduce(lambda a, b: a + b, [1, 2, 3]), statistics.mean([1, 2, 3]),
      colorsys.rgb_to_hsv(1, 0, 0)[0], random.Random(3).randint(0, 0), '{:.1f}'.format(2.0),
      bpy.app.version >= (4, 0, 0), Vector((1, 0, 0)).length)
coords = [0.0] * (len(block.data.vertices) * 3)
block.data.vertices.foreach_get('co', coords)
block['weight'] = 1.0
block.keyframe_insert('["weight"]', frame=1)
print('{0:{1}}'.format(2.0, '.2f'), bpy.utils.units.to_string('METRIC', 'LENGTH', 1.5),
      issubclass(GeometryNodeTree, bpy.types.NodeTree), bpy.types.GeometryNodeTree.bl_rna.identifier,
      isinstance(block, (bpy.types.Mesh, bpy.types.Object)), len(coords))
"#;
        let output = run(&blender, PythonPolicy::safe(), code).await.unwrap();
        assert_eq!(
            output,
            "True 5 3 20 {\"pairs\": 6} 6 2 0.0 0 2.0 True 1.0\n\
             2.00 1.5 m True GeometryNodeTree True 60\n"
        );
    });
}

#[test]
fn trusted_mode_runs_what_safe_mode_refuses() {
    on_blender(|blender| async move {
        fresh(&blender, PLANE).await;
        let code = "import os\nprint(os.path.basename('/a/b.txt'))";
        assert!(run(&blender, PythonPolicy::safe(), code).await.is_err());
        let trusted = PythonPolicy::trusted(true, true).unwrap();
        assert_eq!(run(&blender, trusted, code).await.unwrap(), "b.txt\n");
    });
}
