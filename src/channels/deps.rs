//! What answering a message needs from the rest of the daemon, in one narrow struct: the manager
//! owns it and lends it to every command and turn, so neither reaches into the manager.

use std::sync::Arc;

use antler_channel::{ChatKey, InboundMessage};
use serde_json::{Map, json};
use tokio_util::sync::CancellationToken;

use crate::channels::journal::Journal;
use crate::channels::mapping::{ChatMap, ChatRecord};
use crate::channels::outbox::Outbox;
use crate::config::ConfigHandle;
use crate::harness::{Harness, RunError};
use crate::identity::channel_user_id;

pub(crate) struct TurnDeps {
    pub(crate) harness: Arc<Harness>,
    pub(crate) config: ConfigHandle,
    pub(crate) chats: ChatMap,
    pub(crate) journal: Journal,
    pub(crate) outbox: Outbox,
    /// Fires at shutdown: turns cut short are left pending for the next start.
    pub(crate) stop: CancellationToken,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum TurnError {
    #[error(transparent)]
    Store(#[from] antler_store::StoreError),
    #[error(transparent)]
    Thread(#[from] antler_store::threads::ThreadError),
    #[error(transparent)]
    Path(#[from] crate::paths::PathError),
    #[error(transparent)]
    Run(#[from] RunError),
    #[error(transparent)]
    Memory(#[from] crate::memory::MemoryError),
    /// A command could not be carried out; the text says why.
    #[error("{0}")]
    Command(String),
}

impl TurnDeps {
    /// The chat's record; its first message creates the thread, owned by the sender.
    pub(crate) async fn chat_record(
        &self,
        key: &ChatKey,
        message: &InboundMessage,
    ) -> Result<ChatRecord, TurnError> {
        let user_id = channel_user_id(&message.channel, &message.user_id);
        let harness = self.harness.clone();
        let chat = key.to_string();
        self.chats
            .get_or_create(key, &user_id, move |user| {
                let mut metadata = Map::new();
                metadata.insert(
                    "channel_source".into(),
                    json!({"type": "im_channel", "chat": chat}),
                );
                harness
                    .create_thread(user, None, metadata)
                    .map(|record| record.thread_id)
                    .map_err(TurnError::from)
            })
            .await
    }

    /// Points the chat at a fresh thread, keeping its settings (model, plan mode) unless
    /// `change` changes them.
    pub(crate) fn new_thread(
        &self,
        key: &ChatKey,
        user_id: &str,
        change: impl FnOnce(&mut ChatRecord),
    ) -> Result<ChatRecord, TurnError> {
        let existing = self.chats.get(key)?;
        // In a group the thread keeps the owner the conversation started with.
        let owner = existing
            .as_ref()
            .map_or_else(|| user_id.to_string(), |r| r.user_id.clone());
        let thread = self.harness.create_thread(&owner, None, Map::new())?;
        let now = chrono::Utc::now();
        let mut record = existing.unwrap_or(ChatRecord {
            thread_id: String::new(),
            user_id: owner,
            model: None,
            agent: None,
            plan_mode: false,
            bootstrap: None,
            created_at: now,
            updated_at: now,
        });
        record.thread_id = thread.thread_id;
        record.updated_at = now;
        // A bootstrap belongs to its conversation: a new one ends it (unless `change` starts
        // one).
        record.bootstrap = None;
        change(&mut record);
        self.chats.put(key, &record)?;
        Ok(record)
    }

    /// Marks a message answered and forgets its outbox records.
    pub(crate) fn finish_entry(&self, journal_key: &str) {
        if let Err(error) = self
            .journal
            .mark_done(journal_key)
            .and_then(|()| self.outbox.clear_entry(journal_key))
        {
            tracing::warn!(%error, journal_key, "Could not mark a channel message answered");
        }
    }
}
