//! Aggregation of an output folder's `scores.json` files into per-task and overall figures
//! (`summary.json`), and a Markdown and an HTML table that put them beside the published
//! leaderboard, which is marked as theirs. Also merging shard outputs into one folder.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use viga_core::report::escape;

use crate::EvalError;
use crate::layout::Task;
use crate::scores::{
    EvalSettings, InstanceScores, SCORES_FILE, SETTINGS_FILE, read_json, write_json,
};

pub const SUMMARY_FILE: &str = "summary.json";
pub const MARKDOWN_FILE: &str = "report.md";
pub const HTML_FILE: &str = "report.html";

/// The public rule: a task with fewer than this fraction of executable instances is shown as
/// "--", never as a number.
pub const MIN_EXECUTABLE_FRACTION: f64 = 0.25;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskSummary {
    pub task: Task,
    pub instances: usize,
    pub executable: usize,
    /// False under the 25% rule: the means below are then not shown in tables.
    pub shown: bool,
    /// Means over the executable instances (raw, not leaderboard-scaled).
    pub pl: Option<f64>,
    pub cd: Option<f64>,
    /// Instances whose CD could be computed.
    pub cd_instances: usize,
    pub n_clip: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub settings: EvalSettings,
    /// "final": the system's own final program per instance (the headline).
    pub selection: String,
    pub tasks: Vec<TaskSummary>,
    /// The same figures for the best program per instance chosen with the ground truth
    /// (the benchmark's "best proposal"), when the evaluation scored it; always labelled
    /// "oracle-selected" where shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oracle_selected: Option<Vec<TaskSummary>>,
    /// Over all instances of all tasks; not a leaderboard figure (it has none).
    pub overall: TaskOverall,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskOverall {
    pub instances: usize,
    pub executable: usize,
    pub pl: Option<f64>,
}

fn mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let (sum, count) = values.fold((0.0, 0usize), |(s, c), v| (s + v, c + 1));
    (count > 0).then(|| sum / count as f64)
}

/// Every `<out>/<instance>/scores.json`, sorted by instance.
pub fn collect(out: &Path) -> Result<Vec<InstanceScores>, EvalError> {
    let entries = std::fs::read_dir(out).map_err(|err| EvalError::io(out, err))?;
    let mut all = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|err| EvalError::io(out, err))?;
        let path = entry.path().join(SCORES_FILE);
        if path.is_file() {
            let scores = read_json::<InstanceScores>(&path)?;
            check_instance_name(&scores.instance, &entry.file_name(), &path)?;
            all.push(scores);
        }
    }
    all.sort_by(|a, b| (a.task, &a.instance).cmp(&(b.task, &b.instance)));
    Ok(all)
}

