//! The `Store` seam: an embedded key-value store (sled today, swappable) and what sits on it.
//!
//! The trait is deliberately small (get / put / delete / prefix scan / atomic batch / flush) so a
//! second backend (redb) is a few dozen lines; typed records live in concrete types on top.

#[cfg(test)]
mod conformance;
pub mod memory;
pub mod sled_store;
pub mod threads;

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::state::ThreadState;

/// The store's directory under the data dir (the CLI checks its lock to find a running daemon).
pub const STORE_DIR: &str = "store";

pub use memory::MemoryStore;
pub use sled_store::SledStore;
pub use threads::{ThreadRecord, ThreadStatus, ThreadStore};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("store I/O failed: {0}; check that the data directory is writable and not full")]
    Io(String),
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

/// Key/value pairs in key order, as returned by [`Store::scan_prefix`].
pub type KeyValues = Vec<(Vec<u8>, Vec<u8>)>;

/// Key-value storage in named trees. Implementations must make `apply_batch` atomic.
pub trait Store: Send + Sync {
    fn get(&self, tree: &str, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError>;
    fn put(&self, tree: &str, key: &[u8], value: &[u8]) -> Result<(), StoreError>;
    fn delete(&self, tree: &str, key: &[u8]) -> Result<(), StoreError>;
    /// All entries of `tree` whose key starts with `prefix`, in key order.
    fn scan_prefix(&self, tree: &str, prefix: &[u8]) -> Result<KeyValues, StoreError>;
    fn apply_batch(&self, ops: Vec<BatchOp>) -> Result<(), StoreError>;
    /// Makes every completed write durable.
    fn flush(&self) -> Result<(), StoreError>;
}

pub type StoreRef = Arc<dyn Store>;

/// The state of a thread after one completed step of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub thread_id: String,
    pub run_id: String,
    pub step: u64,
    pub state: ThreadState,
    pub created_at: chrono::DateTime<chrono::Utc>,
}

/// Where the agent loop persists its state after every step.
#[async_trait]
pub trait Checkpointer: Send + Sync {
    async fn save(&self, checkpoint: &Checkpoint) -> Result<(), StoreError>;
    async fn latest(&self, thread_id: &str) -> Result<Option<Checkpoint>, StoreError>;
}
