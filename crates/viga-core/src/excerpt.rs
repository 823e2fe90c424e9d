//! Program output as prompts carry it: the head and the tail of each text, with a note saying
//! how much was cut. A program that prints in a loop can produce hundreds of kilobytes, which
//! would crowd everything else out of the model's context (and cost as much); the beginning
//! and the end are where the setup and the error are. The whole output stays in the run
//! folder (`events.jsonl`, `ExecutionFinished`).

use std::borrow::Cow;

use viga_protocol::iteration::ExecutionResult;

/// Bytes of each output (stdout, stderr, traceback, error message) a prompt carries: half
/// from its beginning, half from its end.
pub(crate) const PROMPT_OUTPUT_BYTES: usize = 4096;

/// `text` when it fits in `budget` bytes; else its first and last `budget / 2` bytes (at
/// character boundaries) around a note saying how much was cut.
pub(crate) fn head_and_tail(text: &str, budget: usize) -> Cow<'_, str> {
    if text.len() <= budget {
        return Cow::Borrowed(text);
    }
    let half = budget / 2;
    let head_end = boundary_at_or_before(text, half);
    let tail_start = boundary_at_or_after(text, text.len() - half);
    let cut = &text[head_end..tail_start];
    Cow::Owned(format!(
        "{}\n[... {} characters ({} lines) cut here; the whole output is in the run folder ...]\n{}",
        &text[..head_end],
        cut.chars().count(),
        cut.lines().count(),
        &text[tail_start..]
    ))
}

/// A copy of `result` whose texts are cut to [`PROMPT_OUTPUT_BYTES`] each, for a prompt.
pub(crate) fn execution_for_prompt(result: &ExecutionResult) -> ExecutionResult {
    let cut = |text: &str| head_and_tail(text, PROMPT_OUTPUT_BYTES).into_owned();
    let mut shown = result.clone();
    shown.stdout = cut(&result.stdout);
    shown.stderr = cut(&result.stderr);
    if let Some(error) = shown.error.as_mut() {
        error.message = cut(&error.message);
        error.traceback = cut(&error.traceback);
    }
    shown
}

fn boundary_at_or_before(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn boundary_at_or_after(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at += 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use viga_protocol::iteration::ExecutionError;

    use super::*;

    #[test]
    fn short_text_is_kept_whole() {
        assert!(matches!(head_and_tail("hello", 10), Cow::Borrowed("hello")));
    }

    #[test]
    fn long_text_keeps_its_head_and_tail_and_says_how_much_was_cut() {
        let text: String = (0..10_000).map(|i| format!("line {i}\n")).collect();
        let shown = head_and_tail(&text, 4096);
        assert!(shown.len() < 4096 + 200, "{}", shown.len());
        assert!(shown.starts_with("line 0\nline 1\n"));
        assert!(shown.ends_with("line 9999\n"));
        let cut = text.len() - 4096;
        assert!(
            shown.contains(&format!("[... {cut} characters")),
            "{}",
            &shown[2000..2200]
        );
    }

    #[test]
    fn cuts_fall_between_characters() {
        let text = "é".repeat(5000);
        let shown = head_and_tail(&text, 1001);
        assert!(shown.starts_with('é') && shown.ends_with('é'));
    }

    #[test]
    fn every_output_of_a_run_is_cut_for_the_prompt() {
        let huge = "x".repeat(300_000);
        let result = ExecutionResult {
            stdout: huge.clone(),
            stderr: huge.clone(),
            error: Some(ExecutionError {
                error_type: "RuntimeError".into(),
                message: huge.clone(),
                traceback: huge,
                line: Some(3),
            }),
            duration_ms: 1.0,
        };
        let shown = execution_for_prompt(&result);
        let error = shown.error.unwrap();
        for text in [
            &shown.stdout,
            &shown.stderr,
            &error.message,
            &error.traceback,
        ] {
            assert!(
                text.len() < 5000 && text.contains("295904 characters"),
                "{}",
                text.len()
            );
        }
        assert_eq!(
            (error.error_type.as_str(), error.line),
            ("RuntimeError", Some(3))
        );
    }
}
