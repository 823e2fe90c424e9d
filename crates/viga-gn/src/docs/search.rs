//! Searching the docs index: BM25 over weighted fields (a node's label and type name
//! weigh most, then its description, then its socket and setting names; an API type's name,
//! then its docstring, then its members), with exact names boosted. The answer is bounded in
//! hits and characters, and the same query over the same index gives the same text.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{ApiTypeDoc, DocsIndex, NodeDoc, SocketDoc};

/// How much an answer may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchLimits {
    /// Hits at most.
    pub max_hits: usize,
    /// Characters of the answer's text at most.
    pub max_chars: usize,
}

impl Default for SearchLimits {
    fn default() -> Self {
        Self {
            max_hits: 5,
            max_chars: 6_000,
        }
    }
}

/// One ranked hit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchHit {
    /// A node's `bl_idname`, or `bpy.types.<Name>` for an API type.
    pub name: String,
    pub score: f64,
}

/// What a search found, and its text for the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchAnswer {
    pub query: String,
    /// The hits in the text, best first.
    pub hits: Vec<SearchHit>,
    /// Hits left out for the character budget.
    pub left_out: usize,
    pub text: String,
}

/// A document of the index, as searched.
struct Entry {
    name: String,
    /// Term frequency, weighted by the field each occurrence is in.
    terms: HashMap<String, f64>,
    length: f64,
    /// The name and label, normalised, for exact matches.
    exact: Vec<String>,
    /// The label's terms in order, for a phrase match.
    phrase: Vec<String>,
    text: String,
}

/// An index ready for searching: its documents' terms counted once.
pub struct DocsSearch {
    index: DocsIndex,
    entries: Vec<Entry>,
    document_frequency: HashMap<String, usize>,
    average_length: f64,
}

impl std::fmt::Debug for DocsSearch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DocsSearch")
            .field("blender_version", &self.index.blender_version)
            .field("entries", &self.entries.len())
            .finish()
    }
}

const K1: f64 = 1.2;
/// Characters kept for the note that hits were left out.
const NOTE_ROOM: usize = 80;
const B: f64 = 0.75;
/// Words that say nothing about which node is meant.
const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "by", "can", "do", "does", "for", "from", "how", "i",
    "in", "is", "it", "its", "me", "my", "of", "on", "or", "that", "the", "this", "to", "what",
    "which", "with", "want", "use", "get", "there",
];

impl DocsSearch {
    pub fn new(index: DocsIndex) -> Self {
        let mut entries: Vec<Entry> = index.nodes.iter().map(node_entry).collect();
        entries.extend(index.api_types.iter().map(api_entry));
        let mut document_frequency = HashMap::new();
        for entry in &entries {
            for term in entry.terms.keys() {
                *document_frequency.entry(term.clone()).or_insert(0) += 1;
            }
        }
        let total: f64 = entries.iter().map(|entry| entry.length).sum();
        let average_length = total / entries.len().max(1) as f64;
        Self {
            index,
            entries,
            document_frequency,
            average_length,
        }
    }

    pub fn index(&self) -> &DocsIndex {
        &self.index
    }

    /// The best hits for `query`, as text for the model: at most `limits.max_hits`, and as
    /// many of them as fit in `limits.max_chars` (the first one cut to fit if need be).
    pub fn search(&self, query: &str, limits: SearchLimits) -> SearchAnswer {
        let ranked = self.rank(query);
        let header = format!(
            "Docs of Blender {} for {query:?}:",
            self.index.blender_version
        );
        let mut text = header;
        let mut hits = Vec::new();
        let mut left_out = 0;
        for (entry, score) in ranked.into_iter().take(limits.max_hits) {
            // Room is kept for the closing note on what was left out.
            let room = limits
                .max_chars
                .saturating_sub(text.chars().count() + 1 + NOTE_ROOM);
            if entry.text.chars().count() <= room {
                text.push('\n');
                text.push_str(&entry.text);
            } else if hits.is_empty() && room > 40 {
                text.push('\n');
                text.extend(entry.text.chars().take(room - 20));
                text.push_str(" …[cut to fit]");
            } else {
                left_out += 1;
                continue;
            }
            hits.push(SearchHit {
                name: entry.name.clone(),
                score: (score * 1000.0).round() / 1000.0,
            });
        }
        if hits.is_empty() && left_out == 0 {
            text.push_str(" nothing matches; try other words (a node's name as Blender shows it, what it does, a socket's name)");
        } else if left_out > 0 {
            text.push_str(&format!(
                "\n({left_out} more hits left out to keep this short; ask more precisely)"
            ));
        }
        SearchAnswer {
            query: query.to_owned(),
            hits,
            left_out,
            text,
        }
    }

