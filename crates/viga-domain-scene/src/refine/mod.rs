//! Refinement by search: a program's numbers fitted to target pictures with renders in the
//! loop, no model involved. It serves the `search` baseline of the evaluation, `viga run
//! --generator search`, and the generator's `refine_numbers` tool, which fits the numbers of
//! the structure a model wrote.
//!
//! **Owns:** reading and rewriting a program's numeric literals ([`literals`]), which of them
//! move and together ([`space`]), the search ([`search`]), the moves
//! it reads off the pictures ([`sight`]), the start scene's structure the
//! search keeps ([`plausible`]) and the objective in a real Blender ([`objective`]).
//!
//! **Must not:** decide budgets or views for a caller, or write files: callers keep results.

mod in_run;
pub mod literals;
pub mod objective;
pub mod plausible;
pub mod search;
pub mod sight;
pub mod space;

pub use literals::{KEEP_MARK, Literal, numeric_literals, with_values};
pub use objective::{FitView, SEARCH_SIDE, SceneObjective, search_render};
pub use search::{Objective, Score, SearchLimits, SearchOutcome, search};
pub use space::Selection;

/// Why a search could not go on.
#[derive(Debug, thiserror::Error)]
pub enum RefineError {
    #[error("Blender: {0}")]
    Blender(#[from] viga_blender::TransportError),
    #[error("a target picture: {0}")]
    Target(viga_skills::metrics::MetricError),
    #[error("a render: {0}")]
    Render(viga_skills::metrics::MetricError),
}
