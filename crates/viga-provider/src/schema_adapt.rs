//! Response schemas adapted to what each backend accepts.
//!
//! A [`ResponseFormat`] carries the JSON Schema (draft 2020-12) that `schemars` derives, and
//! no server takes all of it: llama.cpp's grammar converter fails on `true` sub-schemas
//! (schemars writes one for every `serde_json::Value` field), Gemini's `responseJsonSchema`
//! knows a documented subset of keywords, and OpenAI's strict mode wants every property
//! required and `additionalProperties: false` on every object. Each adapter sends the schema
//! through one function of this module:
//!
//! | backend | function | rules |
//! | --- | --- | --- |
//! | OpenAI-compatible servers | [`for_compatible_server`] | boolean sub-schemas replaced; nothing else changes (`$ref`, `oneOf`, `const` are understood) |
//! | OpenAI | [`for_openai`] | boolean sub-schemas replaced; `strict: true` when the schema can be made strict exactly, else sent as it is without `strict` |
//! | Gemini (`responseJsonSchema`) | [`for_gemini`] | boolean sub-schemas replaced; `oneOf` becomes `anyOf`, `const` a one-value `enum`; keywords outside the documented subset dropped; `$ref` alone on its node |
//! | Anthropic | [`system_with_json_instruction`] | no structured-output field: the schema goes into the system prompt as written |
//!
//! Boolean sub-schemas: `true` (anything) becomes a schema listing every JSON type, since
//! llama.cpp reads the empty schema `{}` as "any object"; `false` (nothing) drops the
//! property or `anyOf`/`oneOf` branch it stands for, turns `items: false` into a `maxItems`,
//! and elsewhere becomes `{"not": {}}`. `additionalProperties: true | false` stays as it is:
//! every backend reads it, and strict mode requires the literal `false`.
//!
//! No rewrite here makes a schema stricter. Some make it looser (a keyword the backend does
//! not know is dropped), which is safe because callers validate the answer against the
//! original schema (`viga_protocol::parse_json`): the backend's schema only steers the model.

use std::convert::Infallible;

use serde_json::{Map, Value, json};

use crate::ResponseFormat;

/// Keywords whose value is one schema.
const SINGLE_SCHEMA_KEYWORDS: &[&str] = &[
    "items",
    "additionalProperties",
    "additionalItems",
    "unevaluatedProperties",
    "unevaluatedItems",
    "not",
    "contains",
    "propertyNames",
    "if",
    "then",
    "else",
    "contentSchema",
];

/// Keywords whose value maps names to schemas.
const SCHEMA_MAP_KEYWORDS: &[&str] = &[
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];

/// Keywords whose value is a list of schemas. Before draft 2020-12 `items` could hold a list
/// too, which [`holds`] allows for.
const SCHEMA_LIST_KEYWORDS: &[&str] = &["anyOf", "oneOf", "allOf", "prefixItems"];

/// Keywords whose boolean value every backend reads, and which OpenAI's strict mode needs
/// spelled `false`: they keep their booleans.
const BOOLEAN_KEPT_KEYWORDS: &[&str] = &["additionalProperties", "unevaluatedProperties"];

/// What Gemini's `responseJsonSchema` documents as supported (`generationConfig` reference).
const GEMINI_KEYWORDS: &[&str] = &[
    "$id",
    "$defs",
    "$ref",
    "$anchor",
    "type",
    "format",
    "title",
    "description",
    "enum",
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "minimum",
    "maximum",
    "anyOf",
    "properties",
    "additionalProperties",
    "required",
    "propertyOrdering",
];

/// What OpenAI's strict mode documents as supported ("Supported schemas" in the Structured
/// Outputs guide). `oneOf` is not among them.
const OPENAI_STRICT_KEYWORDS: &[&str] = &[
    "$defs",
    "$ref",
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "anyOf",
    "title",
    "description",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
];

/// Keywords that only annotate: dropping one never changes which values match.
const ANNOTATIONS: &[&str] = &[
    "$schema",
    "$id",
    "$comment",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
];

