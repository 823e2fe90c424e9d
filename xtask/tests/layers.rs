//! The layering in docs/architecture.md is the truth: every workspace member (as `cargo
//! metadata` lists them) is in its table, no crate depends on one of the same or a higher
//! layer, and the table's "must not" column holds wherever it says something a test can check
//! (the rules are in [`rules_of`]).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic: that is how tests fail

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// A workspace member as `cargo metadata` describes it.
#[derive(Debug, Clone)]
struct Member {
    name: String,
    /// Its folder relative to the workspace root (`crates/viga-core`, `bins/viga`).
    folder: String,
    /// The viga crates it depends on as a normal or build dependency (dev-dependencies may
    /// reach anywhere below the tests).
    depends_on: Vec<String>,
}

fn members() -> Vec<Member> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(root())
        .output()
        .expect("cargo metadata runs");
    assert!(
        output.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: Value = serde_json::from_slice(&output.stdout).unwrap();
    let root = root();
    metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|package| {
            let manifest = PathBuf::from(package["manifest_path"].as_str().unwrap());
            let folder = manifest
                .parent()
                .unwrap()
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let depends_on = package["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|dependency| dependency["kind"].as_str() != Some("dev"))
                .filter_map(|dependency| dependency["name"].as_str())
                .filter(|name| *name == "viga" || name.starts_with("viga-"))
                .map(str::to_owned)
                .collect();
            Member {
                name: package["name"].as_str().unwrap().to_owned(),
                folder,
                depends_on,
            }
        })
        .collect()
}

/// One row of the table: the crate as its first column names it, its layer, what it must not.
#[derive(Debug, Clone)]
struct Row {
    crate_name: String,
    layer: u32,
    must_not: String,
}

fn table(text: &str) -> Vec<Row> {
    let table = &text[text.find("| crate | layer |").expect("the layer table")..];
    table
        .lines()
        .skip(2)
        .take_while(|line| line.starts_with('|'))
        .map(|line| {
            let cells: Vec<&str> = line.split(" | ").map(str::trim).collect();
            let crate_name = cells[0].trim_start_matches('|').trim().to_owned();
            let layer = cells[1]
                .parse()
                .unwrap_or_else(|_| panic!("layer of {crate_name} is not a number"));
            Row {
                crate_name,
                layer,
                must_not: cells
                    .last()
                    .unwrap()
                    .trim_end_matches('|')
                    .trim()
                    .to_owned(),
            }
        })
        .collect()
}

fn rows() -> Vec<Row> {
    table(&std::fs::read_to_string(root().join("docs/architecture.md")).unwrap())
}

/// What a "must not" phrase means in checkable terms.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Rule {
    /// No viga crate among its dependencies.
    NoVigaDependency,
    /// No viga crate but this one among its dependencies.
    OnlyVigaDependency(String),
    /// Not that crate among its dependencies.
    NoDependencyOn(String),
    /// No member has it as a normal dependency.
    NotANormalDependency,
}

/// The rules a row's "must not" text states; a phrase a test cannot check states none.
fn rules_of(must_not: &str) -> Vec<Rule> {
    let mut rules = Vec::new();
    for phrase in must_not.split(';').map(str::trim) {
        if phrase == "depend on any other viga crate" {
            rules.push(Rule::NoVigaDependency);
        } else if let Some(allowed) = phrase.strip_prefix("depend on any viga crate but ") {
            rules.push(Rule::OnlyVigaDependency(allowed.to_owned()));
        } else if let Some(names) = phrase.strip_prefix("depend on ")
            && let Some(names) = crate_list(names)
        {
            rules.extend(names.into_iter().map(Rule::NoDependencyOn));
        } else if phrase == "touch Blender" {
            rules.push(Rule::NoDependencyOn("viga-blender".to_owned()));
        } else if phrase == "call models" || phrase.ends_with("call a model") {
            rules.push(Rule::NoDependencyOn("viga-provider".to_owned()));
        } else if phrase == "be a normal dependency of any crate" {
            rules.push(Rule::NotANormalDependency);
        }
    }
    rules
}

