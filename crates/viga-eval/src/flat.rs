//! What the two benchmarks scored on pictures of a 2D document share (SlideBench and pages):
//! the per-instance result, its summary with the reference-free judge's columns, the
//! instance selection check and the agent's run on one instance.

use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use viga_provider::Provider;

use crate::EvalError;
use crate::slidebench::judge::{CRITERIA, DesignJudgement};
use crate::summary::{Column, Summary, mean};

/// One instance's result (`scores.json`): whether the program ran, why not, the benchmark's
/// own figures `F` and the judge's ratings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlatScores<F> {
    pub instance: String,
    pub system: String,
    /// The program ran (the deck was saved with a first slide, the page loaded).
    pub executed: bool,
    /// Why it did not, when it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    #[serde(flatten)]
    pub figures: F,
    /// The judge's, when there is a judge and the program executed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<DesignJudgement>,
}

impl<F: Default> FlatScores<F> {
    /// A result with nothing executed yet.
    pub fn new(instance: &str, system: &str) -> Self {
        Self {
            instance: instance.to_owned(),
            system: system.to_owned(),
            executed: false,
            failure: None,
            figures: F::default(),
            judge: None,
        }
    }
}

/// The summary of `all` (the results of one system): the execution rate, the columns
/// `columns` makes from the executed results, and with a judge its four criteria, each the
/// mean over the executed results it judged (0-100, 5 = 100).
pub(crate) fn summarise<F>(
    benchmark: &str,
    system: &str,
    judge: Option<String>,
    selected: usize,
    all: &[FlatScores<F>],
    columns: impl FnOnce(&[&FlatScores<F>]) -> Vec<Column>,
) -> Summary {
    let executed: Vec<&FlatScores<F>> = all.iter().filter(|scores| scores.executed).collect();
    let mut figures = columns(&executed);
    if judge.is_some() {
        figures.extend(CRITERIA.iter().map(|(criterion, _)| {
            let values = executed
                .iter()
                .filter_map(|s| s.judge.as_ref()?.percent(criterion));
            Column::new(format!("judge {criterion}"), mean(values), 1)
        }));
    }
    let mut notes = Vec::new();
    if selected > all.len() {
        notes.push(format!(
            "{} selected instance(s) have no result of this system yet (a harness failure, another shard's, or a run still going): rerun the same command to finish them.",
            selected - all.len()
        ));
    }
    Summary {
        benchmark: benchmark.to_owned(),
        system: system.to_owned(),
        judge,
        selected,
        instances: all.len(),
        executed: executed.len(),
        execution_rate: if all.is_empty() {
            0.0
        } else {
            100.0 * executed.len() as f64 / all.len() as f64
        },
        columns: figures,
        notes,
    }
}

/// The results of `system` among `names` in `out` (read, so a damaged one is reported).
pub(crate) fn results<F: serde::de::DeserializeOwned>(
    out: &Path,
    names: impl Iterator<Item = String>,
    system: &str,
) -> Result<Vec<FlatScores<F>>, EvalError> {
    let mut all = Vec::new();
    for name in names {
        let path = out.join(name).join(crate::scores::SCORES_FILE);
        if path.is_file() {
            let scores: FlatScores<F> = crate::scores::read_json(&path)?;
            if scores.system == system {
                all.push(scores);
            }
        }
    }
    Ok(all)
}

/// Every instance `names` asks for was `found`, and something was.
pub(crate) fn check_selection(
    data: &Path,
    found: &[&str],
    names: Option<&[String]>,
    layout: &'static str,
) -> Result<(), EvalError> {
    if let Some(missing) = names
        .into_iter()
        .flatten()
        .find(|name| !found.contains(&name.as_str()))
    {
        return Err(EvalError::NoSuchInstance {
            name: missing.clone(),
            data: data.to_path_buf(),
        });
    }
    if found.is_empty() {
        return Err(EvalError::NoInstances {
            data: data.to_path_buf(),
            layout,
        });
    }
    Ok(())
}

pub(crate) fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The VIGA loop on one instance of a 2D benchmark, its run folders in `scratch/runs`.
pub(crate) struct AgentRun<'a> {
    pub instance: &'a str,
    pub provider: &'a Arc<dyn Provider>,
    pub scratch: &'a Path,
}

impl AgentRun<'_> {
    pub(crate) fn harness(&self, err: impl std::fmt::Display) -> EvalError {
        EvalError::Harness {
            instance: self.instance.to_owned(),
            message: err.to_string(),
        }
    }

    /// The run's settings for `task` (the scratch folder made).
    pub(crate) fn config(
        &self,
        task: &str,
        mode: &str,
        agent: &crate::agent::AgentProposer,
    ) -> Result<viga_core::RunConfig, EvalError> {
        std::fs::create_dir_all(self.scratch).map_err(|err| EvalError::io(self.scratch, err))?;
        let mut config = viga_core::RunConfig::new(task);
        config.mode = mode.to_owned();
        config.max_iterations = agent.max_iterations;
        if let Some(limit) = agent.program_timeout {
            config.program_timeout = limit;
        }
        config.time_limit = agent.time_limit;
        config.provider = self.provider.name().to_owned();
        config.model = self.provider.model().to_owned();
        Ok(config)
    }

    /// Runs the loop to its end and gives its final program.
    pub(crate) async fn final_program(
        &self,
        config: viga_core::RunConfig,
        domain: Arc<dyn viga_core::Domain>,
    ) -> Result<Option<String>, EvalError> {
        let run = viga_core::start(
            config,
            Arc::clone(self.provider),
            domain,
            &self.scratch.join("runs"),
        )
        .map_err(|err| self.harness(err))?;
        let outcome = run.wait().await.map_err(|err| self.harness(err))?;
        Ok(outcome.final_code)
    }
}