    /// Every entry that matches a term of `query`, best first (ties by name).
    fn rank(&self, query: &str) -> Vec<(&Entry, f64)> {
        let mut terms = tokens(query);
        terms.sort();
        terms.dedup();
        let normalised = normalise(query);
        let query_terms = tokens(query);
        let count = self.entries.len() as f64;
        let mut ranked: Vec<(&Entry, f64)> = self
            .entries
            .iter()
            .filter_map(|entry| {
                let mut score = 0.0;
                for term in &terms {
                    let Some(frequency) = entry.terms.get(term) else {
                        continue;
                    };
                    let df = self.document_frequency.get(term).copied().unwrap_or(0) as f64;
                    let idf = (1.0 + (count - df + 0.5) / (df + 0.5)).ln();
                    let norm = K1 * (1.0 - B + B * entry.length / self.average_length);
                    score += idf * frequency * (K1 + 1.0) / (frequency + norm);
                }
                if entry
                    .exact
                    .iter()
                    .any(|name| contains_words(&normalised, name))
                {
                    score += 10.0;
                } else if entry.phrase.len() > 1 && contains_run(&query_terms, &entry.phrase) {
                    score *= 1.5;
                }
                (score > 0.0).then_some((entry, score))
            })
            .collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.name.cmp(&b.0.name)));
        ranked
    }
}

/// Adds `text`'s terms to `terms`, each weighing `weight`.
fn count(terms: &mut HashMap<String, f64>, text: &str, weight: f64) {
    for term in tokens(text) {
        *terms.entry(term).or_insert(0.0) += weight;
    }
}

fn entry(
    name: String,
    terms: HashMap<String, f64>,
    exact: Vec<String>,
    label: &str,
    text: String,
) -> Entry {
    let length = terms.values().sum();
    Entry {
        name,
        terms,
        length,
        exact,
        phrase: tokens(label),
        text,
    }
}

fn node_entry(node: &NodeDoc) -> Entry {
    let mut terms = HashMap::new();
    count(&mut terms, &split_camel(&node.bl_idname), 2.0);
    count(&mut terms, &node.label, 3.0);
    count(&mut terms, &node.description, 1.0);
    for socket in node.inputs.iter().chain(&node.outputs) {
        count(&mut terms, &socket.name, 1.0);
    }
    for property in &node.properties {
        count(&mut terms, &property.identifier.replace('_', " "), 0.5);
        count(
            &mut terms,
            &property.items.join(" ").replace('_', " "),
            0.25,
        );
    }
    let exact = vec![normalise(&node.bl_idname), normalise(&node.label)];
    entry(
        node.bl_idname.clone(),
        terms,
        exact,
        &node.label,
        node_text(node),
    )
}

fn api_entry(api: &ApiTypeDoc) -> Entry {
    let mut terms = HashMap::new();
    count(&mut terms, &split_camel(&api.name), 3.0);
    count(&mut terms, &api.doc, 1.0);
    for member in &api.properties {
        count(&mut terms, &member.identifier.replace('_', " "), 0.5);
        count(&mut terms, &member.description, 0.25);
    }
    for function in &api.functions {
        count(&mut terms, &function.identifier.replace('_', " "), 0.5);
        count(&mut terms, &function.description, 0.25);
    }
    let name = format!("bpy.types.{}", api.name);
    let exact = vec![normalise(&api.name), normalise(&name)];
    entry(name, terms, exact, &split_camel(&api.name), api_text(api))
}

/// A node as the model reads it: one line of what it is, then its sockets and settings.
fn node_text(node: &NodeDoc) -> String {
    let mut text = format!(
        "- {} (\"{}\"): {}",
        node.bl_idname, node.label, node.description
    );
    text.push_str(&format!("\n  inputs: {}", sockets(&node.inputs)));
    text.push_str(&format!("\n  outputs: {}", sockets(&node.outputs)));
    if !node.properties.is_empty() {
        let settings: Vec<String> = node
            .properties
            .iter()
            .map(|property| {
                let mut line = format!("{} ({})", property.identifier, property.kind);
                if !property.items.is_empty() {
                    line.push_str(&format!(" one of {}", property.items.join("|")));
                }
                if let Some(default) = &property.default {
                    line.push_str(&format!(", default {}", plain(default)));
                }
                line
            })
            .collect();
        text.push_str(&format!("\n  settings: {}", settings.join("; ")));
    }
    text
}

