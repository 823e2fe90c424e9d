//! The report's tables: the Markdown and HTML renderings of a [`Summary`], our rows beside
//! the published leaderboard's (marked as theirs), and the notes under them that say what
//! each figure means and what was left out.

use std::fmt::Write as _;

use super::{JudgeSummary, Summary, TaskSummary};
use crate::layout::{Suite, Task};
use crate::leak::LeakStatus;
use crate::scores::ChamferDefinition;
use crate::summary::{Row, Table};

/// A published leaderboard row (lower is better), values as displayed there.
pub(super) struct Published {
    system: &'static str,
    /// In the leaderboard's column order: BS PL, BS N-CLIP, BS CD, Pl PL, Pl N-CLIP, Pl CD,
    /// Geo PL, Geo N-CLIP, Geo CD, Li PL, Li N-CLIP, Mat PL, Mat N-CLIP.
    values: [&'static str; 13],
}

/// From the BlenderGym paper's leaderboard (CVPR 2025), copied from
/// `shared/reference/blendergym.md`.
pub(super) const PUBLISHED: [Published; 3] = [
    Published {
        system: "GPT-4o",
        values: [
            "9.140", "20.47", "0.904", "11.89", "30.38", "11.22", "6.747", "8.561", "1.192",
            "2.410", "2.398", "3.653", "8.942",
        ],
    },
    Published {
        system: "Claude-3.5-Sonnet",
        values: [
            "12.79", "27.96", "1.962", "13.19", "51.76", "11.29", "10.81", "13.04", "1.452",
            "2.897", "4.049", "5.769", "11.44",
        ],
    },
    Published {
        system: "Human",
        values: [
            "0.934", "9.12", "0.399", "0.423", "13.34", "1.532", "1.269", "2.434", "0.334",
            "1.239", "1.632", "0.629", "3.043",
        ],
    },
];

/// The task's short name in column headers, as on the leaderboard.
fn abbreviation(task: Task) -> &'static str {
    match task {
        Task::Blendshape => "BS",
        Task::Placement => "Pl",
        Task::Geometry => "Geo",
        Task::Lighting => "Li",
        Task::Material => "Mat",
        Task::Level1 => "L1",
        Task::Level2 => "L2",
        Task::Level3 => "L3",
    }
}

/// The columns: per task PL and N-CLIP, and for the shape tasks CD twice, ours and the
/// published one side by side: the definitions differ, so they are never one column. With a
/// judge (BlenderBench), one column per level for its mean rating.
fn header(summary: &Summary) -> Vec<String> {
    let suite = summary.settings.suite;
    let mut header = vec!["system".to_owned()];
    for &task in suite.tasks() {
        let short = abbreviation(task);
        header.push(format!("{short} PL"));
        header.push(format!("{short} N-CLIP"));
        if task.has_chamfer() {
            header.push(format!("{short} CD (ours)"));
            header.push(format!("{short} CD (published)"));
        }
    }
    if summary.judge.is_some() {
        for &task in suite.tasks() {
            header.push(format!("{} {JUDGE_COLUMN}", abbreviation(task)));
        }
    }
    header
}

/// The judge's columns' heading: labelled as a judge's rating, which runs the other way.
pub const JUDGE_COLUMN: &str = "judge (VLM, 0-5, higher is better)";

/// How the oracle-selected row is labelled wherever it is shown.
pub const ORACLE_SELECTED_LABEL: &str =
    "oracle-selected: best of its programs and start.py, chosen with the ground truth";
/// How the all-instances row is labelled wherever it is shown.
pub const ALL_INSTANCES_LABEL: &str = "all instances: a non-executable proposal scores as start.py";

/// One task's cells of one of our rows.
struct RowFigures {
    task: Task,
    shown: bool,
    pl: Option<f64>,
    n_clip: Option<f64>,
    cd: Option<f64>,
}

/// Our row, in the suite's columns and scales. "--": under the 25% rule; "n/a": the
/// metric is unavailable (N-CLIP without weights); "not run": no instance of the task.
/// The published CD columns are left empty.
fn our_row(label: String, suite: Suite, tasks: &[RowFigures]) -> Vec<String> {
    let mut row = vec![label];
    for &task in suite.tasks() {
        let found = tasks.iter().find(|t| t.task == task);
        let cell = |value: Option<f64>, scale: f64| match found {
            None => "not run".to_owned(),
            Some(t) if !t.shown => "--".to_owned(),
            Some(_) => value.map_or("n/a".to_owned(), |v| format!("{:.4}", v / scale)),
        };
        let scale = task.display_scale();
        row.push(cell(found.and_then(|t| t.pl), scale));
        row.push(cell(found.and_then(|t| t.n_clip), scale));
        if task.has_chamfer() {
            row.push(cell(found.and_then(|t| t.cd), 1.0));
            row.push(String::new());
        }
    }
    row
}

