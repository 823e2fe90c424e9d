//! One integration-test binary for the crate (keeps link times low).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic: that is how tests fail
mod suite;
