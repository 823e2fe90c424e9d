//! The tools a role is offered in a run: the loop's own (`execute_code`, `undo_last_step`,
//! `make_plan`, `end_process`) and the domain's. The loop answers its own; everything else
//! goes to the domain. A name nobody offers is answered with the names that are.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use viga_protocol::message::ToolSpec;
use viga_skills::generator::{EndGeneration, MakePlan};
use viga_skills::registry::parameters_of;
use viga_skills::verifier::EndVerification;
use viga_skills::{Tool, ToolError, ToolOutput, ToolRegistry};

use crate::CoreError;
use crate::domain::{Domain, ProgramFormat, ToolRole};

/// The generator's tool that runs a program; the loop runs it (see `tool_generator`).
pub(crate) const EXECUTE_CODE: &str = "execute_code";
/// The generator's tool that goes back to the state before its last program.
pub(crate) const UNDO_LAST_STEP: &str = "undo_last_step";

/// The generator's tool that fits its program's numbers to the targets by search.
pub(crate) const REFINE_NUMBERS: &str = "refine_numbers";

/// The most programs one `refine_numbers` call may render, and its default.
pub(crate) const REFINE_MAX_BUDGET: u32 = 120;
const REFINE_DEFAULT_BUDGET: u32 = 60;

/// `refine_numbers`' arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RefineArgs {
    /// Program lines (from 1) whose numbers may move; leave out to fit every number. Numbers
    /// on a line ending in a `# viga: keep` comment never move.
    #[serde(default)]
    pub lines: Option<Vec<usize>>,
    /// How many programs the search may render (default 60, at most 120).
    #[serde(default)]
    pub budget: Option<u32>,
}

impl viga_protocol::ProtocolType for RefineArgs {
    const NAME: &'static str = "RefineArgs";
}

impl RefineArgs {
    /// The budget asked for, within its bounds: at least 2 (the program and one move).
    pub(crate) fn budget(&self) -> u32 {
        self.budget
            .unwrap_or(REFINE_DEFAULT_BUDGET)
            .clamp(2, REFINE_MAX_BUDGET)
    }
}

/// `execute_code`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ProgramArgs {
    /// The whole program; every program runs from the same starting state.
    pub code: String,
}

impl viga_protocol::ProtocolType for ProgramArgs {
    const NAME: &'static str = "ProgramArgs";
}

/// `undo_last_step`'s arguments: none.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NoArgs {}

impl viga_protocol::ProtocolType for NoArgs {
    const NAME: &'static str = "NoArgs";
}

pub(crate) struct OfferedTools {
    role: ToolRole,
    /// Tools the loop answers through their `Control` (plan, end).
    own: ToolRegistry<()>,
    /// Tools the loop runs itself before anything reaches a registry.
    intercepted: Vec<ToolSpec>,
    domain: Vec<ToolSpec>,
}

impl OfferedTools {
    /// The generator's tools: `execute_code`, `undo_last_step`, `end_process`, `make_plan`
    /// when the run plans each iteration, and the domain's.
    pub(crate) fn generator(
        domain: &dyn Domain,
        format: &ProgramFormat,
        plan: bool,
    ) -> Result<Self, CoreError> {
        let mut own = ToolRegistry::<()>::new();
        let mut tools: Vec<Arc<dyn Tool<()>>> = vec![Arc::new(EndGeneration)];
        if plan {
            tools.push(Arc::new(MakePlan));
        }
        for tool in tools {
            own.register(tool)
                .map_err(|err| CoreError::Tool(err.to_string()))?;
        }
        let worker = domain.worker_name();
        let mut intercepted = vec![
            ToolSpec {
                name: EXECUTE_CODE.to_owned(),
                description: format!(
                    "Run {} in {worker} from the starting state (every program starts from the same state, so send the whole program each time) and report stdout, stderr and any exception with its line.",
                    format.noun
                ),
                parameters: parameters_of::<ProgramArgs>(),
            },
            ToolSpec {
                name: UNDO_LAST_STEP.to_owned(),
                description: "Go back to the result of the program before your last one (the starting state when there is none); that program becomes the current one.".to_owned(),
                parameters: parameters_of::<NoArgs>(),
            },
        ];
        if domain.can_refine() {
            intercepted.push(ToolSpec {
                name: REFINE_NUMBERS.to_owned(),
                description: "Fit the numbers of your current program (the last that ran without error) to the target pictures by search, with renders in the loop: write the structure (which objects, nodes, counts) and let this tune positions, sizes, colours and counts. It keeps objects resting on what they rested on and upright things upright; it moves only the lines you name (all when you name none), never a line ending in `# viga: keep`. The fitted program becomes the current program; you get its changes, the loss before and after, and its renders.".to_owned(),
                parameters: parameters_of::<RefineArgs>(),
            });
        }
        Self::new(ToolRole::Generator, own, intercepted, domain)
    }

    /// The verifier's tools: `end_process` and the domain's.
    pub(crate) fn verifier(domain: &dyn Domain) -> Result<Self, CoreError> {
        let mut own = ToolRegistry::<()>::new();
        own.register(Arc::new(EndVerification))
            .map_err(|err| CoreError::Tool(err.to_string()))?;
        Self::new(ToolRole::Verifier, own, Vec::new(), domain)
    }

    fn new(
        role: ToolRole,
        own: ToolRegistry<()>,
        intercepted: Vec<ToolSpec>,
        domain: &dyn Domain,
    ) -> Result<Self, CoreError> {
        let domain_specs = domain.tools(role);
        for spec in &domain_specs {
            let clashes = own.get(&spec.name).is_some()
                || intercepted.iter().any(|own| own.name == spec.name);
            if clashes {
                return Err(CoreError::Config(format!(
                    "the {} domain offers the {} a tool named {:?}, which the loop offers itself; rename the domain's tool",
                    domain.name(),
                    role.as_str(),
                    spec.name
                )));
            }
        }
        Ok(Self {
            role,
            own,
            intercepted,
            domain: domain_specs,
        })
    }

    /// Every tool's spec, by name.
    pub(crate) fn specs(&self) -> Vec<ToolSpec> {
        let mut specs: Vec<ToolSpec> = self
            .own
            .specs()
            .into_iter()
            .chain(self.intercepted.iter().cloned())
            .chain(self.domain.iter().cloned())
            .collect();
        specs.sort_by(|a, b| a.name.cmp(&b.name));
        specs
    }

    pub(crate) fn offers(&self, name: &str) -> bool {
        self.specs().iter().any(|spec| spec.name == name)
    }

    /// Whether `name` is one of the domain's tools (which may look at the worker's state).
    pub(crate) fn is_domain_tool(&self, name: &str) -> bool {
        self.domain.iter().any(|spec| spec.name == name)
    }

    /// Runs a tool the loop does not intercept: its own through their registry, the
    /// domain's through the domain; a name nobody offers goes back to the model with the
    /// names that are offered.
    pub(crate) async fn invoke(
        &self,
        domain: &dyn Domain,
        name: &str,
        arguments: Value,
    ) -> Result<ToolOutput, ToolError> {
        if self.own.get(name).is_some() {
            return self.own.invoke(&(), name, arguments).await;
        }
        if self.is_domain_tool(name) {
            return domain.call_tool(self.role, name, arguments).await;
        }
        Err(ToolError::Recoverable(format!(
            "there is no tool named {name:?}; the tools you have are: {}",
            self.specs()
                .iter()
                .map(|spec| spec.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )))
    }
}
