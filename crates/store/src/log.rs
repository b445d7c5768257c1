//! The checkpoint log: how a thread's state is laid out in the store.
//!
//! Two logical trees (values are JSON):
//! - `heads`: `{thread_id}` → [`Head`], a record of ~200 bytes: the checkpoint version a save
//!   compares-and-sets, the next log sequence, the next message slot, the last step.
//! - `log`: `{thread_id}\0{seq as 8 bytes big-endian}` → [`LogRecord`], append-only: a message
//!   put at a slot (appended, or replacing the message at that slot), slots removed, or the new
//!   value of one state channel (title, todos, artifacts, sandbox, …).
//!
//! Every message lives at a slot, allocated in order and never reused; the thread's messages
//! are its live slots in slot order, its channels the last value written for each. A step's
//! checkpoint appends the records of what changed plus the new head in one atomic batch, so the
//! bytes written per step do not depend on the history, and a reader never sees log records
//! the head does not cover. Records a later one superseded stay until retention drops them.

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hasher};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Value, from_str};

use crate::messages::Message;
use crate::state::ThreadState;

pub const HEADS: &str = "heads";
pub const LOG: &str = "log";

/// The state channels: every field of `ThreadState` but `messages`, by its JSON name.
pub const CHANNELS: [&str; 10] = [
    "sandbox",
    "thread_data",
    "title",
    "artifacts",
    "todos",
    "uploaded_files",
    "viewed_images",
    "summary_text",
    "extra",
    "promoted_tools",
];

/// The head of a thread's log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Head {
    /// Checkpoints saved so far (the version a save expects and bumps).
    pub version: u64,
    /// The sequence the next log record gets.
    pub next_seq: u64,
    /// The slot the next new message gets.
    pub next_slot: u64,
    /// Live messages.
    pub messages: u64,
    pub run_id: String,
    pub step: u64,
    pub created_at: DateTime<Utc>,
}

/// One log record.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogRecord {
    Put {
        at: i64,
        slot: u64,
        message: Message,
    },
    Remove {
        at: i64,
        slots: Vec<u64>,
    },
    Channel {
        at: i64,
        name: String,
        value: Value,
    },
}

impl LogRecord {
    /// When the record was written (unix seconds).
    pub fn at(&self) -> i64 {
        match self {
            LogRecord::Put { at, .. }
            | LogRecord::Remove { at, .. }
            | LogRecord::Channel { at, .. } => *at,
        }
    }
}

/// The encoding side of [`LogRecord`], borrowing what it writes.
#[derive(Serialize)]
#[serde(rename_all = "snake_case")]
enum RecordRef<'a> {
    Put {
        at: i64,
        slot: u64,
        message: &'a Message,
    },
    Remove {
        at: i64,
        slots: &'a [u64],
    },
}

#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    #[error("unknown state channel {0:?}; was this data dir written by a newer antler?")]
    UnknownChannel(String),
}

pub fn encode_put(at: i64, slot: u64, message: &Message) -> Result<Vec<u8>, LogError> {
    Ok(serde_json::to_vec(&RecordRef::Put { at, slot, message })?)
}

pub fn encode_remove(at: i64, slots: &[u64]) -> Result<Vec<u8>, LogError> {
    Ok(serde_json::to_vec(&RecordRef::Remove { at, slots })?)
}

