//! `antler store copy --to postgres://…`: moves a stopped sled data dir's store into a
//! PostgreSQL database, tree by tree, a page at a time.
//!
//! Idempotent: a first pass compares the source with the target and refuses, before writing
//! anything, if the target holds a key the source lacks or a different value under the same
//! key (another install's data, or one that ran on PostgreSQL since the last copy); keys already
//! copied are left as they are. Then the missing keys are written and every tree's count is
//! checked on both sides.

use std::collections::VecDeque;
use std::fmt;

use antler_store::{BatchOp, Store, StoreError};

/// Entries read (and written) per round trip.
const PAGE: usize = 500;

/// What a copy found and did, per tree.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct CopyReport {
    /// (tree, keys in the source, keys written now).
    pub trees: Vec<(String, u64, u64)>,
}

impl fmt::Display for CopyReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{:<24} {:>10} {:>10}", "tree", "keys", "copied now")?;
        for (tree, keys, written) in &self.trees {
            writeln!(f, "{tree:<24} {keys:>10} {written:>10}")?;
        }
        let total: u64 = self.trees.iter().map(|(_, keys, _)| keys).sum();
        let written: u64 = self.trees.iter().map(|(_, _, written)| written).sum();
        write!(
            f,
            "{:<24} {total:>10} {written:>10}\nevery tree's count verified in the target",
            "total"
        )
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(
        "the target database already holds data that differs from this data dir's store \
         ({differing} keys, e.g. {example}); copy into an empty database (CREATE DATABASE a new \
         one and point --to at it), or drop the other data first if it is not needed"
    )]
    TargetDiffers { differing: u64, example: String },
    #[error(
        "after copying, tree {tree} holds {target} keys in the target but {in_source} in the \
         source; something else is writing the target: stop it and copy again"
    )]
    CountMismatch {
        tree: String,
        in_source: u64,
        target: u64,
    },
}

/// Copies every tree of `source` into `target` (see the module doc).
pub fn copy(source: &dyn Store, target: &dyn Store) -> Result<CopyReport, CopyError> {
    let source_trees = source.trees()?;
    let mut trees: Vec<String> = source_trees.clone();
    for tree in target.trees()? {
        if !trees.contains(&tree) {
            trees.push(tree);
        }
    }
    // Pass 1: compare, write nothing.
    let mut differing = 0;
    let mut example = None;
    for tree in &trees {
        merge(source, target, tree, |key, source_value, target_value| {
            if target_value.is_some() && source_value != target_value {
                differing += 1;
                example.get_or_insert_with(|| describe(tree, key));
            }
            Ok(())
        })?;
    }
    if let Some(example) = example {
        return Err(CopyError::TargetDiffers { differing, example });
    }
    // Pass 2: write what is missing, a page per batch.
    let mut report = CopyReport::default();
    for tree in &source_trees {
        let name: &'static str = tree_name(tree);
        let mut pending = Vec::new();
        let (mut keys, mut written) = (0, 0);
        merge(source, target, tree, |key, source_value, target_value| {
            if let Some(value) = source_value {
                keys += 1;
                if target_value.is_none() {
                    pending.push(BatchOp::Put {
                        tree: name,
                        key: key.to_vec(),
                        value: value.to_vec(),
                    });
                    written += 1;
                }
            }
            if pending.len() >= PAGE {
                target.apply_batch(std::mem::take(&mut pending))?;
            }
            Ok(())
        })?;
        target.apply_batch(pending)?;
        report.trees.push((tree.clone(), keys, written));
    }
    // Verify: the same count on both sides.
    for (tree, keys, _) in &report.trees {
        let copied = count(target, tree)?;
        if copied != *keys {
            return Err(CopyError::CountMismatch {
                tree: tree.clone(),
                in_source: *keys,
                target: copied,
            });
        }
    }
    Ok(report)
}

/// Batch ops name their tree with a `&'static str` (the daemon's trees are constants); a copy
/// walks trees by name, a handful per store, so each name is leaked once.
fn tree_name(tree: &str) -> &'static str {
    Box::leak(tree.to_string().into_boxed_str())
}

fn describe(tree: &str, key: &[u8]) -> String {
    format!("{tree}/{}", String::from_utf8_lossy(key).replace('\0', "/"))
}

