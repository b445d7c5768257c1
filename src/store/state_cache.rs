//! The bounded cache of folded thread states: least recently used threads are dropped first
//! once the total passes `cache.thread_states_mb`; a dropped thread is folded from its log
//! again on the next read, identical.

use std::sync::{Arc, Mutex, MutexGuard};

use crate::lru::Lru;
use crate::messages::{KEPT_SLOT_BYTES, Message};
use crate::state::ThreadState;
use crate::store::log::{CHANNELS, Head, SlotInfo};

/// One thread as the checkpointer last saved (or folded) it.
#[derive(Clone, Debug)]
pub(crate) struct CachedThread {
    pub(crate) head: Head,
    /// What the head key holds, for the compare-and-set of the next save (`None`: no head yet).
    pub(crate) head_bytes: Option<Vec<u8>>,
    pub(crate) state: Arc<ThreadState>,
    /// Parallel to `state.messages`.
    pub(crate) slots: Vec<SlotInfo>,
    pub(crate) channels: [u64; CHANNELS.len()],
}

/// Per-entry overhead counted on top of the messages (head, its bytes, channels, the LRU's
/// bookkeeping), measured on fresh threads rather than guessed low.
const ENTRY_OVERHEAD: usize = 2048;

impl CachedThread {
    /// An estimate of the memory the entry holds: per message three times its encoded size (its
    /// strings, the JSON form each body keeps once serialized, see `messages::Text`, and the
    /// whole message's JSON form its history keeps, see `messages::History`), the in-memory
    /// shape and allocation overhead, plus a fixed part. Counted whether or not the forms were
    /// made yet, so serializing a cached state later never takes it past the bound.
    pub(crate) fn weight(&self) -> usize {
        let messages: usize = self
            .slots
            .iter()
            .map(|s| 3 * s.bytes as usize + std::mem::size_of::<Message>() + KEPT_SLOT_BYTES + 160)
            .sum();
        messages + ENTRY_OVERHEAD
    }
}

pub(crate) struct StateCache {
    lru: Mutex<Lru<String, CachedThread>>,
}

impl StateCache {
    pub(crate) fn new(capacity_bytes: usize) -> Self {
        Self {
            lru: Mutex::new(Lru::new(capacity_bytes)),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Lru<String, CachedThread>> {
        // Entries are replaced whole or patched by code that cannot panic halfway.
        self.lru
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Keeps `entry` unless the cache already holds a newer version of the thread (a slow fold
    /// must not replace what a save put there meanwhile).
    pub(crate) fn offer(&self, thread_id: &str, entry: CachedThread) {
        let mut lru = self.lock();
        if let Some(existing) = lru.get(thread_id)
            && existing.head.version >= entry.head.version
        {
            return;
        }
        let weight = entry.weight();
        lru.insert(thread_id.to_string(), entry, weight);
    }

    pub(crate) fn remove(&self, thread_id: &str) {
        self.lock().remove(thread_id);
    }

    /// Drops the threads unused for longer than `max_idle`; returns how many.
    pub(crate) fn evict_idle(&self, max_idle: std::time::Duration) -> usize {
        self.lock().evict_idle(max_idle)
    }

    /// (threads kept, bytes kept, capacity).
    pub(crate) fn usage(&self) -> (usize, usize, usize) {
        let lru = self.lock();
        (lru.len(), lru.weight(), lru.capacity())
    }
}
