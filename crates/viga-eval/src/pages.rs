//! Web pages: a system writes one HTML document per instance; it is loaded in Chromium in a
//! window of the target's size and its screenshot is scored against the target with PL
//! (BlenderGym's photometric loss) and N-CLIP (with CLIP weights), plus the reference-free
//! judge's four design criteria when a provider is given.
//!
//! The layout is ours: `DIR/<name>/task.txt` with `goal.html` (the page to reproduce, also
//! the oracle's answer; the target is its screenshot taken by the same Chromium that shows the
//! proposals) or `target.png` (a screenshot made elsewhere). Results go to `OUT/<name>/`
//! (`page.html`, `page.png`, `scores.json`) and `OUT/summary.json`, `OUT/report.md`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use viga_provider::Provider;
use viga_web::{Viewport, WebError, WebWorker};

use crate::EvalError;
use crate::judge::Judge;
use crate::slidebench::judge::{CRITERIA, DesignJudgement, judge_design};
use crate::slidebench::{AgentRun, check_selection, scored_before};

#[cfg(feature = "clip")]
use crate::clip::ClipBackend;
#[cfg(not(feature = "clip"))]
use crate::no_clip::ClipBackend;

const SUMMARY_FILE: &str = "summary.json";
const REPORT_FILE: &str = "report.md";
const SCORES_FILE: &str = "scores.json";

/// One page to make.
#[derive(Debug, Clone, PartialEq)]
pub struct PageInstance {
    pub name: String,
    pub task: String,
    /// The page to reproduce, when the instance has one.
    pub goal: Option<PathBuf>,
    /// A screenshot made elsewhere, used when there is no goal page.
    pub target: Option<PathBuf>,
}

/// The instances in `data`, by name; `names` keeps those named.
pub fn discover(data: &Path, names: Option<&[String]>) -> Result<Vec<PageInstance>, EvalError> {
    let mut folders: Vec<PathBuf> = std::fs::read_dir(data)
        .map_err(|err| EvalError::DataDir {
            path: data.to_path_buf(),
            message: err.to_string(),
        })?
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.join("task.txt").is_file())
        .collect();
    folders.sort();
    let mut instances = Vec::new();
    for folder in folders {
        let name = folder
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if names.is_some_and(|names| !names.contains(&name)) {
            continue;
        }
        let task_path = folder.join("task.txt");
        let task =
            std::fs::read_to_string(&task_path).map_err(|err| EvalError::io(&task_path, err))?;
        let goal = Some(folder.join("goal.html")).filter(|p| p.is_file());
        let target = Some(folder.join("target.png")).filter(|p| p.is_file());
        if goal.is_none() && target.is_none() {
            return Err(EvalError::io(
                &folder,
                "the instance has neither goal.html nor target.png; give one of them",
            ));
        }
        instances.push(PageInstance {
            name,
            task: task.trim().to_owned(),
            goal,
            target,
        });
    }
    let found: Vec<&str> = instances.iter().map(|i| i.name.as_str()).collect();
    check_selection(
        data,
        &found,
        names,
        "page instances (<name>/task.txt with goal.html or target.png)",
    )?;
    Ok(instances)
}

/// What a system needs to make one page.
#[derive(Debug)]
pub struct PageContext<'a> {
    pub worker: &'a Arc<WebWorker>,
    /// The target screenshot (PNG) and its window.
    pub target: &'a [u8],
    pub viewport: Viewport,
    pub scratch: &'a Path,
}

/// A system that writes a page.
#[async_trait]
pub trait PageProposer: Send + Sync {
    fn system(&self) -> String;
    async fn propose(
        &self,
        instance: &PageInstance,
        context: PageContext<'_>,
    ) -> Result<Option<String>, EvalError>;
}

/// `noop` answers an empty document; `oracle` the goal page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageBaseline {
    Noop,
    Oracle,
}

/// The noop baseline's page.
pub const NOOP_PAGE: &str =
    "<!DOCTYPE html><html><head><meta charset=\"utf-8\"></head><body></body></html>\n";

