//! The docs name only what exists: every backticked identifier in `docs/*.md` and
//! `README.md` (`RunConfig`, `verifier_render()`, `generator_tools`) is a word of the code, a
//! path of them resolves as a whole (`viga_core::report::escape`: a crate, its modules, an
//! item defined or re-exported there, then that item's members; `RunHandle::spawn`: a type
//! and a member of the crate that defines it), and every backticked path into the repository
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
fn unknown_names(markdown: &str, words: &BTreeSet<String>, code: &Crates) -> Vec<String> {
    let mut unknown = Vec::new();
    for span in spans(markdown) {
        if is_identifier_path(&span) {
            let bare = span.strip_suffix("()").unwrap_or(&span);
            let segments: Vec<&str> = bare.split("::").collect();
            let known = match segments.as_slice() {
                [word] => words.contains(*word),
                path => code.resolves(path),
            };
            if !known {
                unknown.push(span);
            }
        } else if is_repository_path(&span) && !root().join(span.trim_end_matches('/')).exists() {
            unknown.push(span);
        }
    }
    unknown
}

/// The workspace's Rust sources by crate: each library's modules (from its files) and the
/// names each module defines or re-exports.
struct Crates {
    crates: Vec<CrateSource>,
}

struct CrateSource {
    /// The name code uses (`viga_core`).
    name: String,
    /// Module path (`""` for the root, `report`, `scene::init`) to its source.
    modules: Vec<(String, String)>,
    /// Every word of its sources.
    words: BTreeSet<String>,
}

/// Paths whose first segment is the standard library's, which the workspace does not define.
const STD_MODULES: [&str; 6] = ["std", "io", "fmt", "fs", "env", "process"];

/// Words that introduce a type's name in Rust source.
const TYPE_WORDS: [&str; 5] = ["struct", "enum", "trait", "type", "union"];

/// Words that introduce an item's name in Rust source.
const DEFINING_WORDS: [&str; 10] = [
    "fn",
    "struct",
    "enum",
    "trait",
    "type",
    "const",
    "static",
    "mod",
    "macro_rules!",
    "union",
];

impl Crates {
    fn read() -> Self {
        let mut crates = Vec::new();
        for folder in ["crates", "bins", "xtask"] {
            let base = root().join(folder);
            let members: Vec<PathBuf> = if folder == "xtask" {
                vec![base]
            } else {
                std::fs::read_dir(&base)
                    .unwrap()
                    .flatten()
                    .map(|entry| entry.path())
                    .collect()
            };
            for member in members {
                let src = member.join("src");
                if !src.is_dir() {
                    continue;
                }
                let dir_name = member
                    .file_name()
                    .unwrap()
                    .to_string_lossy()
                    .replace('-', "_");
                let mut modules = Vec::new();
                module_files(&src, "", &mut modules);
                let words = modules
                    .iter()
                    .flat_map(|(_, source)| identifiers(source).map(str::to_owned))
                    .collect();
                crates.push(CrateSource {
                    name: dir_name,
                    modules,
                    words,
                });
            }
        }
        Self { crates }
    }

    /// Whether `path` resolves: a crate's modules then an item and its members, or a module
    /// or type defined somewhere and its members.
    fn resolves(&self, path: &[&str]) -> bool {
        if STD_MODULES.contains(&path[0]) {
            return true;
        }
        if let Some(krate) = self.crates.iter().find(|c| c.name == path[0]) {
            return krate.resolves_from("", &path[1..]);
        }
        if self.resolves_through_alias(path) {
            return true;
        }
        // A module or an item named by its last path segment, in any crate.
        self.crates.iter().any(|krate| {
            krate.modules.iter().any(|(module, source)| {
                module.rsplit("::").next() == Some(path[0])
                    && krate.resolves_from(module, &path[1..])
                    || defines_type(source, path[0]) && krate.has_words(&path[1..])
            })
        })
    }
}

impl Crates {
    /// Whether `path` starts with a name some crate re-exports under another
    /// (`pub use viga_locate::blender as locate;`) and resolves through what it stands for.
    fn resolves_through_alias(&self, path: &[&str]) -> bool {
        let suffix = format!(" as {};", path[0]);
        self.crates
            .iter()
            .flat_map(|krate| &krate.modules)
            .any(|(_, source)| {
                source.lines().any(|line| {
                    let Some(target) = line
                        .trim_start()
                        .strip_prefix("pub use ")
                        .and_then(|rest| rest.strip_suffix(&suffix))
                    else {
                        return false;
                    };
                    let mut full: Vec<&str> = target.split("::").collect();
                    full.extend_from_slice(&path[1..]);
                    full[0] != path[0] && self.resolves(&full)
                })
            })
    }
}

impl CrateSource {
    fn source_of(&self, module: &str) -> Option<&str> {
        self.modules
            .iter()
            .find(|(name, _)| name == module)
            .map(|(_, source)| source.as_str())
    }

    /// Whether `rest` resolves inside `module`: submodules, then an item defined or
    /// re-exported there, then members of it (words of this crate).
    fn resolves_from(&self, module: &str, rest: &[&str]) -> bool {
        let Some((first, after)) = rest.split_first() else {
            return true;
        };
        let child = if module.is_empty() {
            (*first).to_owned()
        } else {
            format!("{module}::{first}")
        };
        if self.source_of(&child).is_some() {
            return self.resolves_from(&child, after);
        }
        let Some(source) = self.source_of(module) else {
            return false;
        };
        (defines(source, first) || reexports(source, first)) && self.has_words(after)
    }

