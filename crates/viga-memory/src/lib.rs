//! # viga-memory
//!
//! What the agent remembers between iterations, and the record of a run on disk.
//!
//! **Owns:** the Tail_L memory ([`Memory`]): the anchor message (task, target image, initial
//! plan), which is never evicted, and the last *L* [`IterationRecord`]s, where *L* counts
//! iterations (one Generator → Execute → Verifier cycle, fast retries included), never chat
//! messages; the context block those iterations become in the generator's prompt, which always
//! fits a byte budget ([`Memory::context_block`]); the append-only run log `events.jsonl`
//! ([`RunLog`], [`read_run_log`]), from which a run's memory can be rebuilt
//! ([`iterations_in`], [`Memory::rebuild`]). Its files are written whole through
//! `viga_io::files`.
//!
//! **Must not:** call models, touch Blender or the network, or decide anything about the loop
//! (when to stop, what to retry). It stores what it is given, exactly: there is no hidden
//! filter that could drop an iteration, so what the log holds is what the memory shows.
//!
//! [`IterationRecord`]: viga_protocol::iteration::IterationRecord

#![warn(clippy::too_many_lines)] // no library function over 80 lines: clippy.toml sets the threshold

mod error;
mod format;
mod log;
mod memory;

pub use error::MemoryError;
pub use log::{LogContents, RunLog, iterations_in, read_run_log};
pub use memory::{MIN_BUDGET_BYTES, Memory, MemoryConfig};