/// A channel record around an already encoded value (see [`channel_bytes`]).
pub fn encode_channel(at: i64, index: usize, value: &[u8]) -> Vec<u8> {
    let name = CHANNELS[index];
    let mut out = Vec::with_capacity(value.len() + 48);
    out.extend_from_slice(
        format!(r#"{{"channel":{{"at":{at},"name":"{name}","value":"#).as_bytes(),
    );
    out.extend_from_slice(value);
    out.extend_from_slice(b"}}");
    out
}

pub fn decode(bytes: &[u8]) -> Result<LogRecord, LogError> {
    Ok(serde_json::from_slice(bytes)?)
}

/// `{thread_id}\0`: the prefix of a thread's log keys.
pub fn prefix(thread_id: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(thread_id.len() + 9);
    key.extend_from_slice(thread_id.as_bytes());
    key.push(0);
    key
}

pub fn key(thread_id: &str, seq: u64) -> Vec<u8> {
    let mut key = prefix(thread_id);
    key.extend_from_slice(&seq.to_be_bytes());
    key
}

/// The sequence of a log key (`None` for a key of another shape).
pub fn seq_of(key: &[u8]) -> Option<u64> {
    let tail: [u8; 8] = key.get(key.len().checked_sub(8)?..)?.try_into().ok()?;
    Some(u64::from_be_bytes(tail))
}

/// The JSON of channel `index` of `state`.
pub fn channel_bytes(state: &ThreadState, index: usize) -> Result<Vec<u8>, serde_json::Error> {
    match index {
        0 => serde_json::to_vec(&state.sandbox),
        1 => serde_json::to_vec(&state.thread_data),
        2 => serde_json::to_vec(&state.title),
        3 => serde_json::to_vec(&state.artifacts),
        4 => serde_json::to_vec(&state.todos),
        5 => serde_json::to_vec(&state.uploaded_files),
        6 => serde_json::to_vec(&state.viewed_images),
        7 => serde_json::to_vec(&state.summary_text),
        8 => serde_json::to_vec(&state.extra),
        _ => serde_json::to_vec(&state.promoted_tools),
    }
}

/// A cheap fingerprint of every channel, to find the ones a step changed.
pub fn channel_hashes(state: &ThreadState) -> Result<[u64; CHANNELS.len()], serde_json::Error> {
    let mut hashes = [0; CHANNELS.len()];
    for (index, hash) in hashes.iter_mut().enumerate() {
        *hash = hash_bytes(&channel_bytes(state, index)?);
    }
    Ok(hashes)
}

pub fn hash_bytes(bytes: &[u8]) -> u64 {
    let mut hasher = DefaultHasher::new();
    hasher.write(bytes);
    hasher.finish()
}

/// Copies channel `index` of `from` into `to`.
pub fn copy_channel(to: &mut ThreadState, from: &ThreadState, index: usize) {
    match index {
        0 => to.sandbox.clone_from(&from.sandbox),
        1 => to.thread_data.clone_from(&from.thread_data),
        2 => to.title.clone_from(&from.title),
        3 => to.artifacts.clone_from(&from.artifacts),
        4 => to.todos.clone_from(&from.todos),
        5 => to.uploaded_files.clone_from(&from.uploaded_files),
        6 => to.viewed_images.clone_from(&from.viewed_images),
        7 => to.summary_text.clone_from(&from.summary_text),
        8 => to.extra.clone_from(&from.extra),
        _ => to.promoted_tools.clone_from(&from.promoted_tools),
    }
}

/// Reads channel `index`'s value (JSON text) straight into its field of `state`.
fn set_channel(state: &mut ThreadState, index: usize, value: &RawValue) -> Result<(), LogError> {
    let json = value.get();
    match index {
        0 => state.sandbox = from_str(json)?,
        1 => state.thread_data = from_str(json)?,
        2 => state.title = from_str(json)?,
        3 => state.artifacts = from_str(json)?,
        4 => state.todos = from_str(json)?,
        5 => state.uploaded_files = from_str(json)?,
        6 => state.viewed_images = from_str(json)?,
        7 => state.summary_text = from_str(json)?,
        8 => state.extra = from_str(json)?,
        _ => state.promoted_tools = from_str(json)?,
    }
    Ok(())
}

/// A log record as folding reads it: a channel's value kept as text until it is known to be
/// the channel's latest (a long thread's log holds every value a channel ever had; reading
/// each through a `Value` tree was most of a fold's cost after the messages).
#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
// `Put` is nearly every record and each is moved into the state at once: boxing the message
// would cost an allocation per message folded to save stack space no one holds for long.
#[allow(clippy::large_enum_variant)]
enum FoldRecord {
    Put { slot: u64, message: Message },
    Remove { slots: Vec<u64> },
    Channel { name: String, value: Box<RawValue> },
}

/// Where a live message sits in the log, parallel to `state.messages`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotInfo {
    pub slot: u64,
    /// The size of its record, for the cache's weight.
    pub bytes: u32,
}

/// A thread's state rebuilt from its log.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Folded {
    pub state: ThreadState,
    pub slots: Vec<SlotInfo>,
}

