//! A reply the model server cut off at its output limit (`finish_reason: length`): its JSON
//! never parses and its program is not whole, and sending it back whole makes every next
//! request longer by the limit (a Geometry Nodes model repeating one step until the limit made
//! the next prompt three times longer and the next round twice as slow). Every role that
//! answers a cut-off reply (the generator, the verifier, the add-on agent, the Geometry Nodes
//! assistant) sends it back shortened, tells the model what happened and asks for less.

use viga_provider::{FinishReason, ModelResponse};

/// What a conversation keeps of an answer: the whole of it, or the start of one cut off at
/// the output limit (never the whole: it would make every next request longer by the limit).
pub fn kept(answer: &ModelResponse) -> String {
    if answer.finish_reason == FinishReason::Length {
        shortened(&answer.text)
    } else {
        answer.text.clone()
    }
}

/// How much of a cut-off reply stays in the conversation, so the model sees where it was.
const KEPT_CHARS: usize = 400;
/// A line seen this often in one reply is a model repeating itself.
const REPEATED_TIMES: usize = 5;
/// Lines shorter than this (brackets, blank lines) are not counted as repeated steps.
const COUNTED_LINE_CHARS: usize = 12;

/// The start of `text`, marked as cut off.
pub fn shortened(text: &str) -> String {
    let kept: String = text.chars().take(KEPT_CHARS).collect();
    if kept.len() == text.len() {
        return format!("{kept}\n[cut off here at the output limit]");
    }
    format!(
        "{kept}\n[… {} more characters, cut off at the output limit]",
        text.chars().count() - KEPT_CHARS
    )
}

/// The line `text` repeats most, with how often, when it is at least [`REPEATED_TIMES`].
pub fn repeated_line(text: &str) -> Option<(String, usize)> {
    let mut counts: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for line in text.lines().map(str::trim) {
        if line.chars().count() >= COUNTED_LINE_CHARS {
            *counts.entry(line).or_default() += 1;
        }
    }
    counts
        .into_iter()
        .filter(|(_, times)| *times >= REPEATED_TIMES)
        .max_by_key(|(_, times)| *times)
        .map(|(line, times)| (line.chars().take(120).collect(), times))
}

/// What the model is told about a reply cut off at `limit` tokens; `shorter` says what a
/// shorter reply is in its role ("a few steps at most (the next ones come in later rounds),
/// each step once").
pub fn told(limit: u32, text: &str, shorter: &str) -> String {
    let mut said = format!(
        "Your reply was cut off at the output limit ({limit} tokens) before it ended, so none of it ran. Answer again with a shorter reply: {shorter}."
    );
    if let Some((line, times)) = repeated_line(text) {
        said.push_str(&format!(
            " Your reply repeated one line {times} times: {line}"
        ));
    }
    said
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_reply_keeps_its_start_and_says_how_much_was_left_out() {
        let long = "x".repeat(1000);
        let kept = shortened(&long);
        assert!(kept.starts_with(&"x".repeat(KEPT_CHARS)));
        assert!(kept.len() < 500, "{}", kept.len());
        assert!(kept.contains("600 more characters"), "{kept}");
    }

    #[test]
    fn a_line_repeated_five_times_is_named_and_four_is_not() {
        let step = "{\"op\": \"add_node\", \"type\": \"MeshLine\"},";
        let five = format!("{{\n{}\n", [step; 5].join("\n"));
        assert_eq!(repeated_line(&five), Some((step.to_owned(), 5)));
        assert!(told(4096, &five, "fewer steps").contains("repeated one line 5 times"));
        let four = [step; 4].join("\n");
        assert_eq!(repeated_line(&four), None);
        let said = told(4096, &four, "fewer steps");
        assert!(
            said.contains("cut off at the output limit (4096 tokens)"),
            "{said}"
        );
        assert!(said.contains("a shorter reply: fewer steps."), "{said}");
    }
}
