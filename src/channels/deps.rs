//! What answering a message needs from the rest of the daemon, in one narrow struct: the manager
//! owns it and lends it to every command and turn, so neither reaches into the manager.

use std::sync::Arc;

use antler_channel::{ChatKey, InboundMessage};
use serde_json::{Map, json};
use tokio_util::sync::CancellationToken;

use crate::channels::journal::Journal;
use crate::channels::mapping::{ChatMap, ChatRecord, NewChat, chat_owner};
use crate::channels::outbox::Outbox;
use crate::channels::records::RecordError;
use crate::channels::shared_chat;
use crate::cluster::HeldLease;
use crate::config::ConfigHandle;
use crate::harness::{Harness, RunError};
use crate::identity::Identities;

pub(crate) struct TurnDeps {
    pub(crate) harness: Arc<Harness>,
    pub(crate) config: ConfigHandle,
    pub(crate) chats: ChatMap,
    pub(crate) journal: Journal,
    pub(crate) outbox: Outbox,
    /// Fires at shutdown: turns cut short are left pending for the next start.
    pub(crate) stop: CancellationToken,
    /// Fires when the chat's claim is lost (another instance took the chat over): the run is
    /// cancelled at once and the message left pending for the new holder. Never fires outside a
    /// conversation's worker.
    pub(crate) claim_lost: CancellationToken,
    /// The chat's claim while a worker answers it.
    pub(crate) claim: Option<Arc<HeldLease>>,
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
    #[error(transparent)]
    Record(#[from] RecordError),
    #[error(transparent)]
    Migrate(#[from] shared_chat::MigrateError),
    #[error(transparent)]
    Approval(#[from] crate::approvals::ApprovalError),
    #[error(transparent)]
    Schedule(#[from] crate::scheduler::SchedulerError),
    /// A command could not be carried out; the text says why.
    #[error("{0}")]
    Command(String),
}

impl TurnDeps {
    /// The chat's record; its first message creates the thread, owned by the sender in a
    /// direct chat and by the chat in a group. A group's record of the old kind (owned by
    /// whoever spoke first) is moved to the chat here, at its next group message. A direct
    /// chat whose sender became another user (`/link`, `/unlink`) continues on a new thread of
    /// theirs: the old one stays its old owner's, with its history. `user_id` is the sender
    /// as [`Self::sender`] resolved it (once per message: it costs a store read).
    pub(crate) async fn chat_record(
        &self,
        key: &ChatKey,
        message: &InboundMessage,
        user_id: &str,
    ) -> Result<ChatRecord, TurnError> {
        let user_id = user_id.to_string();
        let shared = !message.is_direct;
        let owner = if shared {
            chat_owner(key)
        } else {
            user_id.clone()
        };
        let new = NewChat {
            owner: &owner,
            shared,
            started_by: &user_id,
        };
        let harness = self.harness.clone();
        let chat = key.to_string();
        let metadata = move || {
            let mut metadata = Map::new();
            metadata.insert(
                "channel_source".into(),
                json!({"type": "im_channel", "chat": chat}),
            );
            metadata
        };
        let fresh = metadata.clone();
        let mut record = self
            .chats
            .get_or_create(key, new, move |user| {
                harness
                    .create_thread(user, None, fresh())
                    .map(|record| record.thread_id)
                    .map_err(TurnError::from)
            })
            .await?;
        if shared && !record.shared {
            return Ok(self.migrate(key)?);
        }
        if shared && message.workspace_id.is_some() && record.workspace_id != message.workspace_id {
            let workspace_id = message.workspace_id.clone();
            self.chats
                .update(key, |record| record.workspace_id.clone_from(&workspace_id))?;
            record.workspace_id = workspace_id;
        }
        if !shared && record.user_id != user_id {
            let thread = self.harness.create_thread(&user_id, None, metadata())?;
            record.user_id = user_id;
            record.thread_id = thread.thread_id;
            // A custom agent and a bootstrap were the old user's.
            record.agent = None;
            record.agent_set_by = None;
            record.bootstrap = None;
            record.updated_at = chrono::Utc::now();
            self.chats.put(key, &record)?;
        }
        Ok(record)
    }

    /// The Antler user who sent `message` (linked accounts followed: see [`crate::identity`]).
    pub(crate) fn sender(&self, message: &InboundMessage) -> Result<String, TurnError> {
        let identities = Identities::new(self.harness.threads().store().clone());
        let config = self.config.current();
        Ok(identities.sender(&config, &message.channel, &message.user_id)?)
    }

    /// Points the chat at a fresh thread of the same owner, keeping its settings (model, plan
    /// mode) unless `change` changes them. `user_id` is the sender; `shared`: the message came
    /// from a group (whose conversation the chat owns, see [`ChatMap`]).
    pub(crate) fn new_thread(
        &self,
        key: &ChatKey,
        user_id: &str,
        shared: bool,
        change: impl FnOnce(&mut ChatRecord),
    ) -> Result<ChatRecord, TurnError> {
        let existing = match self.chats.get(key)? {
            Some(record) if shared && !record.shared => Some(self.migrate(key)?),
            other => other,
        };
        let owner = match &existing {
            Some(record) => record.user_id.clone(),
            None if shared => chat_owner(key),
            None => user_id.to_string(),
        };
        let thread = self.harness.create_thread(&owner, None, Map::new())?;
        let now = chrono::Utc::now();
        let mut record = existing.unwrap_or_else(|| {
            let new = NewChat {
                owner: &owner,
                shared,
                started_by: user_id,
            };
            ChatRecord::new(String::new(), &new)
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

    /// Moves a group conversation of the old kind to its chat (see `shared_chat`).
    fn migrate(&self, key: &ChatKey) -> Result<ChatRecord, shared_chat::MigrateError> {
        let data_dir = self.config.current().data_dir();
        shared_chat::migrate(&self.chats, self.harness.threads(), &data_dir, key)
    }

    /// These dependencies for a conversation's worker holding `claim`: the journal and outbox
    /// write fenced by it, and `claim_lost` fires with it.
    pub(crate) fn claimed(&self, claim: Arc<HeldLease>) -> Self {
        Self {
            harness: self.harness.clone(),
            config: self.config.clone(),
            chats: self.chats.clone(),
            journal: self.journal.fenced(claim.clone()),
            outbox: self.outbox.fenced(claim.clone()),
            stop: self.stop.clone(),
            claim_lost: claim.lost(),
            claim: Some(claim),
        }
    }

    /// Whether the chat's claim still holds by this daemon's own clock: a daemon resumed after
    /// a pause past its lease must not edit the status message another daemon now streams into,
    /// even before its renewer has noticed the loss. Always true outside a worker.
    pub(crate) fn claim_live(&self) -> bool {
        self.claim.as_ref().is_none_or(|claim| {
            !claim.is_lost() && claim.lease().is_live(self.harness.cluster().now_ms())
        })
    }

    /// Whether the turn was cut short (shutdown, or the chat taken over): its message stays
    /// pending instead of being answered from here.
    pub(crate) fn interrupted(&self) -> bool {
        self.stop.is_cancelled() || self.claim_lost.is_cancelled() || !self.claim_live()
    }

    /// Marks a message answered and forgets its outbox records, in one batch (fenced by the
    /// chat's claim in a worker).
    pub(crate) fn finish_entry(&self, journal_key: &str) {
        let ops = self.journal.done_ops(journal_key).and_then(|mut ops| {
            ops.extend(self.outbox.clear_ops(journal_key)?);
            Ok(ops)
        });
        match ops
            .map_err(RecordError::from)
            .and_then(|ops| self.journal.apply(ops))
        {
            Ok(()) => {}
            Err(error @ RecordError::ClaimLost { .. }) => {
                tracing::info!(%error, journal_key, "Left a channel message to the instance that took its chat over");
            }
            Err(error) => {
                tracing::warn!(%error, journal_key, "Could not mark a channel message answered");
            }
        }
    }
}
