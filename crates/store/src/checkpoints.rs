//! Saving a step as log records and reading a thread back, through the state cache.
//!
//! A save compares the step's state with what the thread store saved last (the cached entry,
//! else the log folded again): it walks the message ids in order, keeping the slot of every
//! message still in place, and writes a put for each message the step touched or appended, one
//! remove record for the slots that went away, a record for each channel whose value changed,
//! and the new head, in one batch that applies only if the head is still the one it started
//! from. The cached entry is then patched with the same difference.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::Utc;
use serde_json::Map;

use crate::log::{self, CHANNELS, HEADS, Head, LOG, LogError, SlotInfo};
use crate::messages::{History, Message, Text, same_id};
use crate::state::{StateChanges, ThreadState};
use crate::state_cache::CachedThread;
use crate::threads::{ThreadError, ThreadRecord, ThreadStatus, decode, encode, put_record};
use crate::{BatchOp, Checkpoint, Checkpointer, Expect, StepCheckpoint, StoreError, ThreadStore};

impl ThreadStore {
    /// The head of a thread's log, without reading the log (`None`: never checkpointed).
    pub fn head(&self, thread_id: &str) -> Result<Option<Head>, ThreadError> {
        // A shared store's head is read from the store: it is one point read either way.
        if !self.inner.shared
            && let Some(entry) = self.inner.cache.lock().get(thread_id)
        {
            return Ok(Some(entry.head.clone()));
        }
        match self.inner.store.get(HEADS, thread_id.as_bytes())? {
            Some(bytes) => Ok(Some(decode(thread_id.as_bytes(), &bytes)?)),
            None => Ok(None),
        }
    }

    /// The thread's state as of its last checkpoint and that checkpoint's head: from the cache,
    /// else folded from the log (and cached). Shared, so a caller copies only what it changes.
    pub fn state(&self, thread_id: &str) -> Result<Option<(Head, Arc<ThreadState>)>, ThreadError> {
        self.revalidate(thread_id)?;
        if let Some(entry) = self.inner.cache.lock().get(thread_id)
            && let Some(state) = entry.saved_state()
        {
            return Ok(Some((entry.head.clone(), state)));
        }
        self.fold_and_offer(thread_id, false)
    }

    /// The saved state for a run that is about to change it: like `state`, but a cached
    /// message list is lent to the run (`CachedThread::lent`), so its first append takes the
    /// list instead of copying it. With a long history the copy, and dropping the cache's
    /// version of the list later, were ~10 % of a turn's instructions (callgrind, ~1,200
    /// messages). Hand it back with `checkin` when the run ends.
    pub fn checkout(&self, thread_id: &str) -> Result<Option<ThreadState>, ThreadError> {
        self.revalidate(thread_id)?;
        let lent = self
            .inner
            .cache
            .lock()
            .get_mut(thread_id)
            .and_then(CachedThread::lend);
        if lent.is_some() {
            return Ok(lent);
        }
        // Not cached: folded and cached now, shared as `state` shares it; its next run
        // borrows the list.
        Ok(self
            .fold_and_offer(thread_id, true)?
            .map(|(_, state)| Arc::unwrap_or_clone(state)))
    }

    /// On a store other processes write too (`ThreadStoreOptions::shared`), drops the cached
    /// entry if the stored head is no longer the one it was folded or saved at: another daemon
    /// ran a turn on the thread since. One point read of the head; the log is read only when
    /// it moved. A lent entry goes too: its run's next save meets the new head and is refused.
    fn revalidate(&self, thread_id: &str) -> Result<(), ThreadError> {
        if !self.inner.shared {
            return Ok(());
        }
        let stored = self.inner.store.get(HEADS, thread_id.as_bytes())?;
        let mut cache = self.inner.cache.lock();
        if cache
            .get(thread_id)
            .is_some_and(|entry| entry.head_bytes != stored)
        {
            cache.remove(thread_id);
        }
        Ok(())
    }

    /// Folds the thread from the log and offers it to the cache: always for a run, whose saves
    /// compare with the entry, else only if it is long enough to keep (`StateCache::keeps`).
    fn fold_and_offer(
        &self,
        thread_id: &str,
        for_run: bool,
    ) -> Result<Option<(Head, Arc<ThreadState>)>, ThreadError> {
        let Some(entry) = self.fold(thread_id)? else {
            return Ok(None);
        };
        let found = (entry.head.clone(), entry.state.clone());
        if for_run || self.inner.cache.keeps(&entry) {
            self.inner.cache.offer(thread_id, entry);
        }
        Ok(Some(found))
    }

