//! The context block: the kept iterations as prompt text, shrunk to fit a byte budget.
//!
//! Each iteration renders to a self-contained section (header, plan, code, result, output,
//! verifier). Shrinking is a sequence of searches over two knobs per iteration, the lines of
//! code kept and a byte cap on every long text; each search re-renders only the iteration it
//! changes, so fitting stays cheap even for large programs.

use std::borrow::Cow;

use viga_protocol::iteration::IterationRecord;

/// Bytes each long text keeps while older iterations are still in the block: enough for the
/// gist of an error or a critique. Only the newest iteration, once alone, goes below it.
const TEXT_FLOOR: usize = 160;

/// The kept iterations (oldest first) as one text of at most `budget` bytes.
///
/// `budget` must be at least [`crate::MIN_BUDGET_BYTES`], which leaves room for the final
/// cut's marker.
pub(crate) fn context_block(records: &[&IterationRecord], budget: usize) -> String {
    let Some(newest) = records.len().checked_sub(1) else {
        return String::new();
    };
    // Prepared once: every attempt below renders from these.
    let prepared: Vec<Prepared<'_>> = records.iter().map(|r| Prepared::new(r)).collect();
    let mut skip = 0;
    loop {
        let mut layout = Layout::new(&prepared[skip..], skip);
        if layout.fits(budget)
            || layout.shrink_older_code(budget)
            || layout.shrink_text(budget, TEXT_FLOOR)
        {
            return layout.text();
        }
        if skip < newest {
            // Dropping an iteration frees room, so the next attempt starts again uncut.
            skip += 1;
            continue;
        }
        // The newest iteration is alone and still too long: its texts go first, its code last.
        let last = layout.prepared.len() - 1;
        if layout.shrink_text(budget, 0) || layout.shrink_code(last, budget) {
            return layout.text();
        }
        return hard_cut(&layout.text(), budget);
    }
}

/// How much of one iteration to show; the default shows everything.
#[derive(Debug, Clone, Copy, Default)]
struct Cut {
    /// Lines of code kept, half from the start and the rest from the end; `None`: all.
    code_lines: Option<usize>,
    /// Most bytes of each long text (plan, error, stdout, stderr, differences, suggestions),
    /// the omission marker included; `None`: no limit.
    text_cap: Option<usize>,
}

/// The iterations being fitted, with their current cuts and renderings.
struct Layout<'p, 'a> {
    prepared: &'p [Prepared<'a>],
    /// Iterations dropped before these, announced by one line.
    omitted: Option<String>,
    cuts: Vec<Cut>,
    rendered: Vec<String>,
}

impl<'p, 'a> Layout<'p, 'a> {
    fn new(prepared: &'p [Prepared<'a>], omitted: usize) -> Self {
        let cuts = vec![Cut::default(); prepared.len()];
        let rendered = prepared.iter().map(|p| p.render(Cut::default())).collect();
        let omitted = (omitted > 0).then(|| {
            let s = if omitted == 1 { "" } else { "s" };
            format!("[{omitted} earlier iteration{s} omitted]\n")
        });
        Self {
            prepared,
            omitted,
            cuts,
            rendered,
        }
    }

    fn parts(&self) -> impl Iterator<Item = &str> {
        self.omitted
            .as_deref()
            .into_iter()
            .chain(self.rendered.iter().map(String::as_str))
    }

    /// Length of [`Self::text`] without building it.
    fn len(&self) -> usize {
        let (count, bytes) = self
            .parts()
            .fold((0_usize, 0_usize), |(count, bytes), part| {
                (count + 1, bytes + part.len())
            });
        // Parts are separated by one blank line, i.e. one extra newline each.
        bytes + count.saturating_sub(1)
    }

    fn fits(&self, budget: usize) -> bool {
        self.len() <= budget
    }

    fn text(&self) -> String {
        self.parts().collect::<Vec<_>>().join("\n")
    }

    /// Stage 1: the code of every iteration but the newest, oldest first.
    fn shrink_older_code(&mut self, budget: usize) -> bool {
        let older = self.prepared.len().saturating_sub(1);
        (0..older).any(|i| self.shrink_code(i, budget))
    }

    fn shrink_code(&mut self, i: usize, budget: usize) -> bool {
        let lines = self.prepared[i].line_starts.len();
        lines > 0 && self.shrink(i, 0, lines - 1, budget, |cut, v| cut.code_lines = Some(v))
    }

    /// Stage 2 (and, with `floor` 0, the newest iteration's last resort before its code): cap
    /// the long texts of each iteration, oldest first, never below `floor` bytes.
    fn shrink_text(&mut self, budget: usize, floor: usize) -> bool {
        (0..self.prepared.len()).any(|i| {
            let longest = self.prepared[i].longest_text();
            longest > floor
                && self.shrink(i, floor, longest - 1, budget, |cut, v| {
                    cut.text_cap = Some(v);
                })
        })
    }

    /// Sets one knob of iteration `i` to the largest value in `lo..=hi` that fits the budget
    /// and returns true; when even `lo` does not fit, leaves it at `lo` (unless that made the
    /// iteration longer) and returns false. Callers only ask when values above `hi` (the
    /// uncut text, or an earlier floor) are known not to fit. Larger values render longer,
    /// so a binary search finds the value; either way, a value it returns true for fits.
    fn shrink(
        &mut self,
        i: usize,
        lo: usize,
        hi: usize,
        budget: usize,
        set: fn(&mut Cut, usize),
    ) -> bool {
        let (old_cut, old_len) = (self.cuts[i], self.rendered[i].len());
        self.apply(i, lo, set);
        if !self.fits(budget) {
            // A marker can be longer than what it replaces (one short line of code).
            if self.rendered[i].len() >= old_len {
                self.cuts[i] = old_cut;
                self.rendered[i] = self.prepared[i].render(old_cut);
            }
            return false;
        }
        let (mut fitting, mut too_long) = (lo, hi + 1);
        while too_long - fitting > 1 {
            let mid = fitting + (too_long - fitting) / 2;
            self.apply(i, mid, set);
            if self.fits(budget) {
                fitting = mid;
            } else {
                too_long = mid;
            }
        }
        self.apply(i, fitting, set);
        true
    }

    fn apply(&mut self, i: usize, value: usize, set: fn(&mut Cut, usize)) {
        set(&mut self.cuts[i], value);
        self.rendered[i] = self.prepared[i].render(self.cuts[i]);
    }
}

