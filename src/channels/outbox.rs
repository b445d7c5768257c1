//! The outbox: every final send, edit and upload is a durable record with an idempotency key.
//!
//! Tree `channel_outbox`: `{journal key}\u{1e}{step}` → [`OutboxRecord`]. A record is written
//! before the request; the platform's message id is written as soon as the platform answers,
//! and a record that has one is never sent again, so a restart resumes a delivery without
//! producing a second copy. Records that keep failing move to `channel_dead_letters`.

use antler_channel::{Attachment, ChatKey};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::channels::records;
use crate::store::{StoreError, StoreRef};

const TREE: &str = "channel_outbox";
const DEAD: &str = "channel_dead_letters";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum OutboxAction {
    Send {
        text: String,
        reply_to: Option<String>,
    },
    /// Replace the text of the message another record sent.
    Edit { target: String, text: String },
    Upload {
        attachment: Attachment,
        reply_to: Option<String>,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OutboxRecord {
    pub key: String,
    pub chat: ChatKey,
    /// Groups draw from the slower group budget.
    #[serde(default)]
    pub is_group: bool,
    pub action: OutboxAction,
    /// Set once delivered: for sends and uploads the platform's id of the new message.
    pub platform_message_id: Option<String>,
    pub delivered: bool,
    pub attempts: u32,
    pub last_error: Option<String>,
    pub created_at: DateTime<Utc>,
}

impl OutboxRecord {
    pub fn new(key: String, chat: ChatKey, is_group: bool, action: OutboxAction) -> Self {
        Self {
            key,
            chat,
            is_group,
            action,
            platform_message_id: None,
            delivered: false,
            attempts: 0,
            last_error: None,
            created_at: Utc::now(),
        }
    }
}

#[derive(Clone)]
pub struct Outbox {
    store: StoreRef,
}

/// The idempotency key of step `step` of answering journal entry `journal_key`.
pub fn outbox_key(journal_key: &str, step: &str) -> String {
    format!("{journal_key}\u{1e}{step}")
}

impl Outbox {
    pub fn new(store: StoreRef) -> Self {
        Self { store }
    }

    pub fn get(&self, key: &str) -> Result<Option<OutboxRecord>, StoreError> {
        records::read(&self.store, TREE, key)
    }

    /// Writes a record unless one with the same key exists; returns the stored one.
    pub fn insert(&self, record: OutboxRecord) -> Result<OutboxRecord, StoreError> {
        if let Some(existing) = self.get(&record.key)? {
            return Ok(existing);
        }
        records::write(&self.store, TREE, &record.key, &record)?;
        Ok(record)
    }

    pub fn save(&self, record: &OutboxRecord) -> Result<(), StoreError> {
        records::write(&self.store, TREE, &record.key, record)
    }

    /// Records delivery and makes it durable before anything else happens.
    pub fn mark_delivered(
        &self,
        record: &mut OutboxRecord,
        platform_message_id: Option<String>,
    ) -> Result<(), StoreError> {
        record.delivered = true;
        if platform_message_id.is_some() {
            record.platform_message_id = platform_message_id;
        }
        self.save(record)?;
        self.store.flush()
    }

    /// Every record of one journal entry, in step order.
    pub fn for_entry(&self, journal_key: &str) -> Result<Vec<OutboxRecord>, StoreError> {
        let prefix = format!("{journal_key}\u{1e}");
        Ok(records::scan(&self.store, TREE, &prefix)?
            .into_iter()
            .map(|(_, record)| record)
            .collect())
    }

    pub fn dead_letter(&self, record: &OutboxRecord) -> Result<(), StoreError> {
        records::write(&self.store, DEAD, &record.key, record)?;
        self.store.delete(TREE, record.key.as_bytes())
    }

    pub fn dead_letters(&self) -> Result<Vec<OutboxRecord>, StoreError> {
        Ok(records::scan(&self.store, DEAD, "")?
            .into_iter()
            .map(|(_, record)| record)
            .collect())
    }

    /// Removes the records of an answered entry.
    pub fn clear_entry(&self, journal_key: &str) -> Result<(), StoreError> {
        for record in self.for_entry(journal_key)? {
            self.store.delete(TREE, record.key.as_bytes())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;
    use std::sync::Arc;

    #[test]
    fn insert_is_idempotent_and_delivery_sticks() {
        let store: StoreRef = Arc::new(MemoryStore::default());
        let outbox = Outbox::new(store.clone());
        let chat = ChatKey::new("telegram", "42", None);
        let key = outbox_key("j1", "final-0");
        let send = OutboxAction::Send {
            text: "hello".into(),
            reply_to: None,
        };
        let mut record = outbox
            .insert(OutboxRecord::new(
                key.clone(),
                chat.clone(),
                false,
                send.clone(),
            ))
            .expect("insert");
        outbox
            .mark_delivered(&mut record, Some("77".into()))
            .expect("delivered");
        let again = outbox
            .insert(OutboxRecord::new(key.clone(), chat, false, send))
            .expect("insert");
        assert_eq!(again.platform_message_id.as_deref(), Some("77"));
        assert!(again.delivered);
        assert_eq!(Outbox::new(store).for_entry("j1").expect("scan").len(), 1);
        outbox.dead_letter(&again).expect("dead");
        assert_eq!(outbox.dead_letters().expect("dead").len(), 1);
        assert!(outbox.for_entry("j1").expect("scan").is_empty());
    }
}
