//! Thread records and the per-user thread index, on top of any [`Store`]; the thread's state
//! itself is the checkpoint log ([`crate::log`]; saving and folding it are methods of
//! [`ThreadStore`] too, in the store's `checkpoints` module).
//!
//! Layout (logical trees of the store, values are JSON):
//! - `threads`: `{thread_id}` → [`ThreadRecord`]
//! - `user_threads`: `{user_id}\0{thread_id}` → empty (the per-user index)
//! - `heads` and `log`: the thread's state (see [`crate::log`])
//!
//! A checkpoint and the record change it implies (`updated_at`, `title`, the checkpoint
//! version) are written in one atomic batch. Durability: each checkpoint wakes a background
//! flusher thread, so the loop never waits for an fsync yet a crash loses at most the
//! checkpoint whose flush was in flight (instead of sled's whole periodic-flush window).

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::flusher::Flusher;
use crate::log::{self, HEADS, LOG};
use crate::state_cache::StateCache;
use crate::{BatchOp, Store, StoreError, StoreRef, migrate};

pub(crate) use crate::trees::{LEGACY_CHECKPOINTS, THREADS, USER_THREADS};
const MAX_THREAD_ID_LEN: usize = 256;
/// The thread-state cache unless configured (`cache.thread_states_mb`).
pub const DEFAULT_STATE_CACHE_MB: usize = 4;
/// Why a thread needs a few turns before it stays cached: most threads with one turn (a burst
/// of new chats, one-off questions, a bot answering in many Slack threads) never get a second,
/// and their entries, made of the run's own allocations, pinned ~10 MiB of heap after a burst
/// of 1,000 while evicting the long threads the cache is for. Folding a short thread again
/// costs a read of a few log records.
pub const DEFAULT_CACHE_FROM_MESSAGES: usize = 8;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThreadStatus {
    #[default]
    Idle,
    Busy,
    Interrupted,
    Error,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThreadRecord {
    pub thread_id: String,
    /// The owner; empty for threads checkpointed through the SDK without a record.
    pub user_id: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    #[serde(default)]
    pub status: ThreadStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default)]
    pub metadata: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_name: Option<String>,
    /// How many checkpoints the thread has (its head's version; 0 = none yet).
    #[serde(default)]
    pub last_checkpoint: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum ThreadError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("thread {thread_id} not found; list your threads or create a new one")]
    NotFound { thread_id: String },
    #[error("thread id {thread_id} is not available; choose another id or let antler pick one")]
    Unavailable { thread_id: String },
    #[error("thread id {thread_id:?} is invalid: {reason}")]
    InvalidId { thread_id: String, reason: String },
}

/// Typed access to threads and their checkpoints. Cheap to clone.
#[derive(Clone)]
pub struct ThreadStore {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) store: StoreRef,
    /// Serialises read-modify-write of records (short, never held across `.await`).
    records: Mutex<()>,
    pub(crate) flusher: Flusher,
    pub(crate) cache: StateCache,
    /// Other processes write the store too: cached states are checked against the stored head
    /// before they are served (see `ThreadStore::state`).
    pub(crate) shared: bool,
}

/// Sizes of what a [`ThreadStore`] keeps in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadStoreOptions {
    /// Bound of the folded thread states kept (bytes, estimated).
    pub state_cache_bytes: usize,
    /// Threads with fewer saved messages leave the cache when their run ends, and reads do
    /// not add them (see `StateCache::keeps`); 0 keeps every thread.
    pub cache_from_messages: usize,
    /// Check every cached thread against its stored head before serving it, as on a store
    /// several daemons share; implied by [`Store::is_shared`](crate::Store::is_shared).
    pub shared: bool,
}

impl Default for ThreadStoreOptions {
    fn default() -> Self {
        Self {
            state_cache_bytes: DEFAULT_STATE_CACHE_MB * 1024 * 1024,
            cache_from_messages: DEFAULT_CACHE_FROM_MESSAGES,
            shared: false,
        }
    }
}

impl ThreadStore {
    /// A thread store with the default cache, after converting a data dir of the old layout
    /// (see [`migrate`]).
    pub fn new(store: StoreRef) -> Result<Self, ThreadError> {
        Self::with_options(store, ThreadStoreOptions::default())
    }

    pub fn with_options(store: StoreRef, options: ThreadStoreOptions) -> Result<Self, ThreadError> {
        migrate::run(store.as_ref())?;
        let flusher = Flusher::start(store.clone());
        let shared = options.shared || store.is_shared();
        Ok(Self {
            inner: Arc::new(Inner {
                shared,
                store,
                records: Mutex::new(()),
                flusher,
                cache: StateCache::new(options.state_cache_bytes, options.cache_from_messages),
            }),
        })
    }

    pub fn store(&self) -> &StoreRef {
        &self.inner.store
    }

