//! SlideBench (AutoPresent) as a [`Benchmark`]: a system writes a python-pptx program for
//! each slide of a reference deck from its instruction; the program runs (execution rate),
//! and its first slide is scored against the reference slide with the benchmark's
//! reference-based metrics ([`metrics`]) and, with a provider, its reference-free judge
//! ([`judge`]).
//!
//! The layout is SlideBench's `examples/`: `DIR/<deck>/<deck>.pptx` (the reference deck) and
//! `DIR/<deck>/slide_<n>/instruction.txt` (also `instruction_high_level.txt`,
//! `instruction_no_image.txt`) with the slide's pictures in `slide_<n>/media/`. Every result
//! goes to `OUT/<deck>/slide_<n>/`: `reference.png` (the reference slide, which the agent is
//! shown), `program.py`, `generated.pptx`, `generated.png` and `scores.json`; the one runner
//! writes `OUT/summary.json`, `OUT/report.md` and `OUT/report.html`.

pub mod judge;
pub mod metrics;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use viga_domain_slides::{SlidesDomain, SlidesSettings};
use viga_slides::{SlideBlocks, SlideWorker, SlidesError};

use self::judge::judge_design;
use self::metrics::{ReferenceScores, reference_scores};
use crate::EvalError;
use crate::agent::AgentProposer;
use crate::benchmark::{Attempt, Baseline, Benchmark, Context, Lent, Proposal, Proposer, Shelf};
use crate::flat::{AgentRun, FlatScores, check_selection, file_name};
use crate::judge::Judge;
use crate::summary::{Column, Report, Summary};

/// The reference-based metrics, as the reports name them.
pub const REFERENCE_METRICS: [&str; 4] = ["match", "text", "color", "position"];
/// Width of the pictures of slides the judge sees and the results keep.
const PICTURE_WIDTH: u32 = 1280;

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

/// SlideBench's own figures in a result: the reference-based scores (0-100), when executed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SlideFigures {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<ReferenceScores>,
}

/// One slide's result (`scores.json`).
pub type SlideScores = FlatScores<SlideFigures>;

/// SlideBench on its data folder, its programs run by the renderers on `workers`.
#[derive(Debug)]
pub struct SlideBench {
    pub data: PathBuf,
    pub instruction: InstructionKind,
    /// The instances named (`<deck>/slide_<n>`); all without.
    pub instances: Option<Vec<String>>,
    pub judge: Option<Judge>,
    pub program_timeout: Duration,
    pub workers: Arc<Shelf<SlideWorker>>,
}

/// The reference slide an instance is scored against.
#[derive(Debug)]
pub struct Reference {
    blocks: SlideBlocks,
    /// Its picture, which VIGA's runner shows the agent.
    picture: PathBuf,
}

fn slides_error(instance: &SlideInstance, err: SlidesError) -> EvalError {
    EvalError::Harness {
        instance: instance.name.clone(),
        message: format!("the slide renderer: {err}"),
    }
}

#[async_trait]
impl Benchmark for SlideBench {
    type Instance = SlideInstance;
    type Worker = Lent<SlideWorker>;
    type Target = Reference;
    type Scores = SlideScores;

    fn name(&self) -> &'static str {
        "SlideBench"
    }

    fn instance_name(instance: &SlideInstance) -> &str {
        &instance.name
    }

    fn discover(&self) -> Result<Vec<SlideInstance>, EvalError> {
        discover(&self.data, self.instruction, self.instances.as_deref())
    }

    async fn acquire(&self) -> Result<Self::Worker, EvalError> {
        self.workers.acquire().await
    }

    fn containment(worker: &Self::Worker) -> Option<viga_blender::ContainmentStatus> {
        worker.containment()
    }

    fn finished(
        &self,
        _path: &Path,
        scores: &SlideScores,
        system: &str,
    ) -> Result<bool, EvalError> {
        // Another system's result in the folder is made again, for this one.
        Ok(scores.system == system)
    }

    async fn prepare(
        &self,
        instance: &SlideInstance,
        worker: &Self::Worker,
        dir: &Path,
    ) -> Result<Reference, EvalError> {
        let failing = |err: SlidesError| slides_error(instance, err);
        let worker = worker.worker();
        let deck = worker
            .import_deck(&instance.reference_deck)
            .map_err(failing)?;
        let blocks = worker
            .blocks(&deck, instance.slide)
            .await
            .map_err(failing)?;
        let rendered = worker
            .render_slide(&deck, instance.slide, PICTURE_WIDTH)
            .await
            .map_err(failing)?;
        let picture = dir.join("reference.png");
        crate::write_atomic(&picture, &rendered.png)?;
        Ok(Reference { blocks, picture })
    }

    fn context(
        &self,
        target: &Reference,
        worker: &Self::Worker,
        dir: &Path,
    ) -> Context<Self::Worker> {
        Context {
            worker: worker.clone(),
            goal: vec![target.picture.clone()],
            scratch: dir.join("system"),
        }
    }

    async fn score(&self, attempt: Attempt<'_, Self>) -> Result<SlideScores, EvalError> {
        score_slide(self, attempt).await
    }

    fn report(&self, out: &Path, system: &str) -> Result<Report, EvalError> {
        let instances = self.discover()?;
        let names = instances.iter().map(|instance| instance.name.clone());
        let all = crate::flat::results(out, names, system)?;
        let summary = summarise(
            system,
            self.judge.as_ref().map(Judge::label),
            instances.len(),
            &all,
        );
        Report::new(self.name(), &summary, summary.table())
    }
}

