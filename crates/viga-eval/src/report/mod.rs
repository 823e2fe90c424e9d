//! Aggregation of an output folder's `scores.json` files into per-task and overall figures
//! (`summary.json`), and a Markdown and an HTML table that put them beside the published
//! leaderboard, which is marked as theirs. Also merging shard outputs into one folder.
//!
//! This module owns the summary (what is counted and averaged); `tables` owns how it is
//! shown and `merge` how shard folders come together.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::EvalError;
use crate::judge::Judgement;
use crate::layout::{Suite, Task};
use crate::leak::LeakStatus;
use crate::scores::{
    EvalSettings, FitViews, HARNESS_FAILURE_FILE, HarnessFailure, InstanceScores, SCORES_FILE,
    SELECTED_FILE, SETTINGS_FILE, SelectedInstance, read_json,
};
use crate::summary::{Report, mean, write_report};

mod merge;
mod tables;

pub use merge::merge;
pub use tables::{ALL_INSTANCES_LABEL, JUDGE_COLUMN, ORACLE_SELECTED_LABEL, html, markdown, table};

pub use crate::summary::{HTML_FILE, MARKDOWN_FILE, SUMMARY_FILE};

/// The public rule: a task with fewer than this fraction of executable instances is shown as
/// "--", never as a number.
pub const MIN_EXECUTABLE_FRACTION: f64 = 0.25;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskSummary {
    pub task: Task,
    /// Instances of the task selected into this folder (by any run or shard into it).
    pub selected: usize,
    /// Of those, scored: a result, executable or not.
    pub scored: usize,
    /// Of the scored, executable: the program ran and every view rendered.
    pub executable: usize,
    /// Selected instances the harness could not score (their goal does not run, their views
    /// do not match their cameras, Blender was lost): in no figure; a rerun retries them.
    pub harness_failed: usize,
    /// Selected instances with neither a result nor a harness failure: a run still going or
    /// stopped early.
    pub pending: usize,
    /// False under the 25% rule (executable / scored): the means below are then not shown.
    pub shown: bool,
    /// Means over the executable instances (raw, not leaderboard-scaled).
    pub pl: Option<f64>,
    pub cd: Option<f64>,
    /// Instances whose CD could be computed.
    pub cd_instances: usize,
    pub n_clip: Option<f64>,
    /// When some scored views were held out of the system's fit: the mean over executable
    /// instances of PL on the views it fitted, and on the views held out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pl_fit_views: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pl_held_out_views: Option<f64>,
}

/// Per task, over every scored instance: a proposal that is not executable counts with the
/// figures of start.py (the instance's starting program), so nothing is dropped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AllInstancesSummary {
    pub task: Task,
    /// Scored instances in the means.
    pub instances: usize,
    /// Of them, counted with start.py's figures because the proposal was not executable.
    pub as_start: usize,
    /// Scored instances left out: start.py was not executable either (or was not scored, in
    /// results made before this figure).
    pub left_out: usize,
    pub pl: Option<f64>,
    pub cd: Option<f64>,
    pub cd_instances: usize,
    pub n_clip: Option<f64>,
}

/// Which views were scored and which the system fitted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ViewsSummary {
    /// The cameras scored, over all scored instances (each instance is scored on all of its
    /// own views, `Camera1..CameraN`).
    pub scored: Vec<String>,
    /// The goal views the system saw and worked to match (`settings.fit_views`).
    pub fit: Option<FitViews>,
    /// True when no scored instance had a view held out of the fit: the system was then
    /// fitted on the very views it is scored on. Absent when the system fits no view.
    pub fit_is_scored: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub settings: EvalSettings,
    /// "final": the system's own final program per instance (the headline).
    pub selection: String,
    pub tasks: Vec<TaskSummary>,
    /// The all-instances figure: non-executable proposals scored as start.py.
    pub all_instances: Vec<AllInstancesSummary>,
    /// The same figures for the best program per instance chosen with the ground truth
    /// (the benchmark's "best proposal"), when the evaluation scored it; always labelled
    /// "oracle-selected" where shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oracle_selected: Option<Vec<TaskSummary>>,
    pub views: ViewsSummary,
    /// Over all instances of all tasks; not a leaderboard figure (it has none).
    pub overall: TaskOverall,
    /// The reference-free judge's ratings per BlenderBench level; present only when the
    /// evaluation had a judge (`settings.judge`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<Vec<JudgeSummary>>,
    /// BlenderBench: the answer-leakage check of every scored instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_leaks: Option<Vec<LeakEntry>>,
}

/// The judge's ratings of one level's final programs: means over the judged instances
/// (integers 0 to 5 each; higher is better).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JudgeSummary {
    pub task: Task,
    /// Scored instances the judge rated.
    pub judged: usize,
    /// Scored instances whose judgement failed (a malformed answer, the model unreachable):
    /// in no mean.
    pub failed: usize,
    /// Scored instances with nothing to judge (the proposal is not executable): in no mean.
    pub not_judged: usize,
    pub task_completion: Option<f64>,
    pub visual_quality: Option<f64>,
    pub spatial_accuracy: Option<f64>,
    pub detail_accuracy: Option<f64>,
    /// Mean over the judged instances of each one's mean of the four ratings.
    pub mean: Option<f64>,
}

/// One instance's answer-leakage check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeakEntry {
    pub instance: String,
    pub task: Task,
    pub status: LeakStatus,
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskOverall {
    pub selected: usize,
    pub scored: usize,
    pub executable: usize,
    pub harness_failed: usize,
    pub pending: usize,
    /// Mean over the executable instances.
    pub pl: Option<f64>,
}

/// Everything an output folder holds about its instances.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Collected {
    /// Every `<instance>/scores.json`, sorted by task and instance.
    pub scores: Vec<InstanceScores>,
    /// Every `<instance>/harness-failure.json` of an instance without scores.
    pub failures: Vec<HarnessFailure>,
    /// Every `<instance>/instance.json`: the instances runs selected into the folder.
    pub selected: Vec<SelectedInstance>,
}