/// The string formats OpenAI's strict mode knows; schemars also writes formats such as
/// `uint32` or `float` on numbers, which are annotations only.
const OPENAI_STRING_FORMATS: &[&str] = &[
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
];

/// A schema that accepts every JSON value, spelled out by type: `true` and `{}` mean the
/// same, but llama.cpp refuses `true` and reads `{}` as "any object".
fn any_value() -> Value {
    json!({"type": ["object", "array", "string", "number", "boolean", "null"]})
}

/// A schema that accepts no value: `false` spelled as a schema object.
fn no_value() -> Value {
    json!({"not": {}})
}

/// The schema for an OpenAI-compatible server (llama.cpp, vLLM, Ollama, LM Studio): the
/// same schema without boolean sub-schemas.
pub(crate) fn for_compatible_server(schema: &Value) -> Value {
    without_boolean_schemas(schema)
}

/// A schema for OpenAI's `response_format`, and whether it may be sent with `strict: true`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct OpenAiSchema {
    pub(crate) schema: Value,
    pub(crate) strict: bool,
}

/// The schema for OpenAI: made strict when that changes no answer's meaning, else sent
/// without `strict` (the model is then steered by the schema but not bound to it).
///
/// Strict mode needs every property required and `additionalProperties: false` on every
/// object. An optional property becomes required only when it may be null or has a default,
/// since then writing the null or the default says what leaving it out said; an object that
/// allows unknown properties, a `oneOf` whose branches may overlap, or a keyword strict mode
/// does not know keeps the whole schema non-strict.
pub(crate) fn for_openai(schema: &Value) -> OpenAiSchema {
    let portable = without_boolean_schemas(schema);
    let mut strict = portable.clone();
    match make_strict(&mut strict) {
        Ok(()) => OpenAiSchema {
            schema: strict,
            strict: true,
        },
        Err(NotStrict(why)) => {
            tracing::debug!(%why, "the response schema goes to OpenAI without strict mode");
            OpenAiSchema {
                schema: portable,
                strict: false,
            }
        }
    }
}

/// The schema for Gemini's `responseJsonSchema`, reduced to its documented subset.
pub(crate) fn for_gemini(schema: &Value) -> Value {
    let mut schema = without_boolean_schemas(schema);
    let Ok(()) = walk(&mut schema, &mut |node| {
        gemini_node(node);
        Ok::<(), Infallible>(())
    });
    schema
}

/// `system` followed by the instruction to answer with JSON matching `format`'s schema,
/// which goes as written: only the model reads it. For backends without a structured-output
/// field (Anthropic) and for servers that refused the field.
pub(crate) fn system_with_json_instruction(system: &str, format: &ResponseFormat) -> String {
    // Most response schemas describe an object; saying so keeps the model from answering
    // with a bare string or list.
    let what = if format.schema.get("type") == Some(&json!("object")) {
        "object"
    } else {
        "value"
    };
    let instruction = format!(
        "Answer with one JSON {what} and nothing else (no prose, no code fence). It must match \
         this JSON Schema, named {:?}:\n{}",
        format.name, format.schema
    );
    if system.is_empty() {
        instruction
    } else {
        format!("{system}\n\n{instruction}")
    }
}

/// Calls `visit` on every schema object in `schema`, a node before its sub-schemas, so a
/// visit may rewrite the children it is about to descend into. Only schema positions are
/// visited: the values of `properties`, not `properties` itself; never `default`, `const`,
/// `enum` or `examples`, whose values are data (a `true` there is not a schema).
fn walk<E>(
    schema: &mut Value,
    visit: &mut impl FnMut(&mut Map<String, Value>) -> Result<(), E>,
) -> Result<(), E> {
    let Value::Object(node) = schema else {
        return Ok(());
    };
    visit(node)?;
    for child in subschemas(node) {
        walk(child, visit)?;
    }
    Ok(())
}