/// Runs the proposed program, and scores its deck's first slide against the reference.
async fn score_slide(
    bench: &SlideBench,
    attempt: Attempt<'_, SlideBench>,
) -> Result<SlideScores, EvalError> {
    let Attempt {
        instance,
        target: reference,
        proposal,
        worker,
        dir,
        system,
        ..
    } = attempt;
    let failing = |err: SlidesError| slides_error(instance, err);
    let worker = worker.worker();
    let mut scores = SlideScores::new(&instance.name, system);
    let Some(program) = proposal.code else {
        scores.failure = Some("the system gave no program".to_owned());
        return Ok(scores);
    };
    crate::write_atomic(&dir.join("program.py"), program.as_bytes())?;
    let ran = worker
        .run_program(&program, Some(bench.program_timeout))
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
    scores.figures.reference = Some(reference_scores(&generated, &reference.blocks));
    let bytes = deck.read().map_err(|err| EvalError::io(deck.path(), err))?;
    crate::write_atomic(&dir.join("generated.pptx"), &bytes)?;
    let picture = worker
        .render_slide(&deck, 1, PICTURE_WIDTH)
        .await
        .map_err(failing)?;
    crate::write_atomic(&dir.join("generated.png"), &picture.png)?;
    if let Some(judge) = &bench.judge {
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

#[async_trait]
impl Proposer<SlideBench> for Baseline {
    fn system(&self) -> String {
        match self {
            Self::Noop => "noop".to_owned(),
            Self::Oracle => "oracle (the reference slide itself)".to_owned(),
        }
    }

    async fn propose(
        &self,
        instance: &SlideInstance,
        _context: Context<Lent<SlideWorker>>,
    ) -> Result<Proposal, EvalError> {
        Ok(Proposal::code(Some(match self {
            Self::Noop => NOOP_PROGRAM.to_owned(),
            Self::Oracle => oracle_program(&instance.reference_deck, instance.slide),
        })))
    }
}

/// The VIGA loop as the system: the instruction is the task, the slide's pictures the assets
/// it may use, and (as VIGA's runner does) the reference slide's picture the target, unless
/// `instruction_only`; its final program is the proposal.
#[async_trait]
impl Proposer<SlideBench> for AgentProposer {
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
        context: Context<Lent<SlideWorker>>,
    ) -> Result<Proposal, EvalError> {
        let run = AgentRun {
            instance: &instance.name,
            provider: &self.provider,
            scratch: &context.scratch,
        };
        let mut config = run.config(&instance.instruction, "slidebench", self)?;
        if !self.instruction_only
            && let Some(picture) = context.goal.first()
        {
            config.targets.push(viga_core::TargetSpec {
                path: picture.clone(),
                view: Some("1".to_owned()),
                frame: None,
            });
        }
        let settings = SlidesSettings {
            assets: instance.media.clone(),
            ..SlidesSettings::default()
        };
        let domain = SlidesDomain::new(settings, Arc::clone(context.worker.worker()))
            .map_err(|err| run.harness(err))?;
        Ok(Proposal::code(
            run.final_program(config, Arc::new(domain)).await?,
        ))
    }
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

/// The column of AutoPresent's overall score: the plain mean of the eight figures, as
/// `generate/calc_score.py` takes it.
pub const OVERALL: &str = "overall";
/// The column of the overall score times the execution rate (viga's own figure).
pub const OVERALL_EXECUTED: &str = "overall_executed";

/// Sums up the results of one system: execution rate, each reference-based metric's mean
/// over the executed slides, with a judge its criteria and two overall scores, only when
/// every criterion was judged somewhere: [`OVERALL`], the plain mean of the eight, and
/// [`OVERALL_EXECUTED`], that mean times the execution rate.
pub fn summarise(
    system: &str,
    judge: Option<String>,
    selected: usize,
    all: &[SlideScores],
) -> Summary {
    let judged = judge.is_some();
    let mut summary =
        crate::flat::summarise("SlideBench", system, judge, selected, all, |executed| {
            let references: Vec<&ReferenceScores> = executed
                .iter()
                .filter_map(|s| s.figures.reference.as_ref())
                .collect();
            let metric = |name: &str, pick: fn(&ReferenceScores) -> f64| {
                Column::new(
                    name,
                    crate::summary::mean(references.iter().map(|r| pick(r))),
                    1,
                )
            };
            vec![
                metric("match", |r| r.block_match),
                metric("text", |r| r.text),
                metric("color", |r| r.color),
                metric("position", |r| r.position),
            ]
        });
    let value = |name: &str| summary.value(name);
    let reference = match (
        value("match"),
        value("text"),
        value("color"),
        value("position"),
    ) {
        (Some(block_match), Some(text), Some(color), Some(position)) => Some(ReferenceScores {
            block_match,
            text,
            color,
            position,
        }),
        _ => None,
    };
    let free: Option<Vec<f64>> = judge::CRITERIA
        .iter()
        .map(|(criterion, _)| value(&format!("judge {criterion}")))
        .collect();
    if judged {
        let overall = match (reference, free) {
            (Some(reference), Some(free)) => {
                Some((reference.mean() * 4.0 + free.iter().sum::<f64>()) / 8.0)
            }
            _ => None,
        };
        let executed = overall.map(|overall| overall * summary.execution_rate / 100.0);
        summary.columns.push(Column::new(OVERALL, overall, 1));
        summary
            .columns
            .push(Column::new(OVERALL_EXECUTED, executed, 1));
        summary.notes.push(format!("{OVERALL}: AutoPresent's overall score, the plain mean of the eight figures (the four reference-based metrics, the judge's four criteria), as its calc_score.py takes it. {OVERALL_EXECUTED}: that mean times the execution rate (viga's own figure; what calc_score.py gives without --skip_none, where a slide that did not run counts 0 in every figure). Neither unless every criterion was judged somewhere."));
    } else {
        summary.notes.push(
            "No judge (--judge-provider): no reference-free scores, so no overall score."
                .to_owned(),
        );
    }
    summary.notes.insert(0, "Reference-based metrics (AutoPresent's; text is difflib's ratio): means over the executed slides, 0-100, higher is better. The judge's criteria: means over the slides it judged, 0-100 (5 = 100).".to_owned());
    summary
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
            figures: SlideFigures {
                reference: executed.then_some(ReferenceScores {
                    block_match: reference,
                    text: reference,
                    color: reference,
                    position: reference,
                }),
            },
            judge: judge
                .filter(|_| executed)
                .map(|score| judge::DesignJudgement {
                    text: judged(score),
                    image: None,
                    layout: judged(score),
                    color: judged(score),
                }),
        }
    }

    #[test]
    fn the_overall_score_is_the_plain_mean_of_the_eight_and_a_second_column_weighs_it() {
        let all = [scores(true, 80.0, Some(4)), scores(false, 0.0, None)];
        let summary = summarise("s", None, 2, &all);
        assert_eq!((summary.executed, summary.execution_rate), (1, 50.0));
        assert_eq!(summary.value("match"), Some(80.0));
        assert!(
            summary
                .columns
                .iter()
                .all(|c| c.name != OVERALL && c.name != OVERALL_EXECUTED),
            "no judge, no overall"
        );
        // The image criterion was never judged: no overall either.
        let judged = summarise("s", Some("scripted/judge".to_owned()), 2, &all);
        assert_eq!(judged.value("judge text"), Some(80.0));
        assert_eq!(judged.value("judge image"), None);
        assert_eq!(judged.value(OVERALL), None);
        assert_eq!(judged.value(OVERALL_EXECUTED), None);
        let mut with_image = all.clone();
        if let Some(judge) = with_image[0].judge.as_mut() {
            judge.image = Some(judge::CriterionJudgement::Judged {
                score: 4,
                justification: String::new(),
            });
        }
        let summary = summarise("s", Some("j".to_owned()), 2, &with_image);
        // The eight are all 80 over the one slide that ran, of two: AutoPresent's overall is
        // their mean, 80; weighed by the execution rate of 50%, 40.
        let overall = summary.value(OVERALL).unwrap();
        assert!((overall - 80.0).abs() < 1e-9, "{overall}");
        let executed = summary.value(OVERALL_EXECUTED).unwrap();
        assert!((executed - 40.0).abs() < 1e-9, "{executed}");
    }

    #[test]
    fn a_result_keeps_the_fields_of_scores_json() {
        let json = serde_json::to_value(scores(true, 50.0, None)).unwrap();
        assert_eq!(json["reference"]["match"], 50.0, "{json}");
        assert_eq!(json["executed"], true, "{json}");
        let back: SlideScores = serde_json::from_value(json).unwrap();
        assert_eq!(back, scores(true, 50.0, None));
    }

    #[test]
    fn instruction_kinds_name_their_files() {
        assert_eq!("high_level".parse(), Ok(InstructionKind::HighLevel));
        assert_eq!(InstructionKind::NoImage.file(), "instruction_no_image.txt");
        assert!("short".parse::<InstructionKind>().is_err());
    }
}
