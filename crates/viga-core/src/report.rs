//! One self-contained HTML page per run: the target beside each iteration's renders, the
//! plan, the code's diff against the previous iteration, the verifier's feedback and the
//! metrics; the sections its domain adds ([`crate::DomainKind::report_sections`]). A run
//! folder of a shape a domain owns gets that domain's page instead
//! ([`crate::DomainKind::own_report`]). Images are inlined, so the page works offline and
//! can be mailed around. The page's frame ([`HEAD`], [`escape`], [`render_figure`]) is
//! public for those pages.

use std::fmt::Write as _;
use std::path::Path;

use base64::Engine as _;
use viga_memory::{iterations_in, read_run_log};
use viga_protocol::event::RunEvent;
use viga_protocol::iteration::{FailureClass, Feedback, GeneratorToolCall, IterationRecord};

use crate::folder::{REPORT_FILE, RunFolder, SCORES_FILE};
use crate::scores::Scores;
use crate::{CoreError, DomainKinds, RunConfig};

/// Writes the run's HTML report (`report.html` in the run folder unless `out` says where)
/// whole, and returns its path; `kinds` are the domains whose runs it can describe.
pub fn write_html(
    run_folder: &Path,
    out: Option<&Path>,
    kinds: &DomainKinds,
) -> Result<std::path::PathBuf, CoreError> {
    let html = render_html(run_folder, kinds)?;
    let path = out.map_or_else(|| run_folder.join(REPORT_FILE), Path::to_path_buf);
    viga_io::files::write_atomic(&path, html.as_bytes())
        .map_err(|err| CoreError::io(&path, err))?;
    Ok(path)
}

/// Builds the report of a run folder.
pub fn render_html(run_folder: &Path, kinds: &DomainKinds) -> Result<String, CoreError> {
    if let Some(own) = kinds.own_report(run_folder) {
        return own;
    }
    let folder = RunFolder::open(run_folder)?;
    let (config, domain) = folder.read_args()?;
    let log = read_run_log(&folder.events_path())?;
    let records = iterations_in(&log.events);
    let scores: Option<Scores> = std::fs::read_to_string(folder.root().join(SCORES_FILE))
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok());
    let stop = log.events.iter().rev().find_map(|e| match &e.event {
        RunEvent::RunFinished { stop, .. } => Some(stop.in_words()),
        _ => None,
    });
    let targets = shown_targets(&config, &folder, |view, frame| {
        kinds.view_words(&domain.name, view, frame)
    });
    let scripted = config.provider == "scripted";

    let mut html = String::with_capacity(64 * 1024);
    html.push_str(HEAD);
    let _ = write!(html, "<h1>viga run: {}</h1>", escape(&config.task));
    if scripted {
        html.push_str("<p class=\"scripted\">SCRIPTED PROVIDER: every model answer in this run was replayed from a script file, not produced by a model.</p>");
    }
    let described = kinds.describe(&domain, !config.targets.is_empty());
    facts_table(
        &mut html,
        &folder,
        &config,
        &described,
        records.len(),
        stop.as_deref(),
    );
    if log.truncated_tail {
        html.push_str("<p class=\"warn\">The event log ends in a cut-off line (the run was killed while writing); it was ignored.</p>");
    }
    html.push_str(&kinds.report_sections(&domain, &folder));
    let mut previous_code = String::new();
    for record in &records {
        iteration_section(
            &mut html,
            &folder,
            record,
            &previous_code,
            &targets,
            scores.as_ref(),
        );
        if !record.code.is_empty() {
            previous_code.clone_from(&record.code);
        }
    }
    html.push_str("</body></html>\n");
    Ok(html)
}

/// The targets shown beside each iteration's renders, with their `<img>` tags; a target
/// whose copy cannot be read is left out.
fn shown_targets(
    config: &RunConfig,
    folder: &RunFolder,
    words: impl Fn(Option<&str>, Option<i32>) -> String,
) -> Vec<ShownTarget> {
    config
        .targets
        .iter()
        .zip(folder.target_copies(&config.targets))
        .filter_map(|(spec, copy)| {
            let label = crate::domain::label_of(spec.view.as_deref(), spec.frame);
            let named = words(spec.view.as_deref(), spec.frame);
            image_tag(&copy, &format!("target: {named}")).map(|tag| ShownTarget {
                label,
                view: words(spec.view.as_deref(), None),
                words: named,
                frame: spec.frame,
                tag,
            })
        })
        .collect()
}

