//! Step executors and their registry: one executor per [`ActionType`], all running inside
//! Blender through [`GnBlender`] (so on Blender's main thread).

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use viga_protocol::gn::{ActionType, CustomActionType, GnResponse, GnStep};
use viga_protocol::{CompiledSchema, parse_json, parse_json_against};

use crate::{GnBlender, GnError};

/// A Geometry Nodes modifier the run works on.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Target {
    pub object: String,
    pub modifier: String,
    pub group: String,
}

/// What executors share across the steps of one run.
#[derive(Debug, Clone, Default)]
pub struct ExecContext {
    /// The modifier GN_OPS edit; set by `ensure_target` (and by NODE_TREE steps) and kept
    /// across steps and rounds.
    pub current: Option<Target>,
    /// Every target the run created or edited. The gates check these, and only these may be
    /// new modifiers and node groups.
    pub targets: Vec<Target>,
}

impl ExecContext {
    /// Makes `target` current and remembers it.
    pub fn touch(&mut self, target: Target) {
        if !self.targets.contains(&target) {
            self.targets.push(target.clone());
            self.targets.sort();
        }
        self.current = Some(target);
    }
}

/// What a step did, for the step record and the model.
#[derive(Debug, Clone, PartialEq)]
pub struct StepOutcome {
    /// One line for people and the model.
    pub message: String,
    /// The executor's structured answer (per-op results, change counts, snippet output).
    pub detail: Value,
}

/// Runs one kind of step. Implement it to add an action type; register it with
/// [`ExecutorRegistry::register_action_type`] (a new type, with the schema of its payload)
/// or [`ExecutorRegistry::register_executor`] (another executor for a type).
#[async_trait]
pub trait StepExecutor: Send + Sync {
    async fn execute(
        &self,
        blender: &GnBlender,
        context: &mut ExecContext,
        step: &GnStep,
    ) -> Result<StepOutcome, GnError>;
}

/// A new action type, as the model is told of it: its name on the wire, what it does, and
/// the JSON Schema its `payload` must follow.
#[derive(Debug, Clone, PartialEq)]
pub struct ActionDeclaration {
    name: CustomActionType,
    description: String,
    payload_schema: Value,
}

impl ActionDeclaration {
    /// `name` like the built-in ones (`SCATTER_PRESET`: capital letters, digits and
    /// underscores, not a built-in name); `payload_schema` a JSON Schema (draft 2020-12; its
    /// `$defs` are kept, under the type's name). Either that cannot be used is an error
    /// saying why.
    pub fn new(
        name: &str,
        description: impl Into<String>,
        payload_schema: Value,
    ) -> Result<Self, GnError> {
        let name =
            CustomActionType::new(name).map_err(|err| GnError::ActionType(err.to_string()))?;
        CompiledSchema::compile(&payload_schema).map_err(|why| {
            GnError::ActionType(format!(
                "the payload schema of {} is not a usable JSON Schema: {why}",
                name.as_str()
            ))
        })?;
        Ok(Self {
            name,
            description: description.into(),
            payload_schema,
        })
    }

    /// [`ActionDeclaration::new`] with the payload schema derived from `P`.
    pub fn for_payload<P: JsonSchema>(
        name: &str,
        description: impl Into<String>,
    ) -> Result<Self, GnError> {
        Self::new(name, description, viga_protocol::schema_of::<P>())
    }

    pub fn name(&self) -> &CustomActionType {
        &self.name
    }

    /// The step's branch of the reply schema: `{"id", "type": <name>, "payload"}` like the
    /// built-in steps, the payload's own `$defs` moved to `defs` under `<name>.`.
    fn step_schema(&self, defs: &mut Map<String, Value>) -> Value {
        let prefix = format!("{}.", self.name.as_str());
        let mut payload = self.payload_schema.clone();
        if let Some(fields) = payload.as_object_mut() {
            fields.remove("$schema");
            if let Some(Value::Object(own)) = fields.remove("$defs") {
                for (key, mut schema) in own {
                    rebase_refs(&mut schema, &prefix);
                    defs.insert(format!("{prefix}{key}"), schema);
                }
            }
        }
        rebase_refs(&mut payload, &prefix);
        let mut step = json!({
            "additionalProperties": false,
            "properties": {
                "id": {"type": "string"},
                "payload": payload,
                "type": {"const": self.name.as_str(), "type": "string"},
            },
            "required": ["type", "id", "payload"],
            "type": "object",
        });
        if !self.description.is_empty() {
            step["description"] = Value::String(self.description.clone());
        }
        step
    }
}

