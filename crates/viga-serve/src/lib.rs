//! # viga-serve
//!
//! viga's servers: the ways other programs reach viga's Blender.
//!
//! **Owns:** [`mcp`], an MCP server (official `rmcp` SDK) offering the skill library's scene
//! tools and every registered add-on's tools, renders inline as images; [`ws`], a WebSocket
//! gateway for add-on commands (seed 004) with a message id on every message, replayed ids
//! refused, one isolated Blender per user, and commands only for registered add-ons;
//! [`mcp_client`], a Blender transport that reaches a person's Blender through a Blender MCP
//! server they run, viga's bridge sent through its code tool; [`addon_watch`], which tells the
//! MCP server when a call may have changed Blender's add-ons.
//!
//! **Must not:** hold tool logic (tools are `viga_skills::Tool`s) or let `rmcp` and
//! `tungstenite` types leak into other crates.

#![warn(clippy::too_many_lines)] // no library function over 80 lines: clippy.toml sets the threshold

pub mod addon_watch;
pub mod mcp;
pub mod mcp_client;
pub mod ws;
