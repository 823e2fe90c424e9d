//! SlideBench (AutoPresent): a system writes a python-pptx program for each slide of a
//! reference deck from its instruction; the program runs (execution rate), and its first
//! slide is scored against the reference slide with the benchmark's reference-based metrics
//! ([`metrics`]) and, with a provider, its reference-free judge ([`judge`]).
//!
//! The layout is SlideBench's `examples/`: `DIR/<deck>/<deck>.pptx` (the reference deck) and
//! `DIR/<deck>/slide_<n>/instruction.txt` (also `instruction_high_level.txt`,
//! `instruction_no_image.txt`) with the slide's pictures in `slide_<n>/media/`. Every result
//! goes to `OUT/<deck>/slide_<n>/`: `program.py`, `generated.pptx`, `generated.png` and
//! `scores.json`; `OUT/summary.json` and `OUT/report.md` sum them up.

pub mod judge;
pub mod metrics;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use viga_provider::Provider;
use viga_slides::{SlideBlocks, SlideWorker, SlidesError};

use self::judge::{CRITERIA, DesignJudgement, judge_design};
use self::metrics::{ReferenceScores, reference_scores};
use crate::EvalError;
use crate::judge::Judge;

/// The reference-based metrics, as the reports name them.
pub const REFERENCE_METRICS: [&str; 4] = ["match", "text", "color", "position"];
/// Width of the pictures of slides the judge sees and the results keep.
const PICTURE_WIDTH: u32 = 1280;
const SUMMARY_FILE: &str = "summary.json";
const REPORT_FILE: &str = "report.md";
const SCORES_FILE: &str = "scores.json";

/// Which instruction a system is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InstructionKind {
    /// `instruction.txt`: the detailed instruction.
    #[default]
    Detailed,
    /// `instruction_high_level.txt`.
    HighLevel,
    /// `instruction_no_image.txt`.
    NoImage,
}

impl InstructionKind {
    pub fn file(self) -> &'static str {
        match self {
            Self::Detailed => "instruction.txt",
            Self::HighLevel => "instruction_high_level.txt",
            Self::NoImage => "instruction_no_image.txt",
        }
    }
}

impl std::str::FromStr for InstructionKind {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "detailed" => Ok(Self::Detailed),
            "high_level" | "high-level" => Ok(Self::HighLevel),
            "no_image" | "no-image" => Ok(Self::NoImage),
            other => Err(format!(
                "unknown instruction {other:?}; use detailed, high_level or no_image"
            )),
        }
    }
}

/// One slide to make.
#[derive(Debug, Clone, PartialEq)]
pub struct SlideInstance {
    /// `<deck>/slide_<n>`.
    pub name: String,
    pub deck: String,
    /// 1-based, in the reference deck.
    pub slide: usize,
    pub reference_deck: PathBuf,
    pub instruction: String,
    /// The slide's pictures (`slide_<n>/media/`), which the programs may use.
    pub media: Option<PathBuf>,
    /// Whether the reference slide shows pictures (`media/image_*`): the judge's image
    /// criterion applies only then.
    pub has_pictures: bool,
}

