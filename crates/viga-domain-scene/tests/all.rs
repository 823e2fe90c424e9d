//! The loop end to end: real Blender, scripted model.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic: that is how tests fail
mod suite;