/// What a keyword's value holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Holds {
    OneSchema,
    SchemasByName,
    SchemaList,
    /// Data (`default`, `enum`, `const`), a name list (`required`) or a number.
    Other,
}

fn holds(keyword: &str, value: &Value) -> Holds {
    if SCHEMA_MAP_KEYWORDS.contains(&keyword) && value.is_object() {
        Holds::SchemasByName
    } else if (SCHEMA_LIST_KEYWORDS.contains(&keyword) || keyword == "items") && value.is_array() {
        Holds::SchemaList
    } else if SINGLE_SCHEMA_KEYWORDS.contains(&keyword) {
        Holds::OneSchema
    } else {
        Holds::Other
    }
}

/// The direct sub-schemas of `node`, by keyword.
fn subschemas(node: &mut Map<String, Value>) -> Vec<&mut Value> {
    let mut found = Vec::new();
    for (keyword, value) in node.iter_mut() {
        match (holds(keyword, value), value) {
            (Holds::SchemasByName, Value::Object(map)) => found.extend(map.values_mut()),
            (Holds::SchemaList, Value::Array(list)) => found.extend(list.iter_mut()),
            (Holds::OneSchema, value) => found.push(value),
            _ => {}
        }
    }
    found
}

/// `schema` with every boolean sub-schema replaced (see the module docs).
fn without_boolean_schemas(schema: &Value) -> Value {
    let mut schema = match schema {
        Value::Bool(true) => any_value(),
        Value::Bool(false) => no_value(),
        other => other.clone(),
    };
    let Ok(()) = walk(&mut schema, &mut |node| {
        replace_boolean_children(node);
        Ok::<(), Infallible>(())
    });
    schema
}

/// Replaces the boolean schemas among `node`'s direct sub-schemas.
fn replace_boolean_children(node: &mut Map<String, Value>) {
    // A property that must be absent: dropped, which is exact under
    // `additionalProperties: false` and otherwise only lets the model write it.
    if let Some(Value::Object(properties)) = node.get_mut("properties") {
        let forbidden: Vec<String> = properties
            .iter()
            .filter(|(_, schema)| **schema == Value::Bool(false))
            .map(|(name, _)| name.clone())
            .collect();
        properties.retain(|name, _| !forbidden.contains(name));
        if let Some(Value::Array(required)) = node.get_mut("required") {
            required.retain(|name| {
                !name
                    .as_str()
                    .is_some_and(|n| forbidden.iter().any(|f| f == n))
            });
        }
    }
    // A branch that matches nothing adds nothing to `anyOf`/`oneOf`; a `true` in `allOf`
    // takes nothing away.
    for keyword in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = node.get_mut(keyword) {
            branches.retain(|branch| *branch != Value::Bool(false));
            if branches.is_empty() {
                branches.push(no_value());
            }
        }
    }
    if let Some(Value::Array(parts)) = node.get_mut("allOf") {
        parts.retain(|part| *part != Value::Bool(true));
        if parts.is_empty() {
            node.remove("allOf");
        }
    }
    // `items: false` after `prefixItems`: no items beyond the prefix.
    if node.get("items") == Some(&Value::Bool(false)) {
        node.remove("items");
        let prefix = node
            .get("prefixItems")
            .and_then(Value::as_array)
            .map_or(0, Vec::len) as u64;
        let most = node
            .get("maxItems")
            .and_then(Value::as_u64)
            .map_or(prefix, |max| max.min(prefix));
        node.insert("maxItems".to_owned(), json!(most));
    }
    for (keyword, value) in node.iter_mut() {
        if BOOLEAN_KEPT_KEYWORDS.contains(&keyword.as_str()) {
            continue;
        }
        match (holds(keyword, value), value) {
            (Holds::SchemasByName, Value::Object(map)) => {
                map.values_mut().for_each(replace_boolean);
            }
            (Holds::SchemaList, Value::Array(list)) => list.iter_mut().for_each(replace_boolean),
            (Holds::OneSchema, value) => replace_boolean(value),
            _ => {}
        }
    }
}

