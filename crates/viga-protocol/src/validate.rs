//! Parsing untrusted JSON into protocol types: version check, JSON Schema validation (derived
//! with schemars, checked with jsonschema), then the type's own invariants. Every failure
//! names the JSON path and the rule broken, so a model or an add-on author can fix it.

use std::any::TypeId;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::PROTOCOL_VERSION;

/// A protocol type that can arrive as untrusted JSON.
pub trait ProtocolType: JsonSchema + DeserializeOwned + 'static {
    /// Name used in error messages.
    const NAME: &'static str;
    /// The top-level field holding the protocol version, for versioned documents.
    const VERSION_FIELD: Option<&'static str> = None;
    /// The version this build reads and writes natively.
    const VERSION: u32 = PROTOCOL_VERSION;
    /// Older versions still read: a document of one is brought to [`Self::VERSION`] by
    /// [`Self::upgrade`] before it is validated, so a version-1 answer still works once a
    /// version 2 exists.
    const OLDER_VERSIONS: &'static [u32] = &[];

    /// `document`, of the older version `from` (one of [`Self::OLDER_VERSIONS`]), in the
    /// shape of [`Self::VERSION`]; `Err` says what could not be carried over. The version
    /// field is set by the caller.
    fn upgrade(document: Value, from: u32) -> Result<Value, String> {
        let _ = from;
        Ok(document)
    }

    /// Invariants a JSON Schema cannot express (unique ids, cross-field rules).
    fn check(&self) -> Vec<Violation> {
        Vec::new()
    }
}

/// One broken rule at one place in a JSON document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// JSON Pointer to the offending value (`/` for the document itself).
    pub path: String,
    /// The rule broken: a JSON Schema keyword (`required`, `enum`, `additionalProperties`,
    /// `type`, ...) or the name of a type invariant (`unique`, ...).
    pub rule: String,
    pub message: String,
}

impl Violation {
    pub fn new(
        path: impl Into<String>,
        rule: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            path: path.into(),
            rule: rule.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at {} ({}): {}", self.path, self.rule, self.message)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    #[error("{type_name}: malformed JSON at line {line}, column {column}: {message}")]
    MalformedJson {
        type_name: &'static str,
        line: usize,
        column: usize,
        message: String,
    },
    #[error(
        "{type_name}: unsupported protocol version {found}; this viga speaks version {supported}{}. Send \"{field}\": {supported}, or use a viga release that speaks version {found}",
        older_words(.older)
    )]
    UnsupportedVersion {
        type_name: &'static str,
        field: &'static str,
        found: String,
        supported: u32,
        /// Older versions still read.
        older: Vec<u32>,
    },
    #[error(
        "{type_name}: a version {from} document could not be brought to version {to}: {message}"
    )]
    NotUpgraded {
        type_name: &'static str,
        from: u32,
        to: u32,
        message: String,
    },
    #[error("{type_name} is invalid:\n{}", list(.violations))]
    Invalid {
        type_name: &'static str,
        violations: Vec<Violation>,
    },
    /// The derived schema itself did not compile: a bug in viga, not in the input.
    #[error("internal error: the JSON Schema of {type_name} does not compile: {message}")]
    Schema {
        type_name: &'static str,
        message: String,
    },
}

impl ProtocolError {
    /// The violations behind an [`ProtocolError::Invalid`] error; empty for other kinds.
    pub fn violations(&self) -> &[Violation] {
        match self {
            Self::Invalid { violations, .. } => violations,
            _ => &[],
        }
    }
}

fn older_words(older: &[u32]) -> String {
    if older.is_empty() {
        return String::new();
    }
    let versions: Vec<String> = older.iter().map(u32::to_string).collect();
    format!(" (and reads {})", versions.join(", "))
}

