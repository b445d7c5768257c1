//! The sled-backed [`Store`]: one sled tree, logical trees as key prefixes.
//!
//! Keeping every logical tree in one sled tree (`{tree}\0{key}`) makes `apply_batch` a single
//! `sled::Batch`, which sled applies atomically — a checkpoint and its thread record can never
//! be half-written. Durability: sled buffers writes in memory and writes them out on `flush` or
//! every `flush_every_ms`; a SIGKILL loses what was not flushed yet, so callers that need a
//! write to survive a crash call [`Store::flush`] (the thread store does it in the background
//! after every checkpoint).

use std::path::Path;

use crate::store::{BatchOp, KeyValues, Store, StoreError};

/// sled's own periodic flush; bounds what a crash loses when nobody flushes explicitly.
const FLUSH_EVERY_MS: u64 = 200;
const TREE_NAME: &str = "antler";

pub struct SledStore {
    db: sled::Db,
    data: sled::Tree,
}

impl SledStore {
    /// Opens (or creates) the store in directory `path`. Fails if another process holds it.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let path = path.as_ref();
        let open_error = |e: &dyn std::fmt::Display| StoreError::Open {
            path: path.display().to_string(),
            detail: e.to_string(),
        };
        let db = sled::Config::new()
            .path(path)
            .flush_every_ms(Some(FLUSH_EVERY_MS))
            .open()
            .map_err(|e| {
                if is_locked(path) {
                    StoreError::Locked {
                        path: path.display().to_string(),
                    }
                } else {
                    open_error(&e)
                }
            })?;
        let data = db.open_tree(TREE_NAME).map_err(|e| open_error(&e))?;
        Ok(Self { db, data })
    }
}

/// Whether another open file holds the store's lock (sled takes an exclusive `flock` on
/// `{path}/db`), without opening the store. A missing store is not locked.
pub fn is_locked(path: &Path) -> bool {
    let Ok(file) = std::fs::File::open(path.join("db")) else {
        return false;
    };
    // A lock we get is released when `file` is dropped at the end of this function.
    matches!(file.try_lock(), Err(std::fs::TryLockError::WouldBlock))
}

fn full_key(tree: &str, key: &[u8]) -> Vec<u8> {
    let mut full = Vec::with_capacity(tree.len() + 1 + key.len());
    full.extend_from_slice(tree.as_bytes());
    full.push(0);
    full.extend_from_slice(key);
    full
}

fn io(e: sled::Error) -> StoreError {
    StoreError::Io(e.to_string())
}

impl Store for SledStore {
    fn get(&self, tree: &str, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self
            .data
            .get(full_key(tree, key))
            .map_err(io)?
            .map(|v| v.to_vec()))
    }

    fn put(&self, tree: &str, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        self.data.insert(full_key(tree, key), value).map_err(io)?;
        Ok(())
    }

    fn delete(&self, tree: &str, key: &[u8]) -> Result<(), StoreError> {
        self.data.remove(full_key(tree, key)).map_err(io)?;
        Ok(())
    }

    fn scan_prefix(&self, tree: &str, prefix: &[u8]) -> Result<KeyValues, StoreError> {
        let strip = tree.len() + 1;
        self.data
            .scan_prefix(full_key(tree, prefix))
            .map(|entry| {
                let (k, v) = entry.map_err(io)?;
                Ok((k[strip..].to_vec(), v.to_vec()))
            })
            .collect()
    }

    fn apply_batch(&self, ops: Vec<BatchOp>) -> Result<(), StoreError> {
        let mut batch = sled::Batch::default();
        for op in ops {
            match op {
                BatchOp::Put { tree, key, value } => batch.insert(full_key(tree, &key), value),
                BatchOp::Delete { tree, key } => batch.remove(full_key(tree, &key)),
            }
        }
        self.data.apply_batch(batch).map_err(io)
    }

    fn flush(&self) -> Result<(), StoreError> {
        self.db.flush().map_err(io)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sled_store_passes_the_conformance_suite() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(dir.path().join("store")).unwrap();
        crate::store::conformance::run_all(&store);
    }

    #[test]
    fn a_second_open_of_the_same_directory_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let _first = SledStore::open(dir.path()).unwrap();
        let Err(err) = SledStore::open(dir.path()) else {
            panic!("a second open must fail");
        };
        assert!(matches!(err, StoreError::Locked { .. }), "{err}");
        assert!(is_locked(dir.path()));
        drop(_first);
        assert!(!is_locked(dir.path()));
        assert!(!is_locked(&dir.path().join("missing")));
    }

    #[test]
    fn writes_survive_close_and_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = SledStore::open(dir.path()).unwrap();
            store.put("t", b"k", b"v").unwrap();
            store.flush().unwrap();
        }
        let store = SledStore::open(dir.path()).unwrap();
        assert_eq!(store.get("t", b"k").unwrap().as_deref(), Some(&b"v"[..]));
    }
}
