//! The inbound journal: every accepted platform message is stored (and flushed) before the
//! platform is told it arrived, so a crash never loses one and a redelivery is recognised, by
//! this daemon or any other sharing the store.
//!
//! Tree `channel_inbound`: `{channel}\u{1f}{workspace}\u{1f}{chat}\u{1f}{message id}` →
//! [`JournalEntry`], written only if the key is absent (one compare-and-set), so two daemons
//! receiving the same delivery record it once. Answered entries are kept for [`RETENTION`] so
//! redeliveries within that window are dropped.
//!
//! Tree `channel_pending`: the messages still to answer, `{channel}\u{1f}{chat}\u{1f}{topic}
//! \u{1f}{received µs}\u{1f}{journal key}` → [`PendingRef`], written in the entry's batch and
//! removed in the batch that marks it done. A conversation's worker reads its chat's messages
//! from here in received order, and recovery and the sweeper find unanswered chats here
//! instead of scanning the whole journal.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use antler_channel::{ChatKey, InboundMessage};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::channels::records::{self, RecordError, Writes};
use crate::cluster::HeldLease;
use antler_store::{BatchOp, Expect, StoreError, StoreRef};

const TREE: &str = "channel_inbound";
const PENDING: &str = "channel_pending";
/// `pending_index` → `1` once the entries of a store written before the pending index are in it.
const META: &str = "channel_meta";
const INDEXED_MARK: &str = "pending_index";
/// How long a handled message's id is remembered (the issue asks for at least 24 h).
pub const RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JournalState {
    /// Accepted, not answered yet: processed again after a restart.
    Pending,
    /// Answered (or deliberately not: a refused or dropped message).
    Done,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct JournalEntry {
    pub key: String,
    pub message: InboundMessage,
    pub state: JournalState,
    pub received_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Its key in `channel_pending` while pending (none for a `/cancel`, answered at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_key: Option<String>,
}

/// A pending message as its chat's index lists it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PendingRef {
    pub chat: ChatKey,
    pub journal_key: String,
}

/// Whether a message is new.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Recorded {
    New(String),
    Duplicate,
}

/// Whether a new entry goes into its chat's pending index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Index {
    /// Answered by the chat's worker, whichever instance holds the chat.
    Queue,
    /// Answered at once by the instance that received it (`/cancel`), never by a worker.
    Immediate,
}

#[derive(Clone)]
pub struct Journal {
    writes: Writes,
}

impl Journal {
    pub fn new(store: StoreRef) -> Self {
        Self {
            writes: Writes::direct(store),
        }
    }

    /// This journal with its `done` writes fenced by a chat's claim.
    pub(crate) fn fenced(&self, claim: Arc<HeldLease>) -> Self {
        Self {
            writes: Writes::fenced(self.store().clone(), claim),
        }
    }

    fn store(&self) -> &StoreRef {
        self.writes.store()
    }

    /// The dedupe key of a message.
    pub fn key_of(message: &InboundMessage) -> String {
        format!(
            "{}\u{1f}{}\u{1f}{}\u{1f}{}",
            message.channel,
            message.workspace_id.as_deref().unwrap_or(""),
            message.chat_id,
            message.platform_message_id
        )
    }

    /// Whether the message was journalled before (by any instance).
    pub fn seen(&self, message: &InboundMessage) -> Result<bool, StoreError> {
        Ok(self
            .store()
            .get(TREE, Self::key_of(message).as_bytes())?
            .is_some())
    }

    /// Stores a new message as pending of conversation `chat`; a message seen before is a
    /// duplicate. Not durable until [`Journal::flush`].
    pub fn record(
        &self,
        message: &InboundMessage,
        chat: &ChatKey,
        index: Index,
    ) -> Result<Recorded, StoreError> {
        let key = Self::key_of(message);
        let now = Utc::now();
        let pending_key = (index == Index::Queue).then(|| {
            format!(
                "{}{:020}\u{1f}{key}",
                chat_prefix(chat),
                now.timestamp_micros().max(0)
            )
        });
        let entry = JournalEntry {
            key: key.clone(),
            message: message.clone(),
            state: JournalState::Pending,
            received_at: now,
            updated_at: now,
            pending_key: pending_key.clone(),
        };
        let mut ops = vec![records::put_op(TREE, &key, &entry)?];
        if let Some(pending_key) = &pending_key {
            ops.push(pending_op(pending_key, chat, &key)?);
        }
        let absent = Expect {
            tree: TREE,
            key: key.as_bytes().to_vec(),
            value: None,
        };
        if !self.store().apply_batch_if(&absent, ops)? {
            crate::metrics::inbound_duplicate(&message.channel);
            return Ok(Recorded::Duplicate);
        }
        crate::metrics::inbound(&message.channel);
        Ok(Recorded::New(key))
    }

    pub fn get(&self, key: &str) -> Result<Option<JournalEntry>, StoreError> {
        records::read(self.store(), TREE, key)
    }

