use std::time::Duration;

use viga_blender::oneshot::{OneshotError, run_script};

#[tokio::test]
async fn factory_scene_cube_and_version_from_real_blender() {
    let script = r#"
import json, bpy
bpy.ops.wm.read_factory_settings(use_empty=True)
before = len(bpy.data.objects)
bpy.ops.mesh.primitive_cube_add(size=2.0)
print("VIGA_RESULT:" + json.dumps({
    "before": before,
    "after": len(bpy.data.objects),
    "names": [o.name for o in bpy.data.objects],
    "version": bpy.app.version_string,
}))
"#;
    let result = run_script(&super::blender(), script, &[], Duration::from_secs(120))
        .await
        .unwrap();
    assert_eq!(result["before"], 0);
    assert_eq!(result["after"], 1);
    assert_eq!(result["names"][0], "Cube");
    assert!(
        result["version"].as_str().unwrap().starts_with("5."),
        "{result}"
    );
}

#[tokio::test]
async fn a_script_that_raises_reports_the_traceback() {
    let err = run_script(
        &super::blender(),
        "raise ValueError('boom')\n",
        &[],
        Duration::from_secs(120),
    )
    .await
    .unwrap_err();
    match err {
        OneshotError::Failed { stderr_tail, .. } => {
            assert!(stderr_tail.contains("ValueError: boom"), "{stderr_tail}")
        }
        // A Blender binary with --python-exit-code reports the same way; anything else is wrong.
        other => panic!("expected Failed, got {other}"),
    }
}

#[tokio::test]
async fn a_script_without_a_result_line_is_reported() {
    let err = run_script(
        &super::blender(),
        "print('hello')\n",
        &[],
        Duration::from_secs(120),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(err, OneshotError::NoResult { ref stdout_tail } if stdout_tail.contains("hello")),
        "{err}"
    );
}
