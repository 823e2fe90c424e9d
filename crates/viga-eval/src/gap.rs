//! How much of the gap between doing nothing and the goal a system closed, per task, on the
//! views it did not see: `viga eval gap --noop NOOP_OUT SYSTEM_OUT`. The goal program scores
//! PL 0, so the share is `1 - PL(system) / PL(noop)` over the same instances and held-out views
//! (means over the instances, then the ratio). A system fitted on every scored view has no
//! held-out view, and its share is then on the views it fitted, which the table says.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use crate::EvalError;
use crate::layout::Task;
use crate::report::collect;
use crate::scores::{EvalSettings, FitViews, InstanceScores, SETTINGS_FILE, ViewScore, read_json};

/// One task's row.
#[derive(Debug, Clone, PartialEq)]
pub struct GapRow {
    pub task: Task,
    /// Instances scored by both systems (the system's unexecutable ones count as start.py).
    pub instances: usize,
    /// Mean PL over the compared views.
    pub noop_pl: f64,
    pub system_pl: f64,
}

impl GapRow {
    /// The share of noop's PL the system removed; `None` when noop already matched.
    pub fn share(&self) -> Option<f64> {
        (self.noop_pl > 0.0).then(|| 1.0 - self.system_pl / self.noop_pl)
    }
}

/// The rows, and which views they compare.
#[derive(Debug, Clone, PartialEq)]
pub struct GapTable {
    pub system: String,
    /// `held-out views` or `fitted views (the system saw every scored view)`.
    pub views: String,
    pub rows: Vec<GapRow>,
}

/// The settings of `system_out`, once `noop_out` is known to hold noop's results made the
/// same way.
fn comparable_settings(noop_out: &Path, system_out: &Path) -> Result<EvalSettings, EvalError> {
    let settings: EvalSettings = read_json(&system_out.join(SETTINGS_FILE))?;
    let noop_settings: EvalSettings = read_json(&noop_out.join(SETTINGS_FILE))?;
    let bad = |path: &Path, message: String| EvalError::BadResults {
        path: path.to_path_buf(),
        message,
    };
    if noop_settings.system != "noop" {
        return Err(bad(
            &noop_out.join(SETTINGS_FILE),
            format!(
                "--noop must be a folder of the noop baseline's results; this one holds {:?}'s",
                noop_settings.system
            ),
        ));
    }
    if noop_settings.render != settings.render {
        return Err(bad(
            &system_out.join(SETTINGS_FILE),
            format!(
                "rendered at {} but the noop results at {}; score noop at the same settings",
                settings.render, noop_settings.render
            ),
        ));
    }
    Ok(settings)
}

/// Compares the results in `system_out` with the noop results in `noop_out`.
pub fn gap(noop_out: &Path, system_out: &Path) -> Result<GapTable, EvalError> {
    let settings = comparable_settings(noop_out, system_out)?;
    let fit = settings.fit_views.clone().unwrap_or(FitViews::AllScored);
    let noop: BTreeMap<String, InstanceScores> = collect(noop_out)?
        .scores
        .into_iter()
        .map(|s| (s.instance.clone(), s))
        .collect();
    let mut sums: BTreeMap<Task, (usize, f64, f64)> = BTreeMap::new();
    for scores in collect(system_out)?.scores {
        let Some(start) = noop.get(&scores.instance) else {
            return Err(EvalError::BadResults {
                path: noop_out.join(&scores.instance),
                message: format!(
                    "{} has no noop result; score noop on the same instances",
                    scores.instance
                ),
            });
        };
        let compared = |views: &[ViewScore]| {
            let pls: Vec<f64> = views
                .iter()
                .filter(|view| matches!(fit, FitViews::AllScored) || !fit.fits(&view.camera))
                .map(|view| view.pl)
                .collect();
            crate::summary::mean(pls)
        };
        let noop_pl = compared(&start.views);
        // An unexecutable proposal counts as start.py, as the all-instances figure does.
        let system_pl = if scores.executable {
            compared(&scores.views)
        } else {
            noop_pl
        };
        let (Some(noop_pl), Some(system_pl)) = (noop_pl, system_pl) else {
            continue;
        };
        let entry = sums.entry(scores.task).or_default();
        entry.0 += 1;
        entry.1 += noop_pl;
        entry.2 += system_pl;
    }
    let rows = sums
        .into_iter()
        .map(|(task, (instances, noop, system))| GapRow {
            task,
            instances,
            noop_pl: noop / instances as f64,
            system_pl: system / instances as f64,
        })
        .collect();
    let views = match fit {
        FitViews::AllScored => "fitted views (the system saw every scored view)".to_owned(),
        FitViews::Only(names) => format!("held-out views (fitted on {})", names.join(", ")),
    };
    Ok(GapTable {
        system: settings.system,
        views,
        rows,
    })
}

