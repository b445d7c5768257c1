//! Antler's persistence layer: the messages of a conversation ([`messages`]), a thread's state
//! and its changes ([`state`]), the bounded LRU the caches share ([`lru`]), the virtual paths
//! a state records ([`virtual_paths`]), and the `Store` seam with what sits on it (below).
//! Nothing here knows about agents, chats or the config tree.
//!
//! The `Store` seam: an embedded key-value store (sled today, swappable) and what sits on it.
//!
//! The trait is deliberately small and shaped like what PostgreSQL gives natively: point reads
//! and writes, ordered scans of a key prefix (one thread's log), atomic multi-key batches (a
//! transaction), and a batch applied only if one key still holds an expected value
//! (compare-and-set on a thread's head, `UPDATE … WHERE value = $old` in one transaction).
//! Nothing here relies on being the only process using the store. Typed records live on top:
//! [`threads`] (records and the per-user index), [`log`] (the checkpoint log format),
//! [`checkpoints`] (saving and folding), [`migrate`] and [`maintenance`].

// Tests own their tasks through the test runtime, which ends them with the test.
#![cfg_attr(test, allow(clippy::disallowed_methods))]

mod checkpoints;
#[cfg(test)]
mod checkpoints_tests;
// The conformance stories and their fixtures are test code other backends' tests run: they
// assert by unwrapping, as tests do.
#[cfg(any(test, feature = "conformance"))]
#[allow(clippy::unwrap_used, clippy::expect_used)]
pub mod conformance;
mod flusher;
pub mod lease;
pub mod log;
pub mod lru;
pub mod maintenance;
pub mod memory;
pub mod messages;
mod migrate;
mod sled_batch;
pub mod sled_store;
pub mod state;
mod state_cache;
#[cfg(any(test, feature = "conformance"))]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod test_fixtures;
pub mod threads;
pub mod virtual_paths;

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::state::{StateChanges, ThreadState};

/// The store's directory under the data dir (the CLI checks its lock to find a running daemon).
pub const STORE_DIR: &str = "store";

/// The logical trees of the thread store (see ARCHITECTURE.md, "Storage").
pub(crate) mod trees {
    pub(crate) const THREADS: &str = "threads";
    pub(crate) const USER_THREADS: &str = "user_threads";
    /// Full-state checkpoints of data dirs written before the log, converted at open.
    pub(crate) const LEGACY_CHECKPOINTS: &str = "checkpoints";
    pub(crate) const META: &str = "meta";
}

pub use memory::MemoryStore;
pub use sled_store::SledStore;
pub use threads::{ThreadRecord, ThreadStatus, ThreadStore};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("store I/O failed: {0}; check that the data directory is writable and not full")]
    Io(String),
    /// A checkpoint found the thread's head changed under it (another writer, another process).
    #[error(
        "thread {thread_id} was changed by another writer while this run saved it; run again \
         to continue from the stored state"
    )]
    Conflict { thread_id: String },
    #[error("stored record {key} is corrupt: {detail}")]
    Corrupt { key: String, detail: String },
    #[error(
        "could not open the store at {path}: {detail}; is another antler process using this data_dir?"
    )]
    Open { path: String, detail: String },
    /// Another process (a running daemon, usually) holds the store's lock.
    #[error(
        "the store at {path} is locked by another process, most likely an antler daemon using \
         this data_dir; stop it first, or let `antler chat`, `agents` and `status` talk to it"
    )]
    Locked { path: String },
    /// The database of a shared backend failed or refused (unreachable, a schema newer than
    /// this binary, a query error); the message says what to do.
    #[error("{0}")]
    Backend(String),
}

/// One write in an atomic batch.
#[derive(Clone, Debug)]
pub enum BatchOp {
    Put {
        tree: &'static str,
        key: Vec<u8>,
        value: Vec<u8>,
    },
    Delete {
        tree: &'static str,
        key: Vec<u8>,
    },
}

/// The condition of [`Store::apply_batch_if`]: `key` of `tree` holds exactly `value`
/// (`None`: the key is absent).
#[derive(Clone, Debug)]
pub struct Expect {
    pub tree: &'static str,
    pub key: Vec<u8>,
    pub value: Option<Vec<u8>>,
}