/// The judge's cells of a row: its mean rating per level for the final row (`judge`),
/// empty for the others, which it does not rate.
fn judge_cells(suite: Suite, judge: Option<&[JudgeSummary]>) -> Vec<String> {
    suite
        .tasks()
        .iter()
        .map(|&task| match judge {
            None => String::new(),
            Some(levels) => match levels.iter().find(|j| j.task == task) {
                None => "not run".to_owned(),
                Some(j) => j.mean.map_or("n/a".to_owned(), |mean| format!("{mean:.2}")),
            },
        })
        .collect()
}

fn task_row(tasks: &[TaskSummary]) -> Vec<RowFigures> {
    tasks
        .iter()
        .map(|t| RowFigures {
            task: t.task,
            // A task with nothing scored (all harness failures or pending) has no figure.
            shown: t.shown,
            pl: t.pl,
            n_clip: t.n_clip,
            cd: t.cd,
        })
        .collect()
}

/// A published row in our columns: its CD under "CD (published)", "CD (ours)" empty.
fn published_row(published: &Published) -> Vec<String> {
    let mut row = vec![format!("{} (published, theirs)", published.system)];
    let mut values = published.values.iter();
    for task in Task::GYM {
        let mut take = || values.next().map_or(String::new(), |v| (*v).to_owned());
        row.push(take());
        row.push(take());
        if task.has_chamfer() {
            row.push(String::new());
            row.push(take());
        }
    }
    row
}

/// The table's rows, ours first; `true` marks the published (theirs) rows, which only
/// BlenderGym has (see the BlenderBench notes).
fn rows(summary: &Summary) -> Vec<(bool, Vec<String>)> {
    let system = &summary.settings.system;
    let suite = summary.settings.suite;
    let judged = summary.judge.is_some();
    let with_judge = |mut row: Vec<String>, judge: Option<&[JudgeSummary]>| {
        if judged {
            row.extend(judge_cells(suite, judge));
        }
        row
    };
    let mut rows = vec![(
        false,
        with_judge(
            our_row(
                format!("{system} (ours, {})", summary.selection),
                suite,
                &task_row(&summary.tasks),
            ),
            summary.judge.as_deref(),
        ),
    )];
    let all: Vec<RowFigures> = summary
        .all_instances
        .iter()
        .map(|t| RowFigures {
            task: t.task,
            // Every scored instance counts, so the 25% rule has nothing to hide.
            shown: t.instances > 0,
            pl: t.pl,
            n_clip: t.n_clip,
            cd: t.cd,
        })
        .collect();
    if !all.is_empty() {
        rows.push((
            false,
            with_judge(
                our_row(
                    format!("{system} (ours, {ALL_INSTANCES_LABEL})"),
                    suite,
                    &all,
                ),
                None,
            ),
        ));
    }
    if let Some(tasks) = &summary.oracle_selected {
        rows.push((
            false,
            with_judge(
                our_row(
                    format!("{system} (ours, {ORACLE_SELECTED_LABEL})"),
                    suite,
                    &task_row(tasks),
                ),
                None,
            ),
        ));
    }
    if suite == Suite::BlenderGym {
        for published in &PUBLISHED {
            rows.push((true, published_row(published)));
        }
    }
    rows
}

/// The CD note: whose definition each CD column is.
fn cd_note(summary: &Summary) -> String {
    let ours = match summary.settings.cd_definition {
        ChamferDefinition::PointToSurface => format!(
            "point-to-surface Chamfer distance ({} points sampled per surface, each measured to the other surface's nearest triangle; no sampling floor)",
            summary.settings.chamfer_points
        ),
        ChamferDefinition::PointToPoint => format!(
            "point-to-point Chamfer distance ({} points per surface; results made before point-to-surface, which include a sampling floor of about 1/sqrt(points per unit area))",
            summary.settings.chamfer_points
        ),
    };
    format!(
        "CD (ours) is our own definition: {ours}, over every rendered mesh, unscaled, in scene units (docs/eval.md). CD (published) is the paper's, whose definition is not published (the public evaluator has none): the two columns are not comparable."
    )
}

/// `items` joined by `separator`, or `none` when there are none.
fn joined_or(items: &[String], separator: &str, none: &str) -> String {
    if items.is_empty() {
        none.to_owned()
    } else {
        items.join(separator)
    }
}