impl Collected {
    /// Results alone (as if every selected instance was scored).
    pub fn from_scores(scores: Vec<InstanceScores>) -> Self {
        Collected {
            scores,
            ..Collected::default()
        }
    }

    /// Every instance the folder knows of, with its task.
    fn instances(&self) -> BTreeMap<&str, Task> {
        let mut all = BTreeMap::new();
        for s in &self.selected {
            all.insert(s.instance.as_str(), s.task);
        }
        for f in &self.failures {
            all.insert(f.instance.as_str(), f.task);
        }
        for s in &self.scores {
            all.insert(s.instance.as_str(), s.task);
        }
        all
    }
}

/// Reads `<out>/<instance>/` for every instance folder: scores, harness failures and
/// selection marks.
pub fn collect(out: &Path) -> Result<Collected, EvalError> {
    let entries = std::fs::read_dir(out).map_err(|err| EvalError::io(out, err))?;
    let mut all = Collected::default();
    for entry in entries {
        let entry = entry.map_err(|err| EvalError::io(out, err))?;
        let folder = entry.file_name();
        let path = entry.path().join(SCORES_FILE);
        let scored = path.is_file();
        if scored {
            let scores = read_json::<InstanceScores>(&path)?;
            check_instance_name(&scores.instance, &folder, &path)?;
            all.scores.push(scores);
        }
        let path = entry.path().join(HARNESS_FAILURE_FILE);
        if !scored && path.is_file() {
            let failure = read_json::<HarnessFailure>(&path)?;
            check_instance_name(&failure.instance, &folder, &path)?;
            all.failures.push(failure);
        }
        let path = entry.path().join(SELECTED_FILE);
        if path.is_file() {
            let selected = read_json::<SelectedInstance>(&path)?;
            check_instance_name(&selected.instance, &folder, &path)?;
            all.selected.push(selected);
        }
    }
    all.scores
        .sort_by(|a, b| (a.task, &a.instance).cmp(&(b.task, &b.instance)));
    all.failures
        .sort_by(|a, b| (a.task, &a.instance).cmp(&(b.task, &b.instance)));
    all.selected
        .sort_by(|a, b| (a.task, &a.instance).cmp(&(b.task, &b.instance)));
    Ok(all)
}

/// An instance name from a result file is used as a folder name (merge copies
/// `<shard>/<instance>` to `<into>/<instance>`), so it must be a plain name, and the one of
/// the folder the file was found in.
fn check_instance_name(
    instance: &str,
    folder: &std::ffi::OsStr,
    path: &Path,
) -> Result<(), EvalError> {
    let bad = |message: String| EvalError::BadResults {
        path: path.to_path_buf(),
        message,
    };
    viga_skills::names::plain_name("instance name", instance)
        .map_err(|err| bad(err.to_string()))?;
    if folder != instance {
        return Err(bad(format!(
            "it names instance {instance:?} but lies in the folder {:?}",
            folder.to_string_lossy()
        )));
    }
    Ok(())
}

/// Per-task and overall figures. Every result must share `settings`.
pub fn summarise(settings: &EvalSettings, results: &Collected) -> Result<Summary, EvalError> {
    let scores = &results.scores;
    for score in scores {
        let differences = score.settings.differences(settings);
        if !differences.is_empty() {
            return Err(EvalError::BadResults {
                path: PathBuf::from(&score.instance).join(SCORES_FILE),
                message: format!("made with other settings ({})", differences.join("; ")),
            });
        }
    }
    let counts = Counts::of(results);
    let fit = settings.fit_views.as_ref();
    let headline = task_summaries(&counts, scores, fit, |s| Figures {
        executable: s.executable,
        pl: s.pl,
        n_clip: s.n_clip,
        cd: s.cd,
    });
    let oracle_selected = settings.oracle_selected.then(|| {
        task_summaries(&counts, scores, None, |s| match &s.oracle_selected {
            Some(best) => Figures {
                executable: best.pl.is_some(),
                pl: best.pl,
                n_clip: best.n_clip,
                cd: best.cd,
            },
            // Scored before the figure was asked for: nothing to choose from.
            None => Figures::default(),
        })
    });
    let total = |of: &BTreeMap<Task, usize>| of.values().sum::<usize>();
    let bench = settings.suite == Suite::BlenderBench;
    Ok(Summary {
        judge: settings.judge.is_some().then(|| judge_summaries(scores)),
        answer_leaks: bench.then(|| {
            scores
                .iter()
                .filter_map(|s| {
                    s.answer_leak.as_ref().map(|check| LeakEntry {
                        instance: s.instance.clone(),
                        task: s.task,
                        status: check.status,
                        detail: check.detail.clone(),
                    })
                })
                .collect()
        }),
        settings: settings.clone(),
        selection: "final".to_owned(),
        overall: TaskOverall {
            selected: total(&counts.selected),
            scored: scores.len(),
            executable: scores.iter().filter(|s| s.executable).count(),
            harness_failed: total(&counts.harness_failed),
            // Saturating: inconsistent results (the same instance scored twice, say) must
            // not underflow.
            pending: total(&counts.selected)
                .saturating_sub(scores.len())
                .saturating_sub(total(&counts.harness_failed)),
            pl: mean(scores.iter().filter_map(|s| s.pl)),
        },
        tasks: headline,
        all_instances: all_instances(scores),
        oracle_selected,
        views: views_summary(scores, fit),
    })
}

/// Instances selected and failed per task.
struct Counts {
    selected: BTreeMap<Task, usize>,
    harness_failed: BTreeMap<Task, usize>,
}

impl Counts {
    fn of(results: &Collected) -> Self {
        let mut selected = BTreeMap::new();
        for task in results.instances().into_values() {
            *selected.entry(task).or_insert(0) += 1;
        }
        let mut harness_failed = BTreeMap::new();
        for failure in &results.failures {
            *harness_failed.entry(failure.task).or_insert(0) += 1;
        }
        Counts {
            selected,
            harness_failed,
        }
    }
}