/// The instances in `data`, ordered by deck and slide; `names` keeps those named
/// (`<deck>/slide_<n>`).
pub fn discover(
    data: &Path,
    instruction: InstructionKind,
    names: Option<&[String]>,
) -> Result<Vec<SlideInstance>, EvalError> {
    let data_error = |message: String| EvalError::DataDir {
        path: data.to_path_buf(),
        message,
    };
    // By its real path: programs (the oracle's) name the reference deck from their own
    // contained folder, which reaches it only by the path it is granted by.
    let data = &data
        .canonicalize()
        .map_err(|err| data_error(err.to_string()))?;
    let mut decks: Vec<PathBuf> = std::fs::read_dir(data)
        .map_err(|err| data_error(err.to_string()))?
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.is_dir())
        .collect();
    decks.sort();
    let mut instances = Vec::new();
    for folder in decks {
        let deck = file_name(&folder);
        let reference_deck = folder.join(format!("{deck}.pptx"));
        if !reference_deck.is_file() {
            continue;
        }
        let mut slides: Vec<(usize, PathBuf)> = std::fs::read_dir(&folder)
            .map_err(|err| EvalError::io(&folder, err))?
            .flatten()
            .filter_map(|entry| {
                let path = entry.path();
                let number = file_name(&path).strip_prefix("slide_")?.parse().ok()?;
                path.is_dir().then_some((number, path))
            })
            .collect();
        slides.sort();
        for (slide, dir) in slides {
            let name = format!("{deck}/slide_{slide}");
            if names.is_some_and(|names| !names.contains(&name)) {
                continue;
            }
            let instruction_path = dir.join(instruction.file());
            let text = std::fs::read_to_string(&instruction_path).map_err(|err| {
                EvalError::io(
                    &instruction_path,
                    format!("{err} (every slide folder needs {})", instruction.file()),
                )
            })?;
            let media = dir.join("media");
            let has_pictures = std::fs::read_dir(&media).is_ok_and(|entries| {
                entries
                    .flatten()
                    .any(|entry| file_name(&entry.path()).starts_with("image_"))
            });
            instances.push(SlideInstance {
                name,
                deck: deck.clone(),
                slide,
                reference_deck: reference_deck.clone(),
                instruction: text.trim().to_owned(),
                media: media.is_dir().then_some(media),
                has_pictures,
            });
        }
    }
    let found: Vec<&str> = instances.iter().map(|i| i.name.as_str()).collect();
    check_selection(
        data,
        &found,
        names,
        "SlideBench decks (<deck>/<deck>.pptx with slide_<n>/ folders)",
    )?;
    Ok(instances)
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

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// What a system under test needs to make one slide.
#[derive(Debug)]
pub struct SlideContext<'a> {
    pub worker: &'a Arc<SlideWorker>,
    /// The reference slide's picture (PNG), which VIGA's runner shows the agent.
    pub reference_picture: &'a [u8],
    /// Where the system may keep its own files for this instance (an agent's run folders).
    pub scratch: &'a Path,
}

/// A system that writes a slide's program.
#[async_trait]
pub trait SlideProposer: Send + Sync {
    /// Its name in reports.
    fn system(&self) -> String;
    /// The program for `instance`; `None` when the system has none to give.
    async fn propose(
        &self,
        instance: &SlideInstance,
        context: SlideContext<'_>,
    ) -> Result<Option<String>, EvalError>;
}

/// The baselines: `noop` saves a deck of one blank slide; `oracle` saves the reference slide
/// itself (the deck with every other slide removed), the harness's proof.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlideBaseline {
    Noop,
    Oracle,
}

/// The noop baseline's program.
pub const NOOP_PROGRAM: &str = "import os\nfrom pptx import Presentation\nprs = Presentation()\nprs.slides.add_slide(prs.slide_layouts[6])\nprs.save(os.environ[\"VIGA_DECK_PATH\"])\n";

/// The oracle's program for slide `slide` of `deck`: the reference deck with every other slide
/// dropped.
pub fn oracle_program(deck: &Path, slide: usize) -> String {
    format!(
        "import os\nfrom pptx import Presentation\nprs = Presentation({deck:?})\nslides = prs.slides._sldIdLst\nfor index, entry in reversed(list(enumerate(list(slides)))):\n    if index != {keep}:\n        prs.part.drop_rel(entry.rId)\n        slides.remove(entry)\nprs.save(os.environ[\"VIGA_DECK_PATH\"])\n",
        deck = deck.display().to_string(),
        keep = slide - 1,
    )
}

#[async_trait]
impl SlideProposer for SlideBaseline {
    fn system(&self) -> String {
        match self {
            Self::Noop => "noop".to_owned(),
            Self::Oracle => "oracle (the reference slide itself)".to_owned(),
        }
    }

    async fn propose(
        &self,
        instance: &SlideInstance,
        _context: SlideContext<'_>,
    ) -> Result<Option<String>, EvalError> {
        Ok(Some(match self {
            Self::Noop => NOOP_PROGRAM.to_owned(),
            Self::Oracle => oracle_program(&instance.reference_deck, instance.slide),
        }))
    }
}

