//! The statements of the store and what shapes their arguments: a batch folded to its last op
//! per key, and the upper bound of a prefix scan.

use std::collections::BTreeMap;

use antler_store::BatchOp;

pub(crate) const GET: &str = "SELECT value FROM kv WHERE tree = $1 AND key = $2";
pub(crate) const PUT: &str = "INSERT INTO kv (tree, key, value) VALUES ($1, $2, $3) \
     ON CONFLICT (tree, key) DO UPDATE SET value = EXCLUDED.value";
pub(crate) const DELETE: &str = "DELETE FROM kv WHERE tree = $1 AND key = $2";
/// Keys in `[$2, $3)`: a prefix and its successor.
pub(crate) const SCAN_RANGE: &str = "SELECT key, value FROM kv \
     WHERE tree = $1 AND key >= $2 AND key < $3 ORDER BY key";
/// Keys from `$2` on: a prefix without a successor (empty, or all 0xff).
pub(crate) const SCAN_FROM: &str =
    "SELECT key, value FROM kv WHERE tree = $1 AND key >= $2 ORDER BY key";
pub(crate) const PAGE_AFTER: &str =
    "SELECT key, value FROM kv WHERE tree = $1 AND key > $2 ORDER BY key LIMIT $3";
pub(crate) const PAGE_FIRST: &str =
    "SELECT key, value FROM kv WHERE tree = $1 ORDER BY key LIMIT $2";
/// The distinct trees by a skip scan of the primary key: one index probe per tree, however
/// many keys each holds.
pub(crate) const TREES: &str = "WITH RECURSIVE t(tree) AS ( \
         SELECT min(tree) FROM kv \
         UNION ALL \
         SELECT (SELECT min(tree) FROM kv WHERE kv.tree > t.tree) FROM t WHERE t.tree IS NOT NULL \
     ) SELECT tree FROM t WHERE tree IS NOT NULL";
/// A whole batch in one statement (one round trip, atomic on its own): the deletes
/// (`$4`, `$5`) and the puts (`$1`..`$3`), on disjoint keys since the batch was folded.
pub(crate) const WRITE: &str = "WITH deleted AS ( \
         DELETE FROM kv USING unnest($4::text[], $5::bytea[]) AS d(tree, key) \
         WHERE kv.tree = d.tree AND kv.key = d.key \
     ) \
     INSERT INTO kv (tree, key, value) \
     SELECT * FROM unnest($1::text[], $2::bytea[], $3::bytea[]) \
     ON CONFLICT (tree, key) DO UPDATE SET value = EXCLUDED.value";
/// A batch applied only if the expected key (`$6`, `$7`) holds `$8` (NULL: absent); answers
/// whether it was. Run after [`begin_locked`] in the same transaction: its snapshot, taken
/// when it starts, then sees every conditional batch on the key that committed before.
pub(crate) const WRITE_IF: &str = "WITH ok AS ( \
         SELECT 1 WHERE (SELECT value FROM kv WHERE tree = $6 AND key = $7) \
             IS NOT DISTINCT FROM $8::bytea \
     ), deleted AS ( \
         DELETE FROM kv USING unnest($4::text[], $5::bytea[]) AS d(tree, key) \
         WHERE kv.tree = d.tree AND kv.key = d.key AND EXISTS (SELECT 1 FROM ok) \
     ), written AS ( \
         INSERT INTO kv (tree, key, value) \
         SELECT * FROM unnest($1::text[], $2::bytea[], $3::bytea[]) \
         WHERE EXISTS (SELECT 1 FROM ok) \
         ON CONFLICT (tree, key) DO UPDATE SET value = EXCLUDED.value \
     ) SELECT EXISTS (SELECT 1 FROM ok)";

/// Opens a conditional batch's transaction and takes the advisory lock of its expected key
/// (held until the commit): the key may not exist yet, and a row that does not exist cannot be
/// locked `FOR UPDATE`. A simple query (no parameters): the lock id is a number.
pub(crate) fn begin_locked(lock_id: i64) -> String {
    format!("BEGIN; SELECT pg_advisory_xact_lock({lock_id})")
}

