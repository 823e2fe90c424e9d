//! Who holds a connection slot. A connection that has not said hello costs the server as
//! much as a user's, and anyone who can reach the port can open one, so the two are kept
//! apart: connections that have not said hello share a small budget of their own (and each
//! address at most part of it), and only a hello with a valid token takes one of the
//! `max_connections` slots kept for people with tokens. When the budget is spent, the oldest
//! connection that still has not said hello (of the same address, when that address holds
//! its share) makes room for the newest: silent connections opened first can never lock out
//! a person who says hello at once. Refusals and evictions are logged as warnings, at most
//! one line a second with how many there were.

use std::collections::VecDeque;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// How often a kind of refusal is logged, at most.
const LOG_EVERY: Duration = Duration::from_secs(1);

#[derive(Debug)]
pub(super) struct Admission {
    /// Connections that have not said hello, oldest first.
    waiting: Mutex<VecDeque<Waiting>>,
    next_id: AtomicU64,
    max_waiting: usize,
    per_address: usize,
    /// The slots of connections whose hello was accepted.
    greeted: Arc<Semaphore>,
    max_greeted: usize,
    evictions: RateLimitedLog,
    refusals: RateLimitedLog,
}

#[derive(Debug)]
struct Waiting {
    id: u64,
    address: IpAddr,
    evict: Arc<Notify>,
}

/// One connection's place: waiting for its hello, then (after [`Ticket::admit`]) a slot of
/// the greeted. Dropping it gives the place back.
#[derive(Debug)]
pub(super) struct Ticket {
    id: u64,
    admission: Arc<Admission>,
    evict: Arc<Notify>,
    slot: Mutex<Option<OwnedSemaphorePermit>>,
    /// A hello was refused for want of a slot: the connection is to be closed.
    turned_away: AtomicBool,
}

impl Admission {
    pub(super) fn new(max_greeted: usize, max_waiting: usize, per_address: usize) -> Arc<Self> {
        Arc::new(Self {
            waiting: Mutex::new(VecDeque::new()),
            next_id: AtomicU64::new(0),
            max_waiting: max_waiting.max(1),
            per_address: per_address.clamp(1, max_waiting.max(1)),
            greeted: Arc::new(Semaphore::new(max_greeted)),
            max_greeted,
            evictions: RateLimitedLog::default(),
            refusals: RateLimitedLog::default(),
        })
    }

    /// A new connection from `address`: a place among those waiting for their hello, made
    /// by closing the oldest waiting one when the budget (or the address's share) is spent.
    pub(super) fn arrive(self: &Arc<Self>, address: IpAddr) -> Ticket {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let evict = Arc::new(Notify::new());
        let mut waiting = self
            .waiting
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let from_address = waiting.iter().filter(|w| w.address == address).count();
        let oldest = if from_address >= self.per_address {
            waiting.iter().position(|w| w.address == address)
        } else if waiting.len() >= self.max_waiting {
            Some(0)
        } else {
            None
        };
        if let Some(evicted) = oldest.and_then(|index| waiting.remove(index)) {
            evicted.evict.notify_one();
            self.evictions.note(|count| {
                tracing::warn!(
                    address = %evicted.address,
                    count,
                    "closed connections that had not said hello, to make room for newer ones (at most {} wait for their hello, {} per address)",
                    self.max_waiting,
                    self.per_address
                );
            });
        }
        waiting.push_back(Waiting {
            id,
            address,
            evict: Arc::clone(&evict),
        });
        Ticket {
            id,
            admission: Arc::clone(self),
            evict,
            slot: Mutex::new(None),
            turned_away: AtomicBool::new(false),
        }
    }

    fn leave_waiting(&self, id: u64) {
        let mut waiting = self
            .waiting
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        waiting.retain(|w| w.id != id);
    }
}

impl Ticket {
    /// Resolves when the connection is closed to make room; never, once it said hello.
    pub(super) async fn evicted(&self) {
        self.evict.notified().await;
    }

    /// The connection said hello with a valid token: it takes a slot of the greeted.
    /// `false` when every slot is taken (the connection is to be refused and closed).
    pub(super) fn admit(&self) -> bool {
        let mut slot = self
            .slot
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if slot.is_some() {
            return true;
        }
        self.admission.leave_waiting(self.id);
        match Arc::clone(&self.admission.greeted).try_acquire_owned() {
            Ok(permit) => {
                *slot = Some(permit);
                true
            }
            Err(_) => {
                self.turned_away.store(true, Ordering::Relaxed);
                let max = self.admission.max_greeted;
                self.admission.refusals.note(|count| {
                    tracing::warn!(
                        count,
                        "refused hellos: the server holds as many connections as it may ({max}, --max-connections)"
                    );
                });
                false
            }
        }
    }
}

impl Ticket {
    /// Whether a hello was refused for want of a slot.
    pub(super) fn turned_away(&self) -> bool {
        self.turned_away.load(Ordering::Relaxed)
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.admission.leave_waiting(self.id);
    }
}

/// Counts events and calls its log at most once per [`LOG_EVERY`], with the count since.
#[derive(Debug, Default)]
struct RateLimitedLog {
    state: Mutex<(Option<Instant>, u64)>,
}

impl RateLimitedLog {
    fn note(&self, log: impl FnOnce(u64)) {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        state.1 += 1;
        if state.0.is_none_or(|last| last.elapsed() >= LOG_EVERY) {
            log(state.1);
            *state = (Some(Instant::now()), 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    #[tokio::test]
    async fn the_oldest_silent_connection_makes_room_and_a_greeted_one_is_never_evicted() {
        let admission = Admission::new(2, 3, 2);
        let first = admission.arrive(address(1));
        let second = admission.arrive(address(1));
        // The address's share is spent: its oldest makes room.
        let third = admission.arrive(address(1));
        tokio::time::timeout(Duration::from_secs(1), first.evicted())
            .await
            .unwrap();
        assert!(third.admit(), "a hello takes a slot of the greeted");
        let other = admission.arrive(address(2));
        let another = admission.arrive(address(3));
        // Three waiting now (second, other, another): the budget is spent, the oldest goes.
        let newest = admission.arrive(address(4));
        tokio::time::timeout(Duration::from_secs(1), second.evicted())
            .await
            .unwrap();
        assert!(
            tokio::time::timeout(Duration::from_millis(50), third.evicted())
                .await
                .is_err(),
            "a greeted connection is never evicted"
        );
        assert!(newest.admit());
        assert!(!other.admit(), "both slots of the greeted are taken");
        drop(newest);
        assert!(
            another.admit(),
            "a slot comes back when its connection goes"
        );
    }
}