fn sockets(sockets: &[SocketDoc]) -> String {
    if sockets.is_empty() {
        return "none".to_owned();
    }
    let described: Vec<String> = sockets
        .iter()
        .map(|socket| {
            let kind = socket
                .socket_type
                .strip_prefix("NodeSocket")
                .unwrap_or(&socket.socket_type);
            let mut line = format!("{} [{kind}", socket.name);
            if let Some(default) = &socket.default {
                line.push_str(&format!(", default {}", plain(default)));
            }
            if !socket.enabled {
                line.push_str(", shown by another setting");
            }
            line.push(']');
            line
        })
        .collect();
    described.join("; ")
}

fn api_text(api: &ApiTypeDoc) -> String {
    let base = api
        .base
        .as_deref()
        .map(|base| format!(" (a {base})"))
        .unwrap_or_default();
    let mut text = format!("- bpy.types.{}{base}: {}", api.name, api.doc);
    let properties: Vec<String> = api
        .properties
        .iter()
        .map(|member| {
            let name = format!("{} ({})", member.identifier, member.kind);
            described(&name, &member.description)
        })
        .collect();
    if !properties.is_empty() {
        text.push_str(&format!("\n  properties: {}", properties.join("; ")));
    }
    let functions: Vec<String> = api
        .functions
        .iter()
        .map(|function| {
            let call = format!(
                "{}({})",
                function.identifier,
                function.parameters.join(", ")
            );
            described(&call, &function.description)
        })
        .collect();
    if !functions.is_empty() {
        text.push_str(&format!("\n  functions: {}", functions.join("; ")));
    }
    text
}

/// `name: description`, or the name alone when Blender gives no description.
fn described(name: &str, description: &str) -> String {
    if description.is_empty() {
        name.to_owned()
    } else {
        format!("{name}: {description}")
    }
}

/// A default value in few characters: numbers as JSON writes them, strings bare.
fn plain(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// `GeometryNodeDistributePointsOnFaces` as `Geometry Node Distribute Points On Faces`.
fn split_camel(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 8);
    let mut previous: Option<char> = None;
    for c in name.chars() {
        if c.is_uppercase() && previous.is_some_and(|p| p.is_lowercase() || p.is_ascii_digit()) {
            out.push(' ');
        }
        out.push(c);
        previous = Some(c);
    }
    out
}

/// Lower case words of letters and digits, space-separated (`Distribute Points on Faces`
/// and `GeometryNodeDistributePointsOnFaces` as themselves, for exact matches).
fn normalise(text: &str) -> String {
    let lower = text.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .collect();
    words.join(" ")
}

/// Whether the words of `name` appear together in `normalised` text.
fn contains_words(normalised: &str, name: &str) -> bool {
    !name.is_empty() && format!(" {normalised} ").contains(&format!(" {name} "))
}

/// Whether `run` appears in `terms` in a row.
fn contains_run(terms: &[String], run: &[String]) -> bool {
    terms.windows(run.len()).any(|window| window == run)
}

/// The search terms of `text`: lower-case words without stop words, stemmed lightly so that
/// `distributes`, `distributed` and `distribute` (or `faces` and `face`) meet.
pub(super) fn tokens(text: &str) -> Vec<String> {
    let text = split_camel(text).to_lowercase();
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty() && !STOP_WORDS.contains(word))
        .map(stem)
        .collect()
}

fn stem(word: &str) -> String {
    let mut word = word.to_owned();
    for suffix in ["ing", "ed"] {
        if word.len() >= suffix.len() + 4 && word.ends_with(suffix) {
            word.truncate(word.len() - suffix.len());
            break;
        }
    }
    if word.len() > 3 && word.ends_with('s') && !word.ends_with("ss") {
        word.pop();
    }
    if word.len() > 3 && word.ends_with('e') {
        word.pop();
    }
    word
}

#[cfg(test)]
pub(super) mod tests {
    use serde_json::json;

    use super::super::{DOCS_FORMAT, FunctionDoc, MemberDoc, PropertyDoc};
    use super::*;

    fn socket(name: &str, socket_type: &str, default: Option<Value>) -> SocketDoc {
        SocketDoc {
            name: name.into(),
            identifier: name.into(),
            socket_type: socket_type.into(),
            default,
            description: String::new(),
            enabled: true,
        }
    }

    fn node(bl_idname: &str, label: &str, description: &str, inputs: Vec<SocketDoc>) -> NodeDoc {
        NodeDoc {
            bl_idname: bl_idname.into(),
            label: label.into(),
            description: description.into(),
            inputs,
            outputs: vec![socket("Geometry", "NodeSocketGeometry", None)],
            properties: Vec::new(),
        }
    }