fn replace_boolean(schema: &mut Value) {
    match schema {
        Value::Bool(true) => *schema = any_value(),
        Value::Bool(false) => *schema = no_value(),
        _ => {}
    }
}

/// One node of a Gemini schema: the documented subset, `oneOf` read as `anyOf` (as Gemini
/// itself documents), `const` as a one-value `enum`.
fn gemini_node(node: &mut Map<String, Value>) {
    if let Some(branches) = node.remove("oneOf") {
        // Both at once is rare; dropping `oneOf` then only loosens the schema.
        if !node.contains_key("anyOf") {
            node.insert("anyOf".to_owned(), branches);
        }
    }
    let is_enum_value = |value: &Value| value.is_string() || value.is_number();
    if let Some(value) = node.remove("const")
        && is_enum_value(&value)
        && !node.contains_key("enum")
    {
        node.insert("enum".to_owned(), json!([value]));
    }
    // Gemini's `enum` holds strings and numbers only.
    if let Some(Value::Array(values)) = node.get("enum")
        && !values.iter().all(is_enum_value)
    {
        node.remove("enum");
    }
    node.retain(|keyword, _| GEMINI_KEYWORDS.contains(&keyword.as_str()));
    // A loosened node is fine here: Gemini's schema only steers the model.
    let _exact = isolate_ref(node);
}

/// Gemini and OpenAI's strict mode refuse other keywords beside `$ref` (except `$`-keywords).
/// The reference moves into a one-branch `anyOf`, which matches the same values, so the
/// description and the like stay on the node. Returns false when the node had an `anyOf`
/// already and so kept only the reference, which loosens it.
fn isolate_ref(node: &mut Map<String, Value>) -> bool {
    if !node.contains_key("$ref") || node.keys().all(|keyword| keyword.starts_with('$')) {
        return true;
    }
    if node.contains_key("anyOf") {
        node.retain(|keyword, _| keyword.starts_with('$'));
        return false;
    }
    if let Some(reference) = node.remove("$ref") {
        node.insert("anyOf".to_owned(), json!([{"$ref": reference}]));
    }
    true
}

/// Why a schema cannot be made strict, for the debug log.
#[derive(Debug)]
struct NotStrict(String);

/// Rewrites `schema` (already without boolean sub-schemas) into OpenAI's strict subset, or
/// says why that would change its meaning.
fn make_strict(schema: &mut Value) -> Result<(), NotStrict> {
    if schema.get("type") != Some(&json!("object")) {
        return Err(NotStrict(
            "strict mode needs an object schema at the root".to_owned(),
        ));
    }
    walk(schema, &mut strict_node)
}

fn strict_node(node: &mut Map<String, Value>) -> Result<(), NotStrict> {
    // Before the annotations go: the properties' defaults decide what may become required.
    if admits_type(node, "object") || node.contains_key("properties") {
        if node.get("additionalProperties") != Some(&Value::Bool(false)) {
            return Err(NotStrict(
                "an object allows properties it does not list".to_owned(),
            ));
        }
        require_every_property(node)?;
    }
    if let Some(branches) = node.remove("oneOf") {
        if node.contains_key("anyOf") || !branches_are_disjoint(&branches) {
            return Err(NotStrict(
                "a oneOf has branches that may overlap, or sits beside an anyOf".to_owned(),
            ));
        }
        node.insert("anyOf".to_owned(), branches);
    }
    node.retain(|keyword, _| !ANNOTATIONS.contains(&keyword.as_str()));
    if let Some(Value::String(format)) = node.get("format")
        && !OPENAI_STRING_FORMATS.contains(&format.as_str())
    {
        node.remove("format");
    }
    if let Some(keyword) = node
        .keys()
        .find(|keyword| !OPENAI_STRICT_KEYWORDS.contains(&keyword.as_str()))
    {
        return Err(NotStrict(format!(
            "strict mode does not support `{keyword}`"
        )));
    }
    if admits_type(node, "array") && !node.contains_key("items") {
        return Err(NotStrict("an array does not say what it holds".to_owned()));
    }
    if !isolate_ref(node) {
        return Err(NotStrict("a $ref shares its node with an anyOf".to_owned()));
    }
    Ok(())
}

