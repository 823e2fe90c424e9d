//! Integration tests against real Chromium (Debian's `chromium`, or `VIGA_CHROMIUM`).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic: that is how tests fail
mod suite;
