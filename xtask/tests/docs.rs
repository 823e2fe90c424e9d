//! The docs name only what exists: every backticked identifier in `docs/*.md` and
//! `README.md` (`RunConfig`, `viga_core::scene::SceneDomain`, `verifier_render()`,
//! `generator_tools`) is a word of the code, and every backticked path into the repository
//! (`crates/viga-core/prompts/`) exists.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic: that is how tests fail

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The folders whose files are "the code".
const CODE_FOLDERS: [&str; 5] = ["crates", "bins", "xtask", "fixtures", ".ci"];
/// Names the docs may use that belong to other programs (the proxy variables reqwest reads)
/// or stand for a pattern.
const OUTSIDE_NAMES: [&str; 5] = [
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "__dunder__",
];

/// The files read as code, by ending.
const CODE_ENDINGS: [&str; 10] = [
    ".rs", ".py", ".toml", ".json", ".js", ".html", ".css", ".sh", ".md", "run",
];

fn code_files(dir: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == "target" || name.starts_with('.') && name != ".ci" {
            continue;
        }
        if path.is_dir() {
            code_files(&path, files);
        } else if path.ends_with("xtask/tests/docs.rs") {
            // This test's own examples of names that do not exist.
        } else if CODE_ENDINGS.iter().any(|ending| name.ends_with(ending)) {
            files.push(path);
        }
    }
}

/// Every word (identifier-shaped run of characters) in the code, and the snake_case form of
/// every CamelCase one (what serde's `rename_all` writes).
fn code_words() -> BTreeSet<String> {
    let mut files = Vec::new();
    for folder in CODE_FOLDERS {
        code_files(&root().join(folder), &mut files);
    }
    let mut words = BTreeSet::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        for word in identifiers(&text) {
            words.insert(snake_case(word));
            words.insert(word.to_owned());
        }
    }
    words.extend(OUTSIDE_NAMES.iter().map(|name| (*name).to_owned()));
    words
}

fn snake_case(word: &str) -> String {
    let mut snake = String::with_capacity(word.len() + 4);
    for (i, c) in word.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                snake.push('_');
            }
            snake.push(c.to_ascii_lowercase());
        } else {
            snake.push(c);
        }
    }
    snake
}

fn identifiers(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_'))
}

/// The backticked spans of a Markdown text, outside fenced blocks.
fn spans(markdown: &str) -> Vec<String> {
    let mut spans = Vec::new();
    let mut fenced = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        spans.extend(line.split('`').skip(1).step_by(2).map(str::to_owned));
    }
    spans
}

/// `Foo::bar`, `bar()`, `snake_case`: a path of identifiers, maybe called.
fn is_identifier_path(span: &str) -> bool {
    let span = span.strip_suffix("()").unwrap_or(span);
    !span.is_empty()
        && span.split("::").all(|segment| {
            segment.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && segment
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
}

/// `crates/...`, `bins/...`: a path into the repository, without placeholders.
fn is_repository_path(span: &str) -> bool {
    CODE_FOLDERS
        .iter()
        .chain(["docs"].iter())
        .any(|folder| span.starts_with(&format!("{folder}/")))
        && !span.contains(['<', '*', ' ', '{', '$'])
}

fn doc_files() -> Vec<PathBuf> {
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.push(root().join("README.md"));
    docs.sort();
    docs
}

/// What `markdown` names that the code does not have.
fn unknown_names(markdown: &str, words: &BTreeSet<String>) -> Vec<String> {
    let mut unknown = Vec::new();
    for span in spans(markdown) {
        if is_identifier_path(&span) {
            let bare = span.strip_suffix("()").unwrap_or(&span);
            if bare.split("::").any(|segment| !words.contains(segment)) {
                unknown.push(span);
            }
        } else if is_repository_path(&span) && !root().join(span.trim_end_matches('/')).exists() {
            unknown.push(span);
        }
    }
    unknown
}

#[test]
fn every_backticked_name_in_the_docs_exists_in_the_code() {
    let words = code_words();
    let mut wrong = Vec::new();
    for doc in doc_files() {
        let text = std::fs::read_to_string(&doc).unwrap();
        for name in unknown_names(&text, &words) {
            wrong.push(format!(
                "{}: `{name}`",
                doc.strip_prefix(root()).unwrap().display()
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "the docs name what the code does not have (rename or remove):\n{}",
        wrong.join("\n")
    );
}

#[test]
fn a_made_up_name_is_caught() {
    let words = code_words();
    let doc = "`RunConfig` and `viga_core::scene::SceneDomain` exist; `AddonReplyTap` does not, nor `crates/viga-nowhere/`.\n```\n`inside a fence`\n```";
    assert_eq!(
        unknown_names(doc, &words),
        ["AddonReplyTap", "crates/viga-nowhere/"]
    );
}
