//! One integration-test binary for the crate (keeps link times low).
mod suite;
