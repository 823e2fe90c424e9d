//! The Geometry Nodes assistant's step protocol (seed 003): the model answers with a
//! [`GnResponse`] of ordered steps, each executed by the executor registered for its type,
//! and the run is accepted only when the required verification gates pass ([`GateReport`]).

use std::collections::{BTreeMap, HashSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::validate::{ProtocolType, Violation};

/// One reply of the Geometry Nodes assistant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GnResponse {
    /// Must equal [`crate::PROTOCOL_VERSION`].
    pub version: u32,
    pub steps: Vec<GnStep>,
    /// True when the assistant believes the request is fulfilled; accepted only if the
    /// required gates pass.
    pub done: bool,
    #[serde(default)]
    pub final_message: String,
    #[serde(default)]
    pub meta: BTreeMap<String, Value>,
}

/// One step. The `type` tag picks the executor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", deny_unknown_fields)]
#[schemars(transform = one_of_the_built_in_steps)]
pub enum GnStep {
    #[serde(rename = "NODE_TREE")]
    NodeTree {
        id: String,
        payload: NodeTreePayload,
    },
    #[serde(rename = "GN_OPS")]
    GnOps { id: String, payload: GnOpsPayload },
    #[serde(rename = "PYTHON")]
    Python { id: String, payload: PythonPayload },
    /// A step of an action type registered at run time (an executor registry's own type).
    /// Its payload is checked against the schema registered with the type, so this variant
    /// is left out of the derived schema: a reply validated against the built-in schema
    /// alone never reaches it, and one validated against a registry's schema only with a
    /// type that registry declares.
    #[serde(untagged)]
    #[schemars(skip)]
    Custom(CustomStep),
}

/// The built-in steps' branches exclude each other by their tag, as the schema always said
/// (`oneOf`); the untagged [`GnStep::Custom`] makes schemars write `anyOf` although it
/// leaves that variant out.
fn one_of_the_built_in_steps(schema: &mut schemars::Schema) {
    if let Some(branches) = schema.remove("anyOf") {
        schema.insert("oneOf".to_owned(), branches);
    }
}

/// A step of a registered action type, as written on the wire: `{"id", "type", "payload"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CustomStep {
    pub id: String,
    #[serde(rename = "type")]
    pub action_type: CustomActionType,
    /// Checked against the type's registered payload schema before the step exists.
    pub payload: Value,
}

/// The executor kinds, as named on the wire.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub enum ActionType {
    #[serde(rename = "NODE_TREE")]
    NodeTree,
    #[serde(rename = "GN_OPS")]
    GnOps,
    #[serde(rename = "PYTHON")]
    Python,
    /// A type registered at run time; never one of the built-in names.
    #[serde(untagged)]
    Custom(CustomActionType),
}

impl ActionType {
    /// The built-in types, in the order the schema lists them.
    pub const BUILT_IN: [ActionType; 3] = [Self::NodeTree, Self::GnOps, Self::Python];

    /// The type named `name` on the wire: a built-in one, or a registered one when the name
    /// is written like the built-in names (`SCATTER_PRESET`).
    pub fn named(name: &str) -> Result<Self, BadActionTypeName> {
        match Self::BUILT_IN.iter().find(|builtin| builtin.name() == name) {
            Some(builtin) => Ok(builtin.clone()),
            None => CustomActionType::new(name).map(Self::Custom),
        }
    }

    /// The name as the model writes it.
    pub fn name(&self) -> &str {
        match self {
            Self::NodeTree => "NODE_TREE",
            Self::GnOps => "GN_OPS",
            Self::Python => "PYTHON",
            Self::Custom(custom) => custom.as_str(),
        }
    }
}

impl std::fmt::Display for ActionType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The name of an action type registered at run time: 1 to 64 characters of capital
/// letters, digits and underscores, starting with a letter, and none of the built-in names.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct CustomActionType(String);

/// A name that cannot be a registered action type, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name:?} cannot name an action type: {why}")]
pub struct BadActionTypeName {
    pub name: String,
    pub why: &'static str,
}

impl CustomActionType {
    /// The pattern every registered type's name matches (a JSON Schema `pattern`).
    pub const PATTERN: &'static str = "^[A-Z][A-Z0-9_]{0,63}$";