/// Points the payload schema's local references (`#/$defs/X`) at its definitions' new
/// place in the reply schema (`#/$defs/<prefix>X`).
fn rebase_refs(schema: &mut Value, prefix: &str) {
    match schema {
        Value::Object(fields) => {
            for (key, value) in fields.iter_mut() {
                match (key.as_str(), value) {
                    ("$ref", Value::String(target)) => {
                        if let Some(name) = target.strip_prefix("#/$defs/") {
                            *target = format!("#/$defs/{prefix}{name}");
                        }
                    }
                    (_, value) => rebase_refs(value, prefix),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| rebase_refs(item, prefix)),
        _ => {}
    }
}

/// The schema a run's replies are checked against: the step protocol's own, plus a branch
/// per registered action type. Built once per run from the registry.
#[derive(Debug, Clone)]
pub struct ReplySchema {
    schema: Value,
    /// Compiled when the registry declares types of its own; the built-in schema's validator
    /// is compiled once per process by viga-protocol.
    compiled: Option<Arc<CompiledSchema>>,
}

impl ReplySchema {
    /// The step protocol's own schema, with the built-in action types only.
    pub fn built_in() -> Self {
        Self {
            schema: viga_protocol::schema_of::<GnResponse>(),
            compiled: None,
        }
    }

    /// The JSON Schema, as the model is given it.
    pub fn schema(&self) -> &Value {
        &self.schema
    }

    /// Parses and validates one reply: version, schema (an unknown type is named with the
    /// types there are), unique step ids.
    pub fn parse(&self, text: &str) -> Result<GnResponse, viga_protocol::ProtocolError> {
        match &self.compiled {
            Some(compiled) => parse_json_against::<GnResponse>(text, compiled),
            None => parse_json::<GnResponse>(text),
        }
    }
}

/// The executors of a run, by action type, and the action types registered beside the
/// built-in ones.
#[derive(Clone, Default)]
pub struct ExecutorRegistry {
    executors: BTreeMap<ActionType, Arc<dyn StepExecutor>>,
    declared: BTreeMap<CustomActionType, ActionDeclaration>,
}

impl std::fmt::Debug for ExecutorRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.executors.keys()).finish()
    }
}

impl ExecutorRegistry {
    /// The three built-in executors, Python under `python`.
    pub fn with_defaults(python: PythonPolicy) -> Self {
        let mut registry = Self::default();
        registry.register_executor(ActionType::NodeTree, Arc::new(NodeTreeExecutor));
        registry.register_executor(ActionType::GnOps, Arc::new(GnOpsExecutor));
        registry.register_executor(ActionType::Python, Arc::new(PythonExecutor::new(python)));
        registry
    }

    /// Registers (or replaces, returning the old one) the executor of an action type. A
    /// registered type named here without a declaration takes any JSON as its payload;
    /// [`ExecutorRegistry::register_action_type`] gives it a schema.
    pub fn register_executor(
        &mut self,
        action_type: ActionType,
        executor: Arc<dyn StepExecutor>,
    ) -> Option<Arc<dyn StepExecutor>> {
        if let ActionType::Custom(name) = &action_type
            && !self.declared.contains_key(name)
        {
            let any = ActionDeclaration {
                name: name.clone(),
                description: String::new(),
                payload_schema: Value::Bool(true),
            };
            self.declared.insert(name.clone(), any);
        }
        self.executors.insert(action_type, executor)
    }

