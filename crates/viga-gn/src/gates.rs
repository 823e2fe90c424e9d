//! The five verification gates. Blender evaluates all of them (`verify` in
//! `python/gn_lib.py`); the run decides which are required. The two "unexpected" gates
//! compare the scene with a [`Baseline`] taken before the run started.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::json;
use viga_protocol::gn::{GateName, GateReport};

use crate::{ExecContext, GnBlender, GnError};

/// The modifiers and node groups that existed before the run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Baseline {
    /// Object name to its modifier names.
    pub modifiers: BTreeMap<String, Vec<String>>,
    pub node_groups: Vec<String>,
}

impl Baseline {
    pub async fn take(blender: &GnBlender) -> Result<Self, GnError> {
        blender.call("baseline", &json!({})).await
    }
}

/// Which gates must pass before `done: true` is accepted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateConfig {
    pub required: BTreeSet<GateName>,
}

impl Default for GateConfig {
    /// All five.
    fn default() -> Self {
        Self {
            required: [
                GateName::SingleGroupOutput,
                GateName::OutputConnected,
                GateName::NoModifierError,
                GateName::NoUnexpectedNewModifier,
                GateName::NoUnexpectedNewNodeGroup,
            ]
            .into(),
        }
    }
}

/// One gate's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateResult {
    pub passed: bool,
    pub messages: Vec<String>,
}

/// All five verdicts, and the report the model sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateCheck {
    pub results: BTreeMap<GateName, GateResult>,
    /// The required gates only: `success` is false when any of them failed.
    pub report: GateReport,
    /// Failures of gates that are not required, as warnings.
    pub advisory: Vec<String>,
}

/// Evaluates the gates on the run's targets.
pub async fn check_gates(
    blender: &GnBlender,
    baseline: &Baseline,
    context: &ExecContext,
    config: &GateConfig,
) -> Result<GateCheck, GnError> {
    let allowed_modifiers: Vec<_> = context
        .targets
        .iter()
        .map(|t| json!({"object": t.object, "modifier": t.modifier}))
        .collect();
    let allowed_groups: Vec<_> = context.targets.iter().map(|t| &t.group).collect();
    let args = json!({
        "targets": context.targets,
        "baseline": baseline,
        "allowed": {"modifiers": allowed_modifiers, "node_groups": allowed_groups},
    });
    let results: BTreeMap<GateName, GateResult> = blender.call("verify", &args).await?;
    Ok(summarize(results, config))
}

fn summarize(results: BTreeMap<GateName, GateResult>, config: &GateConfig) -> GateCheck {
    let mut failed_gates = Vec::new();
    let mut messages = Vec::new();
    let mut advisory = Vec::new();
    for (gate, result) in &results {
        if result.passed {
            continue;
        }
        let name = wire_name(*gate);
        let named = result.messages.iter().map(|m| format!("{name}: {m}"));
        if config.required.contains(gate) {
            failed_gates.push(*gate);
            messages.extend(named);
        } else {
            advisory.extend(named);
        }
    }
    let report = GateReport {
        success: failed_gates.is_empty(),
        failed_gates,
        messages,
    };
    GateCheck {
        results,
        report,
        advisory,
    }
}

/// The gate's name as the model sees it (`OUTPUT_CONNECTED`).
pub fn wire_name(gate: GateName) -> String {
    match serde_json::to_value(gate) {
        Ok(serde_json::Value::String(name)) => name,
        _ => format!("{gate:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdicts(failing: &[GateName]) -> BTreeMap<GateName, GateResult> {
        GateConfig::default()
            .required
            .into_iter()
            .map(|gate| {
                let passed = !failing.contains(&gate);
                let messages = if passed { vec![] } else { vec!["bad".into()] };
                (gate, GateResult { passed, messages })
            })
            .collect()
    }

    #[test]
    fn only_required_gates_fail_the_report() {
        let mut config = GateConfig::default();
        config.required.remove(&GateName::NoModifierError);
        let check = summarize(
            verdicts(&[GateName::NoModifierError, GateName::OutputConnected]),
            &config,
        );
        assert!(!check.report.success);
        assert_eq!(check.report.failed_gates, vec![GateName::OutputConnected]);
        assert_eq!(check.report.messages, vec!["OUTPUT_CONNECTED: bad"]);
        assert_eq!(check.advisory, vec!["NO_MODIFIER_ERROR: bad"]);
        let clean = summarize(verdicts(&[]), &GateConfig::default());
        assert!(clean.report.success && clean.report.failed_gates.is_empty());
    }
}