fn count(store: &dyn Store, tree: &str) -> Result<u64, StoreError> {
    let mut cursor = Cursor::new(store, tree);
    let mut keys = 0;
    while cursor.next()?.is_some() {
        keys += 1;
    }
    Ok(keys)
}

type Entry = (Vec<u8>, Vec<u8>);

/// Walks `tree` in both stores in key order, calling `visit(key, source value, target value)`
/// once per key either holds.
fn merge(
    source: &dyn Store,
    target: &dyn Store,
    tree: &str,
    mut visit: impl FnMut(&[u8], Option<&[u8]>, Option<&[u8]>) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    let mut from = Cursor::new(source, tree);
    let mut to = Cursor::new(target, tree);
    loop {
        let order = match (from.peek()?, to.peek()?) {
            (None, None) => return Ok(()),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (Some((a, _)), Some((b, _))) => a.cmp(b),
        };
        match order {
            std::cmp::Ordering::Less => {
                let (key, value) = from.take();
                visit(&key, Some(&value), None)?;
            }
            std::cmp::Ordering::Greater => {
                let (key, value) = to.take();
                visit(&key, None, Some(&value))?;
            }
            std::cmp::Ordering::Equal => {
                let (key, value) = from.take();
                let (_, other) = to.take();
                visit(&key, Some(&value), Some(&other))?;
            }
        }
    }
}

/// A tree read a page at a time.
struct Cursor<'a> {
    store: &'a dyn Store,
    tree: &'a str,
    page: VecDeque<Entry>,
    after: Option<Vec<u8>>,
    done: bool,
}

impl<'a> Cursor<'a> {
    fn new(store: &'a dyn Store, tree: &'a str) -> Self {
        Self {
            store,
            tree,
            page: VecDeque::new(),
            after: None,
            done: false,
        }
    }

    fn peek(&mut self) -> Result<Option<&Entry>, StoreError> {
        if self.page.is_empty() && !self.done {
            let page = self
                .store
                .scan_page(self.tree, self.after.as_deref(), PAGE)?;
            self.done = page.len() < PAGE;
            if let Some((last, _)) = page.last() {
                self.after = Some(last.clone());
            }
            self.page = page.into();
        }
        Ok(self.page.front())
    }

    /// The entry `peek` returned (call only after a `peek` that found one).
    fn take(&mut self) -> Entry {
        self.page.pop_front().unwrap_or_default()
    }

    fn next(&mut self) -> Result<Option<Entry>, StoreError> {
        let found = self.peek()?.is_some();
        Ok(found.then(|| self.take()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use antler_store::MemoryStore;

    fn filled(keys: u32) -> MemoryStore {
        let store = MemoryStore::new();
        for i in 0..keys {
            store.put("log", &i.to_be_bytes(), b"record").unwrap();
        }
        store.put("heads", b"t", b"v").unwrap();
        store
    }

    #[test]
    fn copies_every_tree_verifies_counts_and_runs_twice_alike() {
        let source = filled(1_234);
        let target = MemoryStore::new();
        let first = copy(&source, &target).unwrap();
        assert_eq!(
            first.trees,
            [("heads".into(), 1, 1), ("log".into(), 1_234, 1_234)]
        );
        assert_eq!(target.scan_prefix("log", b"").unwrap().len(), 1_234);
        let second = copy(&source, &target).unwrap();
        assert_eq!(
            second.trees,
            [("heads".into(), 1, 0), ("log".into(), 1_234, 0)]
        );
        let shown = second.to_string();
        assert!(shown.contains("log"), "{shown}");
        assert!(shown.contains("verified"), "{shown}");
    }

    #[test]
    fn a_target_with_other_data_is_refused_before_anything_is_written() {
        let source = filled(10);
        let target = MemoryStore::new();
        target.put("heads", b"t", b"another install").unwrap();
        target.put("threads", b"x", b"only there").unwrap();
        let Err(err) = copy(&source, &target) else {
            panic!("a differing target must be refused");
        };
        assert!(
            matches!(err, CopyError::TargetDiffers { differing: 2, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("empty database"), "{err}");
        assert!(target.scan_prefix("log", b"").unwrap().is_empty());
    }
}