/// An instance name from a `scores.json` is used as a folder name (merge copies
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
pub fn summarise(settings: &EvalSettings, scores: &[InstanceScores]) -> Result<Summary, EvalError> {
    for score in scores {
        let differences = score.settings.differences(settings);
        if !differences.is_empty() {
            return Err(EvalError::BadResults {
                path: PathBuf::from(&score.instance).join(SCORES_FILE),
                message: format!("made with other settings ({})", differences.join("; ")),
            });
        }
    }
    let headline = task_summaries(scores, |s| Figures {
        executable: s.executable,
        pl: s.pl,
        n_clip: s.n_clip,
        cd: s.cd,
    });
    let oracle_selected = settings.oracle_selected.then(|| {
        task_summaries(scores, |s| match &s.oracle_selected {
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
    Ok(Summary {
        settings: settings.clone(),
        selection: "final".to_owned(),
        overall: TaskOverall {
            instances: scores.len(),
            executable: scores.iter().filter(|s| s.executable).count(),
            pl: mean(scores.iter().filter_map(|s| s.pl)),
        },
        tasks: headline,
        oracle_selected,
    })
}

/// One program's figures for an instance, as a summary counts them.
#[derive(Debug, Default)]
struct Figures {
    executable: bool,
    pl: Option<f64>,
    n_clip: Option<f64>,
    cd: Option<f64>,
}

/// Per-task means of the figures `pick` takes from each instance, over executable instances.
fn task_summaries(
    scores: &[InstanceScores],
    pick: impl Fn(&InstanceScores) -> Figures,
) -> Vec<TaskSummary> {
    let mut tasks = Vec::new();
    for task in Task::ALL {
        let of_task: Vec<Figures> = scores
            .iter()
            .filter(|s| s.task == task)
            .map(&pick)
            .collect();
        if of_task.is_empty() {
            continue;
        }
        let executable: Vec<&Figures> = of_task.iter().filter(|f| f.executable).collect();
        let cds: Vec<f64> = executable.iter().filter_map(|f| f.cd).collect();
        tasks.push(TaskSummary {
            task,
            instances: of_task.len(),
            executable: executable.len(),
            shown: executable.len() as f64 >= MIN_EXECUTABLE_FRACTION * of_task.len() as f64,
            pl: mean(executable.iter().filter_map(|f| f.pl)),
            cd_instances: cds.len(),
            cd: mean(cds.into_iter()),
            n_clip: mean(executable.iter().filter_map(|f| f.n_clip)),
        });
    }
    tasks
}

/// A published leaderboard row (lower is better), values as displayed there.
struct Published {
    system: &'static str,
    /// In column order: BS PL, BS N-CLIP, BS CD, Pl PL, Pl N-CLIP, Pl CD, Geo PL, Geo N-CLIP,
    /// Geo CD, Li PL, Li N-CLIP, Mat PL, Mat N-CLIP.
    values: [&'static str; 13],
}

/// From the BlenderGym paper's leaderboard (CVPR 2025), copied from
/// `shared/reference/blendergym.md`.
const PUBLISHED: [Published; 3] = [
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

const HEADER: [&str; 14] = [
    "system",
    "BS PL",
    "BS N-CLIP",
    "BS CD",
    "Pl PL",
    "Pl N-CLIP",
    "Pl CD",
    "Geo PL",
    "Geo N-CLIP",
    "Geo CD",
    "Li PL",
    "Li N-CLIP",
    "Mat PL",
    "Mat N-CLIP",
];

/// How the oracle-selected row is labelled wherever it is shown.
pub const ORACLE_SELECTED_LABEL: &str =
    "oracle-selected: best of its programs and start.py, chosen with the ground truth";

/// Our row, in the leaderboard's columns and scales. "--": under the 25% rule; "n/a": the
/// metric is unavailable (N-CLIP without weights); "not run": no instance of the task.
fn our_row(label: String, tasks: &[TaskSummary]) -> Vec<String> {
    let mut row = vec![label];
    for task in Task::ALL {
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
        }
    }
    row
}

/// The table's rows, ours first; `true` marks the published (theirs) rows.
fn rows(summary: &Summary) -> Vec<(bool, Vec<String>)> {
    let mut rows = vec![(
        false,
        our_row(
            format!("{} (ours, {})", summary.settings.system, summary.selection),
            &summary.tasks,
        ),
    )];
    if let Some(tasks) = &summary.oracle_selected {
        rows.push((
            false,
            our_row(
                format!(
                    "{} (ours, {ORACLE_SELECTED_LABEL})",
                    summary.settings.system
                ),
                tasks,
            ),
        ));
    }
    for published in &PUBLISHED {
        let mut row = vec![format!("{} (published, theirs)", published.system)];
        row.extend(published.values.iter().map(|v| (*v).to_owned()));
        rows.push((true, row));
    }
    rows
}

fn notes(summary: &Summary) -> Vec<String> {
    let mut notes = vec![
        "PL and N-CLIP are shown x1e-3 for blendshape (BS) and placement (Pl), x1e-2 for geometry, lighting and material, as on the leaderboard; CD is unscaled. Lower is better.".to_owned(),
        format!(
            "Ours: the system's own final program per instance, rendered with {} by Blender {}; the goal re-rendered the same way. The published rows used Cycles 512x512 at 512 samples in Blender 3.6 on the full BlenderGym set: compare only runs with the same settings and data.",
            summary.settings.render,
            summary.settings.blender_version
        ),
        match &summary.settings.clip_weights {
            Some(weights) => format!(
                "\"--\": fewer than 25% of the task's instances were executable. N-CLIP: 1 - cosine similarity of CLIP ViT-B/32 image embeddings, weights {weights}."
            ),
            None => "\"--\": fewer than 25% of the task's instances were executable. \"n/a\": N-CLIP is unavailable (no CLIP weights configured), never estimated.".to_owned(),
        },
    ];
    if summary.oracle_selected.is_some() {
        notes.push("Oracle-selected: per instance, the program with the lowest PL against the goal renders among every distinct program the system proposed (the final one, its intermediate ones, and start.py), as the public evaluator's \"best proposal\". It uses the ground truth to choose, so it is not the system's own result; the first row is.".to_owned());
    }
    for task in &summary.tasks {
        notes.push(format!(
            "{}: {} of {} instances executable{}.",
            task.task,
            task.executable,
            task.instances,
            if task.task.has_chamfer() {
                format!(", CD over {}", task.cd_instances)
            } else {
                String::new()
            }
        ));
    }
    notes
}

pub fn markdown(summary: &Summary) -> String {
    let mut out = String::from("| ");
    out.push_str(&HEADER.join(" | "));
    out.push_str(" |\n|");
    out.push_str(&"---|".repeat(HEADER.len()));
    out.push('\n');
    for (_, row) in rows(summary) {
        let _ = writeln!(out, "| {} |", row.join(" | "));
    }
    out.push('\n');
    for note in notes(summary) {
        let _ = writeln!(out, "- {note}");
    }
    out
}

pub fn html(summary: &Summary) -> String {
    let mut out = String::from(
        "<!doctype html>\n<meta charset=\"utf-8\">\n<title>BlenderGym evaluation</title>\n<style>table{border-collapse:collapse}td,th{border:1px solid #999;padding:2px 6px;text-align:right}td:first-child{text-align:left}tr.theirs{color:#666}</style>\n<table>\n<tr>",
    );
    for head in HEADER {
        let _ = write!(out, "<th>{}</th>", escape(head));
    }
    out.push_str("</tr>\n");
    for (theirs, row) in rows(summary) {
        out.push_str(if theirs {
            "<tr class=\"theirs\">"
        } else {
            "<tr>"
        });
        for cell in row {
            let _ = write!(out, "<td>{}</td>", escape(&cell));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n<ul>\n");
    for note in notes(summary) {
        let _ = writeln!(out, "<li>{}</li>", escape(&note));
    }
    out.push_str("</ul>\n");
    out
}

/// Reads `<out>`'s results and writes `summary.json`, `report.md` and `report.html` there.
pub fn write_reports(out: &Path) -> Result<Summary, EvalError> {
    let settings: EvalSettings = read_json(&out.join(SETTINGS_FILE))?;
    let summary = summarise(&settings, &collect(out)?)?;
    write_json(&out.join(SUMMARY_FILE), &summary)?;
    crate::write_atomic(&out.join(MARKDOWN_FILE), markdown(&summary).as_bytes())?;
    crate::write_atomic(&out.join(HTML_FILE), html(&summary).as_bytes())?;
    Ok(summary)
}

/// Copies the instance folders of several shard outputs into `into`, refusing shards made
/// with other settings and instances scored twice; then writes the reports. Nothing in the
/// shard folders is changed.
pub fn merge(shards: &[PathBuf], into: &Path) -> Result<Summary, EvalError> {
    let mut settings: Option<EvalSettings> = None;
    let mut owner: BTreeMap<String, PathBuf> = BTreeMap::new();
    for shard in shards {
        let path = shard.join(SETTINGS_FILE);
        let these: EvalSettings = read_json(&path)?;
        if let Some(first) = &settings {
            let differences = first.differences(&these);
            if !differences.is_empty() {
                return Err(EvalError::BadResults {
                    path,
                    message: format!(
                        "this shard was made with other settings ({})",
                        differences.join("; ")
                    ),
                });
            }
        }
        settings = Some(these);
        for scores in collect(shard)? {
            if let Some(previous) = owner.insert(scores.instance.clone(), shard.clone()) {
                return Err(EvalError::BadResults {
                    path: shard.join(&scores.instance),
                    message: format!(
                        "instance {} is also in {}: shards overlap (were they run with the same --shard n and selection?)",
                        scores.instance,
                        previous.display()
                    ),
                });
            }
        }
    }
    let Some(settings) = settings else {
        return Err(EvalError::BadResults {
            path: into.to_path_buf(),
            message: "no shard folders given to merge".to_owned(),
        });
    };
    let existing = into.join(SETTINGS_FILE);
    if existing.is_file() {
        let theirs: EvalSettings = read_json(&existing)?;
        let differences = theirs.differences(&settings);
        if !differences.is_empty() {
            return Err(EvalError::BadResults {
                path: existing,
                message: format!(
                    "the merge target holds other settings ({})",
                    differences.join("; ")
                ),
            });
        }
    }
    std::fs::create_dir_all(into).map_err(|err| EvalError::io(into, err))?;
    write_json(&existing, &settings)?;
    for (instance, shard) in &owner {
        copy_dir(&shard.join(instance), &into.join(instance))?;
    }
    write_reports(into)
}

/// Copies plain files and folders. A link is refused rather than followed: a shard folder is
/// data, and a link in it could pull any file (or the whole disk) into the merge.
fn copy_dir(from: &Path, to: &Path) -> Result<(), EvalError> {
    std::fs::create_dir_all(to).map_err(|err| EvalError::io(to, err))?;
    for entry in std::fs::read_dir(from).map_err(|err| EvalError::io(from, err))? {
        let entry = entry.map_err(|err| EvalError::io(from, err))?;
        let target = to.join(entry.file_name());
        let kind = entry
            .file_type()
            .map_err(|err| EvalError::io(&entry.path(), err))?;
        if kind.is_symlink() {
            return Err(EvalError::BadResults {
                path: entry.path(),
                message: "is a link; shards are merged from plain files and folders only"
                    .to_owned(),
            });
        }
        if kind.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target).map_err(|err| EvalError::io(&target, err))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use viga_protocol::bridge::RenderEngine;

    use super::*;
    use crate::scores::{N_CLIP_UNAVAILABLE, RenderSpec};

    fn settings() -> EvalSettings {
        EvalSettings {
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
        }
    }

    fn scores(instance: &str, task: Task, pl: Option<f64>, cd: Option<f64>) -> InstanceScores {
        InstanceScores {
            instance: instance.to_owned(),
            task,
            settings: settings(),
            executable: pl.is_some(),
            error: pl.is_none().then(|| "raised".to_owned()),
            views: Vec::new(),
            pl,
            n_clip: None,
            n_clip_note: N_CLIP_UNAVAILABLE.to_owned(),
            cd,
            cd_note: None,
            proposal_note: None,
            oracle_selected: None,
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
        let summary = summarise(&settings(), &all).unwrap();
        let placement = &summary.tasks[0];
        assert_eq!(
            (placement.task, placement.instances, placement.executable),
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
        assert!(ours.starts_with("| noop (ours, final) | not run | not run | not run | 3.0000 | n/a | 1.0000 | not run"), "{ours}");
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
        assert!(summarise(&settings(), &quarter).unwrap().tasks[0].shown);
    }

    #[test]
    fn n_clip_is_shown_scaled_when_weights_were_configured() {
        let mut with_clip = settings();
        with_clip.clip_weights = Some("/models/clip.safetensors".to_owned());
        let mut placed = scores("placement1", Task::Placement, Some(0.002), Some(0.5));
        placed.settings = with_clip.clone();
        placed.n_clip = Some(0.0125);
        let table = markdown(&summarise(&with_clip, &[placed]).unwrap());
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
        let summary = summarise(&with_oracle, &all).unwrap();
        assert!(summary.tasks[0].shown);
        let selected = &summary.oracle_selected.as_ref().unwrap()[0];
        assert_eq!((selected.executable, selected.shown), (0, false));
        let table = markdown(&summary);
        let row = table.lines().nth(3).unwrap();
        assert!(row.contains(ORACLE_SELECTED_LABEL), "{table}");
        assert!(row.contains("| -- | -- |"), "{row}");
        assert!(table.contains("Oracle-selected: per instance"), "{table}");
        let page = html(&summary);
        assert_eq!(
            page.matches("<tr class=\"theirs\">").count(),
            PUBLISHED.len()
        );
        // Without the setting there is no such row.
        let plain = markdown(
            &summarise(
                &settings(),
                &[scores("placement1", Task::Placement, Some(0.1), None)],
            )
            .unwrap(),
        );
        assert!(!plain.contains("oracle-selected"), "{plain}");
    }

    #[test]
    fn results_with_other_settings_are_refused() {
        let mut other = scores("placement1", Task::Placement, Some(0.1), None);
        other.settings.render.width = 512;
        let err = summarise(&settings(), &[other]).unwrap_err().to_string();
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
        assert_eq!(merged.tasks[0].instances, 3);
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
}