    pub fn new(name: &str) -> Result<Self, BadActionTypeName> {
        let bad = |why| {
            Err(BadActionTypeName {
                name: name.to_owned(),
                why,
            })
        };
        let mut chars = name.chars();
        if !chars.next().is_some_and(|first| first.is_ascii_uppercase()) {
            return bad("it must start with a capital letter A-Z");
        }
        if name.len() > 64 {
            return bad("it must be at most 64 characters long");
        }
        if !chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_') {
            return bad("it may hold only capital letters A-Z, digits and underscores");
        }
        if ActionType::BUILT_IN
            .iter()
            .any(|builtin| builtin.name() == name)
        {
            return bad("it is a built-in type");
        }
        Ok(Self(name.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for CustomActionType {
    type Error = BadActionTypeName;

    fn try_from(name: String) -> Result<Self, Self::Error> {
        Self::new(&name)
    }
}

impl From<CustomActionType> for String {
    fn from(name: CustomActionType) -> Self {
        name.0
    }
}

impl JsonSchema for CustomActionType {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "CustomActionType".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "An action type registered at run time.",
            "type": "string",
            "pattern": Self::PATTERN,
        })
    }
}

impl GnStep {
    pub fn id(&self) -> &str {
        match self {
            Self::NodeTree { id, .. } | Self::GnOps { id, .. } | Self::Python { id, .. } => id,
            Self::Custom(step) => &step.id,
        }
    }

    pub fn action_type(&self) -> ActionType {
        match self {
            Self::NodeTree { .. } => ActionType::NodeTree,
            Self::GnOps { .. } => ActionType::GnOps,
            Self::Python { .. } => ActionType::Python,
            Self::Custom(step) => ActionType::Custom(step.action_type.clone()),
        }
    }
}

/// A socket named by its name (or identifier) or by its position.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum SocketRef {
    Name(String),
    Index(u32),
}

/// A whole node tree, declared. Re-applying the same declaration changes nothing: nodes are
/// reconciled by `id` (stored as the node's name).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NodeTreePayload {
    /// The object carrying the modifier; the active object when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<String>,
    /// Name of the Geometry Nodes modifier to create or target.
    pub modifier: String,
    /// Name of the node group; derived from the modifier name when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Sockets of the group interface beyond the default Geometry in/out.
    #[serde(default)]
    pub interface: Vec<InterfaceSocket>,
    pub nodes: Vec<NodeSpec>,
    #[serde(default)]
    pub links: Vec<LinkSpec>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SocketDirection {
    Input,
    Output,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InterfaceSocket {
    pub name: String,
    pub direction: SocketDirection,
    /// Blender socket type, for example `NodeSocketFloat`.
    pub socket_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    /// Stable id of the node within the tree (becomes its name).
    pub id: String,
    /// Blender node type, for example `GeometryNodeMeshGrid`.
    pub bl_idname: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<[f32; 2]>,
    /// Default values of input sockets, by socket name or index.
    #[serde(default)]
    pub inputs: BTreeMap<String, Value>,
    /// Node properties such as `data_type` or `operation`.
    #[serde(default)]
    pub properties: BTreeMap<String, Value>,
    /// For the output node of a simulation or repeat zone: the id of its input node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paired_with: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    pub from_node: String,
    pub from_socket: SocketRef,
    pub to_node: String,
    pub to_socket: SocketRef,
}

/// Ordered, deterministic edits of the target node tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GnOpsPayload {
    pub ops: Vec<GnOp>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum GnOp {
    /// Select (creating when missing) the object's Geometry Nodes modifier and its group.
    EnsureTarget {
        object: String,
        modifier: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        group: Option<String>,
    },
    /// Make sure the group has exactly one Group Input and one Group Output node.
    EnsureSingleGroupIo,
    AddNode {
        id: String,
        bl_idname: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        location: Option<[f32; 2]>,
    },
    RemoveNode {
        id: String,
    },
    Link(LinkSpec),
    Unlink(LinkSpec),
    SetInput {
        node: String,
        socket: SocketRef,
        value: Value,
    },
    /// Remove nodes that do not contribute to the Group Output.
    CleanupUnused,
}

/// A snippet of Blender Python, run under the configured Python policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PythonPayload {
    pub code: String,
}

/// The states of a Geometry Nodes assistant run (seed 003 §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum GnRunState {
    Idle,
    Generating,
    RequestingContext,
    Applying,
    Verifying,
    Done,
    Error,
    Cancelled,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    Running,
    Succeeded,
    Failed,
}

/// The record of one applied step (seed 003 §5).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct StepRecord {
    /// The model reply (round) the step came from.
    pub round: u32,
    pub step_id: String,
    pub action_type: ActionType,
    pub status: StepStatus,
    /// Milliseconds since the Unix epoch.
    pub started_at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<u64>,
    #[serde(default)]
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The structural checks a Geometry Nodes result must pass.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum GateName {
    SingleGroupOutput,
    OutputConnected,
    NoModifierError,
    NoUnexpectedNewModifier,
    NoUnexpectedNewNodeGroup,
}