fn list(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(|violation| format!("  - {violation}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The JSON Schema (draft 2020-12) of a type, as plain JSON.
pub fn schema_of<T: JsonSchema>() -> Value {
    schemars::schema_for!(T).to_value()
}

type ValidatorCache = Mutex<HashMap<TypeId, Arc<jsonschema::Validator>>>;

/// Compiling a schema costs far more than validating with it, so each type's validator is
/// compiled once per process.
fn validator_for<T: ProtocolType>() -> Result<Arc<jsonschema::Validator>, ProtocolError> {
    static CACHE: OnceLock<ValidatorCache> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let key = TypeId::of::<T>();
    if let Some(found) = cache.lock().ok().and_then(|map| map.get(&key).cloned()) {
        return Ok(found);
    }
    let compiled =
        jsonschema::validator_for(&schema_of::<T>()).map_err(|err| ProtocolError::Schema {
            type_name: T::NAME,
            message: err.to_string(),
        })?;
    let compiled = Arc::new(compiled);
    if let Ok(mut map) = cache.lock() {
        map.insert(key, Arc::clone(&compiled));
    }
    Ok(compiled)
}

/// Parse and validate untrusted JSON text.
pub fn parse_json<T: ProtocolType>(text: &str) -> Result<T, ProtocolError> {
    parse_value(json_value::<T>(text)?)
}

/// [`parse_json`] against a schema built at run time (see [`parse_value_against`]).
pub fn parse_json_against<T: ProtocolType>(
    text: &str,
    schema: &CompiledSchema,
) -> Result<T, ProtocolError> {
    parse_value_against(json_value::<T>(text)?, schema)
}

fn json_value<T: ProtocolType>(text: &str) -> Result<Value, ProtocolError> {
    serde_json::from_str(text).map_err(|err| ProtocolError::MalformedJson {
        type_name: T::NAME,
        line: err.line(),
        column: err.column(),
        message: err.to_string(),
    })
}

/// The places in a model's `text` a JSON object may be: each fenced block, then the span
/// from the first `{` to the last `}`. Models wrap JSON in fences or prose; whatever is found
/// still goes through [`parse_json`].
pub fn json_candidates(text: &str) -> impl Iterator<Item = &str> {
    let fenced = text.split("```").skip(1).step_by(2).map(|block| {
        let body = block.trim_start_matches(|c: char| c.is_ascii_alphanumeric());
        body.trim()
    });
    let span = text
        .find('{')
        .zip(text.rfind('}'))
        .filter(|(start, end)| start < end)
        .map(|(start, end)| &text[start..=end]);
    fenced.chain(span)
}

/// Validate an already-parsed JSON value and convert it.
pub fn parse_value<T: ProtocolType>(value: Value) -> Result<T, ProtocolError> {
    let value = current_version::<T>(value)?;
    let validator = validator_for::<T>()?;
    let mut violations = Vec::new();
    for error in validator.iter_errors(&value) {
        explain(&error, &mut violations);
    }
    converted(value, violations)
}

/// [`parse_value`] against a schema built at run time instead of `T`'s derived one: a type
/// whose schema grows at run time (the Geometry Nodes steps of an executor registry) is
/// checked against what was registered, with the same version handling, path-and-rule
/// reporting and invariants. `schema` must describe `T`'s current version.
pub fn parse_value_against<T: ProtocolType>(
    value: Value,
    schema: &CompiledSchema,
) -> Result<T, ProtocolError> {
    let value = current_version::<T>(value)?;
    let violations = schema.violations(&value);
    converted(value, violations)
}

/// `value` in the shape of `T`'s current version: as it is, or upgraded from an older one.
fn current_version<T: ProtocolType>(value: Value) -> Result<Value, ProtocolError> {
    match (check_version::<T>(&value)?, T::VERSION_FIELD) {
        (Some(older), Some(field)) => {
            let mut upgraded =
                T::upgrade(value, older).map_err(|message| ProtocolError::NotUpgraded {
                    type_name: T::NAME,
                    from: older,
                    to: T::VERSION,
                    message,
                })?;
            if let Some(fields) = upgraded.as_object_mut() {
                fields.insert(field.to_owned(), Value::from(T::VERSION));
            }
            Ok(upgraded)
        }
        _ => Ok(value),
    }
}

/// `value` as a `T` once it broke no schema rule, checked for `T`'s own invariants.
fn converted<T: ProtocolType>(
    value: Value,
    violations: Vec<Violation>,
) -> Result<T, ProtocolError> {
    if !violations.is_empty() {
        return Err(ProtocolError::Invalid {
            type_name: T::NAME,
            violations,
        });
    }
    let parsed: T = serde_json::from_value(value).map_err(|err| ProtocolError::Invalid {
        type_name: T::NAME,
        violations: vec![Violation::new("/", "deserialize", err.to_string())],
    })?;
    let violations = parsed.check();
    if violations.is_empty() {
        Ok(parsed)
    } else {
        Err(ProtocolError::Invalid {
            type_name: T::NAME,
            violations,
        })
    }
}

/// Turns one schema error into violations. Our tagged unions become `oneOf`/`anyOf` whose
/// bare error ("not valid under any of the schemas") tells a model nothing; when the tag
/// selects exactly one branch, that branch's own errors are reported instead, and when the
/// tag matches no branch, the error names the tag and lists the values it may take.
fn explain(error: &jsonschema::ValidationError<'_>, out: &mut Vec<Violation>) {
    use jsonschema::error::ValidationErrorKind;
    let branches = match error.kind() {
        ValidationErrorKind::OneOfNotValid { context } | ValidationErrorKind::AnyOf { context } => {
            context
        }
        _ => {
            out.push(violation_from(error));
            return;
        }
    };
    let is_tag_mismatch = |branch_error: &jsonschema::ValidationError<'_>| {
        matches!(branch_error.kind(), ValidationErrorKind::Constant { .. })
    };
    let selected: Vec<&Vec<jsonschema::ValidationError<'static>>> = branches
        .iter()
        .filter(|branch| !branch.iter().any(is_tag_mismatch))
        .collect();
    if let [only] = selected.as_slice() {
        for branch_error in only.iter() {
            explain(branch_error, out);
        }
        return;
    }
    let mut expected_tags = Vec::new();
    let mut tag_path = None;
    for branch_error in branches.iter().flatten() {
        if let ValidationErrorKind::Constant { expected_value } = branch_error.kind() {
            expected_tags.push(expected_value.to_string());
            tag_path = Some(branch_error.instance_path().to_string());
        }
    }
    match tag_path {
        Some(path) if selected.is_empty() => {
            let found = error
                .instance()
                .pointer(
                    path.strip_prefix(&error.instance_path().to_string())
                        .unwrap_or_default(),
                )
                .map(Value::to_string)
                .unwrap_or_default();
            out.push(Violation::new(
                pointer_or_root(path),
                "oneOf",
                format!(
                    "{found} is not a known variant; expected one of {}",
                    expected_tags.join(", ")
                ),
            ));
        }
        _ => out.push(violation_from(error)),
    }
}

fn violation_from(error: &jsonschema::ValidationError<'_>) -> Violation {
    Violation::new(
        pointer_or_root(error.instance_path().to_string()),
        error.kind().keyword(),
        error.to_string(),
    )
}

fn pointer_or_root(pointer: String) -> String {
    if pointer.is_empty() {
        "/".to_owned()
    } else {
        pointer
    }
}

/// `Ok(Some(v))` for a document of the older version `v` that is still read, `Ok(None)`
/// for one of the current version (or none the schema will not refuse), and the refusal of
/// any other.
fn check_version<T: ProtocolType>(value: &Value) -> Result<Option<u32>, ProtocolError> {
    let Some(field) = T::VERSION_FIELD else {
        return Ok(None);
    };
    match value.get(field) {
        // A missing or non-integer version is a schema violation, reported as such.
        None => Ok(None),
        Some(found) if found.as_u64() == Some(u64::from(T::VERSION)) => Ok(None),
        Some(found)
            if found
                .as_u64()
                .and_then(|found| u32::try_from(found).ok())
                .is_some_and(|found| T::OLDER_VERSIONS.contains(&found)) =>
        {
            Ok(found.as_u64().and_then(|found| u32::try_from(found).ok()))
        }
        Some(found) if found.is_u64() || found.is_string() || found.is_f64() => {
            Err(ProtocolError::UnsupportedVersion {
                type_name: T::NAME,
                field,
                found: found.to_string(),
                supported: T::VERSION,
                older: T::OLDER_VERSIONS.to_vec(),
            })
        }
        Some(_) => Ok(None),
    }
}

/// Implements [`ProtocolType`] for unversioned types with no invariants beyond their schema.
macro_rules! plain_protocol_types {
    ($($ty:ty),* $(,)?) => {
        $(
            impl $crate::validate::ProtocolType for $ty {
                const NAME: &'static str = stringify!($ty);
            }
        )*
    };
}
pub(crate) use plain_protocol_types;

/// A JSON Schema built at run time (an add-on tool's parameters), compiled once and checked
/// with the same path-and-rule reporting as the derived schemas.
pub struct CompiledSchema {
    validator: jsonschema::Validator,
}

impl fmt::Debug for CompiledSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CompiledSchema")
    }
}

impl CompiledSchema {
    /// Compiles `schema`; the error says why it is not a usable JSON Schema.
    pub fn compile(schema: &Value) -> Result<Self, String> {
        jsonschema::validator_for(schema)
            .map(|validator| Self { validator })
            .map_err(|err| err.to_string())
    }

    /// Every rule `value` breaks, with its path; empty when it conforms.
    pub fn violations(&self, value: &Value) -> Vec<Violation> {
        let mut violations = Vec::new();
        for error in self.validator.iter_errors(value) {
            explain(&error, &mut violations);
        }
        violations
    }
}