/// One program's figures for an instance, as a summary counts them.
#[derive(Debug, Default)]
struct Figures {
    executable: bool,
    pl: Option<f64>,
    n_clip: Option<f64>,
    cd: Option<f64>,
}

/// An instance's mean PL on the views `fit` fits and on the others (`None` for a side with
/// no view).
fn pl_by_fit(score: &InstanceScores, fit: &FitViews) -> (Option<f64>, Option<f64>) {
    let (fitted, held): (Vec<_>, Vec<_>) =
        score.views.iter().partition(|view| fit.fits(&view.camera));
    (
        mean(fitted.iter().map(|view| view.pl)),
        mean(held.iter().map(|view| view.pl)),
    )
}

/// Per-task means of the figures `pick` takes from each instance, over executable
/// instances; with `fit`, also PL on the fit and the held-out views when any were held out.
fn task_summaries(
    counts: &Counts,
    scores: &[InstanceScores],
    fit: Option<&FitViews>,
    pick: impl Fn(&InstanceScores) -> Figures,
) -> Vec<TaskSummary> {
    let mut tasks = Vec::new();
    for task in Task::ALL {
        let selected = counts.selected.get(&task).copied().unwrap_or(0);
        if selected == 0 {
            continue;
        }
        let of_task: Vec<(&InstanceScores, Figures)> = scores
            .iter()
            .filter(|s| s.task == task)
            .map(|s| (s, pick(s)))
            .collect();
        let executable: Vec<&(&InstanceScores, Figures)> =
            of_task.iter().filter(|(_, f)| f.executable).collect();
        let cds: Vec<f64> = executable.iter().filter_map(|(_, f)| f.cd).collect();
        let by_fit: Vec<(Option<f64>, Option<f64>)> = match fit {
            Some(fit) => executable.iter().map(|(s, _)| pl_by_fit(s, fit)).collect(),
            None => Vec::new(),
        };
        let held_out = by_fit.iter().any(|(_, held)| held.is_some());
        let harness_failed = counts.harness_failed.get(&task).copied().unwrap_or(0);
        tasks.push(TaskSummary {
            task,
            selected,
            scored: of_task.len(),
            executable: executable.len(),
            harness_failed,
            pending: selected
                .saturating_sub(of_task.len())
                .saturating_sub(harness_failed),
            shown: !of_task.is_empty()
                && executable.len() as f64 >= MIN_EXECUTABLE_FRACTION * of_task.len() as f64,
            pl: mean(executable.iter().filter_map(|(_, f)| f.pl)),
            cd_instances: cds.len(),
            cd: mean(cds),
            n_clip: mean(executable.iter().filter_map(|(_, f)| f.n_clip)),
            pl_fit_views: held_out
                .then(|| mean(by_fit.iter().filter_map(|(fitted, _)| *fitted)))
                .flatten(),
            pl_held_out_views: held_out
                .then(|| mean(by_fit.iter().filter_map(|(_, held)| *held)))
                .flatten(),
        });
    }
    tasks
}

/// The judge's ratings per task, over the scored instances it rated.
fn judge_summaries(scores: &[InstanceScores]) -> Vec<JudgeSummary> {
    let mut tasks = Vec::new();
    for task in Task::ALL {
        let of_task: Vec<&InstanceScores> = scores.iter().filter(|s| s.task == task).collect();
        if of_task.is_empty() {
            continue;
        }
        let judged: Vec<_> = of_task
            .iter()
            .filter_map(|s| s.judge.as_ref().and_then(Judgement::scores))
            .collect();
        let count = |outcome: fn(&Judgement) -> bool| {
            of_task
                .iter()
                .filter(|s| s.judge.as_ref().is_some_and(outcome))
                .count()
        };
        let criterion = |pick: fn(&crate::judge::JudgeScores) -> u8| {
            mean(judged.iter().map(|scores| f64::from(pick(scores))))
        };
        tasks.push(JudgeSummary {
            task,
            judged: judged.len(),
            failed: count(|j| matches!(j, Judgement::Failed { .. })),
            not_judged: count(|j| matches!(j, Judgement::NotJudged { .. })),
            task_completion: criterion(|s| s.task_completion),
            visual_quality: criterion(|s| s.visual_quality),
            spatial_accuracy: criterion(|s| s.spatial_accuracy),
            detail_accuracy: criterion(|s| s.detail_accuracy),
            mean: mean(judged.iter().map(|scores| scores.mean())),
        });
    }
    tasks
}

/// The all-instances figure per task: the proposal's figures where it is executable, else
/// start.py's.
fn all_instances(scores: &[InstanceScores]) -> Vec<AllInstancesSummary> {
    let mut tasks = Vec::new();
    for task in Task::ALL {
        let of_task: Vec<&InstanceScores> = scores.iter().filter(|s| s.task == task).collect();
        if of_task.is_empty() {
            continue;
        }
        let mut as_start = 0;
        let figures: Vec<Figures> = of_task
            .iter()
            .filter_map(|s| {
                if s.executable {
                    return Some(Figures {
                        executable: true,
                        pl: s.pl,
                        n_clip: s.n_clip,
                        cd: s.cd,
                    });
                }
                let start = s.start_program.as_ref().filter(|start| start.executable)?;
                as_start += 1;
                Some(Figures {
                    executable: true,
                    pl: start.pl,
                    n_clip: start.n_clip,
                    cd: start.cd,
                })
            })
            .collect();
        let cds: Vec<f64> = figures.iter().filter_map(|f| f.cd).collect();
        tasks.push(AllInstancesSummary {
            task,
            instances: figures.len(),
            as_start,
            left_out: of_task.len() - figures.len(),
            pl: mean(figures.iter().filter_map(|f| f.pl)),
            cd_instances: cds.len(),
            cd: mean(cds),
            n_clip: mean(figures.iter().filter_map(|f| f.n_clip)),
        });
    }
    tasks
}

