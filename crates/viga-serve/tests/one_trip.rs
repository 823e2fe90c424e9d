//! In a person's Blender every bridge call is a trip through its main-thread timer, so an
//! MCP client's `execute_code` makes one: the add-ons are listed again only after a call
//! that may have changed them.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic: that is how tests fail

use std::sync::Arc;

use rmcp::ServiceExt as _;
use rmcp::model::CallToolRequestParams;
use serde_json::json;
use viga_blender::BlenderTransport;
use viga_protocol::bridge::SceneReset;
use viga_serve::addon_watch::AddonChangeWatch;
use viga_serve::mcp::{ProgramMode, VigaMcpServer};
use viga_skills::addons::AddonRegistry;
use viga_skills::{RenderSettings, ToolContext};
use viga_testkit::blender::FakeBlender;

#[tokio::test]
async fn a_live_execute_code_lists_the_add_ons_again_only_when_it_changed_them() {
    let fake = Arc::new(FakeBlender::new());
    let watch = Arc::new(AddonChangeWatch::new(
        Arc::clone(&fake) as Arc<dyn BlenderTransport>
    ));
    let context = Arc::new(ToolContext::new(
        Arc::clone(&watch) as Arc<dyn BlenderTransport>,
        RenderSettings::default(),
        SceneReset::Factory,
    ));
    let registry = Arc::new(tokio::sync::RwLock::new(AddonRegistry::new()));
    let server = VigaMcpServer::new(context, registry, ProgramMode::Live)
        .unwrap()
        .with_addon_watch(watch);
    let (client_end, server_end) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move { server.serve(server_end).await.unwrap().waiting().await });
    let client = ().serve(client_end).await.unwrap();
    let execute = || {
        CallToolRequestParams::new("execute_code")
            .with_arguments(json!({"code": "pass"}).as_object().unwrap().clone())
    };

    client.call_tool(execute()).await.unwrap();
    // The session's add-on watch (started by the first call) lists them once at once, then
    // every 2 s; after its first listing, one within the next calls would be theirs.
    let started = std::time::Instant::now();
    while fake.count("list_addons") == 0 {
        assert!(
            started.elapsed().as_secs() < 5,
            "the add-on watch never listed"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let listed = fake.count("list_addons");
    for _ in 0..5 {
        client.call_tool(execute()).await.unwrap();
    }
    assert_eq!(fake.count("apply_program"), 6);
    assert_eq!(
        fake.count("list_addons"),
        listed,
        "programs that changed no add-on cost no listing"
    );

    fake.answer(
        "apply_program",
        json!({"execution": {"stdout": "", "stderr": "", "duration_ms": 1.0},
               "reverted": false, "addons_changed": true}),
    );
    client.call_tool(execute()).await.unwrap();
    assert_eq!(
        fake.count("list_addons"),
        listed + 1,
        "a program that enabled an add-on is followed by a listing"
    );
    client.cancel().await.unwrap();
}