/// The table of the run's facts under the title: provider, model, iterations, how it
/// stopped, domain, memory, generator and containment.
fn facts_table(
    html: &mut String,
    folder: &RunFolder,
    config: &RunConfig,
    described: &str,
    iterations: usize,
    stop: Option<&str>,
) {
    let _ = write!(
        html,
        "<table class=\"facts\"><tr><th>provider</th><td>{}</td><th>model</th><td>{}</td></tr>\
         <tr><th>iterations</th><td>{} of at most {}</td><th>stopped</th><td>{}</td></tr>\
         <tr><th>domain</th><td>{}</td><th>memory window</th><td>{}</td></tr>\
         <tr><th>generator</th><td colspan=\"3\">{}</td></tr>\
         <tr><th>containment</th><td colspan=\"3\">{}</td></tr></table>",
        escape(&config.provider),
        escape(&config.model),
        iterations,
        config.max_iterations,
        escape(stop.unwrap_or("still running or killed")),
        escape(described),
        config.memory_window,
        escape(&generator_line(config)),
        escape(&containment_of(folder))
    );
}

/// How the generator answers, and how its tool calling was found out when it was.
fn generator_line(config: &RunConfig) -> String {
    let mode = if config.generator_tools {
        format!(
            "tools (execute_code, undo_last_step, make_plan, end_process and the domain's own), at most {} turns per iteration",
            config.generator_max_turns
        )
    } else {
        "one fenced program per answer".to_owned()
    };
    match &config.tool_calling_found {
        Some(found) => format!("{mode}; {found}"),
        None => mode,
    }
}

/// One iteration's section: its status line, the images, then plan, fast-retry errors, code
/// and execution error, and last the verifier's feedback.
fn iteration_section(
    html: &mut String,
    folder: &RunFolder,
    record: &IterationRecord,
    previous_code: &str,
    targets: &[ShownTarget],
    scores: Option<&Scores>,
) {
    let _ = write!(html, "<section><h2>Iteration {}</h2>", record.index);
    status_line(html, record, scores, targets);
    images_block(html, folder, record, targets);
    if let Some(plan) = &record.plan {
        let _ = write!(html, "<h3>Plan</h3><pre>{}</pre>", escape(plan));
    }
    generator_tools_block(html, &record.generator_tool_calls);
    retry_errors_block(html, &record.retry_errors);
    code_block(html, record, previous_code);
    if let Some(feedback) = &record.feedback {
        feedback_block(html, feedback);
    }
    html.push_str("</section>");
}

/// How the iteration ran (first time, after fast retries, or how it failed), its photometric
/// loss when `scores.json` has one, its time and its token counts.
fn status_line(
    html: &mut String,
    record: &IterationRecord,
    scores: Option<&Scores>,
    targets: &[ShownTarget],
) {
    let loss = scores
        .and_then(|s| s.iterations.iter().find(|i| i.index == record.index))
        .map(|scored| loss_words(scored, targets));
    let ran = match record.retry_count {
        0 => "ran first time".to_owned(),
        retries => format!("ran after {retries} fast retries"),
    };
    let status = match record.failure {
        // The program ran; only the verifier's verdict was no.
        Some(FailureClass::E3) => format!(
            "{ran}; the verifier did not accept the result yet (E3: it ran, but does not match the task)"
        ),
        Some(failure) => format!(
            "{failure}: {} ({} fast retries)",
            failure.describe(),
            record.retry_count
        ),
        None => ran,
    };
    let _ = write!(
        html,
        "<p class=\"status\">{}{}; {:.1} s; {} input / {} output tokens</p>",
        escape(&status),
        loss.map(|l| format!("; {l}")).unwrap_or_default(),
        record.timings.total_ms / 1000.0,
        record.usage.input_tokens,
        record.usage.output_tokens
    );
}

