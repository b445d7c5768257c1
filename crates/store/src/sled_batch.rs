//! Multi-key batches on sled without `sled::Batch`: a redo record, then the writes, then the
//! record's removal.
//!
//! Why: a `sled::Batch` (and a transaction, which commits like one) seals sled's log buffer
//! before and after its manifest, so every batch costs two synchronous writes with
//! `sync_file_range` on sled's I/O pool, and each hand-off to that pool wakes all its idle
//! threads. With two or three batches per turn that was about half of the daemon's CPU per
//! turn. Single-key writes only go to the log buffer, which the group-commit flusher writes out.
//!
//! Why it is atomic: sled recovers a prefix of its log (recovery stops at the first torn
//! message; `sled::Batch` relies on the same property). The writes of a batch are serialised
//! with every other write of the store (the caller holds the store's write gate), so a crash
//! leaves a prefix of: redo record, the batch's writes in order, the record's removal. If the
//! record survived, nothing written after the batch did, and replaying the whole batch at the
//! next open ([`recover`]) completes it; if it did not, none of the batch's writes survived.

use crate::StoreError;

/// Where the redo record of the batch in flight lives. Logical keys are `{tree}\0{key}` with a
/// non-empty tree name, so no logical key starts with a NUL byte.
pub(crate) const PENDING_BATCH: &[u8] = b"\0pending-batch";

/// One write of a batch on full keys: a value to put, or `None` to delete.
pub(crate) type Write = (Vec<u8>, Option<Vec<u8>>);

/// Applies `writes` atomically (see the module doc). The caller holds the store's write gate.
pub(crate) fn apply(tree: &sled::Tree, writes: &[Write]) -> Result<(), StoreError> {
    match writes {
        [] => Ok(()),
        // One key is atomic on its own.
        [single] => apply_one(tree, single),
        _ => {
            tree.insert(PENDING_BATCH, encode(writes)).map_err(io)?;
            for write in writes {
                apply_one(tree, write)?;
            }
            tree.remove(PENDING_BATCH).map_err(io)?;
            Ok(())
        }
    }
}

/// Completes a batch a crash interrupted, before the store is used. Returns how many writes
/// were replayed (0: there was none).
pub(crate) fn recover(tree: &sled::Tree) -> Result<usize, StoreError> {
    let Some(record) = tree.get(PENDING_BATCH).map_err(io)? else {
        return Ok(0);
    };
    let writes = decode(&record)?;
    for write in &writes {
        apply_one(tree, write)?;
    }
    tree.remove(PENDING_BATCH).map_err(io)?;
    tree.flush().map_err(io)?;
    Ok(writes.len())
}

fn apply_one(tree: &sled::Tree, (key, value): &Write) -> Result<(), StoreError> {
    match value {
        Some(value) => tree.insert(key.as_slice(), value.as_slice()).map(drop),
        None => tree.remove(key.as_slice()).map(drop),
    }
    .map_err(io)
}

/// `[1 put | 0 delete][key length u32 LE][key]([value length u32 LE][value])` per write.
pub(crate) fn encode(writes: &[Write]) -> Vec<u8> {
    let size: usize = writes
        .iter()
        .map(|(key, value)| 9 + key.len() + value.as_ref().map_or(0, Vec::len))
        .sum();
    let mut out = Vec::with_capacity(size);
    for (key, value) in writes {
        out.push(u8::from(value.is_some()));
        push_bytes(&mut out, key);
        if let Some(value) = value {
            push_bytes(&mut out, value);
        }
    }
    out
}

fn push_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    // Keys and values of one store write are far below 4 GiB (sled's own limit).
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(bytes);
}

pub(crate) fn decode(mut bytes: &[u8]) -> Result<Vec<Write>, StoreError> {
    let mut writes = Vec::new();
    while let Some((&tag, rest)) = bytes.split_first() {
        bytes = rest;
        let key = take_bytes(&mut bytes)?;
        let value = match tag {
            0 => None,
            1 => Some(take_bytes(&mut bytes)?),
            other => return Err(corrupt(format!("unknown write tag {other}"))),
        };
        writes.push((key, value));
    }
    Ok(writes)
}

fn take_bytes(bytes: &mut &[u8]) -> Result<Vec<u8>, StoreError> {
    let (length, rest) = bytes
        .split_first_chunk::<4>()
        .ok_or_else(|| corrupt("a length is cut short".into()))?;
    let length = u32::from_le_bytes(*length) as usize;
    if rest.len() < length {
        return Err(corrupt("a key or value is cut short".into()));
    }
    let (taken, rest) = rest.split_at(length);
    *bytes = rest;
    Ok(taken.to_vec())
}

fn corrupt(detail: String) -> StoreError {
    StoreError::Corrupt {
        key: "pending-batch".into(),
        detail: format!(
            "{detail}; the batch a crash interrupted cannot be completed, restore the data dir \
             from a backup"
        ),
    }
}

fn io(e: sled::Error) -> StoreError {
    StoreError::Io(e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_encode_and_decode_exactly() {
        let writes: Vec<Write> = vec![
            (b"log\0t\0\0\0\x01".to_vec(), Some(b"{\"put\":1}".to_vec())),
            (b"heads\0t".to_vec(), Some(Vec::new())),
            (b"log\0t\0\0\0\x00".to_vec(), None),
        ];
        assert_eq!(decode(&encode(&writes)).unwrap(), writes);
        assert!(decode(&[]).unwrap().is_empty());
    }

    #[test]
    fn a_damaged_record_is_a_clear_error() {
        let bytes = encode(&[(b"k".to_vec(), Some(b"value".to_vec()))]);
        for cut in [1, 3, bytes.len() - 1] {
            let err = decode(&bytes[..cut]).unwrap_err();
            assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
        }
        let err = decode(&[7, 0, 0, 0, 0]).unwrap_err();
        assert!(err.to_string().contains("unknown write tag 7"), "{err}");
    }

    #[test]
    fn a_batch_cut_short_by_a_crash_is_completed_at_recovery() {
        let dir = tempfile::tempdir().unwrap();
        let tree = sled::open(dir.path()).unwrap().open_tree("t").unwrap();
        tree.insert(b"gone", b"old").unwrap();
        let writes: Vec<Write> = vec![
            (b"a".to_vec(), Some(b"1".to_vec())),
            (b"b".to_vec(), Some(b"2".to_vec())),
            (b"gone".to_vec(), None),
        ];
        // What a crash after the redo record and the first write leaves.
        tree.insert(PENDING_BATCH, encode(&writes)).unwrap();
        apply_one(&tree, &writes[0]).unwrap();
        assert_eq!(recover(&tree).unwrap(), 3);
        assert_eq!(tree.get(b"b").unwrap().as_deref(), Some(&b"2"[..]));
        assert_eq!(tree.get(b"gone").unwrap(), None);
        assert_eq!(tree.get(PENDING_BATCH).unwrap(), None);
        assert_eq!(recover(&tree).unwrap(), 0, "nothing left to replay");
    }

    #[test]
    fn a_completed_batch_leaves_no_redo_record() {
        let dir = tempfile::tempdir().unwrap();
        let tree = sled::open(dir.path()).unwrap().open_tree("t").unwrap();
        let writes: Vec<Write> = vec![
            (b"a".to_vec(), Some(b"1".to_vec())),
            (b"b".to_vec(), Some(b"2".to_vec())),
        ];
        apply(&tree, &writes).unwrap();
        assert_eq!(tree.get(PENDING_BATCH).unwrap(), None);
        assert_eq!(tree.len(), 2);
    }
}
