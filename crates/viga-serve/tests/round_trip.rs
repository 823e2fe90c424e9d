//! An MCP round trip with the official rmcp client: list the tools, run code, receive a
//! montage image, call an add-on tool, get a recoverable error back as a tool result.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic: that is how tests fail

use std::path::Path;
use std::sync::Arc;

use rmcp::ServiceExt as _;
use rmcp::model::{CallToolRequestParams, ContentBlock};
use serde_json::{Value, json};
use viga_blender::{Worker, WorkerConfig, locate};
use viga_protocol::bridge::{RenderEngine, RenderSpec, SceneReset};
use viga_serve::mcp::{ProgramMode, VigaMcpServer};
use viga_skills::addons::{AddonRegistry, discover};
use viga_skills::{RenderSettings, ToolContext};
use viga_testkit::{BLENDER_TEST_LIMIT, within};

fn arguments(value: Value) -> serde_json::Map<String, Value> {
    value.as_object().unwrap().clone()
}

#[tokio::test]
async fn an_mcp_client_lists_tools_runs_code_and_receives_an_image() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let worker = Worker::start(WorkerConfig::new(locate().unwrap()))
            .await
            .unwrap();
        let mut addons = AddonRegistry::new();
        let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/addons");
        assert!(
            discover(&worker, Some(&folder), &mut addons)
                .await
                .unwrap()
                .is_empty()
        );
        let render = RenderSettings::new(RenderSpec {
            engine: RenderEngine::Workbench,
            width: 64,
            height: 64,
            samples: None,
        });
        let context = Arc::new(ToolContext::new(
            Arc::new(worker),
            render,
            SceneReset::Factory,
        ));
        let addons = Arc::new(tokio::sync::RwLock::new(addons));
        let server = VigaMcpServer::new(context, Arc::clone(&addons), ProgramMode::Reset).unwrap();

        let (client_end, server_end) = tokio::io::duplex(1 << 20);
        let serving =
            tokio::spawn(async move { server.serve(server_end).await.unwrap().waiting().await });
        let client = ().serve(client_end).await.unwrap();

        let tools = client.list_all_tools().await.unwrap();
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        for expected in [
            "execute_code",
            "get_scene_info",
            "initialize_viewpoint",
            "investigate",
            "place_object_relative",
            "paint_object",
        ] {
            assert!(
                names.contains(&expected),
                "{expected} missing from {names:?}"
            );
        }
        assert!(
            !names.contains(&"end_process") && !names.contains(&"make_plan"),
            "loop-only tools are not offered"
        );
        let placer = tools
            .iter()
            .find(|t| t.name == "place_object_relative")
            .unwrap();
        assert_eq!(placer.input_schema["properties"]["side"]["enum"][0], "left");

        let ran = client
            .call_tool(CallToolRequestParams::new("execute_code").with_arguments(arguments(json!({
                "code": "import bpy\nbpy.ops.mesh.primitive_cube_add(size=2)\nbpy.context.object.name = 'Table'\nbpy.ops.mesh.primitive_cube_add(size=1, location=(4, 0, 0))\nbpy.context.object.name = 'Chair'\nprint('built')"
            }))))
            .await
            .unwrap();
        let text = match &ran.content[0] {
            ContentBlock::Text(text) => text.text.clone(),
            other => panic!("expected text, got {other:?}"),
        };
        assert!(
            text.contains("without errors") && text.contains("built"),
            "{text}"
        );

        // execute_code ran on a reloaded base scene; the scene now holds its objects.
        let views = client
            .call_tool(
                CallToolRequestParams::new("initialize_viewpoint").with_arguments(arguments(json!({}))),
            )
            .await
            .unwrap();
        let image = views.content.iter().find_map(|c| match c {
            ContentBlock::Image(image) => Some(image.clone()),
            _ => None,
        });
        let image = image.expect("the montage comes back inline");
        assert_eq!(image.mime_type, "image/png");
        assert!(image.data.len() > 100);

        let placed = client
            .call_tool(
                CallToolRequestParams::new("place_object_relative").with_arguments(arguments(json!({
                    "object1_name": "Chair", "object2_name": "Table", "side": "left"
                }))),
            )
            .await
            .unwrap();
        assert_ne!(placed.is_error, Some(true), "{:?}", placed.content);

        let wrong = client
            .call_tool(
                CallToolRequestParams::new("place_object_relative").with_arguments(arguments(json!({
                    "object1_name": "Chair", "object2_name": "Table", "side": "diagonal"
                }))),
            )
            .await
            .unwrap();
        assert_eq!(
            wrong.is_error,
            Some(true),
            "a bad argument is a tool error the model can fix"
        );

        // Add-ons come and go during a session: the next listing follows.
        assert!(addons.write().await.unregister("object_placer"));
        let tools = client.list_all_tools().await.unwrap();
        assert!(!tools.iter().any(|t| t.name == "place_object_relative"));
        assert!(tools.iter().any(|t| t.name == "paint_object"));
        let gone = client
            .call_tool(
                CallToolRequestParams::new("place_object_relative").with_arguments(arguments(json!({
                    "object1_name": "Chair", "object2_name": "Table", "side": "left"
                }))),
            )
            .await
            .unwrap();
        assert_eq!(
            gone.is_error,
            Some(true),
            "an unregistered add-on's tool is gone"
        );

        client.cancel().await.unwrap();
        serving.await.unwrap().unwrap();
    })
    .await;
}