/// One record's pieces, computed once so that rendering under many cuts is cheap.
struct Prepared<'a> {
    header: String,
    plan: Option<&'a str>,
    /// The program without trailing whitespace, and where each of its lines starts, so that
    /// a cut program is two slices of it.
    code: &'a str,
    line_starts: Vec<usize>,
    code_fence: String,
    duration: String,
    error: Option<String>,
    outputs: Vec<Output<'a>>,
    feedback: Option<PreparedFeedback>,
}

struct Output<'a> {
    label: &'static str,
    text: &'a str,
    fence: String,
}

struct PreparedFeedback {
    accepted: bool,
    /// The items as an indented list; empty when there are none.
    differences: String,
    suggestions: String,
}

impl<'a> Prepared<'a> {
    fn new(record: &'a IterationRecord) -> Self {
        let mut notes = Vec::new();
        match record.retry_count {
            0 => {}
            1 => notes.push("1 fast retry".to_owned()),
            n => notes.push(format!("{n} fast retries")),
        }
        if let Some(failure) = record.failure {
            notes.push(format!("failure {failure}"));
        }
        let mut header = format!("## Iteration {}", record.index);
        if !notes.is_empty() {
            header.push_str(&format!(" ({})", notes.join("; ")));
        }
        header.push('\n');

        let code = record.code.trim_end();
        let line_starts = if code.is_empty() {
            Vec::new()
        } else {
            let after_newlines = code.match_indices('\n').map(|(at, _)| at + 1);
            std::iter::once(0).chain(after_newlines).collect()
        };
        let execution = &record.execution;
        let outputs = [("Stdout", &execution.stdout), ("Stderr", &execution.stderr)]
            .into_iter()
            .map(|(label, text)| (label, text.trim_end()))
            .filter(|(_, text)| !text.is_empty())
            .map(|(label, text)| Output {
                label,
                text,
                fence: fence_for(text),
            })
            .collect();
        // The traceback is left out: the error line already names the exception and the
        // program line, and tracebacks are long. Retry errors are left out too (seed 002:
        // memory follows semantic progress, not syntax fumbling); the count is in the header.
        Self {
            header,
            plan: record
                .plan
                .as_deref()
                .map(str::trim_end)
                .filter(|p| !p.is_empty()),
            code_fence: fence_for(&record.code),
            code,
            line_starts,
            duration: format!("{:.0} ms", execution.duration_ms),
            error: execution.error.as_ref().map(ToString::to_string),
            outputs,
            feedback: record.feedback.as_ref().map(|f| PreparedFeedback {
                accepted: f.accepted,
                differences: list_body(&f.visual_differences),
                suggestions: list_body(&f.suggestions),
            }),
        }
    }

    /// The length of the longest text a cap applies to: caps at or above it change nothing.
    fn longest_text(&self) -> usize {
        let feedback = self
            .feedback
            .iter()
            .flat_map(|f| [&f.differences, &f.suggestions]);
        self.plan
            .into_iter()
            .chain(self.error.as_deref())
            .chain(self.outputs.iter().map(|o| o.text))
            .chain(feedback.map(String::as_str))
            .map(str::len)
            .max()
            .unwrap_or(0)
    }

    /// The iteration's section under `cut`: header, plan, code, result, outputs, verifier.
    fn render(&self, cut: Cut) -> String {
        let cap = cut.text_cap;
        let mut out = String::with_capacity(1024);
        out.push_str(&self.header);
        if let Some(plan) = self.plan {
            out.push_str("Plan: ");
            out.push_str(&cut_text(plan, cap, Keep::Head));
            out.push('\n');
        }
        self.render_code(&mut out, cut.code_lines);
        self.render_result(&mut out, cap);
        self.render_outputs(&mut out, cap);
        self.render_feedback(&mut out, cap);
        out
    }