/// The outcome of the verification gates, sent back to the model when any failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GateReport {
    pub success: bool,
    pub failed_gates: Vec<GateName>,
    pub messages: Vec<String>,
}

/// A Geometry Nodes run's result, as a person's Blender takes it in (the bridge's
/// `import_gn_result`): the node groups to append from the .blend the run's worker saved,
/// and the Geometry Nodes modifiers to create or update. Written where model code ran, so
/// the bridge checks all of it, and none of it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GnResult {
    /// The node groups the run made or changed, by name: each is added, or replaces the
    /// scene's group of that name wherever that is used.
    pub node_groups: Vec<String>,
    pub modifiers: Vec<GnModifierResult>,
}

/// A Geometry Nodes modifier of a run's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GnModifierResult {
    pub object: String,
    pub modifier: String,
    /// One of the result's node groups.
    pub node_group: String,
    /// Input values by the modifier's key: a socket's identifier (`Socket_2`), or it with
    /// `_use_attribute` or `_attribute_name`.
    pub inputs: BTreeMap<String, GnInputValue>,
}

/// A modifier input's value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum GnInputValue {
    Boolean(bool),
    Integer(i64),
    Number(f64),
    Text(String),
    /// A vector, colour or rotation.
    Vector(Vec<f64>),
    Datablock(DatablockRef),
}

/// A datablock input: an object, collection, material or image of the scene, by name (none
/// when empty).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DatablockRef {
    pub kind: DatablockKind,
    pub name: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DatablockKind {
    Object,
    Collection,
    Material,
    Image,
}

/// What `import_gn_result` put into the scene, as one undo step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GnResultImported {
    /// The node groups now in the scene from the result.
    pub node_groups: Vec<String>,
    /// Those of them that replaced a group of the scene.
    pub replaced: Vec<String>,
    /// The modifiers created or updated, as `object/modifier`.
    pub modifiers: Vec<String>,
}

impl ProtocolType for GnResponse {
    const NAME: &'static str = "GnResponse";
    const VERSION_FIELD: Option<&'static str> = Some("version");

    fn check(&self) -> Vec<Violation> {
        let mut seen = HashSet::new();
        let mut violations = Vec::new();
        for (position, step) in self.steps.iter().enumerate() {
            if !seen.insert(step.id()) {
                violations.push(Violation::new(
                    format!("/steps/{position}/id"),
                    "unique",
                    format!(
                        "step id {:?} is used by an earlier step; step ids must be unique",
                        step.id()
                    ),
                ));
            }
        }
        violations
    }
}

crate::validate::plain_protocol_types!(GateReport);

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A step of a registered type reads and writes the same wire shape as a built-in one.
    #[test]
    fn a_custom_step_keeps_the_wire_shape() {
        let wire = json!({"id": "s", "type": "SCATTER_PRESET", "payload": {"count": 3}});
        let step: GnStep = serde_json::from_value(wire.clone()).unwrap();
        assert_eq!(step.id(), "s");
        assert_eq!(step.action_type().name(), "SCATTER_PRESET");
        assert_eq!(serde_json::to_value(&step).unwrap(), wire);
        let builtin: GnStep =
            serde_json::from_value(json!({"id": "p", "type": "PYTHON", "payload": {"code": "x"}}))
                .unwrap();
        assert_eq!(builtin.action_type(), ActionType::Python);
    }

    #[test]
    fn action_types_read_by_name_and_refuse_bad_names() {
        assert_eq!(ActionType::named("GN_OPS").unwrap(), ActionType::GnOps);
        let custom = ActionType::named("SCATTER_PRESET").unwrap();
        assert_eq!(
            serde_json::to_value(&custom).unwrap(),
            json!("SCATTER_PRESET")
        );
        let back: ActionType = serde_json::from_value(json!("SCATTER_PRESET")).unwrap();
        assert_eq!(back, custom);
        let builtin: ActionType = serde_json::from_value(json!("NODE_TREE")).unwrap();
        assert_eq!(builtin, ActionType::NodeTree);
        for bad in ["", "scatter", "9LIVES", "A-B", "PYTHON"] {
            assert!(CustomActionType::new(bad).is_err(), "{bad:?}");
        }
        assert!(serde_json::from_value::<ActionType>(json!("lower")).is_err());
    }
}
