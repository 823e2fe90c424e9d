//! The text match every library ranks by: the words of a query and of an asset's text,
//! normalised the same way (lower case, camel case and separators split, plurals folded,
//! stop words dropped), and the share of the query's words an asset's text contains.

use std::collections::HashSet;

use crate::registry::ToolError;

/// Words that say nothing about which asset is meant.
const STOP_WORDS: [&str; 14] = [
    "an", "and", "for", "in", "of", "on", "or", "some", "the", "to", "with", "my", "at", "by",
];

/// The words of `text` as the ranking compares them: lower case, letters and digits, at least
/// two characters, stop words dropped, a plural `-s`/`-ies` taken off, and camel case also
/// split (`ArmChair` gives `armchair`, `arm` and `chair`).
pub fn text_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    for raw in text.split(|c: char| !c.is_alphanumeric()) {
        push_word(&mut words, raw);
        let parts = camel_parts(raw);
        if parts.len() > 1 {
            for part in parts {
                push_word(&mut words, part);
            }
        }
    }
    words
}

/// A query's words, each once.
pub fn query_words(query: &str) -> Vec<String> {
    let mut seen = HashSet::new();
    // Camel case parts of a query would count a word twice; a query is plain words.
    query
        .split(|c: char| !c.is_alphanumeric())
        .filter_map(normal_word)
        .filter(|word| seen.insert(word.clone()))
        .collect()
}

fn push_word(words: &mut Vec<String>, raw: &str) {
    if let Some(word) = normal_word(raw) {
        words.push(word);
    }
}

fn normal_word(raw: &str) -> Option<String> {
    let word = raw.to_lowercase();
    if word.chars().count() < 2 || STOP_WORDS.contains(&word.as_str()) {
        return None;
    }
    Some(singular(word))
}

fn singular(word: String) -> String {
    if word.len() > 4
        && let Some(stem) = word.strip_suffix("ies")
    {
        return format!("{stem}y");
    }
    if word.len() > 3 && word.ends_with('s') && !word.ends_with("ss") && !word.ends_with("us") {
        let mut word = word;
        word.pop();
        return word;
    }
    word
}

/// `ArmChair01` → `Arm`, `Chair01`; a word without an inner capital is one part.
fn camel_parts(raw: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut previous_lower = false;
    for (index, c) in raw.char_indices() {
        if c.is_uppercase() && previous_lower {
            parts.push(&raw[start..index]);
            start = index;
        }
        previous_lower = c.is_lowercase() || c.is_ascii_digit();
    }
    parts.push(&raw[start..]);
    parts
}

/// How well `words` (an asset's text) match `wanted` (from [`query_words`]): the share of
/// the wanted words present, and how many that is.
pub fn match_score(wanted: &[String], words: &[String]) -> (f32, usize) {
    if wanted.is_empty() {
        return (0.0, 0);
    }
    let matched = wanted.iter().filter(|w| words.contains(w)).count();
    (matched as f32 / wanted.len() as f32, matched)
}

/// The query's words, or the error that tells the model to say what it needs.
pub(crate) fn wanted_words(query: &str) -> Result<Vec<String>, ToolError> {
    let wanted = query_words(query);
    if wanted.is_empty() {
        return Err(ToolError::Recoverable(
            "the asset query has no words; describe the asset you need (\"wooden chair\")"
                .to_owned(),
        ));
    }
    Ok(wanted)
}