    /// Registers a new action type with its executor (replacing an earlier declaration and
    /// executor of that name, returning the old executor): from then on the reply schema of
    /// a run with this registry has a branch for it, so a step of this type validates (its
    /// payload against the declared schema) and runs.
    ///
    /// A crate of its own adds `SCATTER_PRESET`, a scatter written as one step, which its
    /// executor runs as the built-in ops:
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// use async_trait::async_trait;
    /// use serde::Deserialize;
    /// use serde_json::json;
    /// use viga_gn::run::parse_reply_with;
    /// use viga_gn::{
    ///     ActionDeclaration, ExecContext, ExecutorRegistry, GnBlender, GnError, GnOpsExecutor,
    ///     PythonPolicy, StepExecutor, StepOutcome,
    /// };
    /// use viga_protocol::gn::GnStep;
    ///
    /// /// Points on an object's faces, so many per square metre.
    /// #[derive(Deserialize, schemars::JsonSchema)]
    /// #[serde(deny_unknown_fields)]
    /// struct ScatterPreset {
    ///     object: String,
    ///     density: f64,
    /// }
    ///
    /// struct ScatterPresetExecutor;
    ///
    /// #[async_trait]
    /// impl StepExecutor for ScatterPresetExecutor {
    ///     async fn execute(
    ///         &self,
    ///         blender: &GnBlender,
    ///         context: &mut ExecContext,
    ///         step: &GnStep,
    ///     ) -> Result<StepOutcome, GnError> {
    ///         let GnStep::Custom(custom) = step else {
    ///             return Err(GnError::Step(format!("{} is no SCATTER_PRESET step", step.id())));
    ///         };
    ///         // Validated against the declared schema before the step existed.
    ///         let preset: ScatterPreset = serde_json::from_value(custom.payload.clone())
    ///             .map_err(|err| GnError::Step(err.to_string()))?;
    ///         let ops = json!({"id": custom.id, "type": "GN_OPS", "payload": {"ops": [
    ///             {"op": "ensure_target", "object": preset.object, "modifier": "Scatter"},
    ///             {"op": "add_node", "id": "scatter",
    ///              "bl_idname": "GeometryNodeDistributePointsOnFaces"},
    ///             {"op": "set_input", "node": "scatter", "socket": "Density",
    ///              "value": preset.density},
    ///         ]}});
    ///         let ops: GnStep =
    ///             serde_json::from_value(ops).map_err(|err| GnError::Step(err.to_string()))?;
    ///         GnOpsExecutor.execute(blender, context, &ops).await
    ///     }
    /// }
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let mut registry = ExecutorRegistry::with_defaults(PythonPolicy::safe());
    /// let declaration = ActionDeclaration::for_payload::<ScatterPreset>(
    ///     "SCATTER_PRESET",
    ///     "Scatter points on an object's faces.",
    /// )?;
    /// registry.register_action_type(declaration, Arc::new(ScatterPresetExecutor));
    /// let replies = registry.reply_schema()?;
    ///
    /// // A reply using it validates...
    /// let reply = r#"{"version": 1, "done": true, "steps": [{"id": "s1",
    ///     "type": "SCATTER_PRESET", "payload": {"object": "Plane", "density": 20}}]}"#;
    /// let (reply, _) = parse_reply_with(reply, &replies).map_err(GnError::Step)?;
    ///
    /// // ...and runs (here on a stand-in Blender that answers the ops as Blender would).
    /// let blender = viga_testkit::blender::FakeBlender::new();
    /// blender.answer("execute", json!({"stdout": format!("VIGA_GN_RESULT {}", json!({
    ///     "ok": true, "value": {
    ///         "target": {"object": "Plane", "modifier": "Scatter", "group": "Scatter"},
    ///         "results": [{"op": "ensure_target", "changed": true},
    ///                     {"op": "add_node", "changed": true},
    ///                     {"op": "set_input", "changed": true}]}})),
    ///     "stderr": "", "duration_ms": 1.0}));
    /// let blender = GnBlender::new(Arc::new(blender));
    /// let mut context = ExecContext::default();
    /// let outcome = registry.execute(&blender, &mut context, &reply.steps[0]).await?;
    /// assert_eq!(outcome.message, "3 ops, 3 changed the tree");
    /// assert_eq!(context.current.map(|target| target.modifier), Some("Scatter".to_owned()));
    ///
    /// // A payload its schema refuses, and a type nobody registered, are refused before
    /// // anything runs; the refusal names the types there are.
    /// let bad = r#"{"version": 1, "done": true, "steps": [{"id": "s1",
    ///     "type": "SCATTER_PRESET", "payload": {"object": "Plane"}}]}"#;
    /// assert!(parse_reply_with(bad, &replies).unwrap_err().contains("density"));
    /// let unknown = r#"{"version": 1, "done": true, "steps": [{"id": "s1",
    ///     "type": "EXPLODE", "payload": {}}]}"#;
    /// let refused = parse_reply_with(unknown, &replies).unwrap_err();
    /// assert!(refused.contains(r#""NODE_TREE", "GN_OPS", "PYTHON", "SCATTER_PRESET""#), "{refused}");
    /// # Ok::<(), GnError>(())
    /// # }).unwrap();
    /// ```
    pub fn register_action_type(
        &mut self,
        declaration: ActionDeclaration,
        executor: Arc<dyn StepExecutor>,
    ) -> Option<Arc<dyn StepExecutor>> {
        let action_type = ActionType::Custom(declaration.name.clone());
        self.declared.insert(declaration.name.clone(), declaration);
        self.executors.insert(action_type, executor)
    }