fn views_summary(scores: &[InstanceScores], fit: Option<&FitViews>) -> ViewsSummary {
    let mut scored: BTreeSet<(u32, String)> = BTreeSet::new();
    let mut fit_is_scored = true;
    for score in scores {
        for camera in score.scored_views() {
            if fit.is_some_and(|fit| !fit.fits(&camera)) {
                fit_is_scored = false;
            }
            let number = camera
                .strip_prefix("Camera")
                .and_then(|k| k.parse().ok())
                .unwrap_or(u32::MAX);
            scored.insert((number, camera));
        }
    }
    ViewsSummary {
        scored: scored.into_iter().map(|(_, camera)| camera).collect(),
        fit: fit.cloned(),
        fit_is_scored: fit.map(|_| fit_is_scored),
    }
}

/// `<out>`'s results summed up, and the report of them.
pub fn report(out: &Path) -> Result<(Summary, Report), EvalError> {
    let settings: EvalSettings = read_json(&out.join(SETTINGS_FILE))?;
    let summary = summarise(&settings, &collect(out)?)?;
    let report = Report::new(settings.suite.name(), &summary, table(&summary))?;
    Ok((summary, report))
}

/// Reads `<out>`'s results and writes `summary.json`, `report.md` and `report.html` there.
pub fn write_reports(out: &Path) -> Result<Summary, EvalError> {
    let (summary, report) = report(out)?;
    write_report(out, &report)?;
    Ok(summary)
}

#[cfg(test)]
pub(crate) mod tests {
    use viga_protocol::bridge::RenderEngine;

    use super::*;
    use crate::scores::{ChamferDefinition, N_CLIP_UNAVAILABLE, RenderSpec, write_json};

    pub(crate) fn settings() -> EvalSettings {
        EvalSettings {
            suite: Suite::BlenderGym,
            system: "noop".to_owned(),
            render: RenderSpec {
                engine: RenderEngine::Cycles,
                width: 64,
                height: 64,
                samples: Some(8),
            },
            chamfer_points: 100,
            blender_version: "5.0.1".to_owned(),
            clip_weights: None,
            oracle_selected: false,
            fit_views: None,
            cd_definition: ChamferDefinition::CURRENT,
            judge: None,
            containment: crate::scores::Observed(None),
        }
    }

    pub(crate) fn scores(
        instance: &str,
        task: Task,
        pl: Option<f64>,
        cd: Option<f64>,
    ) -> InstanceScores {
        InstanceScores {
            instance: instance.to_owned(),
            task,
            settings: settings(),
            executable: pl.is_some(),
            error: pl.is_none().then(|| "raised".to_owned()),
            cameras: vec!["Camera1".to_owned()],
            views: Vec::new(),
            pl,
            n_clip: None,
            n_clip_note: N_CLIP_UNAVAILABLE.to_owned(),
            cd,
            cd_note: None,
            proposal_note: None,
            oracle_selected: None,
            start_program: None,
            answer_leak: None,
            judge: None,
            seconds: 1.0,
        }
    }

    #[test]
    fn means_are_over_executable_instances_and_the_25_percent_rule_hides_tasks() {
        let all = vec![
            scores("placement1", Task::Placement, Some(0.002), Some(0.5)),
            scores("placement2", Task::Placement, Some(0.004), Some(1.5)),
            scores("placement3", Task::Placement, None, None),
            // 1 of 5 executable: 20% < 25%.
            scores("lighting1", Task::Lighting, Some(0.1), None),
            scores("lighting2", Task::Lighting, None, None),
            scores("lighting3", Task::Lighting, None, None),
            scores("lighting4", Task::Lighting, None, None),
            scores("lighting5", Task::Lighting, None, None),
        ];
        let summary = summarise(&settings(), &Collected::from_scores(all)).unwrap();
        let placement = &summary.tasks[0];
        assert_eq!(
            (placement.task, placement.scored, placement.executable),
            (Task::Placement, 3, 2)
        );
        assert!(placement.shown);
        assert!((placement.pl.unwrap() - 0.003).abs() < 1e-15);
        assert!((placement.cd.unwrap() - 1.0).abs() < 1e-15);
        let lighting = &summary.tasks[1];
        assert!(!lighting.shown);
        let table = markdown(&summary);
        let ours = table.lines().nth(2).unwrap();
        // Placement PL x1e-3 -> 3.0000; lighting hidden; blendshape not run; N-CLIP n/a.
        assert!(ours.starts_with("| noop (ours, final) | not run | not run | not run |  | 3.0000 | n/a | 1.0000 |  | not run"), "{ours}");
        assert!(ours.contains("| -- | -- |"), "{ours}");
        assert!(table.contains("GPT-4o (published, theirs) | 9.140"));
        assert!(html(&summary).contains("<td>Human (published, theirs)</td>"));
        // Exactly 25% is shown.
        let quarter: Vec<_> = (1..=4)
            .map(|i| {
                scores(
                    &format!("material{i}"),
                    Task::Material,
                    (i == 1).then_some(0.01),
                    None,
                )
            })
            .collect();
        assert!(
            summarise(&settings(), &Collected::from_scores(quarter))
                .unwrap()
                .tasks[0]
                .shown
        );
    }

    #[test]
    fn n_clip_is_shown_scaled_when_weights_were_configured() {
        let mut with_clip = settings();
        with_clip.clip_weights = Some("/models/clip.safetensors".to_owned());
        let mut placed = scores("placement1", Task::Placement, Some(0.002), Some(0.5));
        placed.settings = with_clip.clone();
        placed.n_clip = Some(0.0125);
        let table =
            markdown(&summarise(&with_clip, &Collected::from_scores(vec![placed])).unwrap());
        let ours = table.lines().nth(2).unwrap();
        // Placement N-CLIP x1e-3 -> 12.5000.
        assert!(ours.contains("| 2.0000 | 12.5000 | 0.5000 |"), "{ours}");
        assert!(
            table.contains("weights /models/clip.safetensors"),
            "{table}"
        );
        assert!(!table.contains("\"n/a\": N-CLIP is unavailable"), "{table}");
    }

