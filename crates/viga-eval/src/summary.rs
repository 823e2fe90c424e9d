//! The one summary and the one report writer every benchmark shares: the summary's columns
//! (each a mean over the instances it counts), the report's table (our rows and, where the
//! benchmark has them, the published rows beside them, marked as theirs) and its notes, and
//! the writer of `summary.json`, `report.md` and `report.html`.

use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};
use viga_core::report::escape;

use crate::EvalError;

pub const SUMMARY_FILE: &str = "summary.json";
pub const MARKDOWN_FILE: &str = "report.md";
pub const HTML_FILE: &str = "report.html";

/// The mean of `values`; `None` when there are none, so an empty column is never a number.
pub fn mean(values: impl IntoIterator<Item = f64>) -> Option<f64> {
    let (sum, count) = values
        .into_iter()
        .fold((0.0, 0usize), |(s, c), v| (s + v, c + 1));
    (count > 0).then(|| sum / count as f64)
}

/// One figure of a summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Column {
    /// As the report heads it, e.g. `match`, `PL`, `judge text`.
    pub name: String,
    /// The figure (a mean over the instances the column counts; `None` when none had one).
    pub value: Option<f64>,
    /// Decimals shown in the report.
    pub digits: usize,
    /// Why the metric could not be computed at all (never estimated instead), e.g. N-CLIP
    /// without CLIP weights.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
}

impl Column {
    pub fn new(name: impl Into<String>, value: Option<f64>, digits: usize) -> Self {
        Self {
            name: name.into(),
            value,
            digits,
            unavailable: None,
        }
    }

    /// The column of a metric that could not be computed, and why.
    pub fn unavailable(name: impl Into<String>, why: impl Into<String>) -> Self {
        Self {
            unavailable: Some(why.into()),
            ..Self::new(name, None, 0)
        }
    }

    /// The report's cell: the figure, `-` when no instance had one, or why it is unavailable.
    fn cell(&self) -> String {
        match (&self.unavailable, self.value) {
            (Some(why), _) => format!("unavailable ({why})"),
            (None, Some(value)) => format!("{value:.digits$}", digits = self.digits),
            (None, None) => "-".to_owned(),
        }
    }
}

/// A benchmark's figures for one system: how many instances were made and scored, and its
/// columns. `summary.json` of SlideBench and pages; BlenderGym and BlenderBench keep their
/// per-task summary (`report::Summary`) and show it in the same [`Table`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub benchmark: String,
    pub system: String,
    /// `provider/model` of the reference-free judge, when there was one.
    pub judge: Option<String>,
    /// Instances selected (of every shard run into the folder, as far as they are known).
    pub selected: usize,
    /// Instances with a result.
    pub instances: usize,
    /// Of them, those whose program ran (the slide was saved, the page loaded).
    pub executed: usize,
    /// Executed over instances with a result, 0-100.
    pub execution_rate: f64,
    pub columns: Vec<Column>,
    pub notes: Vec<String>,
}

impl Summary {
    /// The figure of the column named `name`, if it has one.
    pub fn value(&self, name: &str) -> Option<f64> {
        self.columns
            .iter()
            .find(|column| column.name == name)
            .and_then(|column| column.value)
    }

    /// The summary as the report's table: one row, ours.
    pub fn table(&self) -> Table {
        let mut header = vec!["system".to_owned()];
        header.extend(self.columns.iter().map(|column| column.name.clone()));
        let mut cells = vec![self.system.clone()];
        cells.extend(self.columns.iter().map(Column::cell));
        Table {
            title: Some(format!(
                "{}: {} on {} instance(s); execution rate {:.1}% ({} executed)",
                self.benchmark, self.system, self.instances, self.execution_rate, self.executed
            )),
            header,
            rows: vec![Row {
                published: false,
                cells,
            }],
            notes: self.notes.clone(),
        }
    }
}

/// A row of a report's table.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// A published (theirs) row, shown as such, beside ours.
    pub published: bool,
    pub cells: Vec<String>,
}

/// What a report shows: a title line, a table under `header`, and notes.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub title: Option<String>,
    pub header: Vec<String>,
    pub rows: Vec<Row>,
    pub notes: Vec<String>,
}