    /// The types a step may have: the built-in ones, then the registered ones by name.
    pub fn action_types(&self) -> Vec<ActionType> {
        let declared = self.declared.keys().cloned().map(ActionType::Custom);
        ActionType::BUILT_IN.into_iter().chain(declared).collect()
    }

    /// The reply schema of a run with this registry: the step protocol's derived schema
    /// (byte for byte, when no type was registered) with one step branch per registered
    /// type.
    pub fn reply_schema(&self) -> Result<ReplySchema, GnError> {
        if self.declared.is_empty() {
            return Ok(ReplySchema::built_in());
        }
        let mut schema = viga_protocol::schema_of::<GnResponse>();
        let mut defs = Map::new();
        let branches: Vec<Value> = self
            .declared
            .values()
            .map(|declaration| declaration.step_schema(&mut defs))
            .collect();
        let Some(all_defs) = schema.get_mut("$defs").and_then(Value::as_object_mut) else {
            return Err(GnError::ActionType(
                "the step protocol's schema has no $defs to add registered types to".to_owned(),
            ));
        };
        all_defs.extend(defs);
        let Some(Value::Array(steps)) = all_defs.get_mut("GnStep").and_then(|s| s.get_mut("oneOf"))
        else {
            return Err(GnError::ActionType(
                "the step protocol's schema has no GnStep branches to add registered types to"
                    .to_owned(),
            ));
        };
        steps.extend(branches);
        let compiled = CompiledSchema::compile(&schema).map_err(|why| {
            GnError::ActionType(format!(
                "the reply schema with the registered types does not compile: {why}"
            ))
        })?;
        Ok(ReplySchema {
            schema,
            compiled: Some(Arc::new(compiled)),
        })
    }

    pub async fn execute(
        &self,
        blender: &GnBlender,
        context: &mut ExecContext,
        step: &GnStep,
    ) -> Result<StepOutcome, GnError> {
        let action_type = step.action_type();
        let Some(executor) = self.executors.get(&action_type) else {
            return Err(GnError::NoExecutor {
                action_type: action_type.name().to_owned(),
                registered: self.executors.keys().map(|t| t.name().to_owned()).collect(),
            });
        };
        executor.execute(blender, context, step).await
    }
}

fn wrong_step(expected: &str, step: &GnStep) -> GnError {
    GnError::Step(format!(
        "the {expected} executor was handed step {:?} of type {}",
        step.id(),
        step.action_type()
    ))
}

fn to_value<T: Serialize>(value: &T) -> Result<Value, GnError> {
    serde_json::to_value(value).map_err(|err| GnError::Decode {
        function: "serialize step".to_owned(),
        message: err.to_string(),
    })
}

/// Declares a whole node tree; nodes are reconciled by id, so re-applying changes nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NodeTreeExecutor;

#[derive(Deserialize)]
struct NodeTreeReply {
    target: Target,
    changes: BTreeMap<String, u64>,
}

#[async_trait]
impl StepExecutor for NodeTreeExecutor {
    async fn execute(
        &self,
        blender: &GnBlender,
        context: &mut ExecContext,
        step: &GnStep,
    ) -> Result<StepOutcome, GnError> {
        let GnStep::NodeTree { payload, .. } = step else {
            return Err(wrong_step("NODE_TREE", step));
        };
        let reply: NodeTreeReply = blender
            .call("apply_node_tree", &json!({"payload": to_value(payload)?}))
            .await?;
        let changed: Vec<String> = reply
            .changes
            .iter()
            .filter(|(_, count)| **count > 0)
            .map(|(what, count)| format!("{what} {count}"))
            .collect();
        let message = format!(
            "{} on {:?}: {}",
            reply.target.modifier,
            reply.target.object,
            if changed.is_empty() {
                "already as declared, nothing changed".to_owned()
            } else {
                changed.join(", ")
            }
        );
        context.touch(reply.target);
        Ok(StepOutcome {
            message,
            detail: to_value(&reply.changes)?,
        })
    }
}