/// The VIGA loop as the system: the instruction is the task, the slide's pictures the assets
/// it may use, and (as VIGA's runner does) the reference slide's picture the target, unless
/// `instruction_only`; its final program is the proposal.
pub struct SlideAgent {
    pub provider: Arc<dyn Provider>,
    pub max_iterations: u32,
    pub instruction_only: bool,
    pub program_timeout: Duration,
}

impl std::fmt::Debug for SlideAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.system())
    }
}

#[async_trait]
impl SlideProposer for SlideAgent {
    fn system(&self) -> String {
        format!(
            "agent ({}/{}, {} iterations{})",
            self.provider.name(),
            self.provider.model(),
            self.max_iterations,
            if self.instruction_only {
                ", instruction only"
            } else {
                ", instruction and reference picture"
            }
        )
    }

    async fn propose(
        &self,
        instance: &SlideInstance,
        context: SlideContext<'_>,
    ) -> Result<Option<String>, EvalError> {
        let run = AgentRun {
            instance: &instance.name,
            provider: &self.provider,
            scratch: context.scratch,
        };
        let mut config = run.config(
            &instance.instruction,
            "slidebench",
            self.max_iterations,
            self.program_timeout,
        )?;
        if !self.instruction_only {
            let picture = context.scratch.join("reference.png");
            crate::write_atomic(&picture, context.reference_picture)?;
            config.targets.push(viga_core::TargetSpec {
                path: picture,
                view: Some("1".to_owned()),
                frame: None,
            });
        }
        let settings = viga_domain_slides::SlidesSettings {
            assets: instance.media.clone(),
            ..viga_domain_slides::SlidesSettings::default()
        };
        let domain = viga_domain_slides::SlidesDomain::new(settings, Arc::clone(context.worker))
            .map_err(|err| run.harness(err))?;
        run.final_program(config, Arc::new(domain)).await
    }
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
        max_iterations: u32,
        program_timeout: Duration,
    ) -> Result<viga_core::RunConfig, EvalError> {
        std::fs::create_dir_all(self.scratch).map_err(|err| EvalError::io(self.scratch, err))?;
        let mut config = viga_core::RunConfig::new(task);
        config.mode = mode.to_owned();
        config.max_iterations = max_iterations;
        config.program_timeout = program_timeout;
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

/// A result `scores.json` keeps, read back to resume when it is `system`'s.
pub(crate) fn scored_before<T: serde::de::DeserializeOwned>(
    folder: &Path,
    is_system: impl Fn(&T) -> bool,
) -> Option<T> {
    let text = std::fs::read_to_string(folder.join(SCORES_FILE)).ok()?;
    serde_json::from_str(&text).ok().filter(is_system)
}

/// One instance's result (`scores.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SlideScores {
    pub instance: String,
    pub system: String,
    /// The program ran and saved a deck with a first slide.
    pub executed: bool,
    /// Why it did not, when it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// The reference-based scores (0-100), when executed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<ReferenceScores>,
    /// The judge's, when there is a judge and the program executed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<DesignJudgement>,
}

/// How an evaluation runs.
#[derive(Debug)]
pub struct SlideEvalConfig {
    pub data: PathBuf,
    pub out: PathBuf,
    pub instruction: InstructionKind,
    pub instances: Option<Vec<String>>,
    pub judge: Option<Judge>,
    pub program_timeout: Duration,
}

/// Progress, one line per instance.
#[derive(Debug, Clone)]
pub enum SlideEvent {
    Started { total: usize, skipped: usize },
    Scored(Box<SlideScores>),
}