/// Adds every property of an object node to its `required`, or fails on one whose absence
/// cannot be written as a value.
fn require_every_property(node: &mut Map<String, Value>) -> Result<(), NotStrict> {
    let Some(Value::Object(properties)) = node.get("properties") else {
        return Ok(());
    };
    let mut required: Vec<Value> = match node.get("required") {
        Some(Value::Array(names)) => names.clone(),
        _ => Vec::new(),
    };
    for (name, schema) in properties {
        if required.iter().any(|listed| listed == name.as_str()) {
            continue;
        }
        if schema.get("default").is_none() && !admits_null(schema) {
            return Err(NotStrict(format!(
                "the optional property `{name}` has no default and cannot be null"
            )));
        }
        required.push(json!(name));
    }
    node.insert("required".to_owned(), Value::Array(required));
    Ok(())
}

/// Whether the node's `type` names `wanted` (alone or in a list).
fn admits_type(node: &Map<String, Value>, wanted: &str) -> bool {
    match node.get("type") {
        Some(Value::String(name)) => name == wanted,
        Some(Value::Array(names)) => names.iter().any(|name| name == wanted),
        _ => false,
    }
}

/// Whether `schema` plainly accepts `null` (a `$ref` is not followed).
fn admits_null(schema: &Value) -> bool {
    let Value::Object(node) = schema else {
        return false;
    };
    let null = Value::Null;
    admits_type(node, "null")
        || node.get("const") == Some(&null)
        || node
            .get("enum")
            .and_then(Value::as_array)
            .is_some_and(|values| values.contains(&null))
        || ["anyOf", "oneOf"].iter().any(|keyword| {
            node.get(*keyword)
                .and_then(Value::as_array)
                .is_some_and(|branches| branches.iter().any(admits_null))
        })
}

