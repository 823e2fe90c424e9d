//! The message ids a session has seen, so a replayed message is refused, kept in a window
//! of fixed size so a long-lived session's memory stays bounded.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;

/// How many of a session's most recent message ids are remembered. A message replayed
/// after this many newer ones is no longer recognised as a replay.
pub const REPLAY_WINDOW: usize = 10_000;

/// The longest message id accepted: with [`REPLAY_WINDOW`] ids remembered, a session's
/// window holds at most 1.28 MB of id text.
pub const MAX_MESSAGE_ID_BYTES: usize = 128;

/// The last `capacity` ids in arrival order (to know which to forget) and as a set (to look
/// one up); both share each id's text.
#[derive(Debug)]
pub(crate) struct ReplayWindow {
    order: VecDeque<Arc<str>>,
    remembered: HashSet<Arc<str>>,
    capacity: usize,
}

impl ReplayWindow {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            order: VecDeque::with_capacity(capacity),
            remembered: HashSet::with_capacity(capacity),
            capacity,
        }
    }

    /// Remembers `id`; false when it is already in the window (a replay).
    pub(crate) fn admit(&mut self, id: &str) -> bool {
        if self.remembered.contains(id) {
            return false;
        }
        let id: Arc<str> = Arc::from(id);
        self.remembered.insert(Arc::clone(&id));
        self.order.push_back(id);
        if self.order.len() > self.capacity
            && let Some(oldest) = self.order.pop_front()
        {
            self.remembered.remove(&oldest);
        }
        true
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        debug_assert_eq!(self.order.len(), self.remembered.len());
        self.order.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hundred_thousand_ids_keep_the_window_at_its_bound() {
        let mut window = ReplayWindow::new(REPLAY_WINDOW);
        for n in 0..100_000 {
            assert!(window.admit(&format!("message-{n}")));
            assert!(window.len() <= REPLAY_WINDOW);
        }
        assert_eq!(window.len(), REPLAY_WINDOW);
        // The most recent ids are still refused as replays; the oldest were forgotten.
        assert!(!window.admit("message-99999"));
        assert!(!window.admit(&format!("message-{}", 100_000 - REPLAY_WINDOW)));
        assert!(window.admit("message-0"));
        assert_eq!(window.len(), REPLAY_WINDOW);
    }
}