/// The views note: what was scored, what the system fitted, and whether they are the same.
fn views_notes(summary: &Summary) -> Vec<String> {
    let views = &summary.views;
    let mut notes = vec![format!(
        "Scored views: every camera of each instance, Camera1..CameraN with N its goal renders, checked against the scene's Camera<k> objects ({}).",
        joined_or(&views.scored, ", ", "none scored yet")
    )];
    let Some(fit) = &views.fit else {
        notes.push("Fit views: none; the system does not look at the goal renders.".to_owned());
        return notes;
    };
    if views.fit_is_scored == Some(true) {
        notes.push(if summary.settings.system.starts_with("search") {
            format!(
                "Fit views: {}. The system minimised PL on the very views it is scored on, so its figures are an upper bound on what fitting those views can reach, not a fair comparison with a model (which is given Camera1 only). Fit on fewer views (--search-views Camera1) to score it on views it never saw.",
                fit.describe()
            )
        } else {
            // The agent: its instances have no view besides the target's (BlenderBench's
            // have Camera1 only).
            format!(
                "Fit views: {}. The system was shown these goal views as its target, and the instances have no other view, so none was held out.",
                fit.describe()
            )
        });
        return notes;
    }
    let split: Vec<String> = summary
        .tasks
        .iter()
        .filter_map(|t| {
            let scale = t.task.display_scale();
            let show = |v: Option<f64>| v.map_or("n/a".to_owned(), |v| format!("{:.4}", v / scale));
            (t.pl_fit_views.is_some() || t.pl_held_out_views.is_some()).then(|| {
                format!(
                    "{} {} / {}",
                    t.task,
                    show(t.pl_fit_views),
                    show(t.pl_held_out_views)
                )
            })
        })
        .collect();
    notes.push(format!(
        "Fit views: {} (the goal views the system saw and worked to match); every other view is held out and scored all the same. PL on the fit views / on the held-out views, same scales, executable instances: {}.",
        fit.describe(),
        joined_or(&split, "; ", "none executable")
    ));
    notes
}

/// What BlenderBench's table shows and does not: the scale, why it has no published rows,
/// the judge, and the answer-leakage check of every instance.
fn blenderbench_notes(summary: &Summary) -> Vec<String> {
    let mut notes = vec![
        "Levels: level1 (L1) camera adjustment, level2 (L2) multi-step editing, level3 (L3) compositional editing. PL and N-CLIP are shown x1e-2 (our scale); lower is better.".to_owned(),
        format!(
            "Ours: the system's own final program per instance, rendered with {} by Blender {}; the goal re-rendered the same way from goal.py. The first row is over executable instances only. No published rows: VIGA's evaluator reports, per instance, the round with the lowest N-CLIP against the goal renders, a choice made with the ground truth (our oracle-selected row, --oracle-selected, is that kind of figure), and its numbers were measured on other data and settings.",
            summary.settings.render,
            summary.settings.blender_version
        ),
    ];
    match (&summary.judge, &summary.settings.judge) {
        (Some(levels), Some(label)) => {
            let per_level: Vec<String> = levels
                .iter()
                .map(|j| {
                    let show = |v: Option<f64>| v.map_or("n/a".to_owned(), |v| format!("{v:.2}"));
                    format!(
                        "{}: {} judged, {} failed, {} not judged; task completion {}, visual quality {}, spatial accuracy {}, detail accuracy {}, mean {}",
                        j.task,
                        j.judged,
                        j.failed,
                        j.not_judged,
                        show(j.task_completion),
                        show(j.visual_quality),
                        show(j.spatial_accuracy),
                        show(j.detail_accuracy),
                        show(j.mean)
                    )
                })
                .collect();
            notes.push(format!(
                "Judge columns: a vision-language model's reference-free rating ({label}), not a measurement. Each executable instance's final Camera1 render is rated against the task text and the picture of the goal the agent was shown, on task completion, visual quality, spatial accuracy and detail accuracy, integers 0-5, higher is better; a column is the mean of the four, over the judged instances of the level. A failed judgement (an answer that is not one JSON object in the judge's schema, or a model that could not be asked) is in no mean and never guessed. {}.",
                per_level.join("; ")
            ));
        }
        _ => notes.push(
            "No judge: no reference-free ratings were made (give --judge-provider to have a vision-language model rate the results).".to_owned(),
        ),
    }
    if let Some(leaks) = &summary.answer_leaks {
        let flagged = leaks
            .iter()
            .filter(|entry| entry.status == LeakStatus::Leaks)
            .count();
        let per_instance: Vec<String> = leaks
            .iter()
            .map(|entry| match entry.status {
                LeakStatus::Leaks => format!("{}: LEAKS ({})", entry.instance, entry.detail),
                other => format!("{}: {}", entry.instance, other.describe()),
            })
            .collect();
        notes.push(format!(
            "Answer-leakage check (does blender_file.blend already hold the goal camera pose of a camera the task moves?): {flagged} of {} scored instance(s) leak. {}.",
            leaks.len(),
            joined_or(&per_instance, "; ", "none scored yet")
        ));
    }
    notes
}