    #[test]
    fn the_oracle_selected_row_is_labelled_ours_and_follows_the_25_percent_rule() {
        let mut with_oracle = settings();
        with_oracle.oracle_selected = true;
        let instance = |name: &str, headline: Option<f64>, best: Option<f64>| {
            let mut s = scores(name, Task::Placement, headline, None);
            s.settings = with_oracle.clone();
            s.oracle_selected = Some(crate::scores::OracleSelected {
                chosen: "start.py".to_owned(),
                programs: 2,
                executable: usize::from(best.is_some()),
                pl: best,
                n_clip: None,
                cd: None,
            });
            s
        };
        // The headline is executable once in four (shown); the oracle-selected figure never
        // (hidden), and the other way round for its PL.
        let all = vec![
            instance("placement1", Some(0.004), None),
            instance("placement2", None, None),
            instance("placement3", None, None),
            instance("placement4", None, None),
        ];
        let summary = summarise(&with_oracle, &Collected::from_scores(all)).unwrap();
        assert!(summary.tasks[0].shown);
        let selected = &summary.oracle_selected.as_ref().unwrap()[0];
        assert_eq!((selected.executable, selected.shown), (0, false));
        let table = markdown(&summary);
        let row = table.lines().nth(4).unwrap();
        assert!(row.contains(ORACLE_SELECTED_LABEL), "{table}");
        assert!(row.contains("| -- | -- |"), "{row}");
        assert!(table.contains("Oracle-selected: per instance"), "{table}");
        let page = html(&summary);
        assert_eq!(
            page.matches("<tr class=\"theirs\">").count(),
            tables::PUBLISHED.len()
        );
        // Without the setting there is no such row.
        let plain = markdown(
            &summarise(
                &settings(),
                &Collected::from_scores(vec![scores(
                    "placement1",
                    Task::Placement,
                    Some(0.1),
                    None,
                )]),
            )
            .unwrap(),
        );
        assert!(!plain.contains("oracle-selected"), "{plain}");
    }

