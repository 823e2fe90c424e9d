//! Bad input of every kind returns a typed error naming the JSON path and the rule broken.

use serde_json::{Value, json};
use viga_protocol::event::TimedEvent;
use viga_protocol::gn::{GateReport, GnResponse};
use viga_protocol::iteration::{Feedback, IterationRecord};
use viga_protocol::manifest::AddonManifest;
use viga_protocol::message::{ChatMessage, ToolSpec};
use viga_protocol::{ProtocolError, ProtocolType, parse_json, parse_value};

/// Asserts that `value` is rejected with a violation of `rule` at `path`.
fn check<T: ProtocolType + std::fmt::Debug>(value: Value, path: &str, rule: &str) {
    let err = parse_value::<T>(value.clone()).expect_err(&format!("{} accepted {value}", T::NAME));
    let violations = err.violations();
    assert!(
        violations.iter().any(|v| v.path == path && v.rule == rule),
        "{}: expected `{rule}` at `{path}`, got:\n{err}",
        T::NAME
    );
    let shown = err.to_string();
    assert!(shown.contains(path), "message must name the path: {shown}");
}

fn gn_ok() -> Value {
    json!({"version": 1, "steps": [{"id": "a", "type": "PYTHON", "payload": {"code": "x = 1"}}], "done": true})
}

fn manifest_ok() -> Value {
    json!({
        "addon_info": {"id": "demo", "name": "Demo"},
        "ai_integration": {
            "agent_description": "demo",
            "tools": [{"name": "t", "description": "d", "parameters": [{"name": "p", "type": "string"}]}]
        }
    })
}

fn with(mut value: Value, pointer: &str, replacement: Value) -> Value {
    *value
        .pointer_mut(pointer)
        .expect("pointer exists in the base document") = replacement;
    value
}

fn without(mut value: Value, pointer: &str) -> Value {
    let (parent, key) = pointer.rsplit_once('/').expect("pointer has a parent");
    let parent = if parent.is_empty() {
        &mut value
    } else {
        value.pointer_mut(parent).unwrap()
    };
    parent.as_object_mut().unwrap().remove(key);
    value
}

#[test]
fn malformed_json_names_line_and_column() {
    for (text, line) in [
        ("{\"version\": 1,\n \"steps\": [", 2),
        ("not json", 1),
        ("", 1),
    ] {
        match parse_json::<GnResponse>(text) {
            Err(ProtocolError::MalformedJson {
                line: found,
                type_name,
                ..
            }) => {
                assert_eq!((found, type_name), (line, "GnResponse"), "{text:?}");
            }
            other => panic!("{text:?}: expected MalformedJson, got {other:?}"),
        }
    }
}

#[test]
fn gn_response_missing_fields() {
    check::<GnResponse>(without(gn_ok(), "/done"), "/", "required");
    check::<GnResponse>(without(gn_ok(), "/steps"), "/", "required");
    check::<GnResponse>(
        with(
            gn_ok(),
            "/steps/0",
            json!({"type": "PYTHON", "payload": {"code": ""}}),
        ),
        "/steps/0",
        "required",
    );
    check::<GnResponse>(
        with(gn_ok(), "/steps/0/payload", json!({})),
        "/steps/0/payload",
        "required",
    );
}

#[test]
fn unknown_variant_tags_list_the_known_ones() {
    let err =
        parse_value::<GnResponse>(with(gn_ok(), "/steps/0/type", json!("SHELL"))).unwrap_err();
    let message = err.to_string();
    for known in ["\"NODE_TREE\"", "\"GN_OPS\"", "\"PYTHON\"", "\"SHELL\""] {
        assert!(message.contains(known), "{message}");
    }
}

#[test]
fn gn_response_wrong_enum_and_types() {
    check::<GnResponse>(
        with(gn_ok(), "/steps/0/type", json!("SHELL")),
        "/steps/0/type",
        "oneOf",
    );
    check::<GnResponse>(with(gn_ok(), "/done", json!("yes")), "/done", "type");
    check::<GnResponse>(
        with(
            gn_ok(),
            "/steps/0",
            json!({"id": "a", "type": "GN_OPS", "payload": {"ops": [{"op": "explode"}]}}),
        ),
        "/steps/0/payload/ops/0/op",
        "oneOf",
    );
}