/// Scores `system` on every selected instance, one after another on `worker`; instances with
/// a `scores.json` of the same system are kept (resume). Returns the summary, also written
/// to `OUT/summary.json` and `OUT/report.md`.
pub async fn run(
    config: &SlideEvalConfig,
    worker: Arc<SlideWorker>,
    system: &dyn SlideProposer,
    events: Option<tokio::sync::mpsc::UnboundedSender<SlideEvent>>,
) -> Result<SlideSummary, EvalError> {
    let instances = discover(
        &config.data,
        config.instruction,
        config.instances.as_deref(),
    )?;
    let name = system.system();
    let done: Vec<Option<SlideScores>> = instances
        .iter()
        .map(|instance| {
            scored_before(&config.out.join(&instance.name), |s: &SlideScores| {
                s.system == name
            })
        })
        .collect();
    let skipped = done.iter().filter(|scores| scores.is_some()).count();
    let send = |event: SlideEvent| {
        if let Some(events) = &events {
            let _ = events.send(event);
        }
    };
    send(SlideEvent::Started {
        total: instances.len(),
        skipped,
    });
    let mut all = Vec::with_capacity(instances.len());
    let mut references: Vec<(PathBuf, viga_slides::Deck)> = Vec::new();
    for (instance, done) in instances.iter().zip(done) {
        if let Some(scores) = done {
            all.push(scores);
            continue;
        }
        let folder = config.out.join(&instance.name);
        std::fs::create_dir_all(&folder).map_err(|err| EvalError::io(&folder, err))?;
        if !references
            .iter()
            .any(|(path, _)| path == &instance.reference_deck)
        {
            let deck = worker
                .import_deck(&instance.reference_deck)
                .map_err(|err| slides_error(instance, err))?;
            references.push((instance.reference_deck.clone(), deck));
        }
        let Some((_, reference)) = references
            .iter()
            .find(|(path, _)| path == &instance.reference_deck)
        else {
            continue;
        };
        let scores = score_instance(config, &worker, system, instance, reference, &folder).await?;
        crate::write_atomic(
            &folder.join(SCORES_FILE),
            &serde_json::to_vec_pretty(&scores).map_err(|err| EvalError::io(&folder, err))?,
        )?;
        send(SlideEvent::Scored(Box::new(scores.clone())));
        all.push(scores);
    }
    let summary = summarise(&name, config.judge.as_ref().map(Judge::label), &all);
    write_summary(&config.out, &summary)?;
    Ok(summary)
}

fn slides_error(instance: &SlideInstance, err: SlidesError) -> EvalError {
    EvalError::Harness {
        instance: instance.name.clone(),
        message: format!("the slide renderer: {err}"),
    }
}

async fn score_instance(
    config: &SlideEvalConfig,
    worker: &Arc<SlideWorker>,
    system: &dyn SlideProposer,
    instance: &SlideInstance,
    reference: &viga_slides::Deck,
    folder: &Path,
) -> Result<SlideScores, EvalError> {
    let failing = |err: SlidesError| slides_error(instance, err);
    let reference_blocks = worker
        .blocks(reference, instance.slide)
        .await
        .map_err(failing)?;
    let reference_picture = worker
        .render_slide(reference, instance.slide, PICTURE_WIDTH)
        .await
        .map_err(failing)?;
    let context = SlideContext {
        worker,
        reference_picture: &reference_picture.png,
        scratch: &folder.join("system"),
    };
    let mut scores = SlideScores {
        instance: instance.name.clone(),
        system: system.system(),
        executed: false,
        failure: None,
        reference: None,
        judge: None,
    };
    let Some(program) = system.propose(instance, context).await? else {
        scores.failure = Some("the system gave no program".to_owned());
        return Ok(scores);
    };
    crate::write_atomic(&folder.join("program.py"), program.as_bytes())?;
    let ran = worker
        .run_program(&program, Some(config.program_timeout))
        .await
        .map_err(failing)?;
    let Some(deck) = ran.deck else {
        scores.failure = Some(describe_status(&ran.run.status));
        return Ok(scores);
    };
    let generated: SlideBlocks = match worker.blocks(&deck, 1).await {
        Ok(blocks) => blocks,
        Err(err @ (SlidesError::Refused { .. } | SlidesError::BadRequest(_))) => {
            scores.failure = Some(format!("its deck cannot be read: {err}"));
            return Ok(scores);
        }
        Err(err) => return Err(failing(err)),
    };
    scores.executed = true;
    scores.reference = Some(reference_scores(&generated, &reference_blocks));
    let bytes = deck.read().map_err(|err| EvalError::io(deck.path(), err))?;
    crate::write_atomic(&folder.join("generated.pptx"), &bytes)?;
    let picture = worker
        .render_slide(&deck, 1, PICTURE_WIDTH)
        .await
        .map_err(failing)?;
    crate::write_atomic(&folder.join("generated.png"), &picture.png)?;
    if let Some(judge) = &config.judge {
        let texts: Vec<String> = generated
            .blocks
            .iter()
            .filter_map(|block| match &block.content {
                viga_slides::BlockContent::Text { text, .. } if !text.trim().is_empty() => {
                    Some(text.clone())
                }
                _ => None,
            })
            .collect();
        scores.judge =
            Some(judge_design(judge, "slide", &picture.png, &texts, instance.has_pictures).await);
    }
    Ok(scores)
}

