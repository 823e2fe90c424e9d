//! # viga-app
//!
//! viga as an application, between the domains and the front ends: what a command does once
//! its arguments are parsed, the same for the command line and any other front end.
//!
//! **Owns:** the one provider factory ([`provider`]: choices, then a run folder's saved
//! settings, then defaults; keys from the environment, else the key store); the domains it
//! knows ([`domains`]); starting contained workers ([`workers`]); starting and resuming runs
//! of every domain ([`runs`]); a person's Blender and results applied to it ([`attach`]), or
//! reached through a Blender MCP server they run ([`through_mcp`]);
//! the add-on agent's and the Geometry Nodes assistant's set-up ([`agent`], [`gn`]); whether
//! an OpenAI-compatible server's model calls tools ([`tool_calling`]); what
//! trusting model-written Python means, for the front end to ask ([`trust`]); the health
//! check ([`doctor`]); evaluation set-up ([`eval`]); one error type whose
//! [`AppError::kind`] picks a failure's advice and exit code.
//!
//! **Must not:** parse command lines, print to a terminal or ask a person anything: the
//! binary parses, prints and asks, and hands the answers in as values; what a command has
//! to say on the way goes out through [`Tell`].

#![warn(clippy::too_many_lines)] // no library function over 80 lines: clippy.toml sets the threshold

pub mod agent;
pub mod attach;
pub mod doctor;
pub mod domains;
mod error;
pub mod eval;
pub mod gn;
pub mod provider;
pub mod runs;
pub mod serve;
pub mod through_mcp;
pub mod tool_calling;
pub mod trust;
pub mod workers;

pub use error::AppError;

/// Where a command's remarks on the way go: the front end shows them as it sees fit.
pub trait Tell: Send + Sync {
    /// Something the person should know (a scripted provider, a setting not used).
    fn say(&self, line: &str);
    /// Something that holds less than asked (containment).
    fn warn(&self, line: &str);
}