/// A batch as the arguments of [`WRITE`], in key order (so two batches lock shared rows in the
/// same order and cannot deadlock each other).
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Folded {
    pub(crate) put_trees: Vec<&'static str>,
    pub(crate) put_keys: Vec<Vec<u8>>,
    pub(crate) put_values: Vec<Vec<u8>>,
    pub(crate) delete_trees: Vec<&'static str>,
    pub(crate) delete_keys: Vec<Vec<u8>>,
}

impl Folded {
    /// The last op of each key wins, as if the ops were applied one by one (a statement may
    /// not touch a row twice).
    pub(crate) fn new(ops: Vec<BatchOp>) -> Self {
        let mut last: BTreeMap<(&'static str, Vec<u8>), Option<Vec<u8>>> = BTreeMap::new();
        for op in ops {
            match op {
                BatchOp::Put { tree, key, value } => last.insert((tree, key), Some(value)),
                BatchOp::Delete { tree, key } => last.insert((tree, key), None),
            };
        }
        let mut folded = Self::default();
        for ((tree, key), value) in last {
            match value {
                Some(value) => {
                    folded.put_trees.push(tree);
                    folded.put_keys.push(key);
                    folded.put_values.push(value);
                }
                None => {
                    folded.delete_trees.push(tree);
                    folded.delete_keys.push(key);
                }
            }
        }
        folded
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.put_keys.is_empty() && self.delete_keys.is_empty()
    }

    /// Rows and bytes (keys and values) the batch writes.
    pub(crate) fn size(&self) -> (usize, usize) {
        let bytes = self.put_keys.iter().map(Vec::len).sum::<usize>()
            + self.put_values.iter().map(Vec::len).sum::<usize>()
            + self.delete_keys.iter().map(Vec::len).sum::<usize>();
        (self.put_keys.len() + self.delete_keys.len(), bytes)
    }
}

/// The smallest key greater than every key starting with `prefix` (`None`: there is none).
pub(crate) fn successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// The advisory lock of `(tree, key)`: 64-bit FNV-1a, stable across builds and platforms so
/// every daemon on the database takes the same lock for the same key.
pub(crate) fn lock_id(tree: &str, key: &[u8]) -> i64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &byte in tree.as_bytes().iter().chain(&[0]).chain(key) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    i64::from_ne_bytes(hash.to_ne_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_successor_is_the_next_key_after_all_its_extensions() {
        assert_eq!(successor(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(successor(b"t\0"), Some(b"t\x01".to_vec()));
        assert_eq!(successor(b"a\xff\xff"), Some(b"b".to_vec()));
        assert_eq!(successor(b"\xff"), None);
        assert_eq!(successor(b""), None);
    }

    #[test]
    fn a_batch_folds_to_its_last_op_per_key_in_key_order() {
        let put = |tree, key: &[u8], value: &[u8]| BatchOp::Put {
            tree,
            key: key.to_vec(),
            value: value.to_vec(),
        };
        let delete = |tree, key: &[u8]| BatchOp::Delete {
            tree,
            key: key.to_vec(),
        };
        let folded = Folded::new(vec![
            put("log", b"b", b"1"),
            delete("log", b"a"),
            put("heads", b"t", b"v1"),
            put("log", b"a", b"2"),
            put("log", b"b", b"3"),
            put("log", b"c", b"4"),
            delete("log", b"c"),
        ]);
        assert_eq!(folded.put_trees, ["heads", "log", "log"]);
        assert_eq!(
            folded.put_keys,
            [b"t".to_vec(), b"a".to_vec(), b"b".to_vec()]
        );
        assert_eq!(
            folded.put_values,
            [b"v1".to_vec(), b"2".to_vec(), b"3".to_vec()]
        );
        assert_eq!(folded.delete_keys, [b"c".to_vec()]);
        assert_eq!(folded.size(), (4, 3 + 4 + 1));
        assert!(Folded::new(Vec::new()).is_empty());
    }

    #[test]
    fn lock_ids_are_stable_and_tell_trees_apart() {
        // Pinned: a change would let two builds on one database take different locks.
        assert_eq!(lock_id("heads", b"t"), lock_id("heads", b"t"));
        assert_eq!(
            lock_id("", b""),
            i64::from_ne_bytes(0xaf63_bd4c_8601_b7df_u64.to_ne_bytes())
        );
        assert_ne!(lock_id("heads", b"t"), lock_id("head", b"st"));
    }
}
