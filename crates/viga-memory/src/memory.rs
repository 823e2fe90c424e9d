//! The Tail_L memory: `M_{t+1} = Tail_L(M_t || c_t)` over iterations, plus the anchor.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};
use viga_protocol::iteration::IterationRecord;
use viga_protocol::message::ChatMessage;

use crate::MemoryError;
use crate::format;

/// The smallest context budget [`Memory::new`] accepts: below it not even one iteration's
/// header, result line and truncation markers fit, and every block would be a hard cut.
pub const MIN_BUDGET_BYTES: usize = 256;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MemoryConfig {
    /// L: how many iterations are kept (at least 1).
    pub window: usize,
    /// Most bytes [`Memory::context_block`] may return (at least [`MIN_BUDGET_BYTES`]).
    pub budget_bytes: usize,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        Self {
            window: 3,
            budget_bytes: 12_000,
        }
    }
}

impl MemoryConfig {
    /// Checks the configuration; [`Memory::new`] calls this, front ends may call it early.
    pub fn validate(&self) -> Result<(), MemoryError> {
        if self.window == 0 {
            return Err(MemoryError::Config(
                "window is 0, but the memory must keep at least the latest iteration: set window (L) to 1 or more (3 is the default)".to_owned(),
            ));
        }
        if self.budget_bytes < MIN_BUDGET_BYTES {
            return Err(MemoryError::Config(format!(
                "budget_bytes is {}, too small for even one iteration's summary: set it to at least {MIN_BUDGET_BYTES} (12000 is the default)",
                self.budget_bytes
            )));
        }
        Ok(())
    }
}

/// The anchor message and the last `window` iterations.
#[derive(Debug, Clone, PartialEq)]
pub struct Memory {
    config: MemoryConfig,
    anchor: Option<ChatMessage>,
    /// Oldest first; never longer than `config.window`.
    kept: VecDeque<IterationRecord>,
    total: u32,
}

impl Memory {
    pub fn new(config: MemoryConfig) -> Result<Memory, MemoryError> {
        config.validate()?;
        Ok(Memory {
            config,
            anchor: None,
            // Not `with_capacity(window)`: a huge window is valid and must not allocate up front.
            kept: VecDeque::new(),
            total: 0,
        })
    }

    pub fn config(&self) -> &MemoryConfig {
        &self.config
    }

    /// The first user message (task, target image, initial plan): always kept, never evicted.
    /// Setting it again replaces it.
    pub fn set_anchor(&mut self, message: ChatMessage) {
        self.anchor = Some(message);
    }

    pub fn anchor(&self) -> Option<&ChatMessage> {
        self.anchor.as_ref()
    }

    /// Appends an iteration; keeps only the last `window` in memory (Tail_L over iterations).
    /// A record counts as one iteration however many fast retries or messages it took.
    pub fn push(&mut self, record: IterationRecord) {
        self.kept.push_back(record);
        while self.kept.len() > self.config.window {
            self.kept.pop_front();
        }
        self.total = self.total.saturating_add(1);
    }

    /// The kept iterations, oldest first.
    pub fn recent(&self) -> impl DoubleEndedIterator<Item = &IterationRecord> + ExactSizeIterator {
        self.kept.iter()
    }

    pub fn last(&self) -> Option<&IterationRecord> {
        self.kept.back()
    }

    /// All iterations ever pushed, not just the kept ones.
    pub fn total_iterations(&self) -> u32 {
        self.total
    }

    /// The kept iterations formatted for a prompt, oldest first, at most `budget_bytes` long.
    /// Empty when nothing has been pushed. The anchor is not part of it: it travels as its own
    /// message (it may hold images).
    ///
    /// When the full text is too long it is shrunk in this order until it fits: the code of
    /// older iterations (head and tail kept, `# [... N lines omitted]` in between); plan,
    /// error, stdout/stderr and verifier feedback (`[... N bytes omitted]`); then the oldest
    /// iterations are dropped (`[k earlier iterations omitted]`); last of all the newest
    /// iteration's own text and code. A final cut at a character boundary covers anything
    /// that still does not fit.
    pub fn context_block(&self) -> String {
        let records: Vec<&IterationRecord> = self.kept.iter().collect();
        format::context_block(&records, self.config.budget_bytes)
    }

    /// Rebuild from records (e.g. read back from a run log): the same state as pushing them
    /// in order, with `total_iterations` counting every record given.
    pub fn rebuild(
        config: MemoryConfig,
        anchor: Option<ChatMessage>,
        records: impl IntoIterator<Item = IterationRecord>,
    ) -> Result<Memory, MemoryError> {
        let mut memory = Memory::new(config)?;
        memory.anchor = anchor;
        for record in records {
            memory.push(record);
        }
        Ok(memory)
    }
}
