//! The memory queue on a store several daemons share: each pending conversation belongs to one
//! instance, so each update runs once across them.
//!
//! A pending record names its owner (the instance that wrote it last). An instance processes
//! only records that are still exactly what it wrote (the owner is itself and nobody replaced
//! them); a turn of the same conversation on another instance rewrites the record with that
//! instance as owner, and the first one drops its copy when it comes due: the new owner's
//! update reads the whole thread when it runs, the first one's turns included. Records whose
//! owner has stopped (no live `instance:` lease) are adopted, with a compare-and-set, at start
//! and every [`QueueOwner::adopt_every`], so a dead instance's conversations are remembered by
//! a survivor. On a store one process holds (sled) there is no owner and none of this runs.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use antler_store::{BatchOp, Expect, StoreError, StoreRef};

use tokio::time::Instant;

use super::{Entry, MemoryQueue, PendingConversation, QUEUE_TREE, debounce};

/// The ids of the instances alive now.
pub type LiveInstances = Arc<dyn Fn() -> Result<HashSet<String>, StoreError> + Send + Sync>;

/// This instance among the daemons sharing the queue's store.
#[derive(Clone)]
pub struct QueueOwner {
    pub instance_id: String,
    pub live: LiveInstances,
    /// How often records of stopped instances are looked for (a lease length).
    pub adopt_every: Duration,
}

/// A record this instance may take: its own, one without owner (written before clusters), or
/// one whose owner is not alive.
pub(crate) fn is_adoptable(
    owner: &QueueOwner,
    record: &PendingConversation,
    live: &HashSet<String>,
) -> bool {
    match record.owner.as_deref() {
        None => true,
        Some(id) if id == owner.instance_id => true,
        Some(id) => !live.contains(id),
    }
}

/// A record found at start, as this instance takes it: as it is without an owner (sled),
/// adopted when [`is_adoptable`], `None` when it belongs to a live instance or another one
/// adopted it first.
pub(super) fn load(
    store: &StoreRef,
    owner: Option<&QueueOwner>,
    live: &HashSet<String>,
    key: &[u8],
    stored: Vec<u8>,
    record: PendingConversation,
) -> Result<Option<(PendingConversation, Vec<u8>)>, StoreError> {
    match owner {
        None => Ok(Some((record, stored))),
        Some(owner) if is_adoptable(owner, &record, live) => {
            adopt(store, owner, key, stored, record)
        }
        Some(_) => Ok(None),
    }
}

/// Rewrites `record` (read as `stored`) with this instance as its owner, unless it changed
/// meanwhile; the record now stored, or `None` when another instance got there first.
pub(crate) fn adopt(
    store: &StoreRef,
    owner: &QueueOwner,
    key: &[u8],
    stored: Vec<u8>,
    mut record: PendingConversation,
) -> Result<Option<(PendingConversation, Vec<u8>)>, StoreError> {
    if record.owner.as_deref() == Some(owner.instance_id.as_str()) {
        return Ok(Some((record, stored)));
    }
    record.owner = Some(owner.instance_id.clone());
    let bytes = serde_json::to_vec(&record)
        .map_err(|e| StoreError::Io(format!("encoding a memory update: {e}")))?;
    let expect = Expect {
        tree: QUEUE_TREE,
        key: key.to_vec(),
        value: Some(stored),
    };
    let put = BatchOp::Put {
        tree: QUEUE_TREE,
        key: key.to_vec(),
        value: bytes.clone(),
    };
    Ok(store
        .apply_batch_if(&expect, vec![put])?
        .then_some((record, bytes)))
}

/// Whether the stored record of `key` is still `record`: nobody replaced, adopted or finished
/// it since this instance wrote it.
pub(crate) fn still_ours(store: &StoreRef, key: &[u8], record: &[u8]) -> Result<bool, StoreError> {
    Ok(store.get(QUEUE_TREE, key)?.as_deref() == Some(record))
}

/// One adopted record: its key, the conversation and the bytes now stored.
pub(crate) type Adopted = (Vec<u8>, PendingConversation, Vec<u8>);

/// The records of stopped instances (and those without owner), adopted: what this instance
/// adds to its queue. `known` are keys it already has.
pub(crate) fn adopt_orphans(
    store: &StoreRef,
    owner: &QueueOwner,
    known: &HashSet<Vec<u8>>,
) -> Result<Vec<Adopted>, StoreError> {
    let live = (owner.live)()?;
    if !live.contains(&owner.instance_id) {
        // This instance's own membership is not recorded (its daemon holds no `instance:`
        // lease), so nobody's liveness can be told: taking records would only move them back
        // and forth between instances; they stay where they are.
        return Ok(Vec::new());
    }
    let mut adopted = Vec::new();
    for (key, value) in store.scan_prefix(QUEUE_TREE, b"")? {
        if known.contains(&key) {
            continue;
        }
        let Ok(record) = serde_json::from_slice::<PendingConversation>(&value) else {
            continue;
        };
        if !is_adoptable(owner, &record, &live) {
            continue;
        }
        if let Some((record, bytes)) = adopt(store, owner, &key, value, record)? {
            adopted.push((key, record, bytes));
        }
    }
    if !adopted.is_empty() {
        tracing::info!(
            adopted = adopted.len(),
            "Took over memory updates of an instance that stopped"
        );
    }
    Ok(adopted)
}

impl MemoryQueue {
    /// Whether the stored record of `key` is still `record` (always, on a store this process
    /// holds alone). A store error counts as ours: the update runs rather than being lost.
    pub(super) fn still_ours(&self, key: &[u8], record: &[u8]) -> bool {
        if self.inner.owner.is_none() {
            return true;
        }
        still_ours(&self.inner.store, key, record).unwrap_or_else(|error| {
            tracing::warn!(%error, "Could not check who owns a memory update; running it here");
            true
        })
    }

    /// Adds the updates of stopped instances to this queue, due one debounce from now.
    pub(super) fn adopt_orphans(&self) {
        let Some(owner) = &self.inner.owner else {
            return;
        };
        let known = self.inner.lock_pending().keys().cloned().collect();
        match adopt_orphans(&self.inner.store, owner, &known) {
            Ok(adopted) if !adopted.is_empty() => {
                let due = Instant::now() + debounce(&self.inner.updater);
                let mut pending = self.inner.lock_pending();
                for (key, conversation, record) in adopted {
                    pending.entry(key).or_insert(Entry {
                        conversation,
                        due,
                        record,
                        failures: 0,
                    });
                }
                drop(pending);
                self.inner.wake.notify_one();
            }
            Ok(_) => {}
            Err(error) => {
                tracing::warn!(%error, "Could not look for memory updates of stopped instances")
            }
        }
    }
}
