//! `viga mcp` driven over real stdio by the official rmcp client, as a desktop assistant would.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic: that is how tests fail

use std::path::Path;

use rmcp::ServiceExt as _;
use rmcp::model::{CallToolRequestParams, ContentBlock};
use rmcp::transport::TokioChildProcess;
use viga_testkit::{BLENDER_TEST_LIMIT, within};

#[tokio::test]
async fn viga_mcp_serves_blender_over_stdio() {
    within(BLENDER_TEST_LIMIT, "the test", async {
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
            ContentBlock::Text(text) => {
                assert!(text.text.contains("- Cube [MESH]"), "{}", text.text)
            }
            other => panic!("expected text, got {other:?}"),
        }
        client.cancel().await.unwrap();
    })
    .await;
}

/// viga driving another Blender MCP server (here a second `viga mcp`, live) through its
/// transport: viga's bridge goes through the server's code tool, so every command works and
/// pictures come back inline. (Resets are tested through mcp-for-blender, in through_mcp.rs:
/// a live `viga mcp` makes each program an undo step of its own, around viga's.)
#[tokio::test]
async fn the_mcp_client_transport_carries_the_whole_bridge_through_a_code_tool() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        use viga_blender::{BlenderCommands as _, TransportError};
        use viga_protocol::bridge::{RenderEngine, RenderRequest, RenderSpec, SceneReset};
        use viga_serve::mcp_client::{McpToolNames, McpTransport};

        let spawn = || {
            let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_viga"));
            command.args(["mcp", "--live", "--resolution", "32"]);
            TokioChildProcess::new(command).unwrap()
        };
        let err = McpTransport::connect(spawn(), McpToolNames::blender_mcp())
            .await
            .unwrap_err();
        assert!(
            matches!(&err, TransportError::Handshake(m) if m.contains("no \"execute_blender_code\" tool") && m.contains("execute_code")),
            "{err}"
        );

        let transport = McpTransport::connect(spawn(), McpToolNames::viga())
            .await
            .unwrap();
        let names = "import bpy\nprint(sorted(o.name for o in bpy.data.objects))";
        let made = transport
            .execute(
                "import bpy\nbpy.ops.mesh.primitive_monkey_add()\nbpy.context.object.name = 'Made'",
                Some(SceneReset::Factory),
                None,
            )
            .await
            .unwrap();
        assert!(made.succeeded(), "{made:?}");
        let after = transport.execute(names, None, None).await.unwrap();
        assert!(after.stdout.contains("'Made'"), "{after:?}");
        let request = RenderRequest {
            camera: None,
            pose: None,
            spec: RenderSpec {
                engine: RenderEngine::Workbench,
                width: 8,
                height: 6,
                samples: None,
            },
            output_path: None,
        };
        let render = transport.render(request, None).await.unwrap();
        assert_eq!((render.width, render.height, render.camera.as_str()), (8, 6, "Camera"));
        transport.ping().await.unwrap();
    })
    .await;
}