    /// Creates a thread for `user_id`, with a fresh id unless one is given. Creating an
    /// existing thread of the same owner returns it unchanged.
    pub fn create(
        &self,
        user_id: &str,
        thread_id: Option<String>,
        metadata: Map<String, Value>,
    ) -> Result<ThreadRecord, ThreadError> {
        let thread_id = match thread_id {
            Some(id) => {
                validate_thread_id(&id)?;
                id
            }
            None => uuid::Uuid::new_v4().to_string(),
        };
        let _guard = self.lock();
        if let Some(existing) = self.read_record(&thread_id)? {
            if existing.user_id == user_id {
                return Ok(existing);
            }
            return Err(ThreadError::Unavailable { thread_id });
        }
        let now = Utc::now();
        let record = ThreadRecord {
            thread_id: thread_id.clone(),
            user_id: user_id.to_string(),
            created_at: now,
            updated_at: now,
            status: ThreadStatus::Idle,
            title: None,
            metadata,
            agent_name: None,
            last_checkpoint: 0,
        };
        self.inner.store.apply_batch(vec![
            put_record(&record)?,
            BatchOp::Put {
                tree: USER_THREADS,
                key: index_key(user_id, &thread_id),
                value: Vec::new(),
            },
        ])?;
        Ok(record)
    }

    pub fn get(&self, thread_id: &str) -> Result<Option<ThreadRecord>, ThreadError> {
        self.read_record(thread_id)
    }

    /// A user's threads, most recently updated first.
    pub fn list(&self, user_id: &str) -> Result<Vec<ThreadRecord>, ThreadError> {
        let prefix = index_key(user_id, "");
        let mut records = Vec::new();
        for (key, _) in self.inner.store.scan_prefix(USER_THREADS, &prefix)? {
            let thread_id = String::from_utf8_lossy(&key[prefix.len()..]).into_owned();
            if let Some(record) = self.read_record(&thread_id)?
                && record.user_id == user_id
            {
                records.push(record);
            }
        }
        records.sort_by_key(|r| std::cmp::Reverse((r.updated_at, r.created_at)));
        Ok(records)
    }

    /// Removes the record, its index entry, its head and its whole log, in one batch. `false`
    /// if there was none.
    pub fn delete(&self, thread_id: &str) -> Result<bool, ThreadError> {
        let _guard = self.lock();
        let Some(record) = self.read_record(thread_id)? else {
            return Ok(false);
        };
        let mut ops = vec![
            BatchOp::Delete {
                tree: THREADS,
                key: thread_id.as_bytes().to_vec(),
            },
            BatchOp::Delete {
                tree: USER_THREADS,
                key: index_key(&record.user_id, thread_id),
            },
            BatchOp::Delete {
                tree: HEADS,
                key: thread_id.as_bytes().to_vec(),
            },
        ];
        for tree in [LOG, LEGACY_CHECKPOINTS] {
            for (key, _) in self
                .inner
                .store
                .scan_prefix(tree, &log::prefix(thread_id))?
            {
                ops.push(BatchOp::Delete { tree, key });
            }
        }
        self.inner.store.apply_batch(ops)?;
        self.inner.cache.remove(thread_id);
        Ok(true)
    }

    /// Drops cached states of threads unused for longer than `max_idle` (they are folded from
    /// the store again when next read); returns how many were dropped.
    pub fn evict_idle(&self, max_idle: std::time::Duration) -> usize {
        self.inner.cache.evict_idle(max_idle)
    }

    pub fn set_status(
        &self,
        thread_id: &str,
        status: ThreadStatus,
    ) -> Result<ThreadRecord, ThreadError> {
        self.update(thread_id, |record| record.status = status)
    }

    /// Asks the background flusher to make everything written so far durable (group commit:
    /// within a few milliseconds) without waiting for the disk.
    pub fn flush_soon(&self) {
        self.inner.flusher.request();
    }

    /// Changes a record in place (title, metadata, agent name, …) and bumps `updated_at`.
    /// A compare-and-set of the record's bytes: another daemon on a shared store changing the
    /// record meanwhile makes this read it again and apply `change` to its version.
    pub fn update(
        &self,
        thread_id: &str,
        mut change: impl FnMut(&mut ThreadRecord),
    ) -> Result<ThreadRecord, ThreadError> {
        let _guard = self.lock();
        loop {
            let Some(bytes) = self.inner.store.get(THREADS, thread_id.as_bytes())? else {
                return Err(ThreadError::NotFound {
                    thread_id: thread_id.to_string(),
                });
            };
            let mut record: ThreadRecord = decode(thread_id.as_bytes(), &bytes)?;
            change(&mut record);
            record.updated_at = Utc::now();
            let expect = crate::Expect {
                tree: THREADS,
                key: thread_id.as_bytes().to_vec(),
                value: Some(bytes),
            };
            if self
                .inner
                .store
                .apply_batch_if(&expect, vec![put_record(&record)?])?
            {
                return Ok(record);
            }
        }
    }