    /// Ends a `checkout`: the cache takes the run's list back if it is still what the run last
    /// saved and the thread is long enough to keep (`StateCache::keeps`); otherwise the entry
    /// goes, and the next read folds the log.
    pub fn checkin(&self, thread_id: &str) {
        let mut cache = self.inner.cache.lock();
        let Some(entry) = cache.get_mut(thread_id) else {
            return;
        };
        let keep = entry.take_back() && self.inner.cache.keeps(entry);
        if !keep {
            cache.remove(thread_id);
        }
    }

    /// (threads, estimated bytes, capacity in bytes) of the thread-state cache.
    pub fn cache_usage(&self) -> (usize, usize, usize) {
        self.inner.cache.usage()
    }

    /// Reads the head and the log and rebuilds the state (no cache involved).
    fn fold(&self, thread_id: &str) -> Result<Option<CachedThread>, ThreadError> {
        let Some(head_bytes) = self.inner.store.get(HEADS, thread_id.as_bytes())? else {
            return Ok(None);
        };
        let head: Head = decode(thread_id.as_bytes(), &head_bytes)?;
        let records = self.inner.store.scan_prefix(LOG, &log::prefix(thread_id))?;
        let folded = log::fold(&head, &records).map_err(|(key, e)| corrupt(&key, e))?;
        let channels = log::channel_hashes(&folded.state)
            .map_err(|e| corrupt(thread_id.as_bytes(), e.into()))?;
        Ok(Some(CachedThread {
            head,
            head_bytes: Some(head_bytes),
            ids: message_ids(&folded.state.messages),
            state: Arc::new(folded.state),
            lent: None,
            slots: folded.slots,
            channels,
        }))
    }

    /// Writes one completed step (see the module doc) and answers the checkpoint's version
    /// (the head's, one more than before).
    pub fn save_step(&self, checkpoint: StepCheckpoint<'_>) -> Result<u64, ThreadError> {
        let thread_id = checkpoint.thread_id;
        let new = checkpoint.state;
        let now = Utc::now();
        let at = now.timestamp();
        // Channels are small: encode them all and compare fingerprints with the last save.
        let mut channels = Vec::with_capacity(CHANNELS.len());
        for index in 0..CHANNELS.len() {
            let bytes = log::channel_bytes(new, index)
                .map_err(|e| corrupt(thread_id.as_bytes(), e.into()))?;
            channels.push((log::hash_bytes(&bytes), bytes));
        }
        let plan = self.plan(thread_id, new, checkpoint.changes, &channels)?;

        let mut seq = plan.base.next_seq;
        let mut ops = Vec::with_capacity(plan.walk.writes.len() + 4);
        let mut written = Vec::with_capacity(plan.walk.writes.len());
        for &index in &plan.walk.writes {
            let slot = plan.walk.slots[index].slot;
            let value = log::encode_put(at, slot, &new.messages[index])
                .map_err(|e| corrupt(thread_id.as_bytes(), e))?;
            written.push(u32::try_from(value.len()).unwrap_or(u32::MAX));
            ops.push(log_op(thread_id, &mut seq, value));
        }
        if !plan.walk.removed.is_empty() {
            let value = log::encode_remove(at, &plan.walk.removed)
                .map_err(|e| corrupt(thread_id.as_bytes(), e))?;
            ops.push(log_op(thread_id, &mut seq, value));
        }
        for &index in &plan.changed_channels {
            let value = log::encode_channel(at, index, &channels[index].1);
            ops.push(log_op(thread_id, &mut seq, value));
        }
        let head = Head {
            version: plan.base.version + 1,
            next_seq: seq,
            next_slot: plan.walk.next_slot,
            messages: new.messages.len() as u64,
            run_id: checkpoint.run_id.to_string(),
            step: checkpoint.step,
            created_at: now,
        };
        let head_bytes = encode(&head)?;
        ops.push(BatchOp::Put {
            tree: HEADS,
            key: thread_id.as_bytes().to_vec(),
            value: head_bytes.clone(),
        });
        let expect = Expect {
            tree: HEADS,
            key: thread_id.as_bytes().to_vec(),
            value: plan.base_bytes.clone(),
        };
        let guard = self.lock();
        let mut record = self
            .read_record(thread_id)?
            .unwrap_or_else(|| sdk_record(thread_id, now));
        record.last_checkpoint = head.version;
        record.updated_at = now;
        // The state's title is the first-message title; a generated one arrives later through
        // `rename` and must not be overwritten by it.
        if record.title.is_none() && new.title.is_some() {
            record.title.clone_from(&new.title);
        }
        ops.push(put_record(&record)?);
        let applied = self.inner.store.apply_batch_if(&expect, ops)?;
        drop(guard);
        if !applied {
            self.inner.cache.remove(thread_id);
            return Err(ThreadError::Store(StoreError::Conflict {
                thread_id: thread_id.to_string(),
            }));
        }
        let version = head.version;
        self.patch_cache(thread_id, new, plan, written, head, head_bytes, &channels);
        self.inner.flusher.request();
        Ok(version)
    }

