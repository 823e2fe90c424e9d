//! Every recipe in the docs runs as written. The recipes are files under `docs/recipes/`, and
//! the docs quote them whole: a fenced block whose caption line names a recipe's path equals
//! that file byte for byte, and every recipe is quoted, so the two cannot drift. Every shell
//! script passes `bash -n` and starts with its `#!` line (sbatch refuses a script that does
//! not); every YAML file is well-formed YAML of Kubernetes objects (checked by its structure:
//! the workspace has no YAML parser); every batch script has a time limit, every evaluation
//! names its render settings, and a script that reads `DATA` stops when it is not set.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic: that is how tests fail

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Every file under `dir`, sorted.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(files_under(&path));
        } else {
            files.push(path);
        }
    }
    files.sort();
    files
}

/// The recipes, by path relative to the repository (`docs/recipes/slurm/submit.sh`).
fn recipes() -> Vec<(String, String)> {
    let root = root();
    let recipes: Vec<(String, String)> = files_under(&root.join("docs/recipes"))
        .into_iter()
        .map(|path| {
            let relative = path.strip_prefix(&root).unwrap().to_string_lossy();
            (
                relative.into_owned(),
                std::fs::read_to_string(&path).unwrap(),
            )
        })
        .collect();
    assert!(recipes.len() >= 5, "{recipes:?}");
    recipes
}

fn recipes_ending(ending: &str) -> Vec<(String, String)> {
    let found: Vec<_> = recipes()
        .into_iter()
        .filter(|(path, _)| path.ends_with(ending))
        .collect();
    assert!(!found.is_empty(), "no {ending} recipe");
    found
}

/// The fenced blocks of `markdown` that quote a recipe: the last non-blank line before the
/// fence names exactly one backticked `docs/recipes/…` path. (path, the block's text).
fn quotes(markdown: &str) -> Vec<(String, String)> {
    let mut quotes = Vec::new();
    let mut caption = "";
    let mut lines = markdown.lines();
    while let Some(line) = lines.next() {
        if !line.starts_with("```") {
            if !line.trim().is_empty() {
                caption = line;
            }
            continue;
        }
        let body: String = lines
            .by_ref()
            .take_while(|line| !line.starts_with("```"))
            .map(|line| format!("{line}\n"))
            .collect();
        let named: Vec<&str> = caption
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|span| span.starts_with("docs/recipes/"))
            .collect();
        if let [path] = named[..] {
            quotes.push((path.to_owned(), body));
        }
        caption = "";
    }
    quotes
}

#[test]
fn the_docs_quote_every_recipe_whole() {
    let mut quoted = Vec::new();
    for doc in files_under(&root().join("docs")) {
        if doc.extension().is_some_and(|e| e == "md") {
            quoted.extend(quotes(&std::fs::read_to_string(&doc).unwrap()));
        }
    }
    let recipes = recipes();
    for (path, body) in &quoted {
        let file = recipes.iter().find(|(recipe, _)| recipe == path);
        let Some((_, text)) = file else {
            panic!("the docs quote {path}, which is not a recipe file");
        };
        assert!(
            body == text,
            "the docs' quote of {path} differs from the file: copy the file into the docs"
        );
    }
    for (path, _) in &recipes {
        assert!(
            quoted.iter().any(|(quote, _)| quote == path),
            "{path} is quoted nowhere in docs/ (a fenced block under a line naming `{path}`)"
        );
    }
}

#[test]
fn a_quote_is_the_block_under_a_line_naming_one_recipe() {
    let markdown =
        "Run `docs/recipes/slurm/x.sh`:\n\n```sh\necho a\n```\n\n```sh\nnot a quote\n```\n";
    assert_eq!(
        quotes(markdown),
        vec![("docs/recipes/slurm/x.sh".to_owned(), "echo a\n".to_owned())]
    );
}