/// Why a program left no deck, in a line.
fn describe_status(status: &viga_slides::ProgramStatus) -> String {
    use viga_slides::ProgramStatus;
    match status {
        ProgramStatus::Saved => "it saved a deck".to_owned(),
        ProgramStatus::Failed(error) => format!(
            "{}: {}{}",
            error.kind,
            error.message,
            error
                .line
                .map(|line| format!(" (line {line})"))
                .unwrap_or_default()
        ),
        ProgramStatus::NoDeck { detail } | ProgramStatus::Died { detail } => detail.clone(),
        ProgramStatus::TimedOut { limit_ms } => {
            format!("it was still running after {} ms and was stopped", limit_ms)
        }
    }
}

/// The evaluation's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SlideSummary {
    pub system: String,
    /// `provider/model` of the judge, when there was one.
    pub judge: Option<String>,
    pub instances: usize,
    pub executed: usize,
    /// Executed over all instances, 0-100.
    pub execution_rate: f64,
    /// Each reference-based metric's mean over the executed instances (0-100).
    pub reference: Option<ReferenceScores>,
    /// Each judge criterion's mean over the instances it judged (0-100, 5 = 100).
    pub judge_scores: Vec<(String, Option<f64>)>,
    /// The mean of the eight, times the execution rate; only with a judge that scored every
    /// criterion somewhere.
    pub overall: Option<f64>,
}

fn mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let values: Vec<f64> = values.collect();
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// Sums up the scores of one system.
pub fn summarise(system: &str, judge: Option<String>, all: &[SlideScores]) -> SlideSummary {
    let executed: Vec<&SlideScores> = all.iter().filter(|scores| scores.executed).collect();
    let references: Vec<&ReferenceScores> = executed
        .iter()
        .filter_map(|s| s.reference.as_ref())
        .collect();
    let reference = (!references.is_empty()).then(|| ReferenceScores {
        block_match: mean(references.iter().map(|r| r.block_match)).unwrap_or_default(),
        text: mean(references.iter().map(|r| r.text)).unwrap_or_default(),
        color: mean(references.iter().map(|r| r.color)).unwrap_or_default(),
        position: mean(references.iter().map(|r| r.position)).unwrap_or_default(),
    });
    let judge_scores: Vec<(String, Option<f64>)> = if judge.is_some() {
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
    };
    let execution_rate = if all.is_empty() {
        0.0
    } else {
        100.0 * executed.len() as f64 / all.len() as f64
    };
    let overall = match (&reference, judge_scores.len()) {
        (Some(reference), 4) if judge_scores.iter().all(|(_, s)| s.is_some()) => {
            let free: f64 = judge_scores.iter().filter_map(|(_, s)| *s).sum();
            let eight = (reference.mean() * 4.0 + free) / 8.0;
            Some(eight * execution_rate / 100.0)
        }
        _ => None,
    };
    SlideSummary {
        system: system.to_owned(),
        judge,
        instances: all.len(),
        executed: executed.len(),
        execution_rate,
        reference,
        judge_scores,
        overall,
    }
}

