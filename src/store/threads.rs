//! Thread records, the per-user thread index and checkpoints, on top of any [`Store`].
//!
//! Layout (logical trees of the store, values are JSON):
//! - `threads`: `{thread_id}` → [`ThreadRecord`]
//! - `user_threads`: `{user_id}\0{thread_id}` → empty (the per-user index)
//! - `checkpoints`: `{thread_id}\0{seq:020}` → [`Checkpoint`]; only the newest
//!   [`KEPT_CHECKPOINTS`] per thread are kept so a long thread does not grow without bound.
//!
//! A checkpoint and the record change it implies (`updated_at`, `title`, the checkpoint
//! sequence) are written in one atomic batch. Durability: each checkpoint wakes a background
//! flusher thread, so the loop never waits for an fsync yet a crash loses at most the
//! checkpoint whose flush was in flight (instead of sled's whole periodic-flush window).

use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::store::{BatchOp, Checkpoint, Checkpointer, StoreError, StoreRef};

/// Checkpoints kept per thread; older ones are deleted when a new one is written.
pub const KEPT_CHECKPOINTS: u64 = 3;

const THREADS: &str = "threads";
const USER_THREADS: &str = "user_threads";
const CHECKPOINTS: &str = "checkpoints";
const MAX_THREAD_ID_LEN: usize = 256;

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
    /// Sequence number of the newest checkpoint (0 = none yet).
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
    inner: Arc<Inner>,
}

struct Inner {
    store: StoreRef,
    /// Serialises read-modify-write of records (short, never held across `.await`).
    records: Mutex<()>,
    flusher: Flusher,
}

impl ThreadStore {
    pub fn new(store: StoreRef) -> Self {
        let flusher = Flusher::start(store.clone());
        Self {
            inner: Arc::new(Inner {
                store,
                records: Mutex::new(()),
                flusher,
            }),
        }
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

    /// Removes the record, its index entry and every checkpoint. `false` if there was none.
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
        ];
        for (key, _) in self
            .inner
            .store
            .scan_prefix(CHECKPOINTS, &checkpoint_prefix(thread_id))?
        {
            ops.push(BatchOp::Delete {
                tree: CHECKPOINTS,
                key,
            });
        }
        self.inner.store.apply_batch(ops)?;
        Ok(true)
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
    pub fn update(
        &self,
        thread_id: &str,
        change: impl FnOnce(&mut ThreadRecord),
    ) -> Result<ThreadRecord, ThreadError> {
        let _guard = self.lock();
        let mut record = self
            .read_record(thread_id)?
            .ok_or_else(|| ThreadError::NotFound {
                thread_id: thread_id.to_string(),
            })?;
        change(&mut record);
        record.updated_at = Utc::now();
        self.inner.store.apply_batch(vec![put_record(&record)?])?;
        Ok(record)
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

    fn lock(&self) -> MutexGuard<'_, ()> {
        match self.inner.records.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    fn read_record(&self, thread_id: &str) -> Result<Option<ThreadRecord>, ThreadError> {
        match self.inner.store.get(THREADS, thread_id.as_bytes())? {
            Some(bytes) => Ok(Some(decode(thread_id.as_bytes(), &bytes)?)),
            None => Ok(None),
        }
    }

    fn save_checkpoint(&self, checkpoint: &Checkpoint) -> Result<(), ThreadError> {
        let thread_id = checkpoint.thread_id.as_str();
        let value = encode(checkpoint)?;
        let _guard = self.lock();
        let mut record = self
            .read_record(thread_id)?
            .unwrap_or_else(|| ThreadRecord {
                thread_id: thread_id.to_string(),
                user_id: String::new(),
                created_at: checkpoint.created_at,
                updated_at: checkpoint.created_at,
                status: ThreadStatus::Idle,
                title: None,
                metadata: Map::new(),
                agent_name: None,
                last_checkpoint: 0,
            });
        record.last_checkpoint += 1;
        record.updated_at = checkpoint.created_at;
        if checkpoint.state.title.is_some() {
            record.title = checkpoint.state.title.clone();
        }
        let seq = record.last_checkpoint;
        let mut ops = vec![
            BatchOp::Put {
                tree: CHECKPOINTS,
                key: checkpoint_key(thread_id, seq),
                value,
            },
            put_record(&record)?,
        ];
        if seq > KEPT_CHECKPOINTS {
            ops.push(BatchOp::Delete {
                tree: CHECKPOINTS,
                key: checkpoint_key(thread_id, seq - KEPT_CHECKPOINTS),
            });
        }
        self.inner.store.apply_batch(ops)?;
        drop(_guard);
        self.inner.flusher.request();
        Ok(())
    }

    fn latest_checkpoint(&self, thread_id: &str) -> Result<Option<Checkpoint>, ThreadError> {
        let Some(record) = self.read_record(thread_id)? else {
            return Ok(None);
        };
        if record.last_checkpoint == 0 {
            return Ok(None);
        }
        let key = checkpoint_key(thread_id, record.last_checkpoint);
        match self.inner.store.get(CHECKPOINTS, &key)? {
            Some(bytes) => Ok(Some(decode(&key, &bytes)?)),
            None => Ok(None),
        }
    }
}

#[async_trait]
impl Checkpointer for ThreadStore {
    async fn save(&self, checkpoint: &Checkpoint) -> Result<(), StoreError> {
        self.save_checkpoint(checkpoint).map_err(into_store_error)
    }