    /// Whether every one of `names` is a word somewhere in this crate.
    fn has_words(&self, names: &[&str]) -> bool {
        names.iter().all(|name| self.words.contains(*name))
    }
}

/// The modules under `dir` (a crate's `src`, or a module's folder) with their sources.
fn module_files(dir: &Path, prefix: &str, modules: &mut Vec<(String, String)>) {
    let join = |name: &str| {
        if prefix.is_empty() {
            name.to_owned()
        } else {
            format!("{prefix}::{name}")
        }
    };
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            module_files(&path, &join(&name), modules);
        } else if let Some(stem) = name.strip_suffix(".rs") {
            let module = match stem {
                "lib" | "main" if prefix.is_empty() => String::new(),
                "mod" => prefix.to_owned(),
                _ => join(stem),
            };
            modules.push((module, std::fs::read_to_string(&path).unwrap_or_default()));
        }
    }
}

/// Whether `source` defines a type called `name` (whose members a path may name).
fn defines_type(source: &str, name: &str) -> bool {
    defined_by(source, name, &TYPE_WORDS)
}

/// Whether `source` defines an item called `name` (`fn name`, `struct name`, ...).
fn defines(source: &str, name: &str) -> bool {
    defined_by(source, name, &DEFINING_WORDS)
}

fn defined_by(source: &str, name: &str, defining: &[&str]) -> bool {
    source.lines().any(|line| {
        let words: Vec<&str> = line
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '!'))
            .filter(|word| !word.is_empty())
            .collect();
        words
            .windows(2)
            .any(|pair| defining.contains(&pair[0]) && pair[1] == name)
    })
}

/// Whether `source` re-exports something as `name` (`pub use a::name;`, `pub use a::{b,
/// name}`, `pub use a as name`).
fn reexports(source: &str, name: &str) -> bool {
    let mut statement = String::new();
    let mut inside = false;
    for line in source.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("pub use ") || trimmed.starts_with("pub(crate) use ") {
            inside = true;
            statement.clear();
        }
        if inside {
            statement.push_str(line);
            statement.push(' ');
            if line.contains(';') {
                inside = false;
                if identifiers(&statement).any(|word| word == name) {
                    return true;
                }
            }
        }
    }
    false
}

#[test]
fn every_backticked_name_in_the_docs_exists_in_the_code() {
    let words = code_words();
    let code = Crates::read();
    let mut wrong = Vec::new();
    for doc in doc_files() {
        let text = std::fs::read_to_string(&doc).unwrap();
        for name in unknown_names(&text, &words, &code) {
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
    let code = Crates::read();
    let doc = "`RunConfig`, `viga_core::report::escape`, `RunHandle::spawn` and `viga_domain_scene::attached::snapshot_user_scene` exist; `AddonReplyTap` does not, nor `crates/viga-nowhere/`, nor `viga_core::scene::SceneDomain` (every word exists, the path does not), nor `RunHandle::launch_rockets`.\n```\n`inside a fence`\n```";
    assert_eq!(
        unknown_names(doc, &words, &code),
        [
            "AddonReplyTap",
            "crates/viga-nowhere/",
            "viga_core::scene::SceneDomain",
            "RunHandle::launch_rockets"
        ]
    );
}

/// The `VIGA_*` environment variables the code reads or sets: string literals in the Rust
/// sources outside tests, and names the Blender add-on's Python reads from its environment.
/// Variables of tests only (their names say `TEST`) are not for people.
fn environment_variables() -> BTreeSet<String> {
    let mut files = Vec::new();
    for folder in ["crates", "bins", "xtask"] {
        code_files(&root().join(folder), &mut files);
    }
    let mut names = BTreeSet::new();
    for file in files {
        let path = file.to_string_lossy();
        let python = path.ends_with(".py");
        if path.contains("/tests/") || !(path.ends_with(".rs") || python) {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        for (at, _) in text.match_indices("\"VIGA_") {
            let name: String = text[at + 1..]
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            // A marker a program prints (`"VIGA_RESULT:"`) is not a variable.
            let whole_literal = text[at + 1 + name.len()..].starts_with('"');
            let read_from_environment = !python
                || text[..at].ends_with("environ.get(")
                || text[..at].ends_with("environ.pop(")
                || text[..at].ends_with("environ[");
            if whole_literal
                && read_from_environment
                && !name.contains("TEST")
                && !name.ends_with('_')
            {
                names.insert(name);
            }
        }
    }
    names
}

#[test]
fn every_environment_variable_is_documented() {
    let docs: String = doc_files()
        .iter()
        .map(|path| std::fs::read_to_string(path).unwrap())
        .collect();
    let variables = environment_variables();
    assert!(variables.contains("VIGA_BLENDER"), "{variables:?}");
    let undocumented: Vec<&String> = variables
        .iter()
        .filter(|name| !docs.contains(name.as_str()))
        .collect();
    assert!(
        undocumented.is_empty(),
        "environment variables no doc names (say what each does in docs/configuration.md, or in docs/benchmarks.md for a bench's): {undocumented:?}"
    );
}