    /// The program in a fence; when `code_lines` keeps fewer lines than it has, the middle
    /// gives way to a comment saying how many lines were left out.
    fn render_code(&self, out: &mut String, code_lines: Option<usize>) {
        out.push_str("Code:\n");
        out.push_str(&self.code_fence);
        out.push_str("python\n");
        let total = self.line_starts.len();
        match code_lines {
            Some(kept) if kept < total => {
                // The start holds imports and scene setup, the end the latest additions.
                let head = kept / 2;
                let tail_start = total - (kept - head);
                out.push_str(&self.code[..self.line_starts[head]]);
                let omitted = total - kept;
                let s = if omitted == 1 { "" } else { "s" };
                // A Python comment, so the shown code still parses.
                out.push_str(&format!("# [... {omitted} line{s} omitted]\n"));
                if tail_start < total {
                    out.push_str(&self.code[self.line_starts[tail_start]..]);
                    out.push('\n');
                }
            }
            _ if total > 0 => {
                out.push_str(self.code);
                out.push('\n');
            }
            _ => {}
        }
        out.push_str(&self.code_fence);
        out.push('\n');
    }

    /// One line: how long the program ran, and `ok` or its error.
    fn render_result(&self, out: &mut String, cap: Option<usize>) {
        out.push_str("Result: ran in ");
        out.push_str(&self.duration);
        out.push_str(" | ");
        match &self.error {
            None => out.push_str("ok"),
            Some(error) => {
                out.push_str("error ");
                out.push_str(&cut_text(error, cap, Keep::Head));
            }
        }
        out.push('\n');
    }

    /// Stdout and stderr, each in its own fence; empty ones were dropped when prepared.
    fn render_outputs(&self, out: &mut String, cap: Option<usize>) {
        for output in &self.outputs {
            out.push_str(output.label);
            out.push_str(":\n");
            out.push_str(&output.fence);
            out.push_str("text\n");
            // The end of the output is where the last messages and the errors are.
            out.push_str(&cut_text(output.text, cap, Keep::Tail));
            out.push('\n');
            out.push_str(&output.fence);
            out.push('\n');
        }
    }

    /// The verdict and both lists, or a line saying there was no feedback.
    fn render_feedback(&self, out: &mut String, cap: Option<usize>) {
        let Some(feedback) = &self.feedback else {
            out.push_str("Verifier: no feedback\n");
            return;
        };
        let accepted = if feedback.accepted { "yes" } else { "no" };
        out.push_str(&format!("Verifier: accepted={accepted}\n"));
        for (label, body) in [
            ("differences", &feedback.differences),
            ("suggestions", &feedback.suggestions),
        ] {
            if body.is_empty() {
                out.push_str(&format!("- {label}: none\n"));
            } else {
                out.push_str(&format!("- {label}:\n"));
                out.push_str(&cut_text(body, cap, Keep::Head));
                out.push('\n');
            }
        }
    }
}

/// Items as `  - item` lines, continuation lines indented under their item.
fn list_body(items: &[String]) -> String {
    items
        .iter()
        .map(|item| format!("  - {}", item.trim().replace('\n', "\n    ")))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A Markdown fence longer than any run of backticks in `text`, so the text cannot close it.
fn fence_for(text: &str) -> String {
    if !text.contains("```") {
        return "```".to_owned();
    }
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    "`".repeat(longest.max(2) + 1)
}

#[derive(Debug, Clone, Copy)]
enum Keep {
    Head,
    Tail,
}

fn omitted_bytes(bytes: usize) -> String {
    format!("[... {bytes} bytes omitted]")
}

/// `text` within `cap` bytes (marker included, when `cap` leaves room for one), cut at a
/// character boundary.
fn cut_text(text: &str, cap: Option<usize>, keep: Keep) -> Cow<'_, str> {
    let cap = match cap {
        Some(cap) if text.len() > cap => cap,
        _ => return Cow::Borrowed(text),
    };
    // Room for the marker with as many digits as it could need, and its separator.
    let room = cap.saturating_sub(omitted_bytes(text.len()).len() + 1);
    Cow::Owned(match keep {
        Keep::Head => {
            let kept = &text[..text.floor_char_boundary(room)];
            let marker = omitted_bytes(text.len() - kept.len());
            if kept.is_empty() {
                marker
            } else {
                format!("{kept} {marker}")
            }
        }
        Keep::Tail => {
            let kept = &text[text.ceil_char_boundary(text.len() - room)..];
            let marker = omitted_bytes(text.len() - kept.len());
            if kept.is_empty() {
                marker
            } else {
                format!("{marker}\n{kept}")
            }
        }
    })
}

/// The last resort: the start of `text`, cut at a character boundary, and a marker.
fn hard_cut(text: &str, budget: usize) -> String {
    let marker_room = omitted_bytes(text.len()).len() + 1;
    let end = text.floor_char_boundary(budget.saturating_sub(marker_room));
    format!("{}\n{}", &text[..end], omitted_bytes(text.len() - end))
}