#[test]
fn every_shell_recipe_starts_with_its_interpreter_and_parses() {
    for (path, text) in recipes_ending(".sh") {
        let first = text.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("#!"),
            "{path}: the first line must be the #! line (sbatch refuses anything else), not {first:?}"
        );
        let output = Command::new("bash")
            .arg("-n")
            .arg(root().join(&path))
            .output()
            .expect("bash must be installed");
        assert!(
            output.status.success(),
            "{path}: bash -n: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

#[test]
fn every_recipe_has_a_time_limit_render_settings_and_says_to_set_data() {
    for (path, text) in recipes() {
        if text.contains("#SBATCH") {
            assert!(text.contains("#SBATCH --time="), "{path}: no time limit");
        }
        if text.contains("kind: Job") {
            assert!(
                text.contains("activeDeadlineSeconds:"),
                "{path}: no time limit"
            );
        }
        // A command continued over lines (`\` in a script, a folded YAML scalar) is one.
        let joined = text.replace("\\\n", " ").replace('\n', " ");
        for command in joined.split("viga eval blendergym").skip(1) {
            let command = command.split(['#', ';']).next().unwrap_or_default();
            for flag in ["--resolution", "--samples"] {
                assert!(
                    command.contains(flag),
                    "{path}: an evaluation without {flag}"
                );
            }
        }
        if text.contains("$DATA") {
            assert!(
                text.contains("${DATA:?"),
                "{path}: reads DATA without stopping when it is not set"
            );
        }
    }
}

#[test]
fn every_yaml_recipe_is_well_formed_kubernetes_objects() {
    for (path, text) in recipes_ending(".yaml") {
        if let Err(problem) = check_yaml(&text) {
            panic!("{path}: {problem}");
        }
    }
}

#[test]
fn malformed_yaml_is_caught() {
    let good = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: a\nspec:\n  args:\n    - >-\n      sh -c {x\n    - {a: [1, 2]}\n    - it's plain\n";
    assert_eq!(check_yaml(good), Ok(()));
    for (bad, why) in [
        (good.replace("  name: a", "\tname: a"), "a tab"),
        (good.replace("  name: a", "   name: a"), "odd indent"),
        (
            good.replace("kind: Job\n", "kind: Job\n  extra: 1\n"),
            "under a value",
        ),
        (good.replace("{a: [1, 2]}", "{a: [1, 2}"), "unbalanced"),
        (good.replace("kind: Job\n", ""), "no kind"),
        (good.replace("{a: [1, 2]}", "{a: \"b}"), "an unclosed quote"),
        (good.replace("metadata:", "metadata"), "not a key"),
    ] {
        assert!(check_yaml(&bad).is_err(), "{why} was accepted:\n{bad}");
    }
}

/// Checks YAML by its structure, as far as these recipes use it: block mappings and sequences
/// indented by two, flow collections on one line, block scalars (`|`, `>-`), comments; each
/// document a Kubernetes object (`apiVersion`, `kind`, `metadata`).
fn check_yaml(text: &str) -> Result<(), String> {
    for document in text.split("\n---\n") {
        check_document(document)?;
        for key in ["apiVersion:", "kind:", "metadata:"] {
            if !document.lines().any(|line| line.starts_with(key)) {
                return Err(format!("a document without {key}"));
            }
        }
    }
    Ok(())
}

fn check_document(document: &str) -> Result<(), String> {
    // The indent a deeper line may have (one that opens a block allows more), and the indent
    // of a block scalar's line while its text runs.
    let (mut deepest, mut scalar): (usize, Option<usize>) = (0, None);
    for (number, line) in document.lines().enumerate() {
        let at = |problem: &str| Err(format!("line {}: {problem}: {line:?}", number + 1));
        let content = line.trim_start_matches(' ');
        let indent = line.len() - content.len();
        if content.is_empty() || scalar.is_some_and(|of| indent > of) {
            continue;
        }
        scalar = None;
        if content.starts_with('\t') {
            return at("a tab in the indentation");
        }
        if content.starts_with('#') {
            continue;
        }
        if indent % 2 != 0 || indent > deepest {
            return at("indented under a line that opens no block");
        }
        let mut column = indent;
        let mut body = content;
        while let Some(rest) = body.strip_prefix("- ") {
            column += 2;
            body = rest;
        }
        let in_sequence = column > indent;
        let value = match key_and_value(body) {
            Some(value) => value,
            None if in_sequence => body,
            None => return at("neither a key nor a sequence entry"),
        };
        if let Err(problem) = balanced(value) {
            return at(&problem);
        }
        if ["|", "|-", "|+", ">", ">-", ">+"].contains(&value) {
            scalar = Some(column - usize::from(in_sequence) * 2);
        }
        deepest = if value.is_empty() { column + 2 } else { column };
    }
    Ok(())
}

/// The value after `key:` when `body` is a plain key (and maybe a value), else None.
fn key_and_value(body: &str) -> Option<&str> {
    let (key, value) = body.split_once(':')?;
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./".contains(c));
    (plain && (value.is_empty() || value.starts_with(' '))).then(|| value.trim())
}

/// Quotes closed and brackets balanced, outside quotes, on one line. A quote mark opens a
/// quoted scalar only where one may start (`don't` is plain text).
fn balanced(value: &str) -> Result<(), String> {
    let mut open = Vec::new();
    let mut quote = None;
    let mut before = None;
    for c in value.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') if matches!(before, None | Some('[' | '{' | ',' | ':')) => {
                quote = Some(c);
            }
            (None, '[' | '{') => open.push(c),
            (None, ']') if open.pop() != Some('[') => return Err("an unopened ]".to_owned()),
            (None, '}') if open.pop() != Some('{') => return Err("an unopened }".to_owned()),
            _ => {}
        }
        if !c.is_whitespace() {
            before = Some(c);
        }
    }
    match (quote, open.is_empty()) {
        (None, true) => Ok(()),
        (Some(q), _) => Err(format!("an unclosed {q}")),
        (None, false) => Err(format!("unclosed {open:?}")),
    }
}
