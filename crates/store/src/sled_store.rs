//! The sled-backed [`Store`]: one sled tree, logical trees as key prefixes.
//!
//! Every logical tree lives in one sled tree (`{tree}\0{key}`). Batches are applied key by key
//! behind a redo record ([`sled_batch`](crate::sled_batch)), atomically across a crash,
//! and behind the store's gate: writers one at a time, readers never in the middle of a batch
//! (what `sled::Batch` guarantees too, at the price of two synchronous log writes per batch).
//! Durability: sled buffers writes in memory and writes them out on `flush` or every
//! `flush_every_ms`; a SIGKILL loses what was not flushed yet, so callers that need a write to
//! survive a crash call [`Store::flush`] (the thread store does it in the background after
//! every checkpoint).

use std::path::{Path, PathBuf};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::sled_batch::{self, Write};
use crate::{BatchOp, Expect, KeyValues, Store, StoreError};

/// sled's own periodic flush; bounds what a crash loses when nobody flushes explicitly.
const FLUSH_EVERY_MS: u64 = 200;
const TREE_NAME: &str = "antler";
/// How long an open waits for a lock held by a store this process just closed.
const RELEASE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);
/// sled's page cache unless configured (`store.cache_capacity_mb`); sled's own default is 1 GiB.
/// 2 rather than 4: what a burst of new threads leaves in it pinned ~8 MiB more heap after the
/// burst, and the thread-state cache serves the threads read often.
pub const DEFAULT_CACHE_CAPACITY_MB: u64 = 2;

pub struct SledStore {
    db: sled::Db,
    data: sled::Tree,
    /// Writes exclusive, reads shared (a scan takes it per entry, like sled's own iterators):
    /// a batch is applied key by key, and its redo record must not be overtaken by another
    /// write (see [`sled_batch`]).
    gate: RwLock<()>,
}

impl SledStore {
    /// Opens (or creates) the store in directory `path` with the default page cache. Fails if
    /// another process holds it.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_with_cache(path, DEFAULT_CACHE_CAPACITY_MB)
    }

    /// Opens the store with a page cache of `cache_capacity_mb` MiB (what sled keeps of the
    /// tree in memory; the thread-state cache above it holds the folded threads).
    pub fn open_with_cache(
        path: impl AsRef<Path>,
        cache_capacity_mb: u64,
    ) -> Result<Self, StoreError> {
        let path = path.as_ref();
        let open_error = |e: &dyn std::fmt::Display| StoreError::Open {
            path: path.display().to_string(),
            detail: e.to_string(),
        };
        // sled finishes writing out buffers on its own threads after a `Db` is dropped, and
        // they hold its lock until then: a reopen right after a close waits for them briefly.
        let deadline = std::time::Instant::now() + RELEASE_WAIT;
        let db = loop {
            let opened = sled::Config::new()
                .path(path)
                .cache_capacity(cache_capacity_mb.max(1) * 1024 * 1024)
                .flush_every_ms(Some(FLUSH_EVERY_MS))
                .open();
            match opened {
                Ok(db) => break db,
                // The lock can be released between sled's attempt and our look at it, so
                // sled's own "could not acquire lock" counts as locked too.
                Err(e)
                    if (is_lock_error(&e) || is_locked(path))
                        && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(e) if is_lock_error(&e) || is_locked(path) => {
                    return Err(StoreError::Locked {
                        path: path.display().to_string(),
                    });
                }
                Err(e) => return Err(open_error(&e)),
            }
        };
        let data = db.open_tree(TREE_NAME).map_err(|e| open_error(&e))?;
        let replayed = sled_batch::recover(&data)?;
        if replayed > 0 {
            tracing::warn!(
                writes = replayed,
                "Completed a store batch that a crash had interrupted"
            );
        }
        Ok(Self {
            db,
            data,
            gate: RwLock::new(()),
        })
    }

    fn read(&self) -> RwLockReadGuard<'_, ()> {
        // The gate guards no data: a panic while it was held leaves nothing half-done that a
        // redo record would not complete.
        self.gate
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, ()> {
        self.gate
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The size of the store's files on disk, in bytes.
    pub fn size_on_disk(&self) -> Result<u64, StoreError> {
        self.db.size_on_disk().map_err(io)
    }
}

/// What [`compact`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompactReport {
    pub bytes_before: u64,
    pub bytes_after: u64,
    pub keys: u64,
}

