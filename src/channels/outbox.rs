//! The outbox: every final send, edit and upload is a durable record with an idempotency key.
//!
//! Tree `channel_outbox`: `{journal key}\u{1e}{step}` → [`OutboxRecord`], the step being an
//! [`OutboxStep`] (`status`, `final-0`, `file-1`, …). A record is written
//! before the request; the platform's message id is written as soon as the platform answers,
//! and a record that has one is never sent again, so a restart resumes a delivery without
//! producing a second copy. Records that keep failing move to `channel_dead_letters`. While a
//! conversation's worker answers a message every write is fenced by the chat's claim, and every
//! send waits for the claim to check out, so an instance that lost the chat sends nothing more
//! and its successor resumes the records exactly as a restart does.

use antler_channel::{Attachment, Button, ChatKey};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use std::sync::Arc;

use crate::channels::records::{self, RecordError, Writes};
use crate::cluster::HeldLease;
use antler_store::{BatchOp, StoreError, StoreRef};

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
    /// A message with one row of buttons (an approval request); plain text where the channel
    /// has no buttons.
    Buttons {
        text: String,
        buttons: Vec<Button>,
        reply_to: Option<String>,
    },
    /// Replace the text of the message with buttons another record sent and remove them: the
    /// question is settled.
    Settle { target: String, text: String },
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
    /// The journal entry this record answers.
    pub fn journal_key(&self) -> &str {
        self.key
            .rsplit_once('\u{1e}')
            .map_or(&self.key, |(entry, _)| entry)
    }

    /// The step this record performs; `None` for a key written by a newer version.
    pub fn step(&self) -> Option<OutboxStep> {
        let (_, step) = self.key.rsplit_once('\u{1e}')?;
        OutboxStep::decode(step)
    }

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
    writes: Writes,
}

/// One step of answering a message; with the journal key it is the record's idempotency key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OutboxStep {
    /// The "Working on it…" message the answer streams into.
    Status,
    /// Chunk `n` of a command's reply.
    Reply(usize),
    /// Chunk `n` of an error reply.
    Error(usize),
    /// Chunk `n` of the final answer; `Final(0)` is written last, so its presence means the
    /// whole answer is planned.
    Final(usize),
    /// Artifact `n`, uploaded after the text.
    File(usize),
    /// A new message carrying the text of an edit that could not land.
    Resend(Box<OutboxStep>),
    /// The approval request a parked run posts (its id), after the text the run said.
    Approval(String),
    /// An approval request's buttons settled (the decision shown in their message).
    Settle,
    /// Chunk `n` of a voice note's transcript shown in the chat (`voice.echo_transcript`),
    /// before the status message.
    Transcript(usize),
    /// The answer spoken (`voice.speech`): an upload with `Attachment::voice`, after the text
    /// and files.
    Voice,
}

impl OutboxStep {
    fn encode(&self) -> String {
        match self {
            OutboxStep::Status => "status".into(),
            OutboxStep::Reply(n) => format!("reply-{n}"),
            OutboxStep::Error(n) => format!("error-{n}"),
            OutboxStep::Final(n) => format!("final-{n}"),
            OutboxStep::File(n) => format!("file-{n}"),
            OutboxStep::Resend(step) => format!("{}-resend", step.encode()),
            OutboxStep::Approval(id) => format!("approval:{id}"),
            OutboxStep::Settle => "settle".into(),
            OutboxStep::Transcript(n) => format!("transcript-{n}"),
            OutboxStep::Voice => "voice".into(),
        }
    }

    fn decode(text: &str) -> Option<Self> {
        if let Some(inner) = text.strip_suffix("-resend") {
            return Self::decode(inner).map(|step| OutboxStep::Resend(Box::new(step)));
        }
        if text == "status" {
            return Some(OutboxStep::Status);
        }
        if text == "settle" {
            return Some(OutboxStep::Settle);
        }
        if text == "voice" {
            return Some(OutboxStep::Voice);
        }
        if let Some(id) = text.strip_prefix("approval:") {
            return Some(OutboxStep::Approval(id.to_string()));
        }
        let (kind, n) = text.rsplit_once('-')?;
        let n = n.parse().ok()?;
        match kind {
            "reply" => Some(OutboxStep::Reply(n)),
            "error" => Some(OutboxStep::Error(n)),
            "final" => Some(OutboxStep::Final(n)),
            "file" => Some(OutboxStep::File(n)),
            "transcript" => Some(OutboxStep::Transcript(n)),
            _ => None,
        }
    }

