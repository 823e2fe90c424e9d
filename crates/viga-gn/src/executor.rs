//! Step executors and their registry: one executor per [`ActionType`], all running inside
//! Blender through [`GnBlender`] (so on Blender's main thread).

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use viga_protocol::gn::{ActionType, GnStep};

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
/// [`ExecutorRegistry::register_executor`].
#[async_trait]
pub trait StepExecutor: Send + Sync {
    async fn execute(
        &self,
        blender: &GnBlender,
        context: &mut ExecContext,
        step: &GnStep,
    ) -> Result<StepOutcome, GnError>;
}

/// The executors of a run, by action type.
#[derive(Clone, Default)]
pub struct ExecutorRegistry {
    executors: BTreeMap<ActionType, Arc<dyn StepExecutor>>,
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

    /// Registers (or replaces, returning the old one) the executor of an action type.
    pub fn register_executor(
        &mut self,
        action_type: ActionType,
        executor: Arc<dyn StepExecutor>,
    ) -> Option<Arc<dyn StepExecutor>> {
        self.executors.insert(action_type, executor)
    }

    pub async fn execute(
        &self,
        blender: &GnBlender,
        context: &mut ExecContext,
        step: &GnStep,
    ) -> Result<StepOutcome, GnError> {
        let executor = self
            .executors
            .get(&step.action_type())
            .ok_or(GnError::NoExecutor(step.action_type()))?;
        executor.execute(blender, context, step).await
    }
}

fn wrong_step(expected: &str, step: &GnStep) -> GnError {
    GnError::Step(format!(
        "the {expected} executor was handed step {:?} of type {:?}",
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