/// Whether no value can match two of `branches`: each is an object requiring one same
/// property, fixed by `const` (or a one-value `enum`) to a value of its own. Then `oneOf`
/// and `anyOf` accept the same values. This is how serde's tagged enums come out.
fn branches_are_disjoint(branches: &Value) -> bool {
    let Some(branches) = branches.as_array() else {
        return false;
    };
    let tag_of = |branch: &Value, name: &str| -> Option<Value> {
        let required = branch.get("required")?.as_array()?;
        if !required.iter().any(|listed| listed == name) {
            return None;
        }
        let property = branch.get("properties")?.get(name)?;
        match (property.get("const"), property.get("enum")) {
            (Some(value), _) => Some(value.clone()),
            (None, Some(Value::Array(values))) => match values.as_slice() {
                [only] => Some(only.clone()),
                _ => None,
            },
            _ => None,
        }
    };
    let Some(candidates) = branches
        .first()
        .and_then(|first| first.get("properties"))
        .and_then(Value::as_object)
    else {
        return false;
    };
    candidates.keys().any(|name| {
        let tags: Option<Vec<Value>> = branches.iter().map(|branch| tag_of(branch, name)).collect();
        tags.is_some_and(|tags| {
            tags.iter()
                .enumerate()
                .all(|(index, tag)| !tags[index + 1..].contains(tag))
        })
    })
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use viga_protocol::CompiledSchema;
    use viga_protocol::gn::GnResponse;

    use super::*;

    fn gn_schema() -> Value {
        viga_protocol::schema_of::<GnResponse>()
    }

    /// JSON pointers of the boolean schemas in `schema`, found independently of the module's
    /// walker: the places llama.cpp's converter visits (`additionalProperties` aside, whose
    /// booleans it reads).
    fn boolean_schemas(schema: &Value, at: &str, found: &mut Vec<String>) {
        match schema {
            Value::Bool(_) => found.push(at.to_owned()),
            Value::Object(node) => {
                for (keyword, value) in node {
                    let here = format!("{at}/{keyword}");
                    match (keyword.as_str(), value) {
                        ("properties" | "$defs" | "patternProperties", Value::Object(map)) => {
                            for (name, child) in map {
                                boolean_schemas(child, &format!("{here}/{name}"), found);
                            }
                        }
                        ("anyOf" | "oneOf" | "allOf" | "prefixItems", Value::Array(list)) => {
                            for (index, child) in list.iter().enumerate() {
                                boolean_schemas(child, &format!("{here}/{index}"), found);
                            }
                        }
                        ("items" | "not" | "contains" | "if" | "then" | "else", child) => {
                            boolean_schemas(child, &here, found)
                        }
                        ("additionalProperties", Value::Object(_)) => {
                            boolean_schemas(value, &here, found)
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }

    fn booleans_in(schema: &Value) -> Vec<String> {
        let mut found = Vec::new();
        boolean_schemas(schema, "", &mut found);
        found
    }

    /// Every schema object in `schema`, through the module's walker.
    fn nodes(schema: &Value) -> Vec<Map<String, Value>> {
        let mut copy = schema.clone();
        let mut found = Vec::new();
        let Ok(()) = walk(&mut copy, &mut |node| {
            found.push(node.clone());
            Ok::<(), Infallible>(())
        });
        found
    }

    /// The `GnOp` branch for `op`.
    fn op_branch<'a>(schema: &'a Value, branches: &str, op: &str) -> &'a Value {
        schema["$defs"]["GnOp"][branches]
            .as_array()
            .and_then(|branches| {
                branches
                    .iter()
                    .find(|branch| branch["properties"]["op"].to_string().contains(op))
            })
            .unwrap_or_else(|| panic!("no {op} branch"))
    }

    /// Every valid reply of the GN fixture cases.
    fn valid_gn_replies() -> Vec<Value> {
        let cases = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/gn/cases");
        let original = CompiledSchema::compile(&gn_schema()).unwrap();
        let mut replies = Vec::new();
        for entry in std::fs::read_dir(&cases).unwrap() {
            let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
            let case: Value = serde_json::from_str(&text).unwrap();
            for turn in case["replies"].as_array().into_iter().flatten() {
                let reply = &turn["reply"];
                if reply.is_object() && original.violations(reply).is_empty() {
                    replies.push(reply.clone());
                }
            }
        }
        assert!(replies.len() >= 10, "only {} valid replies", replies.len());
        replies
    }

    #[test]
    fn the_gn_schema_has_what_servers_refuse() {
        let schema = gn_schema();
        let booleans = booleans_in(&schema);
        assert!(
            booleans.contains(&"/$defs/InterfaceSocket/properties/default".to_owned()),
            "{booleans:?}"
        );
        assert!(schema["$defs"]["GnStep"].get("oneOf").is_some());
        assert!(schema.to_string().contains("\"$ref\""));
    }

    #[test]
    fn compatible_servers_get_the_schema_without_boolean_schemas_and_nothing_else_changed() {
        let original = gn_schema();
        let adapted = for_compatible_server(&original);
        assert_eq!(booleans_in(&adapted), Vec::<String>::new());
        assert_eq!(
            op_branch(&adapted, "oneOf", "set_input")["properties"]["value"],
            any_value()
        );
        assert_eq!(
            adapted["$defs"]["InterfaceSocket"]["properties"]["default"],
            any_value()
        );
        // The `default` keyword holds data, not a schema, and `additionalProperties: true`
        // is understood everywhere.
        let inputs = &adapted["$defs"]["NodeSpec"]["properties"]["inputs"];
        assert_eq!(
            (&inputs["default"], &inputs["additionalProperties"]),
            (&json!({}), &json!(true))
        );
        // Putting `true` back gives the original: `$ref`, `oneOf` and the rest are untouched.
        let mut restored = adapted.clone();
        fn restore(value: &mut Value) {
            if *value == any_value() {
                *value = json!(true);
            }
            match value {
                Value::Object(map) => map.values_mut().for_each(restore),
                Value::Array(list) => list.iter_mut().for_each(restore),
                _ => {}
            }
        }
        restore(&mut restored);
        assert_eq!(restored, original);
    }

    #[test]
    fn openai_gets_the_gn_schema_without_strict_since_it_has_free_form_objects() {
        let adapted = for_openai(&gn_schema());
        assert!(!adapted.strict);
        assert_eq!(adapted.schema, for_compatible_server(&gn_schema()));
    }

    /// A schema that can be made strict: closed objects, optional properties that are
    /// nullable or defaulted, a tagged `oneOf`, a described `$ref`.
    fn strictable() -> Value {
        json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "name": {"type": "string", "description": "who"},
                "note": {"type": ["string", "null"]},
                "tags": {"type": "array", "items": {"type": "string"}, "default": []},
                "count": {"type": "integer", "format": "uint32", "minimum": 0},
                "shape": {"$ref": "#/$defs/Shape", "description": "what"}
            },
            "required": ["name", "count", "shape"],
            "$defs": {"Shape": {"oneOf": [
                {"type": "object", "additionalProperties": false,
                 "properties": {"kind": {"type": "string", "const": "circle"}, "radius": {"type": "number"}},
                 "required": ["kind", "radius"]},
                {"type": "object", "additionalProperties": false,
                 "properties": {"kind": {"type": "string", "const": "square"}, "side": {"type": "number"}},
                 "required": ["kind", "side"]}
            ]}}
        })
    }

    #[test]
    fn openai_gets_a_strict_schema_when_nothing_changes_meaning() {
        let adapted = for_openai(&strictable());
        assert!(adapted.strict);
        assert_eq!(
            adapted.schema,
            json!({
                "type": "object",
                "additionalProperties": false,
                "properties": {
                    "name": {"type": "string", "description": "who"},
                    "note": {"type": ["string", "null"]},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "count": {"type": "integer", "minimum": 0},
                    "shape": {"anyOf": [{"$ref": "#/$defs/Shape"}], "description": "what"}
                },
                "required": ["name", "count", "shape", "note", "tags"],
                "$defs": {"Shape": {"anyOf": [
                    {"type": "object", "additionalProperties": false,
                     "properties": {"kind": {"type": "string", "const": "circle"}, "radius": {"type": "number"}},
                     "required": ["kind", "radius"]},
                    {"type": "object", "additionalProperties": false,
                     "properties": {"kind": {"type": "string", "const": "square"}, "side": {"type": "number"}},
                     "required": ["kind", "side"]}
                ]}}
            })
        );
        // What strict mode lets the model write, the original accepts.
        let original = CompiledSchema::compile(&strictable()).unwrap();
        let strict = CompiledSchema::compile(&adapted.schema).unwrap();
        let answer = json!({"name": "a", "note": null, "tags": [], "count": 2,
                            "shape": {"kind": "square", "side": 1.5}});
        assert!(strict.violations(&answer).is_empty());
        assert!(original.violations(&answer).is_empty());
    }

    #[test]
    fn openai_gets_a_non_strict_schema_when_strict_would_change_its_meaning() {
        let mut optional = strictable();
        optional["properties"]["nickname"] = json!({"type": "string"});
        let mut open = strictable();
        open.as_object_mut().unwrap().remove("additionalProperties");
        let mut overlapping = strictable();
        overlapping["$defs"]["Shape"] = json!({"oneOf": [{"type": "number"}, {"type": "integer"}]});
        let mut unsupported = strictable();
        unsupported["properties"]["name"]["minLength"] = json!(1);
        let list = json!({"type": "array", "items": {"type": "string"}});
        for (case, schema) in [
            ("optional without default", optional),
            ("open object", open),
            ("overlapping oneOf", overlapping),
            ("minLength", unsupported),
            ("array root", list),
            ("$ref beside anyOf", ref_beside_any_of()),
        ] {
            let adapted = for_openai(&schema);
            assert!(!adapted.strict, "{case}");
            assert_eq!(adapted.schema, schema, "{case}: sent as it is");
        }
    }

    #[test]
    fn gemini_gets_the_documented_subset() {
        let adapted = for_gemini(&gn_schema());
        assert_eq!(booleans_in(&adapted), Vec::<String>::new());
        for node in nodes(&adapted) {
            for keyword in node.keys() {
                assert!(
                    GEMINI_KEYWORDS.contains(&keyword.as_str()),
                    "{keyword} in {node:?}"
                );
            }
            if node.contains_key("$ref") {
                assert!(node.keys().all(|k| k.starts_with('$')), "{node:?}");
            }
        }
        assert!(adapted.get("$defs").is_some(), "references stay");
        let set_input = op_branch(&adapted, "anyOf", "set_input");
        assert_eq!(
            set_input["properties"]["op"],
            json!({"type": "string", "enum": ["set_input"]})
        );
        assert_eq!(set_input["properties"]["value"], any_value());
        // The keyword goes; the `default` property of an interface socket stays.
        assert!(
            adapted["$defs"]["NodeSpec"]["properties"]["inputs"]
                .get("default")
                .is_none()
        );
        assert_eq!(
            adapted["$defs"]["InterfaceSocket"]["properties"]["default"],
            any_value()
        );
        let text = adapted.to_string();
        for gone in ["\"oneOf\"", "\"const\"", "\"$schema\""] {
            assert!(!text.contains(gone), "{gone} left in {text}");
        }
    }

    /// [`strictable`] with a `$ref` that shares its node with an `anyOf`.
    fn ref_beside_any_of() -> Value {
        let mut schema = strictable();
        schema["properties"]["shape"]["anyOf"] = json!([{"type": "object"}]);
        schema
    }

    #[test]
    fn gemini_keeps_a_described_reference_beside_its_description() {
        let adapted = for_gemini(&strictable());
        assert_eq!(
            adapted["properties"]["shape"],
            json!({"anyOf": [{"$ref": "#/$defs/Shape"}], "description": "what"})
        );
        // With an `anyOf` already there, the reference stays alone, as Gemini requires.
        let crowded = for_gemini(&ref_beside_any_of());
        assert_eq!(
            crowded["properties"]["shape"],
            json!({"$ref": "#/$defs/Shape"})
        );
    }

    #[test]
    fn adapted_gn_schemas_accept_every_reply_the_original_accepts() {
        let replies = valid_gn_replies();
        let original = gn_schema();
        for (backend, adapted) in [
            ("compatible", for_compatible_server(&original)),
            ("openai", for_openai(&original).schema),
            ("gemini", for_gemini(&original)),
        ] {
            let compiled = CompiledSchema::compile(&adapted).unwrap();
            for reply in &replies {
                let violations = compiled.violations(reply);
                assert!(violations.is_empty(), "{backend}: {violations:?}\n{reply}");
            }
        }
    }

    #[test]
    fn false_schemas_become_what_they_mean() {
        let schema = json!({
            "type": "object",
            "properties": {"gone": false, "kept": true},
            "required": ["gone", "kept"],
            "additionalProperties": false,
            "$defs": {
                "Pair": {"type": "array", "prefixItems": [{"type": "string"}, true], "items": false},
                "Either": {"anyOf": [false, {"type": "string"}]},
                "Nothing": {"oneOf": [false]},
                "Never": {"not": true}
            }
        });
        assert_eq!(
            for_compatible_server(&schema),
            json!({
                "type": "object",
                "properties": {"kept": any_value()},
                "required": ["kept"],
                "additionalProperties": false,
                "$defs": {
                    "Pair": {"type": "array", "prefixItems": [{"type": "string"}, any_value()], "maxItems": 2},
                    "Either": {"anyOf": [{"type": "string"}]},
                    "Nothing": {"oneOf": [no_value()]},
                    "Never": {"not": any_value()}
                }
            })
        );
        assert_eq!(for_compatible_server(&json!(true)), any_value());
        assert_eq!(for_compatible_server(&json!(false)), no_value());
    }
}
