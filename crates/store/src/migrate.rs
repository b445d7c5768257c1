//! Converts a data dir of the old layout, where every checkpoint was the thread's whole state
//! (`checkpoints`: `{thread_id}\0{seq:020}` → [`Checkpoint`], the newest three per thread), to
//! the checkpoint log, once, when a thread store opens it.
//!
//! Each thread is converted in one atomic batch (its newest checkpoint becomes slots 1..n and
//! one record per channel, plus a head; its old checkpoints are deleted), so a crash mid-way
//! leaves every thread either converted or untouched, and the next start finishes the job. The
//! `meta` key is written last; a data dir opened by this version is not readable by older ones.

use serde::Deserialize;

use crate::log::{self, CHANNELS, HEADS, Head, LOG};
use crate::trees::{LEGACY_CHECKPOINTS, META, THREADS};
use crate::{BatchOp, Checkpoint, Store, StoreError};

/// What conversion reads of a thread record.
#[derive(Deserialize)]
struct LegacyRecord {
    thread_id: String,
    #[serde(default)]
    last_checkpoint: u64,
}

const FORMAT_KEY: &[u8] = b"threads_format";
/// The layout this version writes: the checkpoint log.
const FORMAT: &[u8] = b"2";

/// Converts what is left to convert; returns how many threads were.
pub(crate) fn run(store: &dyn Store) -> Result<usize, StoreError> {
    if store.get(META, FORMAT_KEY)?.as_deref() == Some(FORMAT) {
        return Ok(0);
    }
    let mut converted = 0;
    for (key, value) in store.scan_prefix(THREADS, b"")? {
        let record: LegacyRecord = decode(&key, &value)?;
        if convert_thread(store, &record)? {
            converted += 1;
        }
    }
    // Checkpoints of threads whose record is gone can never be read: drop them.
    let orphans: Vec<BatchOp> = store
        .scan_prefix(LEGACY_CHECKPOINTS, b"")?
        .into_iter()
        .map(|(key, _)| BatchOp::Delete {
            tree: LEGACY_CHECKPOINTS,
            key,
        })
        .collect();
    if !orphans.is_empty() {
        store.apply_batch(orphans)?;
    }
    store.put(META, FORMAT_KEY, FORMAT)?;
    store.flush()?;
    if converted > 0 {
        tracing::info!(
            threads = converted,
            "Converted threads to the checkpoint log"
        );
    }
    Ok(converted)
}

fn convert_thread(store: &dyn Store, record: &LegacyRecord) -> Result<bool, StoreError> {
    let thread_id = record.thread_id.as_str();
    let checkpoints = store.scan_prefix(LEGACY_CHECKPOINTS, &log::prefix(thread_id))?;
    // Keys are zero-padded sequences: the last one is the newest checkpoint.
    let Some((newest_key, newest)) = checkpoints.last() else {
        return Ok(false);
    };
    let checkpoint: Checkpoint = decode(newest_key, newest)?;
    let at = checkpoint.created_at.timestamp();
    let corrupt = |detail: String| StoreError::Corrupt {
        key: format!("{thread_id}/checkpoint"),
        detail,
    };
    let mut ops: Vec<BatchOp> = checkpoints
        .iter()
        .map(|(key, _)| BatchOp::Delete {
            tree: LEGACY_CHECKPOINTS,
            key: key.clone(),
        })
        .collect();
    // A head or log left by an earlier, interrupted conversion is replaced whole.
    for (key, _) in store.scan_prefix(LOG, &log::prefix(thread_id))? {
        ops.push(BatchOp::Delete { tree: LOG, key });
    }
    let mut seq = 1;
    let mut put = |value: Vec<u8>, ops: &mut Vec<BatchOp>| {
        ops.push(BatchOp::Put {
            tree: LOG,
            key: log::key(thread_id, seq),
            value,
        });
        seq += 1;
    };
    for (index, message) in checkpoint.state.messages.iter().enumerate() {
        let value =
            log::encode_put(at, index as u64 + 1, message).map_err(|e| corrupt(e.to_string()))?;
        put(value, &mut ops);
    }
    for index in 0..CHANNELS.len() {
        let value =
            log::channel_bytes(&checkpoint.state, index).map_err(|e| corrupt(e.to_string()))?;
        put(log::encode_channel(at, index, &value), &mut ops);
    }
    let messages = checkpoint.state.messages.len() as u64;
    let head = Head {
        version: record.last_checkpoint.max(1),
        next_seq: seq,
        next_slot: messages + 1,
        messages,
        run_id: checkpoint.run_id,
        step: checkpoint.step,
        created_at: checkpoint.created_at,
    };
    ops.push(BatchOp::Put {
        tree: HEADS,
        key: thread_id.as_bytes().to_vec(),
        value: serde_json::to_vec(&head).map_err(|e| corrupt(e.to_string()))?,
    });
    store.apply_batch(ops)?;
    Ok(true)
}

fn decode<T: for<'de> Deserialize<'de>>(key: &[u8], bytes: &[u8]) -> Result<T, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::Corrupt {
        key: String::from_utf8_lossy(key).replace('\0', "/"),
        detail: e.to_string(),
    })
}