    /// The record key of this step of answering journal entry `journal_key`.
    pub fn key(&self, journal_key: &str) -> String {
        format!("{journal_key}\u{1e}{}", self.encode())
    }
}

impl Outbox {
    pub fn new(store: StoreRef) -> Self {
        Self {
            writes: Writes::direct(store),
        }
    }

    /// This outbox with every write fenced by a chat's claim: once another instance took the
    /// chat over, nothing more is planned, marked or sent from here.
    pub(crate) fn fenced(&self, claim: Arc<HeldLease>) -> Self {
        Self {
            writes: Writes::fenced(self.store().clone(), claim),
        }
    }

    fn store(&self) -> &StoreRef {
        self.writes.store()
    }

    pub fn get(&self, key: &str) -> Result<Option<OutboxRecord>, StoreError> {
        records::read(self.store(), TREE, key)
    }

    /// Writes a record unless one with the same key exists; returns the stored one.
    pub fn insert(&self, record: OutboxRecord) -> Result<OutboxRecord, RecordError> {
        if let Some(existing) = self.get(&record.key)? {
            return Ok(existing);
        }
        self.save(&record)?;
        Ok(record)
    }

    pub fn save(&self, record: &OutboxRecord) -> Result<(), RecordError> {
        self.writes
            .apply(vec![records::put_op(TREE, &record.key, record)?])
    }

    /// Whether this outbox may still send: asked before every request to the platform.
    pub fn check(&self) -> Result<(), RecordError> {
        self.writes.check()
    }

    /// Records delivery and makes it durable before anything else happens.
    pub fn mark_delivered(
        &self,
        record: &mut OutboxRecord,
        platform_message_id: Option<String>,
    ) -> Result<(), RecordError> {
        record.delivered = true;
        if platform_message_id.is_some() {
            record.platform_message_id = platform_message_id;
        }
        self.save(record)?;
        Ok(self.store().flush()?)
    }

    /// Every record of one journal entry, in step order.
    pub fn for_entry(&self, journal_key: &str) -> Result<Vec<OutboxRecord>, StoreError> {
        let prefix = format!("{journal_key}\u{1e}");
        Ok(records::scan(self.store(), TREE, &prefix)?
            .into_iter()
            .map(|(_, record)| record)
            .collect())
    }

    pub fn dead_letter(&self, record: &OutboxRecord) -> Result<(), RecordError> {
        crate::metrics::dead_letter(&record.chat.channel);
        self.writes.apply(vec![
            records::put_op(DEAD, &record.key, record)?,
            BatchOp::Delete {
                tree: TREE,
                key: record.key.as_bytes().to_vec(),
            },
        ])
    }

    pub fn dead_letters(&self) -> Result<Vec<OutboxRecord>, StoreError> {
        Ok(records::scan(self.store(), DEAD, "")?
            .into_iter()
            .map(|(_, record)| record)
            .collect())
    }

    /// The writes that remove the records of an answered entry (applied with the journal's
    /// `done`, in one batch).
    pub(crate) fn clear_ops(&self, journal_key: &str) -> Result<Vec<BatchOp>, StoreError> {
        let prefix = format!("{journal_key}\u{1e}");
        Ok(self
            .store()
            .scan_prefix(TREE, prefix.as_bytes())?
            .into_iter()
            .map(|(key, _)| BatchOp::Delete { tree: TREE, key })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use antler_store::MemoryStore;

    #[test]
    fn insert_is_idempotent_and_delivery_sticks() {
        let store: StoreRef = Arc::new(MemoryStore::default());
        let outbox = Outbox::new(store.clone());
        let chat = ChatKey::new("telegram", "42", None);
        let key = OutboxStep::Final(0).key("j1");
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

    #[test]
    fn steps_round_trip_through_their_keys() {
        let chat = ChatKey::new("telegram", "42", None);
        let steps = [
            OutboxStep::Status,
            OutboxStep::Reply(0),
            OutboxStep::Error(2),
            OutboxStep::Final(11),
            OutboxStep::File(3),
            OutboxStep::Resend(Box::new(OutboxStep::Final(0))),
            OutboxStep::Approval("k3-x9".into()),
            OutboxStep::Settle,
            OutboxStep::Transcript(1),
            OutboxStep::Voice,
        ];
        for step in steps {
            let action = OutboxAction::Send {
                text: "x".into(),
                reply_to: None,
            };
            let record = OutboxRecord::new(step.key("j\u{1f}1"), chat.clone(), false, action);
            assert_eq!(record.step(), Some(step));
        }
    }
}