#[test]
fn gn_response_unknown_fields_are_refused() {
    check::<GnResponse>(
        with(gn_ok(), "/done", json!(true)).tap_insert("/", "extra", json!(1)),
        "/",
        "additionalProperties",
    );
    check::<GnResponse>(
        gn_ok().tap_insert("/steps/0/payload", "shell", json!(true)),
        "/steps/0/payload",
        "additionalProperties",
    );
}

#[test]
fn gn_response_duplicate_step_ids() {
    let doc = with(
        gn_ok(),
        "/steps",
        json!([
            {"id": "a", "type": "PYTHON", "payload": {"code": "1"}},
            {"id": "a", "type": "PYTHON", "payload": {"code": "2"}}
        ]),
    );
    check::<GnResponse>(doc, "/steps/1/id", "unique");
}

#[test]
fn unknown_protocol_version_is_refused_clearly() {
    for version in [json!(2), json!(0), json!("1.0"), json!(1.5)] {
        let err =
            parse_value::<GnResponse>(with(gn_ok(), "/version", version.clone())).unwrap_err();
        assert!(
            matches!(err, ProtocolError::UnsupportedVersion { supported: 1, .. }),
            "{version}: {err}"
        );
        assert!(
            err.to_string().contains("this viga speaks version 1"),
            "{err}"
        );
    }
    check::<GnResponse>(without(gn_ok(), "/version"), "/", "required");
}

#[test]
fn manifest_missing_and_wrong_fields() {
    check::<AddonManifest>(
        without(manifest_ok(), "/addon_info/id"),
        "/addon_info",
        "required",
    );
    check::<AddonManifest>(
        without(manifest_ok(), "/ai_integration/tools/0/name"),
        "/ai_integration/tools/0",
        "required",
    );
    check::<AddonManifest>(
        with(
            manifest_ok(),
            "/ai_integration/tools/0/parameters/0/type",
            json!("color"),
        ),
        "/ai_integration/tools/0/parameters/0/type",
        "enum",
    );
    check::<AddonManifest>(
        manifest_ok().tap_insert(
            "/ai_integration/tools/0/parameters/0",
            "requried",
            json!(false),
        ),
        "/ai_integration/tools/0/parameters/0",
        "additionalProperties",
    );
    check::<AddonManifest>(
        manifest_ok().tap_insert(
            "/ai_integration",
            "metadata",
            json!({"performance_impact": "extreme"}),
        ),
        "/ai_integration/metadata/performance_impact",
        "enum",
    );
}

#[test]
fn manifest_invariants() {
    let enum_without_options = with(
        manifest_ok(),
        "/ai_integration/tools/0/parameters/0",
        json!({"name": "side", "type": "enum"}),
    );
    check::<AddonManifest>(
        enum_without_options,
        "/ai_integration/tools/0/parameters/0/options",
        "enum_options",
    );
    let options_on_float = with(
        manifest_ok(),
        "/ai_integration/tools/0/parameters/0",
        json!({"name": "d", "type": "float", "options": ["1"]}),
    );
    check::<AddonManifest>(
        options_on_float,
        "/ai_integration/tools/0/parameters/0/options",
        "enum_options",
    );
    let tool = json!({"name": "t", "description": "d"});
    let duplicate_tools = with(
        manifest_ok(),
        "/ai_integration/tools",
        json!([tool.clone(), tool]),
    );
    check::<AddonManifest>(duplicate_tools, "/ai_integration/tools/1/name", "unique");
    let parameter = json!({"name": "p", "type": "string"});
    let duplicate_parameters = with(
        manifest_ok(),
        "/ai_integration/tools/0/parameters",
        json!([parameter.clone(), parameter]),
    );
    check::<AddonManifest>(
        duplicate_parameters,
        "/ai_integration/tools/0/parameters/1/name",
        "unique",
    );
}

#[test]
fn messages_and_tools() {
    check::<ChatMessage>(json!({"role": "system", "content": []}), "/role", "enum");
    check::<ChatMessage>(json!({"role": "user"}), "/", "required");
    check::<ChatMessage>(
        json!({"role": "user", "content": [{"type": "video"}]}),
        "/content/0/type",
        "oneOf",
    );
    check::<ToolSpec>(json!({"name": "x", "description": "y"}), "/", "required");
    check::<ToolSpec>(
        json!({"name": 3, "description": "y", "parameters": {}}),
        "/name",
        "type",
    );
}

