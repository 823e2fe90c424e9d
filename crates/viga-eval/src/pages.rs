//! Web pages as a [`Benchmark`]: a system writes one HTML document per instance; it is loaded
//! in Chromium in a window of the target's size and its screenshot is scored against the
//! target with PL (BlenderGym's photometric loss) and N-CLIP (with CLIP weights), plus the
//! reference-free judge's four design criteria when a provider is given.
//!
//! The layout is ours: `DIR/<name>/task.txt` with `goal.html` (the page to reproduce, also
//! the oracle's answer; the target is its screenshot taken by the same Chromium that shows the
//! proposals) or `target.png` (a screenshot made elsewhere). Results go to `OUT/<name>/`
//! (`target.png`, `page.html`, `page.png`, `scores.json`); the one runner writes
//! `OUT/summary.json`, `OUT/report.md` and `OUT/report.html`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use viga_domain_page::{DEFAULT_VIEWPORT, PageDomain, PageSettings};
use viga_web::{Viewport, WebError, WebWorker};

use crate::EvalError;
use crate::agent::AgentProposer;
use crate::benchmark::{Attempt, Baseline, Benchmark, Context, Lent, Proposal, Proposer, Shelf};
use crate::flat::{AgentRun, FlatScores, check_selection};
use crate::judge::Judge;
use crate::slidebench::judge::judge_design;
use crate::summary::{Column, Report, Summary, mean};

#[cfg(feature = "clip")]
use crate::clip::ClipBackend;
#[cfg(not(feature = "clip"))]
use crate::no_clip::ClipBackend;

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

/// The noop baseline's page.
pub const NOOP_PAGE: &str =
    "<!DOCTYPE html><html><head><meta charset=\"utf-8\"></head><body></body></html>\n";

/// The pages' own figures in a result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PageFigures {
    /// Photometric loss against the target (lower is better), when executed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pl: Option<f64>,
    /// 1 - cosine similarity of CLIP features (lower is better), with CLIP weights.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n_clip: Option<f64>,
    /// Requests the page made outside itself, all refused.
    #[serde(default)]
    pub refused_requests: usize,
}

/// One page's result (`scores.json`).
pub type PageScores = FlatScores<PageFigures>;

/// The pages of a data folder, shown by the browsers on `workers`.
#[derive(Debug)]
pub struct PageBench {
    pub data: PathBuf,
    /// The instances named; all without.
    pub instances: Option<Vec<String>>,
    pub judge: Option<Judge>,
    /// N-CLIP's network; without it N-CLIP is unavailable.
    pub clip: Option<Arc<ClipBackend>>,
    pub program_timeout: Duration,
    pub workers: Arc<Shelf<WebWorker>>,
}

impl PageBench {
    /// CLIP loaded from `weights`, when given, for [`PageBench::clip`].
    pub fn load_clip(weights: Option<&Path>) -> Result<Option<Arc<ClipBackend>>, EvalError> {
        match weights {
            Some(path) => Ok(Some(Arc::new(ClipBackend::load(path)?))),
            None => Ok(None),
        }
    }
}

/// The target screenshot an instance is scored against, and its window.
#[derive(Debug)]
pub struct Target {
    png: Vec<u8>,
    path: PathBuf,
    viewport: Viewport,
}

#[async_trait]
impl Benchmark for PageBench {
    type Instance = PageInstance;
    type Worker = Lent<WebWorker>;
    type Target = Target;
    type Scores = PageScores;