    #[test]
    fn results_with_other_settings_are_refused() {
        let mut other = scores("placement1", Task::Placement, Some(0.1), None);
        other.settings.render.width = 512;
        let err = summarise(&settings(), &Collected::from_scores(vec![other]))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("render Cycles 512x64 8 spp vs Cycles 64x64 8 spp"),
            "{err}"
        );
    }

    #[test]
    fn merge_refuses_overlapping_shards_and_combines_disjoint_ones() {
        let root = tempfile::tempdir().unwrap();
        let shard = |name: &str, instances: &[&str]| {
            let dir = root.path().join(name);
            write_json(&dir.join(SETTINGS_FILE), &settings()).unwrap();
            for instance in instances {
                write_json(
                    &dir.join(instance).join(SCORES_FILE),
                    &scores(instance, Task::Placement, Some(0.001), None),
                )
                .unwrap();
            }
            dir
        };
        let a = shard("a", &["placement1", "placement3"]);
        let b = shard("b", &["placement2"]);
        let c = shard("c", &["placement2"]);
        let err = merge(&[a.clone(), b.clone(), c], &root.path().join("bad")).unwrap_err();
        assert!(err.to_string().contains("shards overlap"), "{err}");
        assert!(
            !root.path().join("bad").exists(),
            "a refused merge writes nothing"
        );
        let merged = merge(&[a, b], &root.path().join("all")).unwrap();
        assert_eq!(merged.tasks[0].scored, 3);
        assert!(root.path().join("all/report.md").is_file());
    }

    #[test]
    fn instance_names_that_would_leave_their_folder_are_refused() {
        let root = tempfile::tempdir().unwrap();
        let shard = root.path().join("shard");
        write_json(&shard.join(SETTINGS_FILE), &settings()).unwrap();
        let planted = shard.join("placement1").join(SCORES_FILE);
        for (instance, refusal) in [
            ("..", "climbs out of its folder"),
            ("../../victim", "path separator"),
            ("/etc", "path separator"),
            ("placement2", "lies in the folder \"placement1\""),
        ] {
            write_json(
                &planted,
                &scores(instance, Task::Placement, Some(0.1), None),
            )
            .unwrap();
            let err = merge(std::slice::from_ref(&shard), &root.path().join("into"))
                .unwrap_err()
                .to_string();
            assert!(err.contains(refusal), "{instance}: {err}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn links_in_a_shard_are_refused_not_followed() {
        let root = tempfile::tempdir().unwrap();
        let shard = root.path().join("shard");
        let instance = shard.join("placement1");
        write_json(&shard.join(SETTINGS_FILE), &settings()).unwrap();
        write_json(
            &instance.join(SCORES_FILE),
            &scores("placement1", Task::Placement, Some(0.1), None),
        )
        .unwrap();
        std::os::unix::fs::symlink(root.path(), instance.join("everything")).unwrap();
        let err = merge(&[shard], &root.path().join("into"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("is a link"), "{err}");
    }

    fn with_views(mut s: InstanceScores, pls: &[f64]) -> InstanceScores {
        s.cameras = (1..=pls.len()).map(|k| format!("Camera{k}")).collect();
        s.views = pls
            .iter()
            .enumerate()
            .map(|(k, pl)| crate::scores::ViewScore {
                camera: format!("Camera{}", k + 1),
                pl: *pl,
                n_clip: None,
            })
            .collect();
        s
    }

    #[test]
    fn counts_selected_scored_executable_harness_failed_and_pending_per_task() {
        let selected = |instance: &str, task: Task| SelectedInstance {
            instance: instance.to_owned(),
            task,
            cameras: vec!["Camera1".to_owned()],
        };
        let results = Collected {
            scores: vec![
                scores("placement1", Task::Placement, Some(0.002), Some(0.5)),
                scores("placement2", Task::Placement, None, None),
            ],
            failures: vec![
                HarnessFailure {
                    instance: "placement3".to_owned(),
                    task: Task::Placement,
                    error: "goal.py fails".to_owned(),
                },
                HarnessFailure {
                    instance: "lighting1".to_owned(),
                    task: Task::Lighting,
                    error: "views".to_owned(),
                },
            ],
            selected: vec![
                selected("placement1", Task::Placement),
                selected("placement2", Task::Placement),
                selected("placement3", Task::Placement),
                selected("placement4", Task::Placement),
                selected("lighting1", Task::Lighting),
            ],
        };
        let summary = summarise(&settings(), &results).unwrap();
        let placement = &summary.tasks[0];
        assert_eq!(
            (
                placement.selected,
                placement.scored,
                placement.executable,
                placement.harness_failed,
                placement.pending
            ),
            (4, 2, 1, 1, 1)
        );
        // A task with nothing scored has no figure, but is counted.
        let lighting = &summary.tasks[1];
        assert_eq!(
            (lighting.selected, lighting.scored, lighting.harness_failed),
            (1, 0, 1)
        );
        assert!(!lighting.shown && lighting.pl.is_none());
        assert_eq!(
            (
                summary.overall.selected,
                summary.overall.scored,
                summary.overall.harness_failed,
                summary.overall.pending
            ),
            (5, 2, 2, 1)
        );
        let table = markdown(&summary);
        assert!(
            table.contains("- placement: 4 selected; 2 scored (1 executable, 1 not executable); 1 harness-failed; 1 pending; CD over 1."),
            "{table}"
        );
        assert!(
            table.contains("- lighting: 1 selected; 0 scored (0 executable, 0 not executable); 1 harness-failed; 0 pending."),
            "{table}"
        );
        assert!(
            table.contains("2 instance(s) failed in the harness"),
            "{table}"
        );
        assert!(
            table.contains("1 selected instance(s) have no result yet"),
            "{table}"
        );
        let json = serde_json::to_value(&summary).unwrap();
        assert_eq!(json["tasks"][0]["harness_failed"], 1, "{json}");
        assert_eq!(json["tasks"][0]["selected"], 4, "{json}");
    }

    #[test]
    fn inconsistent_counts_leave_nothing_pending_instead_of_underflowing() {
        // The same instance scored twice, and failed in the harness too: more results than
        // instances selected.
        let twice = Collected {
            scores: vec![
                scores("placement1", Task::Placement, Some(0.002), None),
                scores("placement1", Task::Placement, Some(0.004), None),
            ],
            failures: vec![HarnessFailure {
                instance: "placement1".to_owned(),
                task: Task::Placement,
                error: "goal.py fails".to_owned(),
            }],
            ..Collected::default()
        };
        let summary = summarise(&settings(), &twice).unwrap();
        let placement = &summary.tasks[0];
        assert_eq!(
            (
                placement.selected,
                placement.scored,
                placement.harness_failed,
                placement.pending
            ),
            (1, 2, 1, 0)
        );
        assert_eq!(
            (
                summary.overall.selected,
                summary.overall.scored,
                summary.overall.pending
            ),
            (1, 2, 0)
        );
        let duplicates = Collected::from_scores(vec![
            scores("lighting1", Task::Lighting, Some(0.1), None),
            scores("lighting1", Task::Lighting, None, None),
            scores("lighting1", Task::Lighting, None, None),
        ]);
        let summary = summarise(&settings(), &duplicates).unwrap();
        assert_eq!(
            (summary.tasks[0].selected, summary.tasks[0].pending),
            (1, 0)
        );
        assert_eq!(summary.overall.pending, 0);
        assert!(!markdown(&summary).contains("have no result yet"));
    }

    #[test]
    fn the_all_instances_figure_scores_a_non_executable_proposal_as_start_py() {
        let start = |pl: Option<f64>, cd: Option<f64>| crate::scores::StartProgram {
            executable: pl.is_some(),
            error: pl.is_none().then(|| "raised".to_owned()),
            pl,
            n_clip: None,
            cd,
        };
        let mut failed_once = scores("placement2", Task::Placement, None, None);
        failed_once.start_program = Some(start(Some(0.010), Some(2.5)));
        let mut failed_twice = scores("placement3", Task::Placement, None, None);
        failed_twice.start_program = Some(start(None, None));
        let mut failed_l = Vec::new();
        for i in 1..=4 {
            let mut s = scores(&format!("lighting{i}"), Task::Lighting, None, None);
            s.start_program = Some(start(Some(0.02 * f64::from(i)), None));
            failed_l.push(s);
        }
        let mut all = vec![
            scores("placement1", Task::Placement, Some(0.002), Some(0.5)),
            failed_once,
            failed_twice,
        ];
        all.extend(failed_l);
        let summary = summarise(&settings(), &Collected::from_scores(all)).unwrap();
        let placement = &summary.all_instances[0];
        assert_eq!(
            (placement.instances, placement.as_start, placement.left_out),
            (2, 1, 1)
        );
        assert!((placement.pl.unwrap() - 0.006).abs() < 1e-15);
        assert!((placement.cd.unwrap() - 1.5).abs() < 1e-15);
        // The executable-only figure is unchanged beside it.
        assert!((summary.tasks[0].pl.unwrap() - 0.002).abs() < 1e-15);
        // Lighting: nothing executable, so the headline hides it; all instances shows it.
        let lighting = &summary.all_instances[1];
        assert_eq!((lighting.instances, lighting.as_start), (4, 4));
        assert!((lighting.pl.unwrap() - 0.05).abs() < 1e-15);
        let table = markdown(&summary);
        let headline = table.lines().nth(2).unwrap();
        let row = table.lines().nth(3).unwrap();
        assert!(
            headline.ends_with("| -- | -- | not run | not run |"),
            "{headline}"
        );
        assert!(
            row.starts_with(&format!("| noop (ours, {ALL_INSTANCES_LABEL}) | not run | not run | not run |  | 6.0000 | n/a | 1.5000 |  |")),
            "{row}"
        );
        assert!(
            row.ends_with("| 5.0000 | n/a | not run | not run |"),
            "{row}"
        );
        assert!(
            table.contains("placement 1 of 2 as start.py, 1 left out (start.py not executable either); lighting 4 of 4 as start.py"),
            "{table}"
        );
    }

    #[test]
    fn fit_views_are_reported_beside_the_scored_views() {
        // Noop looks at no goal view.
        let plain = summarise(
            &settings(),
            &Collected::from_scores(vec![with_views(
                scores("placement1", Task::Placement, Some(0.002), None),
                &[0.001, 0.003],
            )]),
        )
        .unwrap();
        assert_eq!(plain.views.scored, ["Camera1", "Camera2"]);
        assert_eq!(plain.views.fit_is_scored, None);
        assert!(markdown(&plain).contains("Fit views: none"));

        // The search fitted on every scored view: said plainly.
        let mut search = settings();
        search.system = "search (budget 60)".to_owned();
        search.fit_views = Some(FitViews::AllScored);
        let instance = |name: &str, pls: &[f64], settings: &EvalSettings| {
            let mut s = with_views(
                scores(
                    name,
                    Task::Placement,
                    Some(pls.iter().sum::<f64>() / pls.len() as f64),
                    None,
                ),
                pls,
            );
            s.settings = settings.clone();
            s
        };
        let fitted = summarise(
            &search,
            &Collected::from_scores(vec![instance("placement1", &[0.001, 0.003], &search)]),
        )
        .unwrap();
        assert_eq!(fitted.views.fit_is_scored, Some(true));
        assert_eq!(fitted.tasks[0].pl_held_out_views, None);
        let table = markdown(&fitted);
        assert!(
            table.contains("Fit views: all scored views. The system minimised PL on the very views it is scored on, so its figures are an upper bound")
                && table.contains("--search-views Camera1"),
            "{table}"
        );
        // Naming every view is the same thing.
        let mut both = search.clone();
        both.fit_views = Some(FitViews::Only(vec![
            "Camera1".to_owned(),
            "Camera2".to_owned(),
        ]));
        let named = summarise(
            &both,
            &Collected::from_scores(vec![instance("placement1", &[0.001, 0.003], &both)]),
        )
        .unwrap();
        assert_eq!(named.views.fit_is_scored, Some(true));

        // Fitted on Camera1 only: PL on the fit and the held-out views, per task.
        let mut first = search.clone();
        first.fit_views = Some(FitViews::Only(vec!["Camera1".to_owned()]));
        let held = summarise(
            &first,
            &Collected::from_scores(vec![
                instance("placement1", &[0.001, 0.003], &first),
                instance("placement2", &[0.002, 0.005], &first),
            ]),
        )
        .unwrap();
        assert_eq!(held.views.fit_is_scored, Some(false));
        let placement = &held.tasks[0];
        assert!((placement.pl_fit_views.unwrap() - 0.0015).abs() < 1e-15);
        assert!((placement.pl_held_out_views.unwrap() - 0.004).abs() < 1e-15);
        assert!((placement.pl.unwrap() - 0.00275).abs() < 1e-15);
        let table = markdown(&held);
        assert!(
            table.contains("Fit views: Camera1 (the goal views the system saw and worked to match); every other view is held out")
                && table.contains("placement 1.5000 / 4.0000"),
            "{table}"
        );
        assert!(!table.contains("very views"), "{table}");
    }

    #[test]
    fn our_cd_and_the_published_cd_are_separate_labelled_columns() {
        let summary = summarise(
            &settings(),
            &Collected::from_scores(vec![scores(
                "blendshape1",
                Task::Blendshape,
                Some(0.001),
                Some(0.25),
            )]),
        )
        .unwrap();
        let table = markdown(&summary);
        let mut lines = table.lines();
        assert_eq!(
            lines.next().unwrap(),
            "| system | BS PL | BS N-CLIP | BS CD (ours) | BS CD (published) | Pl PL | Pl N-CLIP | Pl CD (ours) | Pl CD (published) | Geo PL | Geo N-CLIP | Geo CD (ours) | Geo CD (published) | Li PL | Li N-CLIP | Mat PL | Mat N-CLIP |"
        );
        assert_eq!(lines.next().unwrap(), format!("|{}", "---|".repeat(17)));
        assert_eq!(
            lines.next().unwrap(),
            "| noop (ours, final) | 1.0000 | n/a | 0.2500 |  | not run | not run | not run |  | not run | not run | not run |  | not run | not run | not run | not run |"
        );
        assert_eq!(
            lines.next().unwrap(),
            format!(
                "| noop (ours, {ALL_INSTANCES_LABEL}) | 1.0000 | n/a | 0.2500 |  | not run | not run | not run |  | not run | not run | not run |  | not run | not run | not run | not run |"
            )
        );
        assert_eq!(
            lines.next().unwrap(),
            "| GPT-4o (published, theirs) | 9.140 | 20.47 |  | 0.904 | 11.89 | 30.38 |  | 11.22 | 6.747 | 8.561 |  | 1.192 | 2.410 | 2.398 | 3.653 | 8.942 |"
        );
        assert!(
            table.contains("CD (ours) is our own definition: point-to-surface Chamfer distance (100 points sampled per surface")
                && table.contains("the two columns are not comparable"),
            "{table}"
        );
        let page = html(&summary);
        assert!(
            page.contains("<th>BS CD (ours)</th><th>BS CD (published)</th>"),
            "{page}"
        );
        assert!(page.contains("<td>0.904</td>"), "{page}");
    }

    #[test]
    fn settings_from_before_point_to_surface_read_as_point_to_point_and_are_not_mixed() {
        let mut old = serde_json::to_value(settings()).unwrap();
        old.as_object_mut().unwrap().remove("cd_definition");
        let old: EvalSettings = serde_json::from_value(old).unwrap();
        assert_eq!(old.cd_definition, ChamferDefinition::PointToPoint);
        assert_eq!(
            old.differences(&settings()),
            ["CD point-to-point vs point-to-surface"]
        );
        let mut fitted = settings();
        fitted.fit_views = Some(FitViews::Only(vec!["Camera1".to_owned()]));
        assert_eq!(
            settings().differences(&fitted),
            ["fit views none vs Camera1"]
        );
        let json = serde_json::to_value(&fitted).unwrap();
        assert_eq!(json["fit_views"], serde_json::json!({"only": ["Camera1"]}));
        assert_eq!(json["cd_definition"], "point-to-surface");
        let mut legacy = summarise(&old, &Collected::default()).unwrap();
        legacy.settings.cd_definition = ChamferDefinition::PointToPoint;
        assert!(markdown(&legacy).contains("which include a sampling floor"));
    }

    #[test]
    fn merge_carries_harness_failures_and_selections() {
        let root = tempfile::tempdir().unwrap();
        let a = root.path().join("a");
        write_json(&a.join(SETTINGS_FILE), &settings()).unwrap();
        write_json(
            &a.join("placement1").join(SCORES_FILE),
            &scores("placement1", Task::Placement, Some(0.001), None),
        )
        .unwrap();
        let b = root.path().join("b");
        write_json(&b.join(SETTINGS_FILE), &settings()).unwrap();
        write_json(
            &b.join("placement2").join(HARNESS_FAILURE_FILE),
            &HarnessFailure {
                instance: "placement2".to_owned(),
                task: Task::Placement,
                error: "goal.py fails".to_owned(),
            },
        )
        .unwrap();
        write_json(
            &b.join("placement3").join(SELECTED_FILE),
            &SelectedInstance {
                instance: "placement3".to_owned(),
                task: Task::Placement,
                cameras: vec!["Camera1".to_owned()],
            },
        )
        .unwrap();
        let merged = merge(&[a.clone(), b.clone()], &root.path().join("all")).unwrap();
        let placement = &merged.tasks[0];
        assert_eq!(
            (
                placement.selected,
                placement.scored,
                placement.harness_failed,
                placement.pending
            ),
            (3, 1, 1, 1)
        );
        // The same failed instance in two shards is an overlap like any other.
        let err = merge(&[b.clone(), b], &root.path().join("twice")).unwrap_err();
        assert!(err.to_string().contains("shards overlap"), "{err}");
        // A failure whose instance was scored since is history.
        write_json(
            &a.join("placement1").join(HARNESS_FAILURE_FILE),
            &HarnessFailure {
                instance: "placement1".to_owned(),
                task: Task::Placement,
                error: "old".to_owned(),
            },
        )
        .unwrap();
        assert!(collect(&a).unwrap().failures.is_empty());
    }

    /// Three level-1 instances (judged 5, judged 1, judgement failed) and one level-2
    /// instance not judged, with a judgement only when `settings` names a judge.
    fn judged_levels(settings: &EvalSettings) -> Collected {
        use crate::judge::JudgeScores;
        use crate::leak::LeakCheck;

        let level = |name: &str, task: Task, judge: Option<Judgement>, status: LeakStatus| {
            let mut s = scores(name, task, Some(0.01), None);
            s.judge = judge;
            s.answer_leak = Some(LeakCheck {
                status,
                moved: Vec::new(),
                leaked: Vec::new(),
                detail: format!("{} detail", status.describe()),
            });
            s
        };
        let judged = |rating: u8| Judgement::Judged {
            scores: JudgeScores {
                task_completion: rating,
                visual_quality: rating,
                spatial_accuracy: rating,
                detail_accuracy: 1,
            },
            justification: String::new(),
        };
        let judge = |j: Judgement| settings.judge.is_some().then_some(j);
        let mut all = vec![
            level(
                "level1-a",
                Task::Level1,
                judge(judged(5)),
                LeakStatus::Leaks,
            ),
            level(
                "level1-b",
                Task::Level1,
                judge(judged(1)),
                LeakStatus::Clean,
            ),
            level(
                "level1-c",
                Task::Level1,
                judge(Judgement::Failed {
                    error: "malformed".to_owned(),
                }),
                LeakStatus::Clean,
            ),
            level(
                "level2-a",
                Task::Level2,
                judge(Judgement::NotJudged {
                    reason: "not executable".to_owned(),
                }),
                LeakStatus::NoCameraChange,
            ),
        ];
        for s in &mut all {
            s.settings = settings.clone();
        }
        Collected::from_scores(all)
    }

    #[test]
    fn blenderbench_judge_figures_count_failures_apart_and_need_a_judge() {
        let mut settings = settings();
        settings.suite = Suite::BlenderBench;
        // Without a judge: no judge figures, no judge column.
        let plain = summarise(&settings, &judged_levels(&settings)).unwrap();
        assert_eq!(plain.judge, None);
        assert!(!markdown(&plain).contains(JUDGE_COLUMN));
        let leaks = plain.answer_leaks.as_ref().unwrap();
        assert_eq!(leaks.len(), 4);
        assert_eq!(leaks[0].status, LeakStatus::Leaks);
        assert!(markdown(&plain).contains("1 of 4 scored instance(s) leak"));

        let unjudged = settings.clone();
        settings.judge = Some("scripted/judge".to_owned());
        assert_eq!(
            unjudged.differences(&settings),
            ["no judge vs judge scripted/judge"]
        );
        let with_judge = summarise(&settings, &judged_levels(&settings)).unwrap();
        let levels = with_judge.judge.as_ref().unwrap();
        assert_eq!(
            (levels[0].judged, levels[0].failed, levels[0].not_judged),
            (2, 1, 0)
        );
        // (5+5+5+1)/4 and (1+1+1+1)/4, averaged: the failed judgement is in no mean.
        assert_eq!(levels[0].mean, Some(2.5));
        assert_eq!(levels[0].task_completion, Some(3.0));
        assert_eq!((levels[1].judged, levels[1].not_judged), (0, 1));
        assert_eq!(levels[1].mean, None);
        let table = markdown(&with_judge);
        assert!(table.contains(&format!("L1 {JUDGE_COLUMN}")), "{table}");
        assert!(table.contains("| 2.50 | n/a | not run |"), "{table}");
        // The judge rates the final program only: the other rows leave its cells empty.
        assert!(
            table
                .contains("start.py) | 1.0000 | n/a | 1.0000 | n/a | not run | not run |  |  |  |"),
            "{table}"
        );
        // BlenderBench has no published rows.
        assert!(!table.contains("(published, theirs)"), "{table}");
    }
}
