//! What the model is told about the scene: a compact, deterministic snapshot at the start
//! and again after every round that applied steps, and slices it asks for by name, each held
//! to a character budget.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::{GnBlender, GnError};

/// An on-demand context slice, as the model names it in `meta.request_context`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SliceKind {
    ModifierStack,
    /// The target group's topology: exposed sockets, nodes by type, links by socket name.
    /// The snapshot carries the same summary within its smaller budget; this slice has room
    /// for a large tree.
    NodeTreeSummary,
    /// The target group as a declaration: also socket defaults, locations and zone pairs.
    NodeTreeIr,
    SceneSummary,
    GeometryStats,
}

impl SliceKind {
    pub const ALL: [SliceKind; 5] = [
        Self::ModifierStack,
        Self::NodeTreeSummary,
        Self::NodeTreeIr,
        Self::SceneSummary,
        Self::GeometryStats,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::ModifierStack => "modifier_stack",
            Self::NodeTreeSummary => "node_tree_summary",
            Self::NodeTreeIr => "node_tree_ir",
            Self::SceneSummary => "scene_summary",
            Self::GeometryStats => "geometry_stats",
        }
    }
}

/// Character budgets for what goes to the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextBudget {
    pub snapshot_chars: usize,
    pub slice_chars: usize,
}

impl Default for ContextBudget {
    fn default() -> Self {
        Self {
            snapshot_chars: 4_000,
            slice_chars: 12_000,
        }
    }
}

/// The snapshot of the scene around `object` (the active object when `None`), as JSON
/// text of at most `budget.snapshot_chars` characters. The active node group is `modifier`'s
/// (else the object's active or first Geometry Nodes modifier's); its node and link lists are
/// shortened first when the snapshot would not fit.
pub async fn snapshot(
    blender: &GnBlender,
    object: Option<&str>,
    modifier: Option<&str>,
    budget: &ContextBudget,
) -> Result<String, GnError> {
    let args = json!({"object": object, "modifier": modifier});
    fetch_within(blender, "snapshot", args, budget.snapshot_chars).await
}

/// One slice. Lists are shortened (their length halved, the cut reported inside the slice)
/// until the text fits `budget.slice_chars`; past 4 items the text itself is cut.
pub async fn slice(
    blender: &GnBlender,
    kind: SliceKind,
    object: Option<&str>,
    modifier: Option<&str>,
    budget: &ContextBudget,
) -> Result<String, GnError> {
    let args = json!({"kind": kind, "object": object, "modifier": modifier});
    fetch_within(blender, "context_slice", args, budget.slice_chars).await
}

/// Largest per-list item count tried first; halved until the answer fits its budget.
const START_ITEMS: u64 = 256;

/// Calls a context function with a `max_items` bound on its lists, halving the bound until
/// the answer fits `chars`; below 4 items, [`fit`] cuts the text instead. Shorter lists are
/// preferred to a cut because they keep the JSON whole and say what was left out.
async fn fetch_within(
    blender: &GnBlender,
    function: &str,
    mut args: Value,
    chars: usize,
) -> Result<String, GnError> {
    let mut items = START_ITEMS;
    loop {
        args["max_items"] = json!(items);
        let value: Value = blender.call(function, &args).await?;
        if value.to_string().chars().count() <= chars || items <= 4 {
            return Ok(fit(&value, chars));
        }
        items /= 2;
    }
}

/// Compact JSON of at most `budget` characters; a cut is marked so the model knows.
pub fn fit(value: &Value, budget: usize) -> String {
    let text = value.to_string();
    if text.chars().count() <= budget {
        return text;
    }
    const MARK: &str = " …[truncated to fit the context budget]";
    let keep = budget.saturating_sub(MARK.chars().count());
    let mut cut: String = text.chars().take(keep).collect();
    cut.push_str(MARK);
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_keeps_small_values_and_cuts_large_ones_on_characters() {
        let small = json!({"a": 1});
        assert_eq!(fit(&small, 100), r#"{"a":1}"#);
        let large = json!({"name": "ü".repeat(500)});
        let cut = fit(&large, 100);
        assert_eq!(cut.chars().count(), 100);
        assert!(cut.ends_with("[truncated to fit the context budget]"));
    }

    #[test]
    fn slice_names_match_the_wire() {
        for kind in SliceKind::ALL {
            assert_eq!(serde_json::to_value(kind).unwrap(), json!(kind.name()));
        }
    }
}
