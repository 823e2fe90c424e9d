//! The manifest-driven end-to-end harness: each case sets up a scene in real Blender, runs
//! the assistant with scripted replies (or a real provider), and checks both the run's
//! protocol status and what ended up in the scene.
//!
//! `fixtures/gn/manifest.json` lists case files; a case file holds the prompt, the scene
//! setup, the replies (JSON objects, or strings sent verbatim to test refusals), a timeout
//! and the expectations.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use viga_blender::BlenderCommands as _;
use viga_protocol::bridge::SceneReset;
use viga_provider::scripted::{Expectation, Script, Turn};
use viga_provider::{
    FinishReason, ModelResponse, Provider, ProviderConfig, ScriptedProvider, build_provider,
};

use crate::run::{GnOutcome, GnRun, GnRunConfig, RunState};
use crate::{ExecutorRegistry, GnBlender, GnError, PythonPolicy};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub version: u32,
    /// Case files, relative to the manifest.
    pub cases: Vec<PathBuf>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    pub name: String,
    pub prompt: String,
    #[serde(default)]
    pub object: Option<String>,
    /// Python run on a factory-empty scene first; the default adds a mesh plane "Plane".
    #[serde(default)]
    pub setup: Option<String>,
    /// Scripted replies, in order. Absent when `provider` is set.
    #[serde(default)]
    pub replies: Vec<ScriptedReply>,
    /// A real provider instead of scripted replies.
    #[serde(default)]
    pub provider: Option<ProviderConfig>,
    #[serde(default = "default_timeout")]
    pub timeout_s: u64,
    #[serde(default = "default_rounds")]
    pub max_rounds: u32,
    pub expect: Expectations,
}

fn default_timeout() -> u64 {
    60
}