/// Applies ordered, idempotent edits to the current target.
#[derive(Debug, Clone, Copy, Default)]
pub struct GnOpsExecutor;

#[derive(Debug, Deserialize, Serialize)]
struct OpResult {
    op: String,
    changed: bool,
}

#[derive(Deserialize)]
struct OpsReply {
    target: Option<Target>,
    results: Vec<OpResult>,
}

#[async_trait]
impl StepExecutor for GnOpsExecutor {
    async fn execute(
        &self,
        blender: &GnBlender,
        context: &mut ExecContext,
        step: &GnStep,
    ) -> Result<StepOutcome, GnError> {
        let GnStep::GnOps { payload, .. } = step else {
            return Err(wrong_step("GN_OPS", step));
        };
        let args = json!({"target": context.current, "ops": to_value(&payload.ops)?});
        let reply: OpsReply = blender.call("apply_ops", &args).await?;
        if let Some(target) = reply.target {
            context.touch(target);
        }
        let changed = reply.results.iter().filter(|r| r.changed).count();
        Ok(StepOutcome {
            message: format!("{} ops, {changed} changed the tree", reply.results.len()),
            detail: to_value(&reply.results)?,
        })
    }
}

/// How PYTHON steps run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PythonMode {
    /// The AST policy and restricted builtins of `python/gn_safe.py`. Advisory: the real
    /// boundary is the worker process.
    Safe,
    /// Plain `exec` with full builtins.
    Trusted,
}

/// The Python mode of a run. Trusted mode cannot be built without both an explicit setting
/// and a confirmation for this run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PythonPolicy {
    mode: PythonMode,
}

impl Default for PythonPolicy {
    fn default() -> Self {
        Self::safe()
    }
}

impl PythonPolicy {
    pub fn safe() -> Self {
        Self {
            mode: PythonMode::Safe,
        }
    }

    /// `allowed_by_setting`: the user turned trusted Python on in their settings.
    /// `confirmed_for_run`: the user confirmed it for this run. Both are required.
    pub fn trusted(allowed_by_setting: bool, confirmed_for_run: bool) -> Result<Self, GnError> {
        match (allowed_by_setting, confirmed_for_run) {
            (true, true) => Ok(Self {
                mode: PythonMode::Trusted,
            }),
            (false, _) => Err(GnError::TrustedNotAllowed {
                missing: "the setting is off (turn it on explicitly, e.g. --trusted-python)",
            }),
            (true, false) => Err(GnError::TrustedNotAllowed {
                missing: "this run was not confirmed",
            }),
        }
    }

    pub fn mode(&self) -> PythonMode {
        self.mode
    }
}

/// Runs PYTHON steps under a [`PythonPolicy`].
#[derive(Debug, Clone, Copy)]
pub struct PythonExecutor {
    policy: PythonPolicy,
}

impl PythonExecutor {
    pub fn new(policy: PythonPolicy) -> Self {
        Self { policy }
    }
}

#[derive(Deserialize)]
struct PythonReply {
    output: String,
}

