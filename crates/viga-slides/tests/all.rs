//! Integration tests against real LibreOffice and python-pptx (`cargo xtask setup`, and
//! Debian's libreoffice-impress).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic: that is how tests fail
mod suite;