    /// Compares the step with the last save, folding the thread first if it is not cached.
    fn plan(
        &self,
        thread_id: &str,
        new: &ThreadState,
        changes: &StateChanges,
        channels: &[(u64, Vec<u8>)],
    ) -> Result<Plan, ThreadError> {
        {
            let mut cache = self.inner.cache.lock();
            if let Some(entry) = cache.get(thread_id) {
                return Ok(Plan::against(entry, new, changes, channels));
            }
        }
        let base = match self.fold(thread_id)? {
            Some(entry) => entry,
            None => CachedThread {
                head: Head {
                    version: 0,
                    next_seq: 1,
                    next_slot: 1,
                    messages: 0,
                    run_id: String::new(),
                    step: 0,
                    created_at: Utc::now(),
                },
                head_bytes: None,
                state: Arc::default(),
                lent: None,
                ids: Vec::new(),
                slots: Vec::new(),
                channels: log::channel_hashes(&ThreadState::default())
                    .map_err(|e| corrupt(thread_id.as_bytes(), e.into()))?,
            },
        };
        let plan = Plan::against(&base, new, changes, channels);
        self.inner.cache.offer(thread_id, base);
        Ok(plan)
    }

    /// Brings the cached entry to the saved state, if it is still the one the plan started
    /// from (it may have been evicted meanwhile: then the next read folds the log).
    #[allow(clippy::too_many_arguments)]
    fn patch_cache(
        &self,
        thread_id: &str,
        new: &ThreadState,
        plan: Plan,
        written: Vec<u32>,
        head: Head,
        head_bytes: Vec<u8>,
        channels: &[(u64, Vec<u8>)],
    ) {
        let mut cache = self.inner.cache.lock();
        let Some(entry) = cache.get_mut(thread_id) else {
            return;
        };
        if entry.head.version != plan.base.version {
            return;
        }
        let mut slots = plan.walk.slots;
        for (&index, bytes) in plan.walk.writes.iter().zip(written) {
            slots[index].bytes = bytes;
        }
        if plan.walk.in_place {
            let state = Arc::make_mut(&mut entry.state);
            // A lent list is the run's own: the entry points at the saved one again below.
            let owned = entry.lent.is_none();
            for &index in &plan.walk.writes {
                let message = &new.messages[index];
                let id = message.id_text().clone();
                if index < entry.ids.len() {
                    entry.ids[index] = id;
                    entry.slots[index] = slots[index];
                    if owned {
                        state.messages[index] = message.clone();
                    }
                } else {
                    entry.ids.push(id);
                    entry.slots.push(slots[index]);
                    if owned {
                        state.messages.push(message.clone());
                    }
                }
            }
            for &index in &plan.changed_channels {
                log::copy_channel(state, new, index);
            }
        } else {
            let mut state = new.clone();
            if entry.lent.is_some() {
                state.messages = History::default();
            }
            entry.state = Arc::new(state);
            entry.ids = message_ids(&new.messages);
            entry.slots = slots;
        }
        if entry.lent.is_some() {
            entry.lent = Some(new.messages.downgrade());
        }
        for (hash, (new_hash, _)) in entry.channels.iter_mut().zip(channels) {
            *hash = *new_hash;
        }
        entry.head = head;
        entry.head_bytes = Some(head_bytes);
        let weight = entry.weight();
        cache.reweigh(thread_id, weight);
    }
}

#[async_trait]
impl Checkpointer for ThreadStore {
    async fn save(&self, checkpoint: StepCheckpoint<'_>) -> Result<u64, StoreError> {
        self.save_step(checkpoint).map_err(into_store_error)
    }

    async fn latest(&self, thread_id: &str) -> Result<Option<Checkpoint>, StoreError> {
        let found = self.state(thread_id).map_err(into_store_error)?;
        Ok(found.map(|(head, state)| Checkpoint {
            thread_id: thread_id.to_string(),
            run_id: head.run_id,
            step: head.step,
            state: Arc::unwrap_or_clone(state),
            created_at: head.created_at,
        }))
    }

    async fn rename(&self, thread_id: &str, title: &str) -> Result<(), StoreError> {
        self.update(thread_id, |record| record.title = Some(title.to_string()))
            .map(|_| ())
            .map_err(into_store_error)
    }
}

/// What a save writes, worked out against the last save.
struct Plan {
    base: Head,
    base_bytes: Option<Vec<u8>>,
    walk: Walk,
    changed_channels: Vec<usize>,
}

