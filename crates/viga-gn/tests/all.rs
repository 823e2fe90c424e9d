//! viga-gn on real Blender: the tests in `suite/` share one warm Blender worker, one test at a
//! time, each within a time limit (see `suite::on_blender`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