/// Rewrites the store at `path` into a fresh one holding only live keys (sled reclaims the
/// space of deleted and overwritten values lazily; this gives it back at once), then swaps the
/// directories. Offline: fails with [`StoreError::Locked`] while a daemon holds the store. A
/// crash mid-way leaves the original in place (the copy is written beside it first).
pub fn compact(path: &Path, cache_capacity_mb: u64) -> Result<CompactReport, StoreError> {
    let copy_path = sibling(path, "compacting");
    let old_path = sibling(path, "before-compaction");
    let _ = std::fs::remove_dir_all(&copy_path);
    let (bytes_before, keys) = {
        let old = SledStore::open_with_cache(path, cache_capacity_mb)?;
        let copy = SledStore::open_with_cache(&copy_path, cache_capacity_mb)?;
        let bytes_before = old.size_on_disk()?;
        let mut keys = 0;
        for name in old.db.tree_names() {
            let from = old.db.open_tree(&name).map_err(io)?;
            let to = copy.db.open_tree(&name).map_err(io)?;
            let mut batch = sled::Batch::default();
            for entry in from.iter() {
                let (key, value) = entry.map_err(io)?;
                batch.insert(key, value);
                keys += 1;
                if keys % 10_000 == 0 {
                    to.apply_batch(std::mem::take(&mut batch)).map_err(io)?;
                }
            }
            to.apply_batch(batch).map_err(io)?;
        }
        copy.db.flush().map_err(io)?;
        (bytes_before, keys)
    };
    let rename = |from: &Path, to: &Path| {
        std::fs::rename(from, to).map_err(|e| {
            StoreError::Io(format!(
                "could not rename {} to {}: {e}",
                from.display(),
                to.display()
            ))
        })
    };
    let _ = std::fs::remove_dir_all(&old_path);
    rename(path, &old_path)?;
    rename(&copy_path, path)?;
    std::fs::remove_dir_all(&old_path)
        .map_err(|e| StoreError::Io(format!("could not remove {}: {e}", old_path.display())))?;
    let bytes_after = SledStore::open_with_cache(path, cache_capacity_mb)?.size_on_disk()?;
    Ok(CompactReport {
        bytes_before,
        bytes_after,
        keys,
    })
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{suffix}"));
    path.with_file_name(name)
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

/// sled reports a held lock only as an `Other` I/O error with this text.
fn is_lock_error(e: &sled::Error) -> bool {
    matches!(e, sled::Error::Io(io) if io.to_string().contains("could not acquire lock"))
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
        let _read = self.read();
        Ok(self
            .data
            .get(full_key(tree, key))
            .map_err(io)?
            .map(|v| v.to_vec()))
    }

    fn put(&self, tree: &str, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        let _write = self.write();
        self.data.insert(full_key(tree, key), value).map_err(io)?;
        Ok(())
    }

    fn delete(&self, tree: &str, key: &[u8]) -> Result<(), StoreError> {
        let _write = self.write();
        self.data.remove(full_key(tree, key)).map_err(io)?;
        Ok(())
    }

    fn scan_prefix(&self, tree: &str, prefix: &[u8]) -> Result<KeyValues, StoreError> {
        let strip = tree.len() + 1;
        let mut entries = self.data.scan_prefix(full_key(tree, prefix));
        let mut found = Vec::new();
        loop {
            let entry = {
                let _read = self.read();
                entries.next()
            };
            match entry {
                Some(entry) => {
                    let (k, v) = entry.map_err(io)?;
                    found.push((k[strip..].to_vec(), v.to_vec()));
                }
                None => return Ok(found),
            }
        }
    }

    fn apply_batch(&self, ops: Vec<BatchOp>) -> Result<(), StoreError> {
        let writes = full_writes(ops);
        let _write = self.write();
        sled_batch::apply(&self.data, &writes)
    }

    fn apply_batch_if(&self, expect: &Expect, ops: Vec<BatchOp>) -> Result<bool, StoreError> {
        let expect_key = full_key(expect.tree, &expect.key);
        let writes = full_writes(ops);
        // The check and the writes happen under one hold of the write gate: no other write of
        // this store (the only process that has it open) can come between them.
        let _write = self.write();
        let current = self.data.get(&expect_key).map_err(io)?;
        if current.as_deref() != expect.value.as_deref() {
            return Ok(false);
        }
        sled_batch::apply(&self.data, &writes)?;
        Ok(true)
    }

    fn flush(&self) -> Result<(), StoreError> {
        self.db.flush().map_err(io)?;
        Ok(())
    }

    fn trees(&self) -> Result<Vec<String>, StoreError> {
        // Keys are `{tree}\0{key}`: read the first key at or after `from`, take its tree, and
        // jump past the tree's keys (`{tree}\x01`), one seek per tree.
        let mut names = Vec::new();
        let mut from = vec![1u8];
        loop {
            let next = {
                let _read = self.read();
                self.data.range(from.as_slice()..).next()
            };
            let Some(entry) = next else {
                return Ok(names);
            };
            let (key, _) = entry.map_err(io)?;
            let Some(end) = key.iter().position(|&b| b == 0) else {
                return Err(StoreError::Corrupt {
                    key: String::from_utf8_lossy(&key).into_owned(),
                    detail: "a key without a tree name".into(),
                });
            };
            names.push(String::from_utf8_lossy(&key[..end]).into_owned());
            from = key[..end].to_vec();
            from.push(1);
        }
    }

    fn scan_page(
        &self,
        tree: &str,
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<KeyValues, StoreError> {
        use std::ops::Bound;
        let strip = tree.len() + 1;
        let start = match after {
            Some(after) => Bound::Excluded(full_key(tree, after)),
            None => Bound::Included(full_key(tree, b"")),
        };
        let mut end = tree.as_bytes().to_vec();
        end.push(1);
        let mut entries = self.data.range((start, Bound::Excluded(end)));
        let mut found = Vec::new();
        while found.len() < limit {
            let entry = {
                let _read = self.read();
                entries.next()
            };
            let Some(entry) = entry else { break };
            let (k, v) = entry.map_err(io)?;
            found.push((k[strip..].to_vec(), v.to_vec()));
        }
        Ok(found)
    }
}

fn full_writes(ops: Vec<BatchOp>) -> Vec<Write> {
    ops.into_iter()
        .map(|op| match op {
            BatchOp::Put { tree, key, value } => (full_key(tree, &key), Some(value)),
            BatchOp::Delete { tree, key } => (full_key(tree, &key), None),
        })
        .collect()
}

#[cfg(test)]
mod conformance {
    crate::store_conformance_tests!(crate::conformance::Fresh::sled);

    use std::sync::Arc;

    use serde_json::{Map, Value};

    use crate::StoreRef;
    use crate::conformance::threads::{open, turn};
    use crate::state::StateUpdate;
    use crate::test_fixtures::Driver;

    #[test]
    fn checkpoints_survive_a_reopen_of_sled() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store");
        let expected = {
            let store: StoreRef = Arc::new(crate::SledStore::open(&path).unwrap());
            let threads = open(&store);
            threads.create("u", Some("t".into()), Map::new()).unwrap();
            let mut driver = Driver::new(threads.clone(), "t");
            for n in 0..3 {
                turn(&mut driver, n);
            }
            driver.apply(StateUpdate {
                extra: [("date".to_string(), Value::String("2025-01-01".into()))].into(),
                ..Default::default()
            });
            driver.save().unwrap();
            threads.flush().unwrap();
            driver.state
        };
        let store: StoreRef = Arc::new(crate::SledStore::open(&path).unwrap());
        let threads = open(&store);
        assert_eq!(*threads.state("t").unwrap().unwrap().1, expected);
        assert_eq!(threads.list("u").unwrap().len(), 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn sleds_own_lock_refusal_is_recognised_as_a_held_lock() {
        let dir = tempfile::tempdir().unwrap();
        let _first = SledStore::open(dir.path()).unwrap();
        let Err(refused) = sled::Config::new().path(dir.path()).open() else {
            panic!("sled must refuse a second open");
        };
        assert!(is_lock_error(&refused), "{refused}");
        let other = sled::Error::Io(std::io::Error::other("disk full"));
        assert!(!is_lock_error(&other));
    }

    #[test]
    fn compaction_keeps_every_key_and_frees_deleted_space() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store");
        {
            let store = SledStore::open(&path).unwrap();
            let big = vec![7u8; 64 * 1024];
            for i in 0..200u32 {
                store.put("t", &i.to_be_bytes(), &big).unwrap();
            }
            for i in 0..190u32 {
                store.delete("t", &i.to_be_bytes()).unwrap();
            }
            store.put("other", b"k", b"v").unwrap();
            store.flush().unwrap();
        }
        let report = compact(&path, 4).unwrap();
        assert_eq!(report.keys, 11);
        assert!(report.bytes_after < report.bytes_before, "{report:?}");
        let store = SledStore::open(&path).unwrap();
        assert_eq!(store.scan_prefix("t", b"").unwrap().len(), 10);
        assert_eq!(
            store.get("other", b"k").unwrap().as_deref(),
            Some(&b"v"[..])
        );
        assert!(!sibling(&path, "compacting").exists());
        assert!(!sibling(&path, "before-compaction").exists());
    }

    #[test]
    fn an_open_completes_a_batch_a_crash_interrupted() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = SledStore::open(dir.path()).unwrap();
            let writes = full_writes(vec![
                BatchOp::Put {
                    tree: "log",
                    key: b"t1".to_vec(),
                    value: b"record".to_vec(),
                },
                BatchOp::Put {
                    tree: "heads",
                    key: b"t".to_vec(),
                    value: b"v2".to_vec(),
                },
            ]);
            // The redo record and the first write reached the disk, the head did not.
            store
                .data
                .insert(sled_batch::PENDING_BATCH, sled_batch::encode(&writes))
                .unwrap();
            store.put("log", b"t1", b"record").unwrap();
            store.flush().unwrap();
        }
        let store = SledStore::open(dir.path()).unwrap();
        assert_eq!(
            store.get("heads", b"t").unwrap().as_deref(),
            Some(&b"v2"[..])
        );
        assert_eq!(store.data.len(), 2, "the redo record is gone");
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
