//! The inbound journal: every accepted platform message is stored (and flushed) before the
//! platform is told it arrived, so a crash never loses one and a redelivery is recognised.
//!
//! Tree `channel_inbound`: `{channel}\u{1f}{workspace}\u{1f}{chat}\u{1f}{message id}` →
//! [`JournalEntry`]. Answered entries are kept for [`RETENTION`] so redeliveries within that
//! window are dropped; pending ones are processed again when the daemon starts.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use antler_channel::InboundMessage;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::channels::records;
use antler_store::{StoreError, StoreRef};

const TREE: &str = "channel_inbound";
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
}

/// Whether a message is new.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Recorded {
    New(String),
    Duplicate,
}

#[derive(Clone)]
pub struct Journal {
    store: StoreRef,
    /// Makes check-then-insert atomic within the daemon (the store has no compare-and-swap).
    write: Arc<Mutex<()>>,
}

impl Journal {
    pub fn new(store: StoreRef) -> Self {
        Self {
            store,
            write: Arc::default(),
        }
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

    /// Stores a new message as pending; a message seen before is a duplicate. Not durable until
    /// [`Journal::flush`].
    pub fn record(&self, message: &InboundMessage) -> Result<Recorded, StoreError> {
        let key = Self::key_of(message);
        let _guard = self.write.lock().unwrap_or_else(|p| p.into_inner());
        if records::read::<JournalEntry>(&self.store, TREE, &key)?.is_some() {
            crate::metrics::inbound_duplicate(&message.channel);
            return Ok(Recorded::Duplicate);
        }
        crate::metrics::inbound(&message.channel);
        let now = Utc::now();
        let entry = JournalEntry {
            key: key.clone(),
            message: message.clone(),
            state: JournalState::Pending,
            received_at: now,
            updated_at: now,
        };
        records::write(&self.store, TREE, &key, &entry)?;
        Ok(Recorded::New(key))
    }

    pub fn get(&self, key: &str) -> Result<Option<JournalEntry>, StoreError> {
        records::read(&self.store, TREE, key)
    }

    pub fn mark_done(&self, key: &str) -> Result<(), StoreError> {
        let _guard = self.write.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(mut entry) = records::read::<JournalEntry>(&self.store, TREE, key)? {
            entry.state = JournalState::Done;
            entry.updated_at = Utc::now();
            records::write(&self.store, TREE, key, &entry)?;
        }
        Ok(())
    }

    /// Makes recorded messages durable; call before acknowledging them to the platform.
    pub fn flush(&self) -> Result<(), StoreError> {
        self.store.flush()
    }

    /// Messages accepted but not answered, oldest first.
    pub fn pending(&self) -> Result<Vec<JournalEntry>, StoreError> {
        let mut pending: Vec<JournalEntry> = records::scan::<JournalEntry>(&self.store, TREE, "")?
            .into_iter()
            .map(|(_, entry)| entry)
            .filter(|entry| entry.state == JournalState::Pending)
            .collect();
        pending.sort_by_key(|entry| entry.received_at);
        Ok(pending)
    }

    /// Forgets answered messages older than `retention`; returns how many.
    pub fn prune(&self, retention: Duration) -> Result<usize, StoreError> {
        let cutoff = Utc::now() - chrono::Duration::from_std(retention).unwrap_or_default();
        let mut removed = 0;
        for (key, entry) in records::scan::<JournalEntry>(&self.store, TREE, "")? {
            if entry.state == JournalState::Done && entry.updated_at < cutoff {
                self.store.delete(TREE, key.as_bytes())?;
                removed += 1;
            }
        }
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use antler_store::MemoryStore;

    pub(crate) fn message(id: &str) -> InboundMessage {
        InboundMessage {
            channel: "telegram".into(),
            workspace_id: Some("42".into()),
            chat_id: "42".into(),
            topic_id: None,
            user_id: "42".into(),
            display_name: None,
            platform_message_id: id.into(),
            text: "hi".into(),
            files: Vec::new(),
            is_direct: true,
            mentions_bot: false,
            reply_to: None,
            thread_reply: false,
        }
    }

    #[test]
    fn duplicates_are_recognised_and_pending_survives_reopen() {
        let store: StoreRef = Arc::new(MemoryStore::default());
        let journal = Journal::new(store.clone());
        let Recorded::New(first) = journal.record(&message("1")).expect("record") else {
            panic!("first delivery must be new");
        };
        assert_eq!(
            journal.record(&message("1")).expect("record"),
            Recorded::Duplicate
        );
        journal.record(&message("2")).expect("record");
        journal.mark_done(&first).expect("done");
        let reopened = Journal::new(store);
        let pending = reopened.pending().expect("pending");
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].message.platform_message_id, "2");
        // A done entry still dedupes.
        assert_eq!(
            reopened.record(&message("1")).expect("record"),
            Recorded::Duplicate
        );
        assert_eq!(reopened.prune(Duration::from_secs(3600)).expect("prune"), 0);
        assert_eq!(reopened.prune(Duration::ZERO).expect("prune"), 1);
    }
}