/// Replays `records` (key, value) in order. Records at or past `head.next_seq` are ignored.
pub fn fold(head: &Head, records: &[(Vec<u8>, Vec<u8>)]) -> Result<Folded, (Vec<u8>, LogError)> {
    let mut messages: BTreeMap<u64, (Message, u32)> = BTreeMap::new();
    let mut state = ThreadState::default();
    // Each channel's latest value and its record's key; later values replace earlier ones
    // whole, so only the latest is read.
    let mut channels: [Option<(&Vec<u8>, Box<RawValue>)>; CHANNELS.len()] = Default::default();
    for (key, value) in records {
        if seq_of(key).is_none_or(|seq| seq >= head.next_seq) {
            continue;
        }
        let record: FoldRecord =
            serde_json::from_slice(value).map_err(|e| (key.clone(), LogError::from(e)))?;
        match record {
            FoldRecord::Put { slot, message } => {
                let bytes = u32::try_from(value.len()).unwrap_or(u32::MAX);
                messages.insert(slot, (message, bytes));
            }
            FoldRecord::Remove { slots } => {
                for slot in slots {
                    messages.remove(&slot);
                }
            }
            FoldRecord::Channel { name, value } => {
                let Some(index) = CHANNELS.iter().position(|channel| *channel == name) else {
                    return Err((key.clone(), LogError::UnknownChannel(name)));
                };
                channels[index] = Some((key, value));
            }
        }
    }
    for (index, latest) in channels.into_iter().enumerate() {
        if let Some((key, value)) = latest {
            set_channel(&mut state, index, &value).map_err(|e| (key.clone(), e))?;
        }
    }
    let mut slots = Vec::with_capacity(messages.len());
    state.messages.reserve(messages.len());
    for (slot, (message, bytes)) in messages {
        slots.push(SlotInfo { slot, bytes });
        state.messages.push(message);
    }
    Ok(Folded { state, slots })
}