#[async_trait]
impl StepExecutor for PythonExecutor {
    async fn execute(
        &self,
        blender: &GnBlender,
        _context: &mut ExecContext,
        step: &GnStep,
    ) -> Result<StepOutcome, GnError> {
        let GnStep::Python { payload, .. } = step else {
            return Err(wrong_step("PYTHON", step));
        };
        let args = json!({"code": payload.code, "mode": self.policy.mode()});
        let reply: PythonReply = blender.call("run_python", &args).await?;
        Ok(StepOutcome {
            message: format!(
                "snippet ran ({:?} mode), {} characters of output",
                self.policy.mode(),
                reply.output.chars().count()
            ),
            detail: json!({"output": reply.output}),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trusted_needs_the_setting_and_the_confirmation() {
        assert!(PythonPolicy::trusted(false, true).is_err());
        assert!(PythonPolicy::trusted(true, false).is_err());
        assert!(PythonPolicy::trusted(false, false).is_err());
        let trusted = PythonPolicy::trusted(true, true).unwrap();
        assert_eq!(trusted.mode(), PythonMode::Trusted);
        assert_eq!(PythonPolicy::default().mode(), PythonMode::Safe);
    }

    struct Nothing;

    #[async_trait]
    impl StepExecutor for Nothing {
        async fn execute(
            &self,
            _blender: &GnBlender,
            _context: &mut ExecContext,
            step: &GnStep,
        ) -> Result<StepOutcome, GnError> {
            Ok(StepOutcome {
                message: format!("{} did nothing", step.id()),
                detail: Value::Null,
            })
        }
    }

    /// With nothing registered, the model gets the step protocol's own schema, byte for byte.
    #[test]
    fn the_built_in_reply_schema_is_the_derived_one() {
        let registry = ExecutorRegistry::with_defaults(PythonPolicy::safe());
        let replies = registry.reply_schema().unwrap();
        assert_eq!(
            replies.schema().to_string(),
            viga_protocol::schema_of::<GnResponse>().to_string()
        );
    }

    /// A payload schema's own definitions move under the type's name, and its references
    /// follow them, so two registered types may both define `Item`.
    #[test]
    fn payload_definitions_keep_their_references() {
        let payload = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {"items": {"type": "array", "items": {"$ref": "#/$defs/Item"}}},
            "required": ["items"],
            "$defs": {"Item": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}
        });
        let mut registry = ExecutorRegistry::with_defaults(PythonPolicy::safe());
        for name in ["FIRST", "SECOND"] {
            let declaration = ActionDeclaration::new(name, "", payload.clone()).unwrap();
            registry.register_action_type(declaration, Arc::new(Nothing));
        }
        let replies = registry.reply_schema().unwrap();
        assert!(replies.schema()["$defs"]["FIRST.Item"].is_object());
        assert!(replies.schema()["$defs"]["SECOND.Item"].is_object());
        let good = json!({"version": 1, "done": false, "steps": [
            {"id": "a", "type": "FIRST", "payload": {"items": [{"n": 1}]}}]});
        let parsed = replies.parse(&good.to_string()).unwrap();
        assert_eq!(parsed.steps[0].action_type().name(), "FIRST");
        let bad = json!({"version": 1, "done": false, "steps": [
            {"id": "a", "type": "SECOND", "payload": {"items": [{"n": "one"}]}}]});
        let refused = replies.parse(&bad.to_string()).unwrap_err().to_string();
        assert!(refused.contains("/steps/0/payload/items/0/n"), "{refused}");
        // The built-in parse never takes a registered type.
        assert!(crate::run::parse_reply(&good.to_string()).is_err());
    }

    #[test]
    fn bad_declarations_and_unknown_types_say_what_there_is() {
        let name = ActionDeclaration::new("scatter", "", json!({})).unwrap_err();
        assert!(name.to_string().contains("capital letter"), "{name}");
        let builtin = ActionDeclaration::new("PYTHON", "", json!({})).unwrap_err();
        assert!(builtin.to_string().contains("built-in"), "{builtin}");
        let schema = ActionDeclaration::new("X", "", json!({"type": 7})).unwrap_err();
        assert!(
            schema.to_string().contains("not a usable JSON Schema"),
            "{schema}"
        );
        let mut registry = ExecutorRegistry::default();
        registry.register_executor(ActionType::GnOps, Arc::new(Nothing));
        let custom = ActionType::named("LATER").unwrap();
        registry.register_executor(custom.clone(), Arc::new(Nothing));
        assert_eq!(
            registry.action_types().last().map(ActionType::name),
            Some("LATER")
        );
        let step: GnStep =
            serde_json::from_value(json!({"id": "p", "type": "PYTHON", "payload": {"code": ""}}))
                .unwrap();
        let blender = GnBlender::new(Arc::new(viga_testkit::blender::FakeBlender::new()));
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let err = runtime
            .block_on(registry.execute(&blender, &mut ExecContext::default(), &step))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "no executor is registered for PYTHON steps; the registered types are GN_OPS, LATER"
        );
        assert!(err.is_step_failure());
    }

    #[test]
    fn touching_a_target_keeps_one_entry_each() {
        let mut context = ExecContext::default();
        let target = Target {
            object: "Plane".into(),
            modifier: "GN".into(),
            group: "GN".into(),
        };
        context.touch(target.clone());
        context.touch(target.clone());
        assert_eq!(context.targets, vec![target.clone()]);
        assert_eq!(context.current, Some(target));
    }
}
