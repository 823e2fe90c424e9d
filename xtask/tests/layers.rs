//! The layering in docs/architecture.md is the truth: every workspace member is in its table,
//! and no crate depends on one of the same or a higher layer.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic: that is how tests fail

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// `members = [ ... ]` of the workspace's Cargo.toml.
fn members() -> Vec<String> {
    let text = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let start = text
        .find("members = [")
        .expect("the workspace lists its members");
    let list = &text[start..text[start..].find(']').unwrap() + start];
    list.split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// The package name and the viga crates a member's Cargo.toml depends on (normal and build
/// dependencies; dev-dependencies may reach anywhere below the tests).
fn manifest(member: &str) -> (String, Vec<String>) {
    let text = std::fs::read_to_string(root().join(member).join("Cargo.toml")).unwrap();
    let mut section = String::new();
    let mut name = String::new();
    let mut dependencies = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line.trim_matches(['[', ']']).to_owned();
            continue;
        }
        let key = line
            .split(['=', '.', ' '])
            .next()
            .unwrap_or_default()
            .trim();
        if section == "package" && key == "name" {
            name = line.split('"').nth(1).unwrap_or_default().to_owned();
        }
        let counts = section == "dependencies" || section == "build-dependencies";
        if counts && (key == "viga" || key.starts_with("viga-")) {
            dependencies.push(key.to_owned());
        }
    }
    (name, dependencies)
}

/// Crate name (as the table's first column writes it) to layer, from architecture.md.
fn layers() -> BTreeMap<String, u32> {
    let text = std::fs::read_to_string(root().join("docs/architecture.md")).unwrap();
    let table = &text[text.find("| crate | layer |").expect("the layer table")..];
    table
        .lines()
        .skip(2)
        .take_while(|line| line.starts_with('|'))
        .map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let layer = cells[2]
                .parse()
                .unwrap_or_else(|_| panic!("layer of {} is not a number", cells[1]));
            (cells[1].to_owned(), layer)
        })
        .collect()
}

#[test]
fn every_member_has_a_layer_and_depends_only_downwards() {
    let layers = layers();
    let mut package_layers = BTreeMap::new();
    let mut manifests = Vec::new();
    for member in members() {
        let last = member.rsplit('/').next().unwrap().to_owned();
        let layer = layers
            .get(&member)
            .or_else(|| layers.get(&last))
            .copied()
            .unwrap_or_else(|| {
                panic!("{member} is missing from the table in docs/architecture.md")
            });
        let (name, dependencies) = manifest(&member);
        package_layers.insert(name.clone(), layer);
        manifests.push((member, layer, dependencies));
    }
    let mut wrong = Vec::new();
    for (member, layer, dependencies) in manifests {
        for dependency in dependencies {
            let theirs = package_layers
                .get(&dependency)
                .unwrap_or_else(|| panic!("{member} depends on {dependency}, which is no member"));
            if *theirs >= layer {
                wrong.push(format!(
                    "{member} (layer {layer}) depends on {dependency} (layer {theirs})"
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
fn the_table_names_only_members() {
    let members = members();
    for name in layers().keys() {
        assert!(
            members
                .iter()
                .any(|m| m == name || m.ends_with(&format!("/{name}"))),
            "docs/architecture.md names {name}, which is no workspace member"
        );
    }
}
