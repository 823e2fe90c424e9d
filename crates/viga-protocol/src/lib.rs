//! # viga-protocol
//!
//! The data types every other viga crate speaks, and nothing else.
//!
//! **Owns:** chat messages with text and image parts, tool specs, tool calls and results;
//! plans, programs, verifier feedback and the iteration record (with the failure classes
//! E0–E3 of the fast-retry loop); the run event stream; the Geometry Nodes step protocol and
//! its gate reports; Blender add-on manifests; the frames spoken to the Blender bridge; the
//! messages of the server's gateway, Blender and chat doors, with the token they carry as a
//! [`Secret`] that never prints. Every
//! type derives its JSON Schema with `schemars`, and untrusted JSON (model output, manifests,
//! frames) is parsed through [`validate::parse_json`], which checks the protocol version, the
//! schema (naming the JSON path and the rule broken) and the type's own invariants.
//!
//! **Must not:** do I/O, spawn tasks, or depend on tokio, reqwest or any other viga crate.
//! Everything here is plain data, so any layer (and any downstream crate) can use it.

#![warn(clippy::too_many_lines)] // no library function over 80 lines: clippy.toml sets the threshold

pub mod bridge;
mod bytes;
pub mod event;
pub mod gateway;
pub mod gn;
pub mod iteration;
pub mod manifest;
pub mod message;
mod secret;
pub mod server;
pub mod stream;
pub mod validate;

pub use secret::Secret;
pub use validate::{
    CompiledSchema, ProtocolError, ProtocolType, Violation, json_candidates, parse_json,
    parse_json_against, parse_value, parse_value_against, schema_of,
};

/// The version of viga's wire protocol: the Geometry Nodes step protocol, the bridge
/// handshake, presets and run logs all carry it. A document carrying another version is
/// refused with [`ProtocolError::UnsupportedVersion`].
pub const PROTOCOL_VERSION: u32 = 1;