impl Plan {
    fn against(
        base: &CachedThread,
        new: &ThreadState,
        changes: &StateChanges,
        channels: &[(u64, Vec<u8>)],
    ) -> Self {
        let changed_channels = (0..CHANNELS.len())
            .filter(|&index| base.channels[index] != channels[index].0)
            .collect();
        Self {
            base: base.head.clone(),
            base_bytes: base.head_bytes.clone(),
            walk: walk(
                &base.ids,
                &base.slots,
                &new.messages,
                changes,
                base.head.next_slot,
            ),
            changed_channels,
        }
    }
}

/// The slots of the new messages, found by walking ids against the saved ones.
#[derive(Debug, PartialEq)]
pub(crate) struct Walk {
    /// Parallel to the new messages (`bytes` is the old record's size for kept ones).
    pub(crate) slots: Vec<SlotInfo>,
    /// Indexes of the new messages to write.
    pub(crate) writes: Vec<usize>,
    /// Saved slots no longer live.
    pub(crate) removed: Vec<u64>,
    /// Nothing removed or moved: the new messages are the old ones, some replaced, some
    /// appended.
    pub(crate) in_place: bool,
    pub(crate) next_slot: u64,
}

/// Keeps a saved message's slot when its id comes next in saved order and the slot keeps the
/// order increasing; everything else (new ids, a message that moved) is written at a fresh
/// slot, and skipped saved messages are removed. Touched messages are rewritten in place.
pub(crate) fn walk(
    old: &[Text],
    old_slots: &[SlotInfo],
    new: &[Message],
    changes: &StateChanges,
    mut next_slot: u64,
) -> Walk {
    let mut slots = Vec::with_capacity(new.len());
    let mut writes = Vec::new();
    let mut removed = Vec::new();
    let mut in_place = true;
    let mut cursor = 0;
    let mut last_slot = 0;
    for (index, message) in new.iter().enumerate() {
        let id = message.id();
        let found = if old.get(cursor).is_some_and(|old_id| same_id(old_id, id)) {
            Some(cursor)
        } else {
            old[cursor.min(old.len())..]
                .iter()
                .position(|old_id| same_id(old_id, id))
                .map(|offset| cursor + offset)
        };
        match found {
            Some(at) if old_slots[at].slot > last_slot => {
                removed.extend(old_slots[cursor..at].iter().map(|s| s.slot));
                in_place &= at == index;
                slots.push(old_slots[at]);
                last_slot = old_slots[at].slot;
                if changes.touches(id) {
                    writes.push(index);
                }
                cursor = at + 1;
            }
            found => {
                if let Some(at) = found {
                    // It moved behind a newer message: it goes to a fresh slot.
                    removed.extend(old_slots[cursor..=at].iter().map(|s| s.slot));
                    cursor = at + 1;
                }
                slots.push(SlotInfo {
                    slot: next_slot,
                    bytes: 0,
                });
                last_slot = next_slot;
                next_slot += 1;
                writes.push(index);
            }
        }
    }
    removed.extend(
        old_slots[cursor.min(old_slots.len())..]
            .iter()
            .map(|s| s.slot),
    );
    in_place &= removed.is_empty();
    Walk {
        slots,
        writes,
        removed,
        in_place,
        next_slot,
    }
}

/// The ids a save walks (`walk`), shared with the messages.
pub(crate) fn message_ids(messages: &[Message]) -> Vec<Text> {
    messages.iter().map(|m| m.id_text().clone()).collect()
}

fn log_op(thread_id: &str, seq: &mut u64, value: Vec<u8>) -> BatchOp {
    let key = log::key(thread_id, *seq);
    *seq += 1;
    BatchOp::Put {
        tree: LOG,
        key,
        value,
    }
}

/// The record of a thread checkpointed through the SDK without one (no owner).
fn sdk_record(thread_id: &str, now: chrono::DateTime<Utc>) -> ThreadRecord {
    ThreadRecord {
        thread_id: thread_id.to_string(),
        user_id: String::new(),
        created_at: now,
        updated_at: now,
        status: ThreadStatus::Idle,
        title: None,
        metadata: Map::new(),
        agent_name: None,
        last_checkpoint: 0,
    }
}

fn corrupt(key: &[u8], error: LogError) -> ThreadError {
    ThreadError::Store(StoreError::Corrupt {
        key: String::from_utf8_lossy(key).replace('\0', "/"),
        detail: error.to_string(),
    })
}

pub(crate) fn into_store_error(error: ThreadError) -> StoreError {
    match error {
        ThreadError::Store(e) => e,
        other => StoreError::Io(other.to_string()),
    }
}