#[async_trait]
impl PageProposer for PageBaseline {
    fn system(&self) -> String {
        match self {
            Self::Noop => "noop".to_owned(),
            Self::Oracle => "oracle (the goal page)".to_owned(),
        }
    }

    async fn propose(
        &self,
        instance: &PageInstance,
        _context: PageContext<'_>,
    ) -> Result<Option<String>, EvalError> {
        match self {
            Self::Noop => Ok(Some(NOOP_PAGE.to_owned())),
            Self::Oracle => {
                let Some(goal) = &instance.goal else {
                    return Err(EvalError::Harness {
                        instance: instance.name.clone(),
                        message: "the oracle needs the instance's goal.html".to_owned(),
                    });
                };
                std::fs::read_to_string(goal)
                    .map(Some)
                    .map_err(|err| EvalError::io(goal, err))
            }
        }
    }
}

/// The VIGA loop with the page domain: the task text and the target screenshot, in a window
/// of the target's size; its final page is the proposal.
pub struct PageAgent {
    pub provider: Arc<dyn Provider>,
    pub max_iterations: u32,
    pub program_timeout: Duration,
}

impl std::fmt::Debug for PageAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.system())
    }
}

#[async_trait]
impl PageProposer for PageAgent {
    fn system(&self) -> String {
        format!(
            "agent ({}/{}, {} iterations)",
            self.provider.name(),
            self.provider.model(),
            self.max_iterations
        )
    }

    async fn propose(
        &self,
        instance: &PageInstance,
        context: PageContext<'_>,
    ) -> Result<Option<String>, EvalError> {
        let run = AgentRun {
            instance: &instance.name,
            provider: &self.provider,
            scratch: context.scratch,
        };
        let mut config = run.config(
            &instance.task,
            "pages",
            self.max_iterations,
            self.program_timeout,
        )?;
        let picture = context.scratch.join("target.png");
        crate::write_atomic(&picture, context.target)?;
        config.targets.push(viga_core::TargetSpec::picture(picture));
        let settings = viga_domain_page::PageSettings {
            viewport: context.viewport,
        };
        let domain = viga_domain_page::PageDomain::new(settings, Arc::clone(context.worker))
            .map_err(|err| run.harness(err))?;
        run.final_program(config, Arc::new(domain)).await
    }
}

/// One instance's result (`scores.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PageScores {
    pub instance: String,
    pub system: String,
    /// The page loaded (a page that never finishes loading or crashes did not).
    pub executed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// Photometric loss against the target (lower is better), when executed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pl: Option<f64>,
    /// 1 - cosine similarity of CLIP features (lower is better), with CLIP weights.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n_clip: Option<f64>,
    /// Requests the page made outside itself, all refused.
    #[serde(default)]
    pub refused_requests: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<DesignJudgement>,
}

#[derive(Debug)]
pub struct PageEvalConfig {
    pub data: PathBuf,
    pub out: PathBuf,
    pub instances: Option<Vec<String>>,
    pub judge: Option<Judge>,
    pub clip_weights: Option<PathBuf>,
    pub program_timeout: Duration,
}