    /// The writes that mark entry `key` answered and take it out of its chat's index.
    pub(crate) fn done_ops(&self, key: &str) -> Result<Vec<BatchOp>, StoreError> {
        let Some(mut entry) = self.get(key)? else {
            return Ok(Vec::new());
        };
        let mut ops = Vec::with_capacity(2);
        if let Some(pending_key) = entry.pending_key.take() {
            ops.push(BatchOp::Delete {
                tree: PENDING,
                key: pending_key.into_bytes(),
            });
        }
        entry.state = JournalState::Done;
        entry.updated_at = Utc::now();
        ops.push(records::put_op(TREE, key, &entry)?);
        Ok(ops)
    }

    /// Applies `ops` as this journal writes (fenced by the chat's claim while a worker owns it).
    pub(crate) fn apply(&self, ops: Vec<BatchOp>) -> Result<(), RecordError> {
        self.writes.apply(ops)
    }

    pub fn mark_done(&self, key: &str) -> Result<(), RecordError> {
        let ops = self.done_ops(key)?;
        self.writes.apply(ops)
    }

    /// Makes recorded messages durable; call before acknowledging them to the platform.
    pub fn flush(&self) -> Result<(), StoreError> {
        self.store().flush()
    }

    /// The conversations with messages waiting, each once, in key order; only `channel`'s
    /// when given.
    pub fn pending_chats(&self, channel: Option<&str>) -> Result<Vec<ChatKey>, StoreError> {
        let prefix = channel.map_or_else(String::new, |channel| format!("{channel}\u{1f}"));
        let chats: BTreeSet<ChatKey> = records::scan::<PendingRef>(self.store(), PENDING, &prefix)?
            .into_iter()
            .map(|(_, pending)| pending.chat)
            .collect();
        Ok(chats.into_iter().collect())
    }

    /// How many messages of `channel` wait for an answer.
    pub fn pending_count(&self, channel: &str) -> Result<usize, StoreError> {
        let prefix = format!("{channel}\u{1f}");
        Ok(self.store().scan_prefix(PENDING, prefix.as_bytes())?.len())
    }

    /// The oldest message of `chat` still to answer. Index entries whose message is answered,
    /// gone or unreadable are removed on the way, so one bad record cannot stop the chat.
    pub fn next_pending(&self, chat: &ChatKey) -> Result<Option<JournalEntry>, StoreError> {
        let prefix = chat_prefix(chat);
        for (index_key, pending) in records::scan::<PendingRef>(self.store(), PENDING, &prefix)? {
            match self.get(&pending.journal_key) {
                Ok(Some(entry)) if entry.state == JournalState::Pending => return Ok(Some(entry)),
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!(%error, journal_key = %pending.journal_key, "Skipping an unreadable journalled message")
                }
            }
            self.store().delete(PENDING, index_key.as_bytes())?;
        }
        Ok(None)
    }

    /// Puts the pending entries of a store written before the pending index into it, once per
    /// store; `chat_of` names each message's conversation.
    pub fn index_unindexed(
        &self,
        chat_of: impl Fn(&InboundMessage) -> Result<ChatKey, StoreError>,
    ) -> Result<usize, StoreError> {
        if self.store().get(META, INDEXED_MARK.as_bytes())?.is_some() {
            return Ok(0);
        }
        let mut indexed = 0;
        for (key, mut entry) in records::scan::<JournalEntry>(self.store(), TREE, "")? {
            if entry.state != JournalState::Pending || entry.pending_key.is_some() {
                continue;
            }
            let chat = chat_of(&entry.message)?;
            let pending_key = format!(
                "{}{:020}\u{1f}{key}",
                chat_prefix(&chat),
                entry.received_at.timestamp_micros().max(0)
            );
            entry.pending_key = Some(pending_key.clone());
            self.store().apply_batch(vec![
                records::put_op(TREE, &key, &entry)?,
                pending_op(&pending_key, &chat, &key)?,
            ])?;
            indexed += 1;
        }
        self.store().put(META, INDEXED_MARK.as_bytes(), b"1")?;
        Ok(indexed)
    }

    /// Forgets answered messages older than `retention`; returns how many.
    pub fn prune(&self, retention: Duration) -> Result<usize, StoreError> {
        let cutoff = Utc::now() - chrono::Duration::from_std(retention).unwrap_or_default();
        let mut removed = 0;
        for (key, entry) in records::scan::<JournalEntry>(self.store(), TREE, "")? {
            if entry.state == JournalState::Done && entry.updated_at < cutoff {
                self.store().delete(TREE, key.as_bytes())?;
                removed += 1;
            }
        }
        Ok(removed)
    }
}

/// The index prefix of one conversation: every component ends with a separator, so one chat's
/// prefix never matches another's (`1` and `12`, a chat and its topics).
fn chat_prefix(chat: &ChatKey) -> String {
    format!(
        "{}\u{1f}{}\u{1f}{}\u{1f}",
        chat.channel,
        chat.chat_id,
        chat.topic_id.as_deref().unwrap_or("")
    )
}

fn pending_op(pending_key: &str, chat: &ChatKey, journal_key: &str) -> Result<BatchOp, StoreError> {
    let pending = PendingRef {
        chat: chat.clone(),
        journal_key: journal_key.to_string(),
    };
    records::put_op(PENDING, pending_key, &pending)
}

#[cfg(test)]
#[path = "journal_tests.rs"]
pub(crate) mod tests;