/// An iteration's photometric loss: the mean, and each view's when there are several, named
/// as the person named them.
fn loss_words(scored: &crate::IterationScores, targets: &[ShownTarget]) -> String {
    let mut said = format!("photometric loss {:.5}", scored.mean);
    if scored.views.len() > 1 {
        let each: Vec<String> = scored
            .views
            .iter()
            .map(|(label, loss)| {
                let named = targets
                    .iter()
                    .find(|target| &target.label == label)
                    .map_or(label.as_str(), |target| target.words.as_str());
                format!("{named} {loss:.5}")
            })
            .collect();
        let _ = write!(said, " ({})", each.join(", "));
    }
    said
}

/// A caption for a render the verifier asked for, from its file name: `overview_front.png`
/// reads `overview front`.
fn render_caption(render_id: &str) -> String {
    let name = render_id.rsplit('/').next().unwrap_or(render_id);
    let stem = name.rsplit_once('.').map_or(name, |(stem, _)| stem);
    stem.replace(['_', '-'], " ")
}

/// A target picture as the report shows it.
struct ShownTarget {
    label: String,
    /// The view as the person named it, without the frame (a strip's caption).
    view: String,
    /// The view and frame as the person named them (a caption).
    words: String,
    frame: Option<i32>,
    /// Its `<img>` tag.
    tag: String,
}

/// Each still target beside the render of its view; an animation's targets as a strip per
/// view, targets above renders, frame by frame; then the verifier's other renders. A render
/// whose file is gone is left out.
fn images_block(
    html: &mut String,
    folder: &RunFolder,
    record: &IterationRecord,
    targets: &[ShownTarget],
) {
    let render_of = |label: &str| {
        let stem = crate::folder::target_render_stem(label);
        record.render_ids.iter().find(|id| {
            id.rsplit('/')
                .next()
                .is_some_and(|name| name.starts_with(&stem))
        })
    };
    let mut shown = Vec::new();
    let mut views: Vec<&str> = Vec::new();
    for target in targets.iter().filter(|t| t.frame.is_some()) {
        if !views.contains(&target.view.as_str()) {
            views.push(&target.view);
        }
    }
    for view in views {
        let strip: Vec<&ShownTarget> = targets
            .iter()
            .filter(|t| t.frame.is_some() && t.view == view)
            .collect();
        let _ = write!(
            html,
            "<table class=\"strip\"><caption>{} over time: target above, render below</caption><tr>",
            escape(view)
        );
        for target in &strip {
            let _ = write!(
                html,
                "<td><figure>{}<figcaption>target, frame {}</figcaption></figure></td>",
                target.tag,
                target.frame.unwrap_or_default()
            );
        }
        html.push_str("</tr><tr>");
        for target in &strip {
            html.push_str("<td>");
            if let Some(render_id) = render_of(&target.label) {
                html.push_str(&render_figure(
                    folder,
                    render_id,
                    &format!("result, frame {}", target.frame.unwrap_or_default()),
                ));
                shown.push(render_id);
            }
            html.push_str("</td>");
        }
        html.push_str("</tr></table>");
    }
    html.push_str("<div class=\"images\">");
    for target in targets.iter().filter(|t| t.frame.is_none()) {
        let _ = write!(
            html,
            "<figure>{}<figcaption>target: {}</figcaption></figure>",
            target.tag,
            escape(&target.words)
        );
        if let Some(render_id) = render_of(&target.label) {
            html.push_str(&render_figure(
                folder,
                render_id,
                &format!("result: {}", target.words),
            ));
            shown.push(render_id);
        }
    }
    for render_id in record.render_ids.iter().filter(|id| !shown.contains(id)) {
        html.push_str(&render_figure(
            folder,
            render_id,
            &render_caption(render_id),
        ));
    }
    html.push_str("</div>");
}