impl GapTable {
    /// A Markdown table: task, instances, noop PL, system PL, share of the gap closed.
    pub fn markdown(&self) -> String {
        let mut out = format!(
            "{} on the {}: share of the noop->goal PL gap closed\n\n| task | instances | noop PL | system PL | gap closed |\n|---|---|---|---|---|\n",
            self.system, self.views
        );
        for row in &self.rows {
            let share = row
                .share()
                .map_or("-".to_owned(), |share| format!("{:.0}%", share * 100.0));
            let _ = writeln!(
                out,
                "| {} | {} | {:.6} | {:.6} | {share} |",
                row.task.name(),
                row.instances,
                row.noop_pl,
                row.system_pl
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::{scores, settings};
    use crate::scores::{SCORES_FILE, write_json};

    /// An output folder of `system` fitted on `fit`, each instance with its per-camera PLs.
    fn folder(
        root: &Path,
        name: &str,
        system: &str,
        fit: Option<FitViews>,
        pls: &[(&str, [f64; 2])],
    ) -> std::path::PathBuf {
        let dir = root.join(name);
        let mut eval = settings();
        eval.system = system.to_owned();
        eval.fit_views = fit.clone();
        write_json(&dir.join(SETTINGS_FILE), &eval).unwrap();
        for (instance, [first, second]) in pls {
            let mut instance_scores = scores(instance, Task::Placement, Some(0.0), None);
            instance_scores.settings = eval.clone();
            instance_scores.views = vec![
                ViewScore {
                    camera: "Camera1".to_owned(),
                    pl: *first,
                    n_clip: None,
                },
                ViewScore {
                    camera: "Camera2".to_owned(),
                    pl: *second,
                    n_clip: None,
                },
            ];
            write_json(&dir.join(instance).join(SCORES_FILE), &instance_scores).unwrap();
        }
        dir
    }

    #[test]
    fn the_share_is_on_the_views_the_system_did_not_fit() {
        let root = tempfile::tempdir().unwrap();
        let noop = folder(
            root.path(),
            "noop",
            "noop",
            None,
            &[("placement1", [4.0, 8.0]), ("placement2", [2.0, 4.0])],
        );
        let fit = Some(FitViews::Only(vec!["Camera1".to_owned()]));
        let search = folder(
            root.path(),
            "search",
            "search",
            fit,
            &[("placement1", [0.0, 2.0]), ("placement2", [0.0, 4.0])],
        );
        let table = gap(&noop, &search).unwrap();
        assert_eq!(table.rows.len(), 1);
        let row = &table.rows[0];
        assert_eq!((row.instances, row.noop_pl, row.system_pl), (2, 6.0, 3.0));
        assert_eq!(row.share(), Some(0.5));
        assert!(
            table
                .markdown()
                .contains("| placement | 2 | 6.000000 | 3.000000 | 50% |"),
            "{}",
            table.markdown()
        );
        assert!(table.views.contains("held-out"), "{}", table.views);
        let err = gap(&search, &search).unwrap_err().to_string();
        assert!(
            err.contains("--noop must be a folder of the noop baseline"),
            "{err}"
        );
        // Results rendered otherwise are not compared.
        let mut other = settings();
        other.render.width = 128;
        write_json(&noop.join(SETTINGS_FILE), &other).unwrap();
        let err = gap(&noop, &search).unwrap_err().to_string();
        assert!(err.contains("score noop at the same settings"), "{err}");
    }
}