    /// Gives a thread to another owner (a group chat's thread moving from the person who
    /// started it to the chat): the record and the per-user index change in one
    /// compare-and-set batch, so a concurrent change of the record is applied again to the
    /// moved one. Idempotent: a thread `to` already owns is returned unchanged.
    pub fn transfer(&self, thread_id: &str, to: &str) -> Result<ThreadRecord, ThreadError> {
        let _guard = self.lock();
        loop {
            let Some(bytes) = self.inner.store.get(THREADS, thread_id.as_bytes())? else {
                return Err(ThreadError::NotFound {
                    thread_id: thread_id.to_string(),
                });
            };
            let mut record: ThreadRecord = decode(thread_id.as_bytes(), &bytes)?;
            if record.user_id == to {
                return Ok(record);
            }
            let from = std::mem::replace(&mut record.user_id, to.to_string());
            let expect = crate::Expect {
                tree: THREADS,
                key: thread_id.as_bytes().to_vec(),
                value: Some(bytes),
            };
            let ops = vec![
                put_record(&record)?,
                BatchOp::Delete {
                    tree: USER_THREADS,
                    key: index_key(&from, thread_id),
                },
                BatchOp::Put {
                    tree: USER_THREADS,
                    key: index_key(to, thread_id),
                    value: Vec::new(),
                },
            ];
            if self.inner.store.apply_batch_if(&expect, ops)? {
                return Ok(record);
            }
        }
    }

    /// Marks threads left `Busy` by a crash as `Interrupted`; returns their ids.
    pub fn reset_busy(&self) -> Result<Vec<String>, ThreadError> {
        let mut reset = Vec::new();
        for (key, value) in self.inner.store.scan_prefix(THREADS, b"")? {
            let record: ThreadRecord = decode(&key, &value)?;
            if record.status == ThreadStatus::Busy {
                self.set_status(&record.thread_id, ThreadStatus::Interrupted)?;
                reset.push(record.thread_id);
            }
        }
        Ok(reset)
    }

    /// Makes everything written so far durable (end of a run, shutdown).
    pub fn flush(&self) -> Result<(), ThreadError> {
        self.inner.store.flush()?;
        Ok(())
    }

    /// Waits until every checkpoint saved so far was flushed by the background flusher.
    /// Returns `false` if that did not happen within `timeout`.
    pub fn wait_durable(&self, timeout: Duration) -> bool {
        self.inner.flusher.wait_durable(timeout)
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, ()> {
        match self.inner.records.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    pub(crate) fn read_record(&self, thread_id: &str) -> Result<Option<ThreadRecord>, ThreadError> {
        match self.inner.store.get(THREADS, thread_id.as_bytes())? {
            Some(bytes) => Ok(Some(decode(thread_id.as_bytes(), &bytes)?)),
            None => Ok(None),
        }
    }
}

fn validate_thread_id(thread_id: &str) -> Result<(), ThreadError> {
    let reason = if thread_id.is_empty() {
        "it is empty"
    } else if thread_id.len() > MAX_THREAD_ID_LEN {
        "it is longer than 256 bytes"
    } else if thread_id.chars().any(char::is_control) {
        "it contains control characters"
    } else {
        return Ok(());
    };
    Err(ThreadError::InvalidId {
        thread_id: thread_id.chars().take(64).collect(),
        reason: reason.to_string(),
    })
}

/// How many threads `user_id` owns, from the per-user index alone (what `antler users show`
/// reports without opening a thread store).
pub fn user_thread_count(store: &dyn Store, user_id: &str) -> Result<usize, StoreError> {
    Ok(store
        .scan_prefix(USER_THREADS, &index_key(user_id, ""))?
        .len())
}

pub(crate) fn index_key(user_id: &str, thread_id: &str) -> Vec<u8> {
    format!("{user_id}\0{thread_id}").into_bytes()
}

pub(crate) fn put_record(record: &ThreadRecord) -> Result<BatchOp, ThreadError> {
    Ok(BatchOp::Put {
        tree: THREADS,
        key: record.thread_id.as_bytes().to_vec(),
        value: encode(record)?,
    })
}

pub(crate) fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, ThreadError> {
    serde_json::to_vec(value)
        .map_err(|e| ThreadError::Store(StoreError::Io(format!("could not encode a record: {e}"))))
}

pub(crate) fn decode<T: for<'de> Deserialize<'de>>(
    key: &[u8],
    bytes: &[u8],
) -> Result<T, ThreadError> {
    serde_json::from_slice(bytes).map_err(|e| {
        ThreadError::Store(StoreError::Corrupt {
            key: String::from_utf8_lossy(key).replace('\0', "/"),
            detail: e.to_string(),
        })
    })
}

#[cfg(test)]
#[path = "threads_tests.rs"]
mod tests;