/// Scores `system` on every selected instance, one after another in `worker`'s browser;
/// instances already scored for the same system are kept (resume).
pub async fn run(
    config: &PageEvalConfig,
    worker: Arc<WebWorker>,
    system: &dyn PageProposer,
) -> Result<PageSummary, EvalError> {
    let instances = discover(&config.data, config.instances.as_deref())?;
    let clip = match &config.clip_weights {
        Some(path) => Some(Arc::new(ClipBackend::load(path)?)),
        None => None,
    };
    let name = system.system();
    let mut all = Vec::with_capacity(instances.len());
    for instance in &instances {
        let folder = config.out.join(&instance.name);
        let done = scored_before(&folder, |scores: &PageScores| scores.system == name);
        if let Some(scores) = done {
            all.push(scores);
            continue;
        }
        std::fs::create_dir_all(&folder).map_err(|err| EvalError::io(&folder, err))?;
        let scores =
            score_instance(config, &worker, system, instance, &folder, clip.as_ref()).await?;
        crate::write_atomic(
            &folder.join(SCORES_FILE),
            &serde_json::to_vec_pretty(&scores).map_err(|err| EvalError::io(&folder, err))?,
        )?;
        all.push(scores);
    }
    let summary = summarise(
        &name,
        config.judge.as_ref().map(Judge::label),
        clip.is_some(),
        &all,
    );
    std::fs::create_dir_all(&config.out).map_err(|err| EvalError::io(&config.out, err))?;
    crate::write_atomic(
        &config.out.join(SUMMARY_FILE),
        &serde_json::to_vec_pretty(&summary).map_err(|err| EvalError::io(&config.out, err))?,
    )?;
    crate::write_atomic(&config.out.join(REPORT_FILE), markdown(&summary).as_bytes())?;
    Ok(summary)
}

fn web_error(instance: &PageInstance, err: WebError) -> EvalError {
    EvalError::Harness {
        instance: instance.name.clone(),
        message: format!("Chromium: {err}"),
    }
}

/// The target screenshot and its window: the goal page's, taken now, or the shipped one.
async fn target_of(
    worker: &WebWorker,
    instance: &PageInstance,
) -> Result<(Vec<u8>, Viewport), EvalError> {
    let size_of = |png: &[u8]| {
        viga_skills::metrics::image_size(png)
            .map(|(width, height)| Viewport { width, height })
            .map_err(|err| EvalError::Harness {
                instance: instance.name.clone(),
                message: format!("the target picture: {err}"),
            })
    };
    if let Some(goal) = &instance.goal {
        let html = std::fs::read_to_string(goal).map_err(|err| EvalError::io(goal, err))?;
        // The goal's window: the shipped screenshot's size, else the common default.
        let viewport = match &instance.target {
            Some(path) => size_of(&std::fs::read(path).map_err(|err| EvalError::io(path, err))?)?,
            None => viga_domain_page::DEFAULT_VIEWPORT,
        };
        let (_, shot) = worker
            .render(&html, viewport)
            .await
            .map_err(|err| web_error(instance, err))?;
        return Ok((shot.png, viewport));
    }
    let Some(path) = &instance.target else {
        return Err(EvalError::io(Path::new(&instance.name), "no target"));
    };
    let png = std::fs::read(path).map_err(|err| EvalError::io(path, err))?;
    let viewport = size_of(&png)?;
    Ok((png, viewport))
}

async fn score_instance(
    config: &PageEvalConfig,
    worker: &Arc<WebWorker>,
    system: &dyn PageProposer,
    instance: &PageInstance,
    folder: &Path,
    clip: Option<&Arc<ClipBackend>>,
) -> Result<PageScores, EvalError> {
    let (target, viewport) = target_of(worker, instance).await?;
    crate::write_atomic(&folder.join("target.png"), &target)?;
    let mut scores = PageScores {
        instance: instance.name.clone(),
        system: system.system(),
        executed: false,
        failure: None,
        pl: None,
        n_clip: None,
        refused_requests: 0,
        judge: None,
    };
    let context = PageContext {
        worker,
        target: &target,
        viewport,
        scratch: &folder.join("system"),
    };
    let Some(page) = system.propose(instance, context).await? else {
        scores.failure = Some("the system gave no page".to_owned());
        return Ok(scores);
    };
    crate::write_atomic(&folder.join("page.html"), page.as_bytes())?;
    let shot = match worker
        .load_within(&page, viewport, config.program_timeout)
        .await
    {
        Ok(_) => worker
            .screenshot(viga_web::Shot::default())
            .await
            .map_err(|err| web_error(instance, err))?,
        Err(err @ (WebError::Lost(_) | WebError::PageFailed(_) | WebError::BadRequest(_))) => {
            scores.failure = Some(err.to_string());
            return Ok(scores);
        }
        Err(err) => return Err(web_error(instance, err)),
    };
    scores.executed = true;
    scores.refused_requests = worker.page_report().await.refused_total;
    crate::write_atomic(&folder.join("page.png"), &shot.png)?;
    scores.pl = Some(
        viga_skills::metrics::photometric_loss(&shot.png, &target).map_err(|err| {
            EvalError::Harness {
                instance: instance.name.clone(),
                message: format!("PL: {err}"),
            }
        })?,
    );
    if let Some(clip) = clip {
        let decode = |png: &[u8]| {
            image::load_from_memory(png)
                .map(|picture| picture.to_rgb8())
                .map_err(|err| EvalError::Harness {
                    instance: instance.name.clone(),
                    message: format!("N-CLIP: {err}"),
                })
        };
        let (page, goal) = (decode(&shot.png)?, decode(&target)?);
        scores.n_clip = Some(
            clip.n_clip(&page, &goal)
                .map_err(|err| EvalError::Harness {
                    instance: instance.name.clone(),
                    message: format!("N-CLIP: {err}"),
                })?,
        );
    }
    if let Some(judge) = &config.judge {
        scores.judge = Some(judge_design(judge, "web page", &shot.png, &[], true).await);
    }
    Ok(scores)
}