fn default_rounds() -> u32 {
    6
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedReply {
    /// What the request answered by this reply must contain (e.g. gate feedback).
    #[serde(default)]
    pub expect: Expectation,
    /// A JSON reply (sent as its text) or a string sent verbatim.
    pub reply: Value,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expectations {
    pub state: RunState,
    /// Objects that must exist.
    #[serde(default)]
    pub objects: Vec<String>,
    /// Modifiers that must exist, with node types their group must contain.
    #[serde(default)]
    pub modifiers: Vec<ExpectedModifier>,
    /// `object/modifier` names that must not exist.
    #[serde(default)]
    pub absent_modifiers: Vec<String>,
    #[serde(default)]
    pub min_gate_failures: u32,
    #[serde(default)]
    pub protocol_errors: u32,
    /// Text the run's error must contain.
    #[serde(default)]
    pub error_contains: Option<String>,
    #[serde(default)]
    pub rounds: Option<u32>,
    /// Steps that failed (and went back to the model).
    #[serde(default)]
    pub steps_failed: Option<u32>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectedModifier {
    pub object: String,
    pub modifier: String,
    #[serde(default)]
    pub node_types: Vec<String>,
}

/// The verdict on one case.
#[derive(Debug, Clone, Serialize)]
pub struct CaseResult {
    pub name: String,
    pub failures: Vec<String>,
    pub state: Option<RunState>,
}

impl CaseResult {
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

/// Reads the manifest and its cases.
pub fn load_manifest(path: &Path) -> Result<Vec<Case>, GnError> {
    let manifest: Manifest = read_json(path)?;
    if manifest.version != viga_protocol::PROTOCOL_VERSION {
        return Err(GnError::file(
            path,
            format!(
                "manifest version {} is not {}",
                manifest.version,
                viga_protocol::PROTOCOL_VERSION
            ),
        ));
    }
    let base = path.parent().unwrap_or(Path::new("."));
    manifest
        .cases
        .iter()
        .map(|case| read_json(&base.join(case)))
        .collect()
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, GnError> {
    let text = std::fs::read_to_string(path)
        .map_err(|err| GnError::file(path, format!("cannot read it: {err}")))?;
    serde_json::from_str(&text).map_err(|err| GnError::file(path, err))
}

const DEFAULT_SETUP: &str =
    "import bpy\nbpy.ops.mesh.primitive_plane_add(size=4.0)\nbpy.context.object.name = 'Plane'\n";

fn provider_for(case: &Case) -> Result<Arc<dyn Provider>, GnError> {
    if let Some(config) = &case.provider {
        return Ok(build_provider(config)?);
    }
    let turns = case
        .replies
        .iter()
        .map(|reply| Turn {
            expect: reply.expect.clone(),
            response: ModelResponse::text_only(
                match &reply.reply {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                },
                FinishReason::Stop,
            ),
            delay_ms: 0,
        })
        .collect();
    let script = Script {
        description: case.name.clone(),
        turns,
    };
    Ok(Arc::new(ScriptedProvider::new(
        format!("scripted:{}", case.name),
        script,
    )))
}

/// Runs one case on the given Blender (its scene is reset first).
pub async fn run_case(case: &Case, blender: &GnBlender, output: Option<&Path>) -> CaseResult {
    let mut result = CaseResult {
        name: case.name.clone(),
        failures: Vec::new(),
        state: None,
    };
    let setup = case.setup.as_deref().unwrap_or(DEFAULT_SETUP);
    match blender
        .transport()
        .execute(setup, Some(SceneReset::Factory), None)
        .await
    {
        Ok(done) if done.succeeded() => {}
        Ok(done) => {
            result
                .failures
                .push(format!("setup raised: {:?}", done.error));
            return result;
        }
        Err(err) => {
            result.failures.push(format!("setup failed: {err}"));
            return result;
        }
    }
    let provider = match provider_for(case) {
        Ok(provider) => provider,
        Err(err) => {
            result.failures.push(err.to_string());
            return result;
        }
    };
    let mut config = GnRunConfig::new(case.prompt.clone());
    config.object.clone_from(&case.object);
    config.max_rounds = case.max_rounds;
    config.output = output.map(Path::to_path_buf);
    let run = GnRun::new(
        config,
        provider,
        blender.clone(),
        ExecutorRegistry::with_defaults(PythonPolicy::safe()),
    );
    let outcome = match run_within(run, Duration::from_secs(case.timeout_s)).await {
        Ok(outcome) => outcome,
        Err(failure) => {
            result.failures.push(failure);
            return result;
        }
    };
    result.state = Some(outcome.state);
    check_outcome(&case.expect, &outcome, &mut result.failures);
    match blender.call::<Value>("scene_facts", &json!({})).await {
        Ok(facts) => check_scene(&case.expect, &facts, &mut result.failures),
        Err(err) => result
            .failures
            .push(format!("cannot read the scene: {err}")),
    }
    result
}

/// Runs the assistant within `limit`. A run that is waited out is cancelled and waited for,
/// so the next case has the scene to itself: a model call stops at once, a Blender step in
/// flight finishes first.
async fn run_within(run: GnRun, limit: Duration) -> Result<GnOutcome, String> {
    let run = run.start();
    let canceller = run.canceller();
    let finished = run.wait();
    tokio::pin!(finished);
    match tokio::time::timeout(limit, &mut finished).await {
        Ok(outcome) => outcome.map_err(|err| err.to_string()),
        Err(_) => {
            canceller.cancel();
            let _ = finished.await;
            Err(format!("timed out after {} s", limit.as_secs()))
        }
    }
}

fn check_outcome(expect: &Expectations, outcome: &GnOutcome, failures: &mut Vec<String>) {
    if outcome.state != expect.state {
        failures.push(format!(
            "state {:?}, expected {:?} (problem: {:?})",
            outcome.state,
            expect.state,
            outcome.problem()
        ));
    }
    let counters = &outcome.telemetry.counters;
    if counters.gate_failures < expect.min_gate_failures {
        failures.push(format!(
            "{} gate failures, expected at least {}",
            counters.gate_failures, expect.min_gate_failures
        ));
    }
    if counters.protocol_errors != expect.protocol_errors {
        failures.push(format!(
            "{} protocol errors, expected {}",
            counters.protocol_errors, expect.protocol_errors
        ));
    }
    if let Some(needle) = &expect.error_contains
        && !outcome.problem().unwrap_or("").contains(needle.as_str())
    {
        failures.push(format!(
            "error {:?} does not contain {needle:?}",
            outcome.problem()
        ));
    }
    if let Some(rounds) = expect.rounds
        && outcome.rounds != rounds
    {
        failures.push(format!("{} rounds, expected {rounds}", outcome.rounds));
    }
    if let Some(failed) = expect.steps_failed
        && counters.steps_failed != failed
    {
        failures.push(format!(
            "{} steps failed, expected {failed}",
            counters.steps_failed
        ));
    }
}

#[derive(Deserialize)]
struct Facts {
    objects: BTreeMap<String, ObjectFacts>,
}

#[derive(Deserialize)]
struct ObjectFacts {
    modifiers: BTreeMap<String, ModifierFacts>,
}

#[derive(Deserialize)]
struct ModifierFacts {
    node_types: Vec<String>,
}

fn check_scene(expect: &Expectations, facts: &Value, failures: &mut Vec<String>) {
    let facts: Facts = match serde_json::from_value(facts.clone()) {
        Ok(facts) => facts,
        Err(err) => {
            failures.push(format!("scene facts have an unexpected shape: {err}"));
            return;
        }
    };
    for object in &expect.objects {
        if !facts.objects.contains_key(object) {
            failures.push(format!("object {object:?} is missing"));
        }
    }
    for wanted in &expect.modifiers {
        let modifier = facts
            .objects
            .get(&wanted.object)
            .and_then(|o| o.modifiers.get(&wanted.modifier));
        let Some(modifier) = modifier else {
            failures.push(format!(
                "modifier {:?} on {:?} is missing",
                wanted.modifier, wanted.object
            ));
            continue;
        };
        for node_type in &wanted.node_types {
            if !modifier.node_types.contains(node_type) {
                failures.push(format!(
                    "modifier {:?} has no {node_type} node (has {:?})",
                    wanted.modifier, modifier.node_types
                ));
            }
        }
    }
    for absent in &expect.absent_modifiers {
        let present = absent.split_once('/').is_some_and(|(object, modifier)| {
            facts
                .objects
                .get(object)
                .is_some_and(|o| o.modifiers.contains_key(modifier))
        });
        if present {
            failures.push(format!("modifier {absent:?} should not exist"));
        }
    }
}