/// The generator's tool calls in order: tool, arguments, and what came of each; nothing
/// for a generator without tools.
fn generator_tools_block(html: &mut String, calls: &[GeneratorToolCall]) {
    if calls.is_empty() {
        return;
    }
    html.push_str("<h3>Generator tools</h3><table class=\"calls\"><tr><th>tool</th><th>arguments</th><th>outcome</th></tr>");
    for call in calls {
        let _ = write!(
            html,
            "<tr{}><td>{}{}</td><td><code>{}</code></td><td>{}</td></tr>",
            if call.ok { "" } else { " class=\"error\"" },
            escape(&call.tool),
            if call.ok { "" } else { " (failed)" },
            escape(&call.arguments),
            escape(&call.outcome)
        );
    }
    html.push_str("</table>");
}

/// The errors fast retry fixed before the program ran; nothing when there were none.
fn retry_errors_block(html: &mut String, retry_errors: &[String]) {
    if retry_errors.is_empty() {
        return;
    }
    html.push_str("<h3>Fixed by fast retry</h3><ul>");
    for error in retry_errors {
        let _ = write!(html, "<li>{}</li>", escape(error));
    }
    html.push_str("</ul>");
}

/// The code as a diff against the previous iteration's, then the traceback if it failed.
fn code_block(html: &mut String, record: &IterationRecord, previous_code: &str) {
    let diff = diff_html(previous_code, &record.code);
    let _ = write!(
        html,
        "<h3>Code (diff against the previous iteration)</h3><pre class=\"diff\">{}</pre>",
        diff.html
    );
    if let Some((removed, added)) = diff.shown_whole {
        let _ = write!(
            html,
            "<p class=\"warn\">The changed part is too long to line up ({removed} lines before, \
             {added} after): it is shown removed, then added, whole.</p>"
        );
    }
    if let Some(error) = &record.execution.error {
        let _ = write!(
            html,
            "<h3>Error</h3><pre class=\"error\">{}</pre>",
            escape(&error.traceback)
        );
    }
}

/// The verifier's verdict, then its differences and suggestions, each list only when it has
/// items.
fn feedback_block(html: &mut String, feedback: &Feedback) {
    let _ = write!(
        html,
        "<h3>Verifier: {}</h3>",
        if feedback.accepted {
            "accepted"
        } else {
            "not accepted"
        }
    );
    for (title, items) in [
        ("Differences", &feedback.visual_differences),
        ("Suggestions", &feedback.suggestions),
    ] {
        if !items.is_empty() {
            let _ = write!(html, "<p>{title}</p><ul>");
            for item in items {
                let _ = write!(html, "<li>{}</li>", escape(item));
            }
            html.push_str("</ul>");
        }
    }
}

/// What containment the run's programs ran under, as its folder records it.
fn containment_of(folder: &RunFolder) -> String {
    let recorded = std::fs::read_to_string(folder.root().join(crate::folder::CONTAINMENT_FILE))
        .ok()
        .and_then(|text| serde_json::from_str::<viga_sandbox::ContainmentStatus>(&text).ok());
    match recorded {
        Some(status) => format!("{}: {}", status.policy, status.summary()),
        None => "not recorded (started by a program that does not record it, or before viga did)"
            .to_owned(),
    }
}

/// The figure of one render, by the id an iteration or a step recorded. Ids are read from the
/// run folder, which may come from anyone: an id naming a file outside it (by its path, or
/// through a link inside it) is refused on the page and never read. A render whose file is
/// gone is left out.
pub fn render_figure(folder: &RunFolder, render_id: &str, caption: &str) -> String {
    let path = match viga_skills::names::relative_path("render id", render_id) {
        Ok(relative) => folder.root().join(relative),
        Err(refused) => return format!("<p class=\"warn\">{}</p>", escape(&refused.to_string())),
    };
    if let (Ok(root), Ok(real)) = (
        std::fs::canonicalize(folder.root()),
        std::fs::canonicalize(&path),
    ) && !real.starts_with(&root)
    {
        return format!(
            "<p class=\"warn\">render id {} is refused: a link leads it out of the run folder</p>",
            escape(&format!("{render_id:?}"))
        );
    }
    image_tag(&path, render_id).map_or_else(String::new, |tag| {
        format!(
            "<figure>{tag}<figcaption>{}</figcaption></figure>",
            escape(caption)
        )
    })
}

