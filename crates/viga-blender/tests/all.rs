//! Integration tests against real Blender (the project's bpy venv, or `VIGA_BLENDER`).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic: that is how tests fail
mod suite;