    /// A small index shaped like Blender's.
    pub(crate) fn sample() -> DocsIndex {
        let mut distribute = node(
            "GeometryNodeDistributePointsOnFaces",
            "Distribute Points on Faces",
            "Generate points spread out on the surface of a mesh",
            vec![
                socket("Mesh", "NodeSocketGeometry", None),
                socket("Selection", "NodeSocketBool", Some(json!(true))),
                socket("Density", "NodeSocketFloat", Some(json!(10.0))),
            ],
        );
        distribute.properties.push(PropertyDoc {
            identifier: "distribute_method".into(),
            kind: "enum".into(),
            description: "Method to use for scattering points".into(),
            items: vec!["RANDOM".into(), "POISSON".into()],
            default: Some(json!("RANDOM")),
        });
        DocsIndex {
            format: DOCS_FORMAT,
            blender_version: "5.0.1".into(),
            build_hash: "abc".into(),
            nodes: vec![
                node(
                    "GeometryNodeDistributePointsInVolume",
                    "Distribute Points in Volume",
                    "Generate points inside a volume",
                    vec![socket("Volume", "NodeSocketGeometry", None)],
                ),
                distribute,
                node(
                    "GeometryNodeInstanceOnPoints",
                    "Instance on Points",
                    "Generate a reference to geometry at each of the input points",
                    vec![socket("Points", "NodeSocketGeometry", None)],
                ),
                node("GeometryNodeMeshCube", "Cube", "Generate a cuboid mesh", Vec::new()),
            ],
            api_types: vec![ApiTypeDoc {
                name: "NodeTree".into(),
                base: Some("ID".into()),
                doc: "Node tree consisting of linked nodes used for shading, textures and compositing".into(),
                properties: vec![MemberDoc {
                    identifier: "nodes".into(),
                    kind: "collection".into(),
                    description: "".into(),
                }],
                functions: vec![FunctionDoc {
                    identifier: "interface_update".into(),
                    description: "Updated node group interface".into(),
                    parameters: vec!["context".into()],
                }],
            }],
        }
    }

    #[test]
    fn the_node_that_does_it_ranks_first() {
        let search = DocsSearch::new(sample());
        let answer = search.search(
            "which node distributes points on faces, and what are its inputs",
            SearchLimits::default(),
        );
        assert_eq!(answer.hits[0].name, "GeometryNodeDistributePointsOnFaces");
        assert!(answer.text.contains("inputs: Mesh [Geometry]; Selection [Bool, default true]; Density [Float, default 10.0]"), "{}", answer.text);
        assert!(
            answer
                .text
                .contains("distribute_method (enum) one of RANDOM|POISSON, default RANDOM")
        );
        // The same query gives the same text.
        assert_eq!(
            search.search(
                "which node distributes points on faces, and what are its inputs",
                SearchLimits::default()
            ),
            answer
        );
    }

    #[test]
    fn exact_names_win_and_api_types_are_found() {
        let search = DocsSearch::new(sample());
        let cube = search.search("Cube", SearchLimits::default());
        assert_eq!(cube.hits[0].name, "GeometryNodeMeshCube");
        let by_id = search.search("GeometryNodeInstanceOnPoints", SearchLimits::default());
        assert_eq!(by_id.hits[0].name, "GeometryNodeInstanceOnPoints");
        let api = search.search("node tree interface update", SearchLimits::default());
        assert_eq!(api.hits[0].name, "bpy.types.NodeTree");
        assert!(api.text.contains("interface_update(context)"));
    }

    #[test]
    fn answers_are_bounded() {
        let search = DocsSearch::new(sample());
        let one = search.search(
            "points",
            SearchLimits {
                max_hits: 1,
                max_chars: 10_000,
            },
        );
        assert_eq!(one.hits.len(), 1);
        let short = search.search(
            "points",
            SearchLimits {
                max_hits: 5,
                max_chars: 300,
            },
        );
        assert!(short.text.chars().count() <= 300, "{}", short.text);
        assert!(short.left_out > 0);
        let none = search.search("zzz qqq", SearchLimits::default());
        assert!(none.hits.is_empty());
        assert!(none.text.contains("nothing matches"));
    }

    #[test]
    fn terms_meet_across_word_forms() {
        assert_eq!(tokens("distributes Faces"), tokens("distribute face"));
        assert_eq!(
            tokens("GeometryNodeSetPosition"),
            vec!["geometry", "nod", "set", "position"]
        );
        assert_eq!(tokens("the points of it"), vec!["point"]);
    }
}