fn notes(summary: &Summary) -> Vec<String> {
    let clip_note = match &summary.settings.clip_weights {
        Some(weights) => format!(
            "\"--\": fewer than 25% of the task's instances were executable. N-CLIP: 1 - cosine similarity of CLIP ViT-B/32 image embeddings, weights {weights}."
        ),
        None => "\"--\": fewer than 25% of the task's instances were executable. \"n/a\": N-CLIP is unavailable (no CLIP weights configured), never estimated.".to_owned(),
    };
    let mut notes = match summary.settings.suite {
        Suite::BlenderGym => vec![
            "PL and N-CLIP are shown x1e-3 for blendshape (BS) and placement (Pl), x1e-2 for geometry, lighting and material, as on the leaderboard; CD is unscaled. Lower is better.".to_owned(),
            format!(
                "Ours: the system's own final program per instance, rendered with {} by Blender {}; the goal re-rendered the same way. The first row is over executable instances only. The published rows used Cycles 512x512 at 512 samples in Blender 3.6 on the full BlenderGym set: compare only runs with the same settings and data.",
                summary.settings.render,
                summary.settings.blender_version
            ),
            clip_note,
            cd_note(summary),
        ],
        Suite::BlenderBench => {
            let mut notes = blenderbench_notes(summary);
            notes.insert(2, clip_note);
            notes
        }
    };
    notes.extend(views_notes(summary));
    notes.extend(
        summary
            .settings
            .containment
            .0
            .as_ref()
            .map(containment_note),
    );
    notes.extend(all_instances_note(summary));
    if summary.oracle_selected.is_some() {
        notes.push("Oracle-selected: per instance, the program with the lowest PL against the goal renders among every distinct program the system proposed (the final one, its intermediate ones, and start.py), as the public evaluator's \"best proposal\". It uses the ground truth to choose, so it is not the system's own result; the first row is.".to_owned());
    }
    for task in &summary.tasks {
        notes.push(format!(
            "{}: {} selected; {} scored ({} executable, {} not executable); {} harness-failed; {} pending{}.",
            task.task,
            task.selected,
            task.scored,
            task.executable,
            task.scored - task.executable,
            task.harness_failed,
            task.pending,
            if task.task.has_chamfer() {
                format!("; CD over {}", task.cd_instances)
            } else {
                String::new()
            }
        ));
    }
    if summary.overall.harness_failed > 0 {
        notes.push(format!(
            "{} instance(s) failed in the harness (the instance could not be scored: see <instance>/harness-failure.json); they are in no figure, and rerunning the same command retries them.",
            summary.overall.harness_failed
        ));
    }
    if summary.overall.pending > 0 {
        notes.push(format!(
            "{} selected instance(s) have no result yet: rerun the same command to finish them.",
            summary.overall.pending
        ));
    }
    notes
}

/// How the all-instances row counts: every scored instance, start.py in place of a proposal
/// that does not run; `None` when no task has instances.
fn all_instances_note(summary: &Summary) -> Option<String> {
    let as_start: Vec<String> = summary
        .all_instances
        .iter()
        .map(|t| {
            let mut text = format!("{} {} of {} as start.py", t.task, t.as_start, t.instances);
            if t.left_out > 0 {
                let _ = write!(
                    text,
                    ", {} left out (start.py not executable either)",
                    t.left_out
                );
            }
            text
        })
        .collect();
    (!as_start.is_empty()).then(|| {
        format!(
            "All instances: every scored instance counts; where the proposal is not executable, start.py (the instance's starting program) is scored in its place, so not running scores as doing nothing. The 25% rule does not apply. {}.",
            as_start.join("; ")
        )
    })
}

/// The summary as the one report writer shows it: our rows and the published ones, and the
/// notes.
pub fn table(summary: &Summary) -> Table {
    Table {
        title: None,
        header: header(summary),
        rows: rows(summary)
            .into_iter()
            .map(|(published, cells)| Row { published, cells })
            .collect(),
        notes: notes(summary),
    }
}

pub fn markdown(summary: &Summary) -> String {
    table(summary).markdown()
}

pub fn html(summary: &Summary) -> String {
    table(summary).html(summary.settings.suite.name())
}

/// What the workers that ran the programs were contained under: each half and each limit in
/// words, and plainly when something did not hold.
fn containment_note(status: &viga_blender::ContainmentStatus) -> String {
    let verdict = if status.policy == viga_blender::ContainmentPolicy::Off {
        "the programs ran uncontained (--containment off)".to_owned()
    } else if status.is_complete() {
        format!("every half held ({})", status.policy)
    } else {
        format!("NOT every half held ({})", status.policy)
    };
    format!(
        "Containment of the workers: {verdict}: {}.",
        status.summary()
    )
}