    async fn latest(&self, thread_id: &str) -> Result<Option<Checkpoint>, StoreError> {
        self.latest_checkpoint(thread_id).map_err(into_store_error)
    }
}

fn into_store_error(error: ThreadError) -> StoreError {
    match error {
        ThreadError::Store(e) => e,
        other => StoreError::Io(other.to_string()),
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

fn index_key(user_id: &str, thread_id: &str) -> Vec<u8> {
    format!("{user_id}\0{thread_id}").into_bytes()
}

fn checkpoint_prefix(thread_id: &str) -> Vec<u8> {
    format!("{thread_id}\0").into_bytes()
}

fn checkpoint_key(thread_id: &str, seq: u64) -> Vec<u8> {
    format!("{thread_id}\0{seq:020}").into_bytes()
}

fn put_record(record: &ThreadRecord) -> Result<BatchOp, ThreadError> {
    Ok(BatchOp::Put {
        tree: THREADS,
        key: record.thread_id.as_bytes().to_vec(),
        value: encode(record)?,
    })
}

fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, ThreadError> {
    serde_json::to_vec(value)
        .map_err(|e| ThreadError::Store(StoreError::Io(format!("could not encode a record: {e}"))))
}

fn decode<T: for<'de> Deserialize<'de>>(key: &[u8], bytes: &[u8]) -> Result<T, ThreadError> {
    serde_json::from_slice(bytes).map_err(|e| {
        ThreadError::Store(StoreError::Corrupt {
            key: String::from_utf8_lossy(key).replace('\0', "/"),
            detail: e.to_string(),
        })
    })
}

/// How long the flusher waits for more checkpoints before one flush covers them all.
const GROUP_COMMIT_WINDOW: Duration = Duration::from_millis(5);

/// Flushes the store on a background thread whenever a checkpoint was written, coalescing
/// requests that arrive while a flush is running.
struct Flusher {
    wake: Option<SyncSender<()>>,
    thread: Option<JoinHandle<()>>,
    progress: Arc<(Mutex<FlushProgress>, Condvar)>,
}

#[derive(Default)]
struct FlushProgress {
    requested: u64,
    durable: u64,
}

impl Flusher {
    fn start(store: StoreRef) -> Self {
        let (wake, wakeups) = sync_channel(1);
        let progress: Arc<(Mutex<FlushProgress>, Condvar)> = Arc::default();
        let shared = progress.clone();
        let thread = std::thread::Builder::new()
            .name("antler-store-flush".into())
            .spawn(move || flush_loop(&store, &wakeups, &shared))
            .ok();
        Self {
            wake: thread.as_ref().map(|_| wake),
            thread,
            progress,
        }
    }

    fn request(&self) {
        if let Ok(mut progress) = self.progress.0.lock() {
            progress.requested += 1;
        }
        if let Some(wake) = &self.wake {
            // A full channel means a wake-up is already pending, which covers this request.
            if let Err(TrySendError::Disconnected(())) = wake.try_send(()) {
                tracing::warn!("store flusher stopped; checkpoints rely on the periodic flush");
            }
        }
    }

    fn wait_durable(&self, timeout: Duration) -> bool {
        let (lock, changed) = &*self.progress;
        let deadline = Instant::now() + timeout;
        let Ok(mut progress) = lock.lock() else {
            return false;
        };
        let target = progress.requested;
        while progress.durable < target {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            progress = match changed.wait_timeout(progress, left) {
                Ok((guard, _)) => guard,
                Err(_) => return false,
            };
        }
        true
    }
}

fn flush_loop(
    store: &StoreRef,
    wakeups: &Receiver<()>,
    progress: &(Mutex<FlushProgress>, Condvar),
) {
    while wakeups.recv().is_ok() {
        // Group commit: checkpoints written within the window share one flush (an fsync per
        // checkpoint would cost more CPU than the whole turn); a crash loses at most this window.
        std::thread::sleep(GROUP_COMMIT_WINDOW);
        let target = progress.0.lock().map(|p| p.requested).unwrap_or(0);
        if let Err(error) = store.flush() {
            tracing::warn!(%error, "Background checkpoint flush failed");
            continue;
        }
        if let Ok(mut p) = progress.0.lock() {
            p.durable = p.durable.max(target);
        }
        progress.1.notify_all();
    }
}

impl Drop for Flusher {
    fn drop(&mut self) {
        // Closing the channel ends the loop; joining releases its store handle before a reopen.
        self.wake.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
#[path = "threads_tests.rs"]
mod tests;