/// The sequences of the records no longer needed for the head's state (a put whose slot was
/// later rewritten or removed, a remove, a channel value later replaced) written before
/// `cutoff` (unix seconds). Removes are safe to drop with the puts they cancelled: those are
/// older still.
pub fn superseded_before(
    records: &[(Vec<u8>, Vec<u8>)],
    cutoff: i64,
) -> Result<Vec<u64>, (Vec<u8>, LogError)> {
    let mut decoded = Vec::with_capacity(records.len());
    // Latest sequence that set each slot / channel; a slot that was removed has no live put.
    let mut live_slot: BTreeMap<u64, Option<u64>> = BTreeMap::new();
    let mut live_channel: BTreeMap<String, u64> = BTreeMap::new();
    for (key, value) in records {
        let Some(seq) = seq_of(key) else { continue };
        let record = decode(value).map_err(|e| (key.clone(), e))?;
        match &record {
            LogRecord::Put { slot, .. } => {
                live_slot.insert(*slot, Some(seq));
            }
            LogRecord::Remove { slots, .. } => {
                for slot in slots {
                    live_slot.insert(*slot, None);
                }
            }
            LogRecord::Channel { name, .. } => {
                live_channel.insert(name.clone(), seq);
            }
        }
        decoded.push((seq, record));
    }
    Ok(decoded
        .into_iter()
        .filter(|(seq, record)| {
            record.at() < cutoff
                && match record {
                    LogRecord::Put { slot, .. } => live_slot.get(slot) != Some(&Some(*seq)),
                    LogRecord::Remove { .. } => true,
                    LogRecord::Channel { name, .. } => live_channel.get(name) != Some(seq),
                }
        })
        .map(|(seq, _)| seq)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{SandboxState, Todo, TodoStatus, UploadedFile, ViewedImage};

    fn full_state() -> ThreadState {
        ThreadState {
            messages: vec![Message::human("hi")].into(),
            sandbox: Some(SandboxState {
                sandbox_id: "s".into(),
            }),
            thread_data: Some(crate::state::ThreadData::virtual_paths()),
            title: Some("t".into()),
            artifacts: vec!["/a".into()],
            todos: Some(vec![Todo {
                content: "x".into(),
                status: TodoStatus::Pending,
                active_form: None,
            }]),
            uploaded_files: vec![UploadedFile {
                filename: "f".into(),
                size: 1,
                path: "/mnt/user-data/uploads/f".into(),
                is_image: false,
            }],
            viewed_images: [(
                "/i.png".to_string(),
                ViewedImage {
                    mime_type: "image/png".into(),
                    size: 1,
                    actual_path: "/i.png".into(),
                },
            )]
            .into(),
            summary_text: Some("s".into()),
            extra: [("k".to_string(), Value::Bool(true))].into(),
            promoted_tools: ["mcp_tool".to_string()].into(),
        }
    }

    #[test]
    fn every_state_field_but_messages_is_a_channel() {
        let state = full_state();
        let Value::Object(fields) = serde_json::to_value(&state).unwrap() else {
            panic!("a state is an object");
        };
        let mut names: Vec<&str> = fields.keys().map(String::as_str).collect();
        names.retain(|name| *name != "messages");
        names.sort_unstable();
        let mut channels = CHANNELS.to_vec();
        channels.sort_unstable();
        assert_eq!(names, channels, "a new ThreadState field needs a channel");
    }

    #[test]
    fn records_round_trip_and_fold_in_slot_order() {
        let state = full_state();
        let head = Head {
            version: 1,
            next_seq: 100,
            next_slot: 10,
            messages: 2,
            run_id: "r".into(),
            step: 1,
            created_at: Utc::now(),
        };
        let a = Message::human("a");
        let b = Message::ai("b");
        let mut records = vec![
            (key("t", 1), encode_put(5, 3, &b).unwrap()),
            (
                key("t", 2),
                encode_put(5, 1, &Message::human("old")).unwrap(),
            ),
            (key("t", 3), encode_put(5, 1, &a).unwrap()),
            (
                key("t", 4),
                encode_put(5, 2, &Message::human("gone")).unwrap(),
            ),
            (key("t", 5), encode_remove(6, &[2]).unwrap()),
        ];
        for index in 0..CHANNELS.len() {
            let value = channel_bytes(&state, index).unwrap();
            records.push((
                key("t", 10 + index as u64),
                encode_channel(7, index, &value),
            ));
        }
        records.push((
            key("t", 100),
            encode_put(9, 9, &Message::human("future")).unwrap(),
        ));
        let folded = fold(&head, &records).unwrap();
        let expected = ThreadState {
            messages: vec![a, b].into(),
            ..state.clone()
        };
        assert_eq!(folded.state, expected);
        let slots: Vec<u64> = folded.slots.iter().map(|s| s.slot).collect();
        assert_eq!(slots, [1, 3]);
        assert_eq!(
            channel_hashes(&folded.state).unwrap(),
            channel_hashes(&state).unwrap()
        );
        // Superseded before t=6: the first put of slot 1 and the put of slot 2 (removed at 6);
        // the remove itself is not older than the cutoff.
        assert_eq!(superseded_before(&records, 6).unwrap(), [2, 4]);
        assert_eq!(superseded_before(&records, 7).unwrap(), [2, 4, 5]);
        assert_eq!(seq_of(&key("t", 42)), Some(42));
    }

    /// A head of an empty thread whose log runs up to `next_seq`.
    fn head_before(next_seq: u64) -> Head {
        Head {
            version: 1,
            next_seq,
            next_slot: 1,
            messages: 0,
            run_id: String::new(),
            step: 0,
            created_at: Utc::now(),
        }
    }

    #[test]
    fn a_channel_folds_to_its_latest_value() {
        let head = head_before(4);
        let records = [
            (
                key("t", 1),
                br#"{"channel":{"at":1,"name":"title","value":"first"}}"#.to_vec(),
            ),
            (
                key("t", 2),
                br#"{"channel":{"at":2,"name":"title","value":"second"}}"#.to_vec(),
            ),
            (
                key("t", 3),
                br#"{"channel":{"at":3,"name":"todos","value":[]}}"#.to_vec(),
            ),
            // Past the head: not part of the state yet.
            (
                key("t", 4),
                br#"{"channel":{"at":4,"name":"title","value":"later"}}"#.to_vec(),
            ),
        ];
        let folded = fold(&head, &records).unwrap();
        assert_eq!(folded.state.title.as_deref(), Some("second"));
        let broken = [(
            key("t", 1),
            br#"{"channel":{"at":1,"name":"title","value":7}}"#.to_vec(),
        )];
        let Err((at, _)) = fold(&head, &broken) else {
            panic!("a latest value of the wrong type must not fold");
        };
        assert_eq!(at, key("t", 1), "the error names the record");
    }

    #[test]
    fn an_unknown_channel_is_a_clear_error() {
        let head = head_before(2);
        let record = br#"{"channel":{"at":1,"name":"novel","value":1}}"#.to_vec();
        let Err((_, error)) = fold(&head, &[(key("t", 1), record)]) else {
            panic!("an unknown channel must not be dropped silently");
        };
        assert!(error.to_string().contains("novel"), "{error}");
    }
}