/// The crates of a list such as `viga-blender, viga-slides or viga-web`; `None` when it
/// names anything but viga crates.
fn crate_list(text: &str) -> Option<Vec<String>> {
    let names: Vec<String> = text
        .split(", ")
        .flat_map(|part| part.split(" or "))
        .map(str::trim)
        .map(str::to_owned)
        .collect();
    names
        .iter()
        .all(|name| name.starts_with("viga") && !name.contains(' '))
        .then_some(names)
}

/// The Rust sources under `folder`, with their paths.
fn sources(folder: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(folder).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            sources(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}

/// How `member` breaks `rule`, in words; empty when it keeps it.
fn broken(rule: &Rule, member: &Member, all: &[Member]) -> Vec<String> {
    match rule {
        Rule::NoVigaDependency => member
            .depends_on
            .iter()
            .map(|d| format!("{} depends on {d}", member.name))
            .collect(),
        Rule::OnlyVigaDependency(allowed) => member
            .depends_on
            .iter()
            .filter(|d| *d != allowed)
            .map(|d| format!("{} depends on {d}; only {allowed} is allowed", member.name))
            .collect(),
        Rule::NoDependencyOn(name) => member
            .depends_on
            .iter()
            .filter(|d| *d == name)
            .map(|d| format!("{} depends on {d}", member.name))
            .collect(),
        Rule::NotANormalDependency => all
            .iter()
            .filter(|other| other.depends_on.contains(&member.name))
            .map(|other| {
                format!(
                    "{} depends on {} (not as a dev-dependency)",
                    other.name, member.name
                )
            })
            .collect(),
    }
}

fn row_of<'a>(rows: &'a [Row], member: &Member) -> &'a Row {
    rows.iter()
        .find(|row| row.crate_name == member.folder || row.crate_name == member.name)
        .unwrap_or_else(|| {
            panic!(
                "{} is missing from the table in docs/architecture.md",
                member.folder
            )
        })
}

