//! The bounded cache of folded thread states: least recently used threads are dropped first
//! once the total passes `cache.thread_states_mb`; a dropped thread is folded from its log
//! again on the next read, identical. A thread larger than the whole bound is kept alone
//! rather than refolded every turn (a turn on a 2,800-message thread cost ~32 ms of CPU that
//! way instead of ~2.6 ms), since its runs hold all of it in memory anyway.

use std::sync::{Arc, Mutex, MutexGuard};

use crate::log::{CHANNELS, Head, SlotInfo};
use crate::lru::Lru;
use crate::messages::{History, KEPT_SLOT_BYTES, Message, Text, WeakHistory};
use crate::state::ThreadState;

/// One thread as the checkpointer last saved (or folded) it.
#[derive(Clone, Debug)]
pub(crate) struct CachedThread {
    pub(crate) head: Head,
    /// What the head key holds, for the compare-and-set of the next save (`None`: no head yet).
    pub(crate) head_bytes: Option<Vec<u8>>,
    /// The saved state; its `messages` are empty while `lent`.
    pub(crate) state: Arc<ThreadState>,
    /// The saved message list while a run holds it (`ThreadStore::checkout`). Held weakly so
    /// the run appends to it without copying a long history; the run's first change after a
    /// save takes the list, and until its next save (or its end, `checkin`) reads fold the log.
    pub(crate) lent: Option<WeakHistory>,
    /// The saved messages' ids, parallel to `slots`: what a save walks, lent or not.
    pub(crate) ids: Vec<Text>,
    pub(crate) slots: Vec<SlotInfo>,
    pub(crate) channels: [u64; CHANNELS.len()],
}

/// Per-entry overhead counted on top of the messages (head, its bytes, channels, the LRU's
/// bookkeeping), measured on fresh threads rather than guessed low.
const ENTRY_OVERHEAD: usize = 2048;

impl CachedThread {
    /// The saved state, if the entry still has its messages (not while lent to a run that has
    /// changed them since its last save).
    pub(crate) fn saved_state(&self) -> Option<Arc<ThreadState>> {
        match &self.lent {
            None => Some(self.state.clone()),
            Some(weak) => weak
                .upgrade()
                .map(|messages| Arc::new(self.with_messages(messages))),
        }
    }

    /// The saved state's channels around `messages` (the saved list, held apart while lent).
    fn with_messages(&self, messages: History) -> ThreadState {
        ThreadState {
            messages,
            ..(*self.state).clone()
        }
    }

    fn has_saved_messages(&self) -> bool {
        self.lent.as_ref().is_none_or(WeakHistory::is_alive)
    }

    /// The saved state for a run, its message list lent to it (see `lent`); `None` as
    /// `saved_state`.
    pub(crate) fn lend(&mut self) -> Option<ThreadState> {
        let messages = match &self.lent {
            Some(weak) => weak.upgrade()?,
            None => {
                let messages = std::mem::take(&mut Arc::make_mut(&mut self.state).messages);
                self.lent = Some(messages.downgrade());
                messages
            }
        };
        Some(self.with_messages(messages))
    }

    /// Takes the lent list back if the run left it as saved; `false`: the entry no longer has
    /// the saved messages.
    pub(crate) fn take_back(&mut self) -> bool {
        let Some(weak) = self.lent.take() else {
            return true;
        };
        match weak.upgrade() {
            Some(messages) => {
                Arc::make_mut(&mut self.state).messages = messages;
                true
            }
            None => false,
        }
    }

    /// An estimate of the memory the entry holds: per message three times its encoded size (its
    /// strings, the JSON form each body keeps once serialized, see `messages::Text`, and the
    /// whole message's JSON form its history keeps, see `messages::History`), the in-memory
    /// shape and allocation overhead, plus a fixed part. Counted whether or not the forms were
    /// made yet, so serializing a cached state later never takes it past the bound.
    pub(crate) fn weight(&self) -> usize {
        let messages: usize = self
            .slots
            .iter()
            .map(|s| {
                3 * s.bytes as usize
                    + std::mem::size_of::<Message>()
                    + std::mem::size_of::<Text>()
                    + KEPT_SLOT_BYTES
                    + 160
            })
            .sum();
        messages + ENTRY_OVERHEAD
    }
}

pub(crate) struct StateCache {
    lru: Mutex<Lru<String, CachedThread>>,
    from_messages: usize,
}

impl StateCache {
    pub(crate) fn new(capacity_bytes: usize, from_messages: usize) -> Self {
        Self {
            lru: Mutex::new(Lru::new(capacity_bytes)),
            from_messages,
        }
    }

    /// Whether a thread stays cached when no run holds it: only once it has
    /// `ThreadStoreOptions::cache_from_messages` saved messages.
    pub(crate) fn keeps(&self, entry: &CachedThread) -> bool {
        entry.ids.len() >= self.from_messages
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
        // An entry of the same version whose lent list changed since is repaired by the fold.
        if let Some(existing) = lru.get(thread_id)
            && existing.head.version >= entry.head.version
            && (existing.head.version > entry.head.version || existing.has_saved_messages())
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
