//! Test helpers for the thread-store conformance story: a data dir in the layout before the
//! checkpoint log, a store that fails or records batches on demand, and a driver that applies
//! updates the way the agent loop does.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use chrono::Utc;
use serde_json::Map;

use crate::state::{StateChanges, StateUpdate, ThreadState};
use crate::threads::{ThreadError, ThreadRecord, ThreadStatus, index_key};
use crate::{
    BatchOp, Checkpoint, Expect, KeyValues, StepCheckpoint, Store, StoreError, StoreRef,
    ThreadStore,
};

/// Every backend, fresh: (name, store, the directory that must outlive a sled store).
#[cfg(test)]
pub(crate) fn backends() -> Vec<(&'static str, StoreRef, Option<tempfile::TempDir>)> {
    let dir = tempfile::tempdir().unwrap();
    let sled: StoreRef = Arc::new(crate::SledStore::open(dir.path().join("store")).unwrap());
    vec![
        ("memory", Arc::new(crate::MemoryStore::new()), None),
        ("sled", sled, Some(dir)),
    ]
}

/// Writes a thread exactly as the thread store did before the checkpoint log: the record and
/// index as `create` wrote them, then one `save_checkpoint` per state (a full `Checkpoint` under
/// `checkpoints/{thread}\0{seq:020}`, the record's `last_checkpoint` bumped, the newest three
/// kept).
pub(crate) fn write_legacy_thread(
    store: &dyn Store,
    user_id: &str,
    thread_id: &str,
    states: &[ThreadState],
) {
    const KEPT_CHECKPOINTS: u64 = 3;
    let now = Utc::now();
    let mut record = ThreadRecord {
        thread_id: thread_id.to_string(),
        user_id: user_id.to_string(),
        created_at: now,
        updated_at: now,
        status: ThreadStatus::Idle,
        title: None,
        metadata: Map::new(),
        agent_name: None,
        last_checkpoint: 0,
    };
    let put_record = |record: &ThreadRecord| BatchOp::Put {
        tree: "threads",
        key: record.thread_id.as_bytes().to_vec(),
        value: serde_json::to_vec(record).unwrap(),
    };
    store
        .apply_batch(vec![
            put_record(&record),
            BatchOp::Put {
                tree: "user_threads",
                key: index_key(user_id, thread_id),
                value: Vec::new(),
            },
        ])
        .unwrap();
    let key = |seq: u64| format!("{thread_id}\0{seq:020}").into_bytes();
    for (step, state) in states.iter().enumerate() {
        let checkpoint = Checkpoint {
            thread_id: thread_id.to_string(),
            run_id: "legacy-run".into(),
            step: step as u64,
            state: state.clone(),
            created_at: now,
        };
        record.last_checkpoint += 1;
        record.updated_at = now;
        if state.title.is_some() {
            record.title.clone_from(&state.title);
        }
        let seq = record.last_checkpoint;
        let mut ops = vec![
            BatchOp::Put {
                tree: "checkpoints",
                key: key(seq),
                value: serde_json::to_vec(&checkpoint).unwrap(),
            },
            put_record(&record),
        ];
        if seq > KEPT_CHECKPOINTS {
            ops.push(BatchOp::Delete {
                tree: "checkpoints",
                key: key(seq - KEPT_CHECKPOINTS),
            });
        }
        store.apply_batch(ops).unwrap();
    }
    store.flush().unwrap();
}

/// A store that can be told to fail its next conditional batch (before anything is applied,
/// as a crash before the commit would), and that records the bytes each one writes.
pub(crate) struct FlakyStore {
    inner: StoreRef,
    fail_next: AtomicBool,
    written: Mutex<Vec<usize>>,
}

impl FlakyStore {
    pub(crate) fn new(inner: StoreRef) -> Arc<Self> {
        Arc::new(Self {
            inner,
            fail_next: AtomicBool::new(false),
            written: Mutex::new(Vec::new()),
        })
    }

    pub(crate) fn fail_next_batch(&self) {
        self.fail_next.store(true, Ordering::SeqCst);
    }

    /// Keys and values written by the last conditional batch.
    pub(crate) fn last_batch_bytes(&self) -> usize {
        self.written.lock().unwrap().last().copied().unwrap_or(0)
    }
}

impl Store for FlakyStore {
    fn get(&self, tree: &str, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        self.inner.get(tree, key)
    }
    fn put(&self, tree: &str, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        self.inner.put(tree, key, value)
    }
    fn delete(&self, tree: &str, key: &[u8]) -> Result<(), StoreError> {
        self.inner.delete(tree, key)
    }
    fn scan_prefix(&self, tree: &str, prefix: &[u8]) -> Result<KeyValues, StoreError> {
        self.inner.scan_prefix(tree, prefix)
    }
    fn apply_batch(&self, ops: Vec<BatchOp>) -> Result<(), StoreError> {
        self.inner.apply_batch(ops)
    }
    fn apply_batch_if(&self, expect: &Expect, ops: Vec<BatchOp>) -> Result<bool, StoreError> {
        if self.fail_next.swap(false, Ordering::SeqCst) {
            return Err(StoreError::Io("injected failure before the commit".into()));
        }
        let bytes = ops
            .iter()
            .map(|op| match op {
                BatchOp::Put { key, value, .. } => key.len() + value.len(),
                BatchOp::Delete { key, .. } => key.len(),
            })
            .sum();
        self.written.lock().unwrap().push(bytes);
        self.inner.apply_batch_if(expect, ops)
    }
    fn flush(&self) -> Result<(), StoreError> {
        self.inner.flush()
    }
}

/// Applies updates to a thread's state and checkpoints it, as the agent loop does.
pub(crate) struct Driver {
    pub(crate) threads: ThreadStore,
    pub(crate) thread_id: String,
    pub(crate) state: ThreadState,
    changes: StateChanges,
    step: u64,
}

impl Driver {
    pub(crate) fn new(threads: ThreadStore, thread_id: &str) -> Self {
        Self {
            threads,
            thread_id: thread_id.to_string(),
            state: ThreadState::default(),
            changes: StateChanges::new(),
            step: 0,
        }
    }

    /// Continues a thread from what the store returns for it.
    pub(crate) fn resume(threads: ThreadStore, thread_id: &str) -> Self {
        let state = threads
            .state(thread_id)
            .unwrap()
            .map(|(_, state)| (*state).clone())
            .unwrap_or_default();
        Self {
            state,
            ..Self::new(threads, thread_id)
        }
    }

    pub(crate) fn apply(&mut self, update: StateUpdate) {
        self.changes.record(&update);
        self.state.apply(update).unwrap();
    }

    pub(crate) fn save(&mut self) -> Result<(), ThreadError> {
        self.step += 1;
        self.threads.save_step(StepCheckpoint {
            thread_id: &self.thread_id,
            run_id: "run",
            step: self.step,
            state: &self.state,
            changes: &self.changes,
        })?;
        self.changes.clear();
        Ok(())
    }

    /// The cached read and a cold fold (a second thread store on the same backend) both give
    /// back exactly the driver's state.
    pub(crate) fn assert_reads_back(&self, store: &StoreRef, context: &str) {
        let (_, cached) = self.threads.state(&self.thread_id).unwrap().unwrap();
        assert_eq!(*cached, self.state, "{context}: cached state");
        let cold = ThreadStore::new(store.clone()).unwrap();
        let (head, folded) = cold.state(&self.thread_id).unwrap().unwrap();
        assert_eq!(*folded, self.state, "{context}: folded state");
        assert_eq!(head.messages, self.state.messages.len() as u64, "{context}");
    }
}
