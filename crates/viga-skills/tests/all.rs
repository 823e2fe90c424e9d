//! The skill library's tests: pure parts directly, tools against real Blender.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic: that is how tests fail
mod suite;