fn image_tag(path: &Path, alt: &str) -> Option<String> {
    let bytes = std::fs::read(path).ok()?;
    let encoded = base64::engine::general_purpose::STANDARD.encode(bytes);
    Some(format!(
        "<img alt=\"{}\" src=\"data:image/png;base64,{encoded}\">",
        escape(alt)
    ))
}

/// Text made safe to put in HTML, in element content and in double-quoted attributes.
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The most cells of the table a line diff fills (changed lines before × changed lines
/// after, 4 bytes each). The table is what makes a diff cost O(n*m): past this the changed
/// part is shown whole instead of lined up.
const MAX_DIFF_CELLS: usize = 4_000_000;

/// A line diff as HTML, added and removed lines marked.
pub(crate) struct LineDiff {
    pub(crate) html: String,
    /// The changed part's lines (before, after) when it was too long to line up
    /// ([`MAX_DIFF_CELLS`]) and is shown removed, then added, whole.
    pub(crate) shown_whole: Option<(usize, usize)>,
}

/// A line diff: the lines both sides start and end with are set aside, and the changed part
/// between them is lined up by longest common subsequence when it fits [`MAX_DIFF_CELLS`].
pub(crate) fn diff_html(before: &str, after: &str) -> LineDiff {
    let old: Vec<&str> = before.lines().collect();
    let new: Vec<&str> = after.lines().collect();
    let start = old.iter().zip(&new).take_while(|(a, b)| a == b).count();
    let end = old[start..]
        .iter()
        .rev()
        .zip(new[start..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let (old_changed, new_changed) = (&old[start..old.len() - end], &new[start..new.len() - end]);
    let mut html = String::new();
    for line in &old[..start] {
        let _ = writeln!(html, "  {}", escape(line));
    }
    let too_long = old_changed.len().saturating_mul(new_changed.len()) > MAX_DIFF_CELLS;
    if too_long {
        for line in old_changed {
            let _ = write!(html, "<del>- {}</del>", escape(line));
        }
        for line in new_changed {
            let _ = write!(html, "<ins>+ {}</ins>", escape(line));
        }
    } else {
        lined_up(old_changed, new_changed, &mut html);
    }
    for line in &old[old.len() - end..] {
        let _ = writeln!(html, "  {}", escape(line));
    }
    LineDiff {
        html,
        shown_whole: too_long.then_some((old_changed.len(), new_changed.len())),
    }
}

/// The longest-common-subsequence diff of two runs of lines, appended to `out`.
fn lined_up(old: &[&str], new: &[&str], out: &mut String) {
    // lengths[i][j]: LCS length of old[i..] and new[j..].
    let mut lengths = vec![vec![0u32; new.len() + 1]; old.len() + 1];
    for i in (0..old.len()).rev() {
        for j in (0..new.len()).rev() {
            lengths[i][j] = if old[i] == new[j] {
                lengths[i + 1][j + 1] + 1
            } else {
                lengths[i + 1][j].max(lengths[i][j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    while i < old.len() || j < new.len() {
        if i < old.len() && j < new.len() && old[i] == new[j] {
            let _ = writeln!(out, "  {}", escape(old[i]));
            i += 1;
            j += 1;
        } else if j < new.len() && (i == old.len() || lengths[i][j + 1] >= lengths[i + 1][j]) {
            // Block elements end their own line inside <pre>; a newline would add a blank one.
            let _ = write!(out, "<ins>+ {}</ins>", escape(new[j]));
            j += 1;
        } else {
            let _ = write!(out, "<del>- {}</del>", escape(old[i]));
            i += 1;
        }
    }
}

/// The page's head: its style, for every report page.
pub const HEAD: &str = "<!doctype html><html><head><meta charset=\"utf-8\"><title>viga run report</title><style>\
body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px;color:#222}\
section{border-top:1px solid #ccc;margin-top:2em}\
.images{display:flex;flex-wrap:wrap;gap:8px}figure{margin:0}img{max-width:280px;border:1px solid #999}.strip img{max-width:160px}.strip caption{text-align:left}\
figcaption{font-size:12px;color:#555}pre{background:#f6f6f6;padding:8px;overflow-x:auto;font-size:12px}\
ins{background:#dfd;text-decoration:none;display:block}del{background:#fdd;text-decoration:none;display:block}\
.scripted{background:#fe8;padding:8px;font-weight:bold}.warn{background:#fdb;padding:8px}.error{background:#fee}\
.facts td,.facts th{padding:2px 10px;text-align:left}\
.calls{border-collapse:collapse;font-size:13px}.calls td,.calls th{border:1px solid #ddd;padding:2px 8px;text-align:left;vertical-align:top}</style></head><body>";

#[cfg(test)]
mod tests {
    use base64::Engine as _;

    use super::{RunFolder, diff_html, escape, render_figure};
    use crate::folder::{ARGS_FILE, EVENTS_FILE};

    #[test]
    fn render_ids_leading_out_of_the_run_folder_are_refused_and_not_read() {
        let root = tempfile::tempdir().unwrap();
        let run = root.path().join("run");
        std::fs::create_dir_all(run.join("renders/1")).unwrap();
        for file in [ARGS_FILE, EVENTS_FILE] {
            std::fs::write(run.join(file), "").unwrap();
        }
        let secret = root.path().join("secret.png");
        std::fs::write(&secret, "the secret").unwrap();
        std::fs::write(run.join("renders/1/front.png"), "a render").unwrap();
        let folder = RunFolder::open(&run).unwrap();
        let inlined = |bytes: &str| base64::engine::general_purpose::STANDARD.encode(bytes);

        let figure = render_figure(&folder, "renders/1/front.png", "front.png");
        assert!(figure.contains(&inlined("a render")), "{figure}");
        let mut outside = vec!["../secret.png".to_owned(), secret.display().to_string()];
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(&secret, run.join("renders/1/link.png")).unwrap();
            outside.push("renders/1/link.png".to_owned());
        }
        for id in &outside {
            let figure = render_figure(&folder, id, id);
            assert!(figure.contains("is refused"), "{id}: {figure}");
            assert!(!figure.contains(&inlined("the secret")), "{id}: {figure}");
        }
    }

    #[test]
    fn diffs_mark_added_and_removed_lines() {
        let diff = diff_html("a\nb\nc\n", "a\nB\nc\nd\n");
        assert_eq!(
            diff.html,
            "  a\n<ins>+ B</ins><del>- b</del>  c\n<ins>+ d</ins>"
        );
        assert_eq!(diff.shown_whole, None);
        assert_eq!(diff_html("", "x").html, "<ins>+ x</ins>");
        assert_eq!(
            diff_html("k\nx\nk\n", "k\ny\nk\n").html,
            "  k\n<ins>+ y</ins><del>- x</del>  k\n"
        );
    }

    #[test]
    fn a_long_change_is_shown_whole_instead_of_lined_up() {
        let numbered =
            |prefix: &str| -> String { (0..2500).map(|n| format!("{prefix}{n}\n")).collect() };
        let before = format!("same\n{}end\n", numbered("old "));
        let after = format!("same\n{}end\n", numbered("new "));
        let started = std::time::Instant::now();
        let diff = diff_html(&before, &after);
        assert_eq!(diff.shown_whole, Some((2500, 2500)));
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        assert!(diff.html.starts_with("  same\n<del>- old 0</del>"));
        assert!(diff.html.ends_with("<ins>+ new 2499</ins>  end\n"));
        // The lines both sides share are set aside first: a small change in a long program
        // is still lined up.
        let edited = before.replacen("old 7\n", "seven\n", 1);
        let diff = diff_html(&before, &edited);
        assert_eq!(diff.shown_whole, None);
        assert_eq!(diff.html.matches("<ins>").count(), 1);
    }

    #[test]
    fn html_is_escaped() {
        assert_eq!(escape("<b>\"&\""), "&lt;b&gt;&quot;&amp;&quot;");
    }
}
