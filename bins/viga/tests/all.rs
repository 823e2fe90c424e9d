//! The viga binary's tests: `suite/` (one module per area) and the helpers they share.

mod suite;
mod support;