/// The evaluation's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PageSummary {
    pub system: String,
    pub judge: Option<String>,
    pub instances: usize,
    pub executed: usize,
    pub execution_rate: f64,
    /// Mean PL over the executed pages.
    pub pl: Option<f64>,
    /// Mean N-CLIP over the executed pages; `None` without CLIP weights.
    pub n_clip: Option<f64>,
    /// Whether N-CLIP was computed at all (CLIP weights given).
    pub n_clip_available: bool,
    pub refused_requests: usize,
    pub judge_scores: Vec<(String, Option<f64>)>,
}

fn mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let values: Vec<f64> = values.collect();
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

pub fn summarise(
    system: &str,
    judge: Option<String>,
    n_clip_available: bool,
    all: &[PageScores],
) -> PageSummary {
    let executed: Vec<&PageScores> = all.iter().filter(|s| s.executed).collect();
    PageSummary {
        system: system.to_owned(),
        instances: all.len(),
        executed: executed.len(),
        execution_rate: if all.is_empty() {
            0.0
        } else {
            100.0 * executed.len() as f64 / all.len() as f64
        },
        pl: mean(executed.iter().filter_map(|s| s.pl)),
        n_clip: mean(executed.iter().filter_map(|s| s.n_clip)),
        n_clip_available,
        refused_requests: all.iter().map(|s| s.refused_requests).sum(),
        judge_scores: if judge.is_some() {
            CRITERIA
                .iter()
                .map(|(criterion, _)| {
                    let values = executed
                        .iter()
                        .filter_map(|s| s.judge.as_ref()?.percent(criterion));
                    ((*criterion).to_owned(), mean(values))
                })
                .collect()
        } else {
            Vec::new()
        },
        judge,
    }
}

pub fn markdown(summary: &PageSummary) -> String {
    let figure = |value: Option<f64>, digits: usize| {
        value.map_or("-".to_owned(), |v| format!("{v:.digits$}"))
    };
    let mut text = format!(
        "Pages: {} on {} page(s); execution rate {:.1}% ({} loaded); {} outside request(s) refused\n\n| PL | N-CLIP |\n|---|---|\n| {} | {} |\n",
        summary.system,
        summary.instances,
        summary.execution_rate,
        summary.executed,
        summary.refused_requests,
        figure(summary.pl, 6),
        if summary.n_clip_available {
            figure(summary.n_clip, 4)
        } else {
            "unavailable (no --clip-weights)".to_owned()
        },
    );
    if let Some(judge) = &summary.judge {
        text.push_str(&format!(
            "\n| reference-free (judge {judge}) | text | image | layout | color |\n|---|---|---|---|---|\n| mean, 0-100 |"
        ));
        for (_, score) in &summary.judge_scores {
            text.push_str(&format!(" {} |", figure(*score, 1)));
        }
        text.push('\n');
    }
    text
}