    fn name(&self) -> &'static str {
        "pages"
    }

    fn instance_name(instance: &PageInstance) -> &str {
        &instance.name
    }

    fn discover(&self) -> Result<Vec<PageInstance>, EvalError> {
        discover(&self.data, self.instances.as_deref())
    }

    async fn acquire(&self) -> Result<Self::Worker, EvalError> {
        self.workers.acquire().await
    }

    fn containment(worker: &Self::Worker) -> Option<viga_blender::ContainmentStatus> {
        worker.containment()
    }

    fn finished(&self, _path: &Path, scores: &PageScores, system: &str) -> Result<bool, EvalError> {
        // Another system's result in the folder is made again, for this one.
        Ok(scores.system == system)
    }

    async fn prepare(
        &self,
        instance: &PageInstance,
        worker: &Self::Worker,
        dir: &Path,
    ) -> Result<Target, EvalError> {
        let (png, viewport) = target_of(worker.worker(), instance).await?;
        let path = dir.join("target.png");
        crate::write_atomic(&path, &png)?;
        Ok(Target {
            png,
            path,
            viewport,
        })
    }

    fn context(&self, target: &Target, worker: &Self::Worker, dir: &Path) -> Context<Self::Worker> {
        Context {
            worker: worker.clone(),
            goal: vec![target.path.clone()],
            scratch: dir.join("system"),
        }
    }

    async fn score(&self, attempt: Attempt<'_, Self>) -> Result<PageScores, EvalError> {
        score_page(self, attempt).await
    }

    fn report(&self, out: &Path, system: &str) -> Result<Report, EvalError> {
        let instances = self.discover()?;
        let names = instances.iter().map(|instance| instance.name.clone());
        let all = crate::flat::results(out, names, system)?;
        let summary = summarise(
            system,
            self.judge.as_ref().map(Judge::label),
            self.clip.is_some(),
            instances.len(),
            &all,
        );
        Report::new(self.name(), &summary, summary.table())
    }
}

#[async_trait]
impl Proposer<PageBench> for Baseline {
    fn system(&self) -> String {
        match self {
            Self::Noop => "noop".to_owned(),
            Self::Oracle => "oracle (the goal page)".to_owned(),
        }
    }

    async fn propose(
        &self,
        instance: &PageInstance,
        _context: Context<Lent<WebWorker>>,
    ) -> Result<Proposal, EvalError> {
        match self {
            Self::Noop => Ok(Proposal::code(Some(NOOP_PAGE.to_owned()))),
            Self::Oracle => {
                let Some(goal) = &instance.goal else {
                    return Err(EvalError::Harness {
                        instance: instance.name.clone(),
                        message: "the oracle needs the instance's goal.html".to_owned(),
                    });
                };
                std::fs::read_to_string(goal)
                    .map(|page| Proposal::code(Some(page)))
                    .map_err(|err| EvalError::io(goal, err))
            }
        }
    }
}

/// The VIGA loop with the page domain: the task text and the target screenshot, in a window
/// of the target's size; its final page is the proposal.
#[async_trait]
impl Proposer<PageBench> for AgentProposer {
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
        context: Context<Lent<WebWorker>>,
    ) -> Result<Proposal, EvalError> {
        let run = AgentRun {
            instance: &instance.name,
            provider: &self.provider,
            scratch: &context.scratch,
        };
        let mut config = run.config(&instance.task, "pages", self)?;
        let Some(picture) = context.goal.first() else {
            return Err(run.harness("the instance has no target picture"));
        };
        // The window is the target's size, as the benchmark shows the proposals in.
        let png = std::fs::read(picture).map_err(|err| EvalError::io(picture, err))?;
        let viewport = picture_size(&instance.name, &png)?;
        config
            .targets
            .push(viga_core::TargetSpec::picture(picture.clone()));
        let domain = PageDomain::new(
            PageSettings { viewport },
            Arc::clone(context.worker.worker()),
        )
        .map_err(|err| run.harness(err))?;
        Ok(Proposal::code(
            run.final_program(config, Arc::new(domain)).await?,
        ))
    }
}

