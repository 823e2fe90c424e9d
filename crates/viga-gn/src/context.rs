//! What the model is told about the scene: a compact, deterministic snapshot with every
//! request, and slices it asks for by name, each held to a character budget.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::{GnBlender, GnError};

/// An on-demand context slice, as the model names it in `meta.request_context`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SliceKind {
    ModifierStack,
    NodeTreeIr,
    SceneSummary,
    GeometryStats,
}

impl SliceKind {
    pub const ALL: [SliceKind; 4] = [
        Self::ModifierStack,
        Self::NodeTreeIr,
        Self::SceneSummary,
        Self::GeometryStats,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::ModifierStack => "modifier_stack",
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
/// text of at most `budget.snapshot_chars` characters.
pub async fn snapshot(
    blender: &GnBlender,
    object: Option<&str>,
    budget: &ContextBudget,
) -> Result<String, GnError> {
    let value: Value = blender.call("snapshot", &json!({"object": object})).await?;
    Ok(fit(&value, budget.snapshot_chars))
}

/// Largest per-list item count tried first; halved until the slice fits its budget.
const START_ITEMS: u64 = 256;

/// One slice. Lists are shortened (their length halved, the cut reported inside the slice)
/// until the text fits `budget.slice_chars`; past 4 items the text itself is cut.
pub async fn slice(
    blender: &GnBlender,
    kind: SliceKind,
    object: Option<&str>,
    modifier: Option<&str>,
    budget: &ContextBudget,
) -> Result<String, GnError> {
    let mut items = START_ITEMS;
    loop {
        let args =
            json!({"kind": kind, "object": object, "modifier": modifier, "max_items": items});
        let value: Value = blender.call("context_slice", &args).await?;
        let text = value.to_string();
        if text.chars().count() <= budget.slice_chars || items <= 4 {
            return Ok(fit(&value, budget.slice_chars));
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
