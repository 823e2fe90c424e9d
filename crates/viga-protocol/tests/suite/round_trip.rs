//! Valid documents parse, and what we serialize parses back to the same value.

use serde_json::json;
use viga_protocol::event::{RunEvent, StopReason, TimedEvent};
use viga_protocol::gn::{ActionType, GnResponse, GnStep};
use viga_protocol::manifest::{AddonManifest, ParameterType};
use viga_protocol::message::{ChatMessage, ContentPart, ImageData};
use viga_protocol::{PROTOCOL_VERSION, parse_json, parse_value};

#[test]
fn gn_response_with_every_step_type_parses() {
    let text = json!({
        "version": PROTOCOL_VERSION,
        "steps": [
            {"id": "s1", "type": "GN_OPS", "payload": {"ops": [
                {"op": "ensure_target", "object": "Plane", "modifier": "Scatter"},
                {"op": "ensure_single_group_io"},
                {"op": "add_node", "id": "dist", "bl_idname": "GeometryNodeDistributePointsOnFaces"},
                {"op": "link", "from_node": "Group Input", "from_socket": "Geometry", "to_node": "dist", "to_socket": 0},
                {"op": "set_input", "node": "dist", "socket": "Density", "value": 20.0},
                {"op": "cleanup_unused"}
            ]}},
            {"id": "s2", "type": "NODE_TREE", "payload": {"modifier": "Tree", "nodes": [
                {"id": "grid", "bl_idname": "GeometryNodeMeshGrid", "inputs": {"Size X": 2.0}}
            ]}},
            {"id": "s3", "type": "PYTHON", "payload": {"code": "print('hi')"}}
        ],
        "done": false
    })
    .to_string();
    let parsed: GnResponse = parse_json(&text).expect("valid response");
    let kinds: Vec<ActionType> = parsed.steps.iter().map(GnStep::action_type).collect();
    assert_eq!(
        kinds,
        [ActionType::GnOps, ActionType::NodeTree, ActionType::Python]
    );
    assert_eq!(parsed.final_message, "");
    let again: GnResponse = parse_value(serde_json::to_value(&parsed).unwrap()).unwrap();
    assert_eq!(again, parsed);
}

#[test]
fn seed_004_manifest_parses_with_defaults() {
    let manifest: AddonManifest = parse_json(
        &json!({
            "addon_info": {"id": "placer", "name": "Object Placer"},
            "ai_integration": {
                "agent_description": "Places objects relative to each other.",
                "tools": [{
                    "name": "place_object_relative",
                    "description": "Place one object beside another.",
                    "parameters": [
                        {"name": "object1_name", "type": "object_name"},
                        {"name": "side", "type": "enum", "options": ["left", "right"]},
                        {"name": "distance", "type": "float", "required": false, "default": 0.5}
                    ]
                }]
            }
        })
        .to_string(),
    )
    .unwrap();
    let tool = &manifest.ai_integration.tools[0];
    assert!(tool.parameters[0].required, "required defaults to true");
    assert_eq!(tool.parameters[1].kind, ParameterType::Enum);
    assert_eq!(manifest.ai_integration.metadata.priority, 50);
}

#[test]
fn images_travel_as_base64_and_debug_hides_bytes() {
    let message = ChatMessage::user(vec![
        ContentPart::text("target:"),
        ContentPart::Image {
            image: ImageData::png(vec![0x89, b'P', b'N', b'G']),
            label: Some("target".into()),
        },
    ]);
    let value = serde_json::to_value(&message).unwrap();
    assert_eq!(value["content"][1]["image"]["data"], "iVBORw==");
    let back: ChatMessage = parse_value(value).unwrap();
    assert_eq!(back, message);
    assert!(format!("{message:?}").contains("bytes: 4"));
}

#[test]
fn timed_events_flatten_the_event_tag() {
    let event = TimedEvent {
        seq: 7,
        unix_ms: 1_700_000_000_000,
        event: RunEvent::RunFinished {
            stop: StopReason::MaxIterations,
            iterations: 3,
        },
    };
    let value = serde_json::to_value(&event).unwrap();
    assert_eq!(value["type"], "run_finished");
    assert_eq!(value["stop"]["reason"], "max_iterations");
    let back: TimedEvent = parse_value(value).unwrap();
    assert_eq!(back, event);
}

#[test]
fn render_settings_travel_flat_in_requests() {
    use viga_protocol::bridge::{
        BridgeCommand, BridgeRequest, FramedViewsRequest, RenderEngine, RenderRequest, RenderSpec,
    };
    // The exact bytes the bridge has always read: the spec's fields sit where the requests
    // used to list them one by one, and unset samples are left out rather than sent as null.
    let cases = [
        (
            BridgeRequest {
                id: 3,
                command: BridgeCommand::Render(RenderRequest {
                    camera: Some("Camera".into()),
                    pose: None,
                    spec: RenderSpec {
                        engine: RenderEngine::Cycles,
                        width: 64,
                        height: 48,
                        samples: Some(16),
                    },
                    output_path: Some("/tmp/a.png".into()),
                }),
            },
            r#"{"id":3,"command":"render","camera":"Camera","engine":"CYCLES","width":64,"height":48,"samples":16,"output_path":"/tmp/a.png"}"#,
        ),
        (
            BridgeRequest {
                id: 4,
                command: BridgeCommand::Render(RenderRequest {
                    camera: None,
                    pose: None,
                    spec: RenderSpec {
                        engine: RenderEngine::Workbench,
                        width: 24,
                        height: 16,
                        samples: None,
                    },
                    output_path: None,
                }),
            },
            r#"{"id":4,"command":"render","engine":"WORKBENCH","width":24,"height":16}"#,
        ),
        (
            BridgeRequest {
                id: 5,
                command: BridgeCommand::RenderFramedViews(FramedViewsRequest {
                    objects: vec!["Cube".into()],
                    padding: Some(0.1),
                    directions: vec![[1.0, -1.0, 0.8]],
                    spec: RenderSpec {
                        engine: RenderEngine::Eevee,
                        width: 32,
                        height: 32,
                        samples: None,
                    },
                    output_paths: vec!["/tmp/v0.png".into()],
                }),
            },
            r#"{"id":5,"command":"render_framed_views","objects":["Cube"],"padding":0.1,"directions":[[1.0,-1.0,0.8]],"engine":"EEVEE","width":32,"height":32,"output_paths":["/tmp/v0.png"]}"#,
        ),
    ];
    for (request, wire) in cases {
        assert_eq!(serde_json::to_string(&request).unwrap(), wire);
        let back: BridgeRequest = serde_json::from_str(wire).unwrap();
        assert_eq!(back, request);
        let checked: BridgeRequest = parse_json(wire).unwrap();
        assert_eq!(checked, request);
    }
}