/// The window of a picture's size.
fn picture_size(instance: &str, png: &[u8]) -> Result<Viewport, EvalError> {
    viga_skills::metrics::image_size(png)
        .map(|(width, height)| Viewport { width, height })
        .map_err(|err| EvalError::Harness {
            instance: instance.to_owned(),
            message: format!("the target picture: {err}"),
        })
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
    let size_of = |png: &[u8]| picture_size(&instance.name, png);
    if let Some(goal) = &instance.goal {
        let html = std::fs::read_to_string(goal).map_err(|err| EvalError::io(goal, err))?;
        // The goal's window: the shipped screenshot's size, else the common default.
        let viewport = match &instance.target {
            Some(path) => size_of(&std::fs::read(path).map_err(|err| EvalError::io(path, err))?)?,
            None => DEFAULT_VIEWPORT,
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

/// Loads the proposed page, and scores its screenshot against the target.
async fn score_page(
    bench: &PageBench,
    attempt: Attempt<'_, PageBench>,
) -> Result<PageScores, EvalError> {
    let Attempt {
        instance,
        target,
        proposal,
        worker,
        dir: folder,
        system,
        ..
    } = attempt;
    let worker = worker.worker();
    let Target {
        png: target,
        viewport,
        ..
    } = target;
    let mut scores = PageScores::new(&instance.name, system);
    let Some(page) = proposal.code else {
        scores.failure = Some("the system gave no page".to_owned());
        return Ok(scores);
    };
    crate::write_atomic(&folder.join("page.html"), page.as_bytes())?;
    let shot = match worker
        .load_within(&page, viewport, bench.program_timeout)
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
    scores.figures.refused_requests = worker.page_report().await.refused_total;
    crate::write_atomic(&folder.join("page.png"), &shot.png)?;
    scores.figures.pl = Some(
        viga_skills::metrics::photometric_loss(&shot.png, &target).map_err(|err| {
            EvalError::Harness {
                instance: instance.name.clone(),
                message: format!("PL: {err}"),
            }
        })?,
    );
    if let Some(clip) = &bench.clip {
        let decode = |png: &[u8]| {
            image::load_from_memory(png)
                .map(|picture| picture.to_rgb8())
                .map_err(|err| EvalError::Harness {
                    instance: instance.name.clone(),
                    message: format!("N-CLIP: {err}"),
                })
        };
        let (page, goal) = (decode(&shot.png)?, decode(&target)?);
        scores.figures.n_clip =
            Some(
                clip.n_clip(&page, &goal)
                    .map_err(|err| EvalError::Harness {
                        instance: instance.name.clone(),
                        message: format!("N-CLIP: {err}"),
                    })?,
            );
    }
    if let Some(judge) = &bench.judge {
        scores.judge = Some(judge_design(judge, "web page", &shot.png, &[], true).await);
    }
    Ok(scores)
}

/// Sums up the results of one system: execution rate, mean PL and N-CLIP over the executed
/// pages (N-CLIP unavailable without weights), the outside requests refused, and with a judge
/// its criteria.
pub fn summarise(
    system: &str,
    judge: Option<String>,
    n_clip_available: bool,
    selected: usize,
    all: &[PageScores],
) -> Summary {
    let refused: usize = all.iter().map(|s| s.figures.refused_requests).sum();
    let mut summary = crate::flat::summarise("pages", system, judge, selected, all, |executed| {
        vec![
            Column::new("PL", mean(executed.iter().filter_map(|s| s.figures.pl)), 6),
            if n_clip_available {
                Column::new(
                    "N-CLIP",
                    mean(executed.iter().filter_map(|s| s.figures.n_clip)),
                    4,
                )
            } else {
                Column::unavailable("N-CLIP", "no --clip-weights")
            },
            Column::new("refused requests", Some(refused as f64), 0),
        ]
    });
    summary.notes.insert(0, "PL (BlenderGym's photometric loss) and N-CLIP (1 - cosine similarity of CLIP ViT-B/32 features) against the target screenshot, means over the loaded pages, lower is better; refused requests: the outside requests the pages made, all refused, in total. The judge's criteria: means over the pages it judged, 0-100 (5 = 100).".to_owned());
    summary
}