/// Key/value pairs in key order, as returned by [`Store::scan_prefix`].
pub type KeyValues = Vec<(Vec<u8>, Vec<u8>)>;

/// Key-value storage in named trees. Implementations must make `apply_batch` and
/// `apply_batch_if` atomic: after a crash or an error, either every op of a batch is visible
/// or none is.
pub trait Store: Send + Sync {
    fn get(&self, tree: &str, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError>;
    fn put(&self, tree: &str, key: &[u8], value: &[u8]) -> Result<(), StoreError>;
    fn delete(&self, tree: &str, key: &[u8]) -> Result<(), StoreError>;
    /// All entries of `tree` whose key starts with `prefix`, in key order.
    fn scan_prefix(&self, tree: &str, prefix: &[u8]) -> Result<KeyValues, StoreError>;
    fn apply_batch(&self, ops: Vec<BatchOp>) -> Result<(), StoreError>;
    /// Applies `ops` atomically if, at that moment, `expect` holds; `Ok(false)` (and nothing
    /// written) if it does not.
    fn apply_batch_if(&self, expect: &Expect, ops: Vec<BatchOp>) -> Result<bool, StoreError>;
    /// Makes every completed write durable.
    fn flush(&self) -> Result<(), StoreError>;
    /// The names of the trees that hold at least one key, in byte order (what `antler store
    /// copy` and `stats` walk). Every backend lists them; the default is for wrappers in tests.
    fn trees(&self) -> Result<Vec<String>, StoreError> {
        Err(StoreError::Backend(
            "this store cannot list its trees; use the sled or postgres backend".into(),
        ))
    }
    /// Up to `limit` entries of `tree` with keys after `after` (from the first key if `None`),
    /// in key order: a whole tree read a page at a time, however large. The default reads the
    /// whole tree for each page; backends answer it with a bounded range read.
    fn scan_page(
        &self,
        tree: &str,
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<KeyValues, StoreError> {
        Ok(self
            .scan_prefix(tree, b"")?
            .into_iter()
            .filter(|(key, _)| after.is_none_or(|after| key.as_slice() > after))
            .take(limit)
            .collect())
    }
    /// Whether other processes may write this store at the same time (a database several
    /// daemons share): then what a process caches of it must be checked against it before use.
    fn is_shared(&self) -> bool {
        false
    }
}

pub type StoreRef = Arc<dyn Store>;

/// The state of a thread after one completed step of a run, as read back.
///
/// Its JSON form is also the record format of data dirs written before the checkpoint log
/// (a full state per checkpoint), which [`migrate`] reads.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub thread_id: String,
    pub run_id: String,
    pub step: u64,
    pub state: ThreadState,
    pub created_at: chrono::DateTime<chrono::Utc>,
}

/// One completed step as the loop hands it over: the state after the step, borrowed (the loop
/// never copies the history to save it), and which messages it touched since the last save.
#[derive(Clone, Copy, Debug)]
pub struct StepCheckpoint<'a> {
    pub thread_id: &'a str,
    pub run_id: &'a str,
    pub step: u64,
    pub state: &'a ThreadState,
    pub changes: &'a StateChanges,
}

/// Where the agent loop persists its state after every step.
///
/// `save` is given the state the thread had at its previous save plus the recorded updates;
/// an implementation may store only the difference. A run therefore starts from the state
/// `latest` returns (or an empty one for a new thread).
#[async_trait]
pub trait Checkpointer: Send + Sync {
    async fn save(&self, checkpoint: StepCheckpoint<'_>) -> Result<u64, StoreError>;
    async fn latest(&self, thread_id: &str) -> Result<Option<Checkpoint>, StoreError>;

    /// Names the thread in its record (a generated title, arriving after the run's answer).
    /// A checkpointer without thread records keeps only the state's title: nothing to do.
    async fn rename(&self, thread_id: &str, title: &str) -> Result<(), StoreError> {
        let _ = (thread_id, title);
        Ok(())
    }
}
