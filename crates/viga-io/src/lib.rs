//! # viga-io
//!
//! The plain I/O that more than one crate needs, written once: whole files and folders that
//! a kill never leaves half done, under a temporary name of their own for every call, and
//! the clock run records are stamped with ([`files`]); what
//! every HTTP client of viga needs: the TLS crypto provider, whether a server is on this
//! machine, an error with its causes on one line ([`net`]); and outside text made safe to
//! print to a terminal ([`terminal`]). (The one key and token type that never prints is
//! viga-protocol's `Secret`.)
//!
//! **Owns:** those primitives. **Must not:** depend on any other viga crate, know about
//! runs, models, Blender or the loop.

#![warn(clippy::too_many_lines)] // no library function over 80 lines: clippy.toml sets the threshold

pub mod files;
pub mod net;
pub mod terminal;