impl Table {
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        if let Some(title) = &self.title {
            let _ = writeln!(out, "{title}\n");
        }
        out.push_str("| ");
        out.push_str(&self.header.join(" | "));
        out.push_str(" |\n|");
        out.push_str(&"---|".repeat(self.header.len()));
        out.push('\n');
        for row in &self.rows {
            let _ = writeln!(out, "| {} |", row.cells.join(" | "));
        }
        out.push('\n');
        for note in &self.notes {
            let _ = writeln!(out, "- {note}");
        }
        out
    }

    pub fn html(&self, benchmark: &str) -> String {
        let mut out = format!(
            "<!doctype html>\n<meta charset=\"utf-8\">\n<title>{} evaluation</title>\n<style>table{{border-collapse:collapse}}td,th{{border:1px solid #999;padding:2px 6px;text-align:right}}td:first-child{{text-align:left}}tr.theirs{{color:#666}}</style>\n",
            escape(benchmark)
        );
        if let Some(title) = &self.title {
            let _ = writeln!(out, "<p>{}</p>", escape(title));
        }
        out.push_str("<table>\n<tr>");
        for head in &self.header {
            let _ = write!(out, "<th>{}</th>", escape(head));
        }
        out.push_str("</tr>\n");
        for row in &self.rows {
            out.push_str(if row.published {
                "<tr class=\"theirs\">"
            } else {
                "<tr>"
            });
            for cell in &row.cells {
                let _ = write!(out, "<td>{}</td>", escape(cell));
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</table>\n<ul>\n");
        for note in &self.notes {
            let _ = writeln!(out, "<li>{}</li>", escape(note));
        }
        out.push_str("</ul>\n");
        out
    }
}

/// A benchmark's report: its summary as `summary.json` holds it (JSON text, the fields in
/// the summary's own order), and its table.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub benchmark: String,
    pub summary: String,
    pub table: Table,
}

impl Report {
    pub fn new(benchmark: &str, summary: &impl Serialize, table: Table) -> Result<Self, EvalError> {
        Ok(Self {
            benchmark: benchmark.to_owned(),
            summary: serde_json::to_string_pretty(summary)
                .map(|json| json + "\n")
                .map_err(|err| EvalError::Harness {
                    instance: "(all)".to_owned(),
                    message: format!("the summary cannot be written as JSON: {err}"),
                })?,
            table,
        })
    }
}

/// Writes `summary.json`, `report.md` and `report.html` into `out`.
pub fn write_report(out: &Path, report: &Report) -> Result<(), EvalError> {
    std::fs::create_dir_all(out).map_err(|err| EvalError::io(out, err))?;
    crate::write_atomic(&out.join(SUMMARY_FILE), report.summary.as_bytes())?;
    crate::write_atomic(&out.join(MARKDOWN_FILE), report.table.markdown().as_bytes())?;
    crate::write_atomic(
        &out.join(HTML_FILE),
        report.table.html(&report.benchmark).as_bytes(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_column_has_no_mean_and_the_cells_say_why() {
        assert_eq!(mean([]), None);
        assert_eq!(mean([1.0, 2.0]), Some(1.5));
        let summary = Summary {
            benchmark: "pages".to_owned(),
            system: "noop".to_owned(),
            judge: None,
            selected: 2,
            instances: 2,
            executed: 1,
            execution_rate: 50.0,
            columns: vec![
                Column::new("PL", Some(0.25), 3),
                Column::new("judge text", None, 1),
                Column::unavailable("N-CLIP", "no --clip-weights"),
            ],
            notes: vec!["a note".to_owned()],
        };
        assert_eq!(summary.value("PL"), Some(0.25));
        let markdown = summary.table().markdown();
        assert!(
            markdown.contains("| system | PL | judge text | N-CLIP |")
                && markdown.contains("| noop | 0.250 | - | unavailable (no --clip-weights) |")
                && markdown.contains("execution rate 50.0% (1 executed)")
                && markdown.contains("- a note"),
            "{markdown}"
        );
    }
}
