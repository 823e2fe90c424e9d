//! `viga mcp` driven over real stdio by the official rmcp client, as a desktop assistant would.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic: that is how tests fail

use std::path::Path;

use rmcp::ServiceExt as _;
use rmcp::model::{CallToolRequestParams, ContentBlock};
use rmcp::transport::TokioChildProcess;

#[tokio::test]
async fn viga_mcp_serves_blender_over_stdio() {
    let addons = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/addons");
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_viga"));
    command
        .arg("mcp")
        .arg("--addons")
        .arg(&addons)
        .args(["--resolution", "32"]);
    let client = ().serve(TokioChildProcess::new(command).unwrap()).await.unwrap();
    let tools = client.list_all_tools().await.unwrap();
    assert!(
        tools.iter().any(|t| t.name == "place_object_relative"),
        "add-on tools are offered"
    );
    let code = serde_json::json!({"code": "import bpy\nbpy.ops.mesh.primitive_cube_add()"});
    client
        .call_tool(
            CallToolRequestParams::new("execute_code")
                .with_arguments(code.as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    let info = client
        .call_tool(CallToolRequestParams::new("get_scene_info"))
        .await
        .unwrap();
    match &info.content[0] {
        ContentBlock::Text(text) => assert!(text.text.contains("- Cube [MESH]"), "{}", text.text),
        other => panic!("expected text, got {other:?}"),
    }
    client.cancel().await.unwrap();
}
