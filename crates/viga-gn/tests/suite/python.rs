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

/// Escape attempts and a word the refusal must contain. Each first moves the Plane, so a
/// refusal that let any of the snippet run would show.
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
];

#[test]
fn safe_mode_refuses_every_escape_before_running_anything() {
    on_blender(|blender| async move {
        assert!(ESCAPES.len() >= 25);
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