#[test]
fn feedback_records_and_reports() {
    check::<Feedback>(
        json!({"visual_differences": [], "suggestions": []}),
        "/",
        "required",
    );
    check::<Feedback>(
        json!({"visual_differences": "too dark", "suggestions": [], "accepted": false}),
        "/visual_differences",
        "type",
    );
    check::<GateReport>(
        json!({"success": false, "failed_gates": ["OUTPUT_DISCONNECTED"], "messages": []}),
        "/failed_gates/0",
        "enum",
    );
    check::<IterationRecord>(json!({"index": -1}), "/index", "minimum");
    check::<TimedEvent>(
        json!({"seq": 1, "unix_ms": 2, "type": "exploded"}),
        "/type",
        "oneOf",
    );
}

#[test]
fn render_requests_refuse_unknown_fields_beside_their_flattened_spec() {
    use viga_protocol::bridge::{FramedViewsRequest, RenderRequest};
    let render = json!({"engine": "CYCLES", "width": 8, "height": 8, "samples": 4});
    assert!(serde_json::from_value::<RenderRequest>(render.clone()).is_ok());
    for (key, value) in [("sampels", json!(4)), ("extra", json!(true))] {
        let error =
            serde_json::from_value::<RenderRequest>(render.clone().tap_insert("/", key, value))
                .unwrap_err();
        assert!(
            error
                .to_string()
                .contains(&format!("unknown field `{key}`")),
            "{error}"
        );
    }
    let views =
        json!({"directions": [[0.0, 0.0, 1.0]], "engine": "WORKBENCH", "width": 8, "height": 8});
    assert!(serde_json::from_value::<FramedViewsRequest>(views.clone()).is_ok());
    let error = serde_json::from_value::<FramedViewsRequest>(views.tap_insert(
        "/",
        "output_path",
        json!("x"),
    ))
    .unwrap_err();
    assert!(
        error.to_string().contains("unknown field `output_path`"),
        "{error}"
    );
    // A missing spec field is still missing.
    let error = serde_json::from_value::<RenderRequest>(without(render, "/width")).unwrap_err();
    assert!(error.to_string().contains("width"), "{error}");
}

/// Insert a key into the object at `pointer` (a test-only convenience).
trait TapInsert {
    fn tap_insert(self, pointer: &str, key: &str, value: Value) -> Value;
}

impl TapInsert for Value {
    fn tap_insert(mut self, pointer: &str, key: &str, value: Value) -> Value {
        let target = if pointer == "/" {
            &mut self
        } else {
            self.pointer_mut(pointer).unwrap()
        };
        target
            .as_object_mut()
            .unwrap()
            .insert(key.to_owned(), value);
        self
    }
}

/// A document whose version 2 renamed a field: version 1 documents are still read.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct Resized {
    version: u32,
    size: f64,
}

impl ProtocolType for Resized {
    const NAME: &'static str = "Resized";
    const VERSION_FIELD: Option<&'static str> = Some("version");
    const VERSION: u32 = 2;
    const OLDER_VERSIONS: &'static [u32] = &[1];

    fn upgrade(mut document: Value, from: u32) -> Result<Value, String> {
        assert_eq!(from, 1);
        let fields = document.as_object_mut().ok_or("not an object")?;
        let width = fields.remove("width").ok_or("no width to carry over")?;
        fields.insert("size".to_owned(), width);
        Ok(document)
    }
}

/// Issue 36: a protocol version with a migration path. A version-1 document is brought to
/// version 2 and read; one that cannot be carried over says why; an unknown version is
/// refused naming what is read.
#[test]
fn an_older_version_is_upgraded_and_read() {
    let read = parse_value::<Resized>(json!({"version": 1, "width": 2.5})).unwrap();
    assert_eq!((read.version, read.size), (2, 2.5));
    let current = parse_value::<Resized>(json!({"version": 2, "size": 3.0})).unwrap();
    assert_eq!(current.size, 3.0);
    let lost = parse_value::<Resized>(json!({"version": 1})).unwrap_err();
    assert!(
        lost.to_string()
            .contains("a version 1 document could not be brought to version 2: no width"),
        "{lost}"
    );
    let unknown = parse_value::<Resized>(json!({"version": 3, "size": 1.0})).unwrap_err();
    assert!(
        unknown
            .to_string()
            .contains("this viga speaks version 2 (and reads 1)"),
        "{unknown}"
    );
}
