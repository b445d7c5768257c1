//! An in-memory [`Store`] for tests, benches and embedded throwaway sessions.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use crate::{BatchOp, Expect, KeyValues, Store, StoreError};

type Trees = BTreeMap<String, BTreeMap<Vec<u8>, Vec<u8>>>;

/// Named `BTreeMap`s behind one lock; a batch is applied under that lock, hence atomically.
#[derive(Debug, Default)]
pub struct MemoryStore {
    trees: Mutex<Trees>,
}

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Trees> {
        // Nothing done under the lock can panic halfway through a batch (map inserts and removes
        // only), so the data behind a poisoned lock is still consistent.
        match self.trees.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

impl Store for MemoryStore {
    fn get(&self, tree: &str, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.lock().get(tree).and_then(|t| t.get(key)).cloned())
    }

    fn put(&self, tree: &str, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        self.lock()
            .entry(tree.to_string())
            .or_default()
            .insert(key.to_vec(), value.to_vec());
        Ok(())
    }

    fn delete(&self, tree: &str, key: &[u8]) -> Result<(), StoreError> {
        if let Some(t) = self.lock().get_mut(tree) {
            t.remove(key);
        }
        Ok(())
    }

    fn scan_prefix(&self, tree: &str, prefix: &[u8]) -> Result<KeyValues, StoreError> {
        let trees = self.lock();
        let Some(t) = trees.get(tree) else {
            return Ok(Vec::new());
        };
        Ok(t.range(prefix.to_vec()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }

    fn apply_batch(&self, ops: Vec<BatchOp>) -> Result<(), StoreError> {
        apply(&mut self.lock(), ops);
        Ok(())
    }

    fn apply_batch_if(&self, expect: &Expect, ops: Vec<BatchOp>) -> Result<bool, StoreError> {
        let mut trees = self.lock();
        let current = trees.get(expect.tree).and_then(|t| t.get(&expect.key));
        if current != expect.value.as_ref() {
            return Ok(false);
        }
        apply(&mut trees, ops);
        Ok(true)
    }

    fn flush(&self) -> Result<(), StoreError> {
        Ok(())
    }

    fn trees(&self) -> Result<Vec<String>, StoreError> {
        Ok(self
            .lock()
            .iter()
            .filter(|(_, t)| !t.is_empty())
            .map(|(name, _)| name.clone())
            .collect())
    }

    fn scan_page(
        &self,
        tree: &str,
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<KeyValues, StoreError> {
        use std::ops::Bound;
        let trees = self.lock();
        let Some(t) = trees.get(tree) else {
            return Ok(Vec::new());
        };
        let start = match after {
            Some(after) => Bound::Excluded(after.to_vec()),
            None => Bound::Unbounded,
        };
        Ok(t.range((start, Bound::Unbounded))
            .take(limit)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }
}

fn apply(trees: &mut Trees, ops: Vec<BatchOp>) {
    for op in ops {
        match op {
            BatchOp::Put { tree, key, value } => {
                trees
                    .entry(tree.to_string())
                    .or_default()
                    .insert(key, value);
            }
            BatchOp::Delete { tree, key } => {
                if let Some(t) = trees.get_mut(tree) {
                    t.remove(&key);
                }
            }
        }
    }
}

#[cfg(test)]
mod conformance {
    crate::store_conformance_tests!(crate::conformance::Fresh::memory);

    #[test]
    fn run_all_runs_every_story() {
        crate::conformance::run_all(&crate::conformance::Fresh::memory);
    }
}