/// The summary as a Markdown table.
pub fn markdown(summary: &SlideSummary) -> String {
    let figure = |value: Option<f64>| value.map_or("-".to_owned(), |v| format!("{v:.1}"));
    let mut text = format!(
        "SlideBench: {} on {} slide(s); execution rate {:.1}% ({} executed)\n\n",
        summary.system, summary.instances, summary.execution_rate, summary.executed
    );
    text.push_str(
        "| reference-based | match | text (difflib) | color | position |\n|---|---|---|---|---|\n",
    );
    let r = summary.reference.as_ref();
    text.push_str(&format!(
        "| mean over executed | {} | {} | {} | {} |\n",
        figure(r.map(|r| r.block_match)),
        figure(r.map(|r| r.text)),
        figure(r.map(|r| r.color)),
        figure(r.map(|r| r.position)),
    ));
    match &summary.judge {
        Some(judge) => {
            text.push_str(&format!(
                "\n| reference-free (judge {judge}) | text | image | layout | color |\n|---|---|---|---|---|\n| mean over judged, 0-100 |"
            ));
            for (_, score) in &summary.judge_scores {
                text.push_str(&format!(" {} |", figure(*score)));
            }
            text.push_str(&format!(
                "\n\nOverall (mean of the eight x execution rate): {}\n",
                figure(summary.overall)
            ));
        }
        None => text.push_str(
            "\nNo judge (--judge-provider): no reference-free scores, so no overall score.\n",
        ),
    }
    text
}

fn write_summary(out: &Path, summary: &SlideSummary) -> Result<(), EvalError> {
    std::fs::create_dir_all(out).map_err(|err| EvalError::io(out, err))?;
    crate::write_atomic(
        &out.join(SUMMARY_FILE),
        &serde_json::to_vec_pretty(summary).map_err(|err| EvalError::io(out, err))?,
    )?;
    crate::write_atomic(&out.join(REPORT_FILE), markdown(summary).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scores(executed: bool, reference: f64, judge: Option<u8>) -> SlideScores {
        let judged = |score: u8| judge::CriterionJudgement::Judged {
            score,
            justification: String::new(),
        };
        SlideScores {
            instance: "deck/slide_1".to_owned(),
            system: "s".to_owned(),
            executed,
            failure: None,
            reference: executed.then_some(ReferenceScores {
                block_match: reference,
                text: reference,
                color: reference,
                position: reference,
            }),
            judge: judge.filter(|_| executed).map(|score| DesignJudgement {
                text: judged(score),
                image: None,
                layout: judged(score),
                color: judged(score),
            }),
        }
    }

    #[test]
    fn the_overall_score_is_the_mean_of_eight_times_the_execution_rate() {
        let all = [scores(true, 80.0, Some(4)), scores(false, 0.0, None)];
        let summary = summarise("s", None, &all);
        assert_eq!((summary.executed, summary.execution_rate), (1, 50.0));
        assert_eq!(summary.reference.unwrap().block_match, 80.0);
        assert_eq!(summary.overall, None, "no judge, no overall");
        // The image criterion was never judged: no overall either.
        let judged = summarise("s", Some("scripted/judge".to_owned()), &all);
        assert_eq!(judged.judge_scores[0], ("text".to_owned(), Some(80.0)));
        assert_eq!(judged.judge_scores[1], ("image".to_owned(), None));
        assert_eq!(judged.overall, None);
        let mut with_image = all.clone();
        if let Some(judge) = with_image[0].judge.as_mut() {
            judge.image = Some(judge::CriterionJudgement::Judged {
                score: 4,
                justification: String::new(),
            });
        }
        let overall = summarise("s", Some("j".to_owned()), &with_image)
            .overall
            .unwrap();
        assert!((overall - 40.0).abs() < 1e-9, "{overall}");
    }

    #[test]
    fn instruction_kinds_name_their_files() {
        assert_eq!("high_level".parse(), Ok(InstructionKind::HighLevel));
        assert_eq!(InstructionKind::NoImage.file(), "instruction_no_image.txt");
        assert!("short".parse::<InstructionKind>().is_err());
    }
}