#[test]
fn every_member_has_a_layer_and_depends_only_downwards() {
    let rows = rows();
    let members = members();
    let layer_of: BTreeMap<&str, u32> = members
        .iter()
        .map(|member| (member.name.as_str(), row_of(&rows, member).layer))
        .collect();
    let mut wrong = Vec::new();
    for member in &members {
        let layer = layer_of[member.name.as_str()];
        for dependency in &member.depends_on {
            let theirs = layer_of.get(dependency.as_str()).unwrap_or_else(|| {
                panic!(
                    "{} depends on {dependency}, which is no member",
                    member.name
                )
            });
            if *theirs >= layer {
                wrong.push(format!(
                    "{} (layer {layer}) depends on {dependency} (layer {theirs})",
                    member.name
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "dependencies pointing up the layers:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn what_each_crate_must_not_do_it_does_not() {
    let rows = rows();
    let members = members();
    let mut wrong = Vec::new();
    let mut checked = 0;
    for member in &members {
        for rule in rules_of(&row_of(&rows, member).must_not) {
            checked += 1;
            wrong.extend(broken(&rule, member, &members));
        }
    }
    assert!(
        checked >= 6,
        "the rules read {checked} checks from the table; it says more"
    );
    assert!(
        wrong.is_empty(),
        "docs/architecture.md's \"must not\" column is broken:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_table_names_only_members() {
    let members = members();
    for row in rows() {
        assert!(
            members
                .iter()
                .any(|m| m.folder == row.crate_name || m.name == row.crate_name),
            "docs/architecture.md names {}, which is no workspace member",
            row.crate_name
        );
    }
}

#[test]
fn an_upward_or_forbidden_dependency_is_caught() {
    let doc = "| crate | layer | owns | must not |\n|---|---|---|---|\n| low | 0 | x | depend on any other viga crate |\n| mid | 1 | x | touch Blender; depend on viga-web or viga-slides |\n| kit | 0 | x | be a normal dependency of any crate |\n| tool | 5 | x | depend on any viga crate but low |\n";
    let rows = table(doc);
    let member = |name: &str, depends_on: &[&str]| Member {
        name: name.to_owned(),
        folder: format!("crates/{name}"),
        depends_on: depends_on.iter().map(|d| (*d).to_owned()).collect(),
    };
    let all = [
        member("low", &["mid"]),
        member("mid", &["viga-blender", "viga-web", "viga-slides", "kit"]),
        member("kit", &[]),
        member("tool", &["low", "mid"]),
    ];
    let mut found = Vec::new();
    for m in &all {
        for rule in rules_of(
            &rows
                .iter()
                .find(|r| r.crate_name == m.name)
                .unwrap()
                .must_not,
        ) {
            found.extend(broken(&rule, m, &all));
        }
    }
    assert_eq!(
        found,
        [
            "low depends on mid",
            "mid depends on viga-blender",
            "mid depends on viga-web",
            "mid depends on viga-slides",
            "mid depends on kit (not as a dev-dependency)",
            "tool depends on mid; only low is allowed"
        ]
    );
}

/// The lint that keeps functions short: clippy reads the threshold from clippy.toml and warns
/// (an error in CI, which runs clippy with `-D warnings`) only in crates that turn
/// `too_many_lines` on, so every member (libraries, the binary, xtask) must, and none may
/// turn it off again, by `allow` or `expect`, except for a test module, whose scenarios read
/// top to bottom.
#[test]
fn every_member_keeps_its_functions_under_eighty_lines() {
    let root = root();
    let clippy = std::fs::read_to_string(root.join("clippy.toml")).unwrap();
    assert!(
        clippy
            .lines()
            .any(|line| line.replace(' ', "") == "too-many-lines-threshold=80"),
        "clippy.toml must set too-many-lines-threshold = 80"
    );
    let mut wrong = Vec::new();
    for member in members() {
        let src = root.join(&member.folder).join("src");
        let crate_root = ["lib.rs", "main.rs"]
            .into_iter()
            .map(|file| src.join(file))
            .find(|file| file.is_file())
            .unwrap_or_else(|| panic!("{} has no src/lib.rs or src/main.rs", member.folder));
        let text = std::fs::read_to_string(&crate_root).unwrap();
        if !text
            .lines()
            .any(|line| line.starts_with("#![warn(clippy::too_many_lines)]"))
        {
            wrong.push(format!(
                "{} lacks #![warn(clippy::too_many_lines)]",
                crate_root.display()
            ));
        }
        let mut files = Vec::new();
        sources(&src, &mut files);
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            for line in lines_turning_off_the_length_rule(&text) {
                wrong.push(format!(
                    "{}:{line} allows clippy::too_many_lines outside a test module; split the function",
                    file.display(),
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The lines (from 1) of the attributes in `source` that `allow` or `expect`
/// `clippy::too_many_lines`, however they are spaced or nested (`cfg_attr`), except on a
/// test module.
fn lines_turning_off_the_length_rule(source: &str) -> Vec<usize> {
    let mut found = Vec::new();
    let mut rest = source;
    while let Some(start) = [rest.find("#["), rest.find("#![")]
        .into_iter()
        .flatten()
        .min()
    {
        let attribute = &rest[start..];
        let end = closing_bracket(attribute).unwrap_or(attribute.len());
        let compact: String = attribute[..end]
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        let turns_off = ["allow(", "expect("].iter().any(|word| {
            compact
                .match_indices(word)
                .any(|(at, _)| compact[at..].contains("clippy::too_many_lines"))
        });
        let after = attribute[end..].trim_start();
        let on_tests = after.starts_with("mod tests");
        if turns_off && !on_tests {
            let offset = source.len() - rest.len() + start;
            found.push(source[..offset].lines().count() + 1);
        }
        rest = &attribute[end.max(1)..];
    }
    found
}

/// Where the attribute that `text` starts with ends (just past its closing `]`).
fn closing_bracket(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (at, c) in text.char_indices() {
        match c {
            '[' | '(' => depth += 1,
            ']' | ')' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 && c == ']' {
                    return Some(at + 1);
                }
            }
            _ => {}
        }
    }
    None
}

#[test]
fn an_allow_or_expect_of_the_length_rule_is_found_in_any_spelling() {
    let source = "#[allow(clippy::too_many_lines)]\nfn a() {}\n#[expect(\n    clippy::too_many_lines,\n    reason = \"long\"\n)]\nfn b() {}\n#[cfg_attr(test, allow(clippy::unwrap_used, clippy :: too_many_lines))]\nfn c() {}\n#[allow(clippy::too_many_lines)]\nmod tests {}\n#[allow(clippy::unwrap_used)]\nfn d() {}\n";
    assert_eq!(lines_turning_off_the_length_rule(source), [1, 3, 8]);
}
