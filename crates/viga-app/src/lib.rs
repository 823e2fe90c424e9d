//! # viga-app
//!
//! viga as an application, between the domains and the front ends: what a command does once
//! its arguments are parsed.
//!
//! **Owns:** evaluation set-up ([`eval`]).
//!
//! **Must not:** parse command lines, print to a terminal or ask a person anything: the
//! binary parses, prints and asks, and hands the answers in as values.

#![warn(clippy::too_many_lines)] // no library function over 80 lines: clippy.toml sets the threshold

pub mod eval;
