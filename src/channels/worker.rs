//! A conversation's worker and the chat claims it works under.
//!
//! One worker per `ChatKey` in all the daemons sharing the store: it holds the lease
//! `chat:{channel}\u{1f}{workspace}\u{1f}{chat}\u{1f}{topic}` while it works and answers the
//! chat's pending messages (the journal's index) in received order, whichever daemon received
//! them; its journal and outbox writes are fenced by the claim, and its turn is cancelled the
//! moment the claim is lost, the message left pending for the next holder. With nothing left it
//! releases the claim and looks once more, so a message another daemon journalled meanwhile is
//! not stranded. The sweeper claims chats whose messages wait with no live claim: a dead
//! daemon's chats move on within two leases.
//!
//! The local queue (`channels.queue_limit`) only wakes the worker and bounds how many messages
//! this daemon sees waiting behind a turn, for the "queued" and "too many" notes; the index is
//! what the worker answers from.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use antler_channel::{ChatKey, InboundMessage};
use tokio::sync::mpsc;

use crate::channels::deps::TurnDeps;
use crate::channels::journal::{JournalEntry, JournalState};
use crate::channels::manager::{ManagerInner, QUEUE_FULL_NOTE, QUEUED_NOTE};
use crate::channels::outbound::note;
use crate::channels::runtime::ChannelRuntime;
use crate::channels::schedule_entry::schedule_entry_of;
use crate::channels::slots::{ChatQueue, Job, Slot};
use crate::channels::turn;
use crate::cluster::HeldLease;

/// A message still waiting this long behind the conversation's current turn gets the
/// "queued" note; one answered sooner needs none.
const QUEUED_NOTE_DELAY: Duration = Duration::from_secs(2);

/// The lease name of a chat's claim. A `ChatKey` names no workspace (chat ids are unique within
/// a channel's bot), so that field is empty; the separators keep `1` apart from `12`.
pub(crate) fn chat_claim(chat: &ChatKey) -> String {
    format!(
        "chat:{}\u{1f}\u{1f}{}\u{1f}{}",
        chat.channel,
        chat.chat_id,
        chat.topic_id.as_deref().unwrap_or("")
    )
}

/// How a worker stopped.
enum Exit {
    /// Nothing left to answer.
    Idle,
    /// Shutdown, the claim lost, the channel gone, or a message that could not be settled:
    /// left pending for a later claim.
    Interrupted,
}

impl ManagerInner {
    /// Hands a chat to its worker: the local one, or a new one once this daemon claims the chat.
    /// When another daemon holds the claim the message stays pending for its worker.
    pub(crate) fn dispatch(self: &Arc<Self>, chat: &ChatKey, job: Option<Job>) {
        let name = chat.to_string();
        let mut queues = self.queues.lock().unwrap_or_else(|p| p.into_inner());
        match queues.get(&name) {
            Some(Slot::Working(queue)) => {
                if let Some(job) = job {
                    self.enqueue(queue, job);
                }
                return;
            }
            Some(Slot::Changing) => return,
            None => {}
        }
        queues.insert(name.clone(), Slot::Changing);
        drop(queues);
        let claim = match self.cluster.try_hold(&chat_claim(chat)) {
            Ok(Some(claim)) => claim,
            Ok(None) => {
                tracing::debug!(%chat, "Another instance is answering this chat; leaving the message to it");
                self.forget_slot(&name);
                return;
            }
            Err(error) => {
                tracing::warn!(%error, %chat, "Could not claim a chat; the sweeper tries again");
                self.forget_slot(&name);
                return;
            }
        };
        let limit = self.deps.config.current().channels.queue_limit.max(1);
        let (sender, receiver) = mpsc::channel(limit);
        let queue = ChatQueue {
            sender,
            current: Arc::default(),
        };
        if let Some(job) = job
            && queue.sender.try_send(job.journal_key).is_ok()
        {
            crate::metrics::chat_queue_added();
        }
        let current = queue.current.clone();
        self.queues
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name, Slot::Working(queue));
        let inner = self.clone();
        let chat = chat.clone();
        self.tracker.spawn(async move {
            inner.work(chat, claim, receiver, current).await;
        });
    }

    /// Claims the chats whose messages wait with no live claim, every third of a lease (a dead
    /// daemon's claims expire after one), until the manager stops.
    pub(crate) async fn sweep_every_third_of_a_lease(self: Arc<Self>) {
        let every = self.cluster.lease_duration() / 3;
        loop {
            tokio::select! {
                () = self.deps.stop.cancelled() => return,
                () = tokio::time::sleep(every) => {}
            }
            if let Err(error) = self.sweep() {
                tracing::warn!(%error, "Could not look for unanswered channel messages");
            }
        }
    }

    fn sweep(self: &Arc<Self>) -> Result<(), antler_store::StoreError> {
        for chat in self.deps.journal.pending_chats(None)? {
            let here = self
                .queues
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains_key(&chat.to_string());
            if here || self.runtime(&chat.channel).is_none() {
                continue;
            }
            let claim = chat_claim(&chat);
            if self
                .cluster
                .live(&claim)?
                .iter()
                .any(|lease| lease.name == claim)
            {
                continue;
            }
            self.dispatch(&chat, None);
        }
        Ok(())
    }

    fn enqueue(self: &Arc<Self>, queue: &ChatQueue, job: Job) {
        match queue.sender.try_send(job.journal_key.clone()) {
            Ok(()) => {
                crate::metrics::chat_queue_added();
                self.note_if_still_waiting(job, queue.current.clone());
            }
            Err(mpsc::error::TrySendError::Full(_)) => {
                crate::metrics::queue_full("chat_messages");
                // Still pending in the journal: answered once the messages before it are.
                self.spawn_note(job.runtime, &job.chat, QUEUE_FULL_NOTE, &job.message);
            }
            // The worker is leaving; its last look at the index finds the message.
            Err(mpsc::error::TrySendError::Closed(_)) => {}
        }
    }

    fn forget_slot(&self, name: &str) {
        let mut queues = self.queues.lock().unwrap_or_else(|p| p.into_inner());
        if matches!(queues.get(name), Some(Slot::Changing)) {
            queues.remove(name);
        }
    }

    async fn work(
        self: Arc<Self>,
        chat: ChatKey,
        claim: HeldLease,
        mut receiver: mpsc::Receiver<String>,
        current: Arc<Mutex<Option<String>>>,
    ) {
        let name = chat.to_string();
        let lost = claim.lost();
        let deps = self.deps.claimed(Arc::new(claim));
        let mut attempted = HashSet::new();
        let exit = loop {
            if deps.interrupted() {
                break Exit::Interrupted;
            }
            while receiver.try_recv().is_ok() {
                crate::metrics::chat_queue_taken();
            }
            let entry = match deps.journal.next_pending(&chat) {
                Ok(Some(entry)) => entry,
                Ok(None) => {
                    // Re-check under the lock senders use, so nothing slips in as we leave.
                    let mut queues = self.queues.lock().unwrap_or_else(|p| p.into_inner());
                    if receiver.try_recv().is_ok() {
                        crate::metrics::chat_queue_taken();
                        continue;
                    }
                    queues.insert(name.clone(), Slot::Changing);
                    break Exit::Idle;
                }
                Err(error) => {
                    tracing::warn!(%error, %chat, "Could not read the chat's pending messages");
                    break Exit::Interrupted;
                }
            };
            // A message still pending after this worker answered it could not be settled (the
            // store refused): a later claim tries again instead of this loop.
            if !attempted.insert(entry.key.clone()) {
                break Exit::Interrupted;
            }
            // A channel that disconnected answers after it reconnects (`recover`).
            let Some(runtime) = self.runtime(&entry.message.channel) else {
                break Exit::Interrupted;
            };
            *current.lock().unwrap_or_else(|p| p.into_inner()) = Some(entry.key.clone());
            handle(&deps, &runtime, &chat, &entry).await;
        };
        if matches!(exit, Exit::Interrupted) {
            let mut queues = self.queues.lock().unwrap_or_else(|p| p.into_inner());
            queues.insert(name.clone(), Slot::Changing);
        }
        receiver.close();
        while receiver.try_recv().is_ok() {
            crate::metrics::chat_queue_taken();
        }
        // Released once the last reference (held by the fenced journal and outbox) goes; wait
        // for the release so this daemon never holds two claims of one chat.
        drop(deps);
        lost.cancelled().await;
        self.forget_slot(&name);
        let stopping = self.deps.stop.is_cancelled();
        if matches!(exit, Exit::Idle) && !stopping {
            match self.deps.journal.next_pending(&chat) {
                Ok(Some(_)) => self.dispatch(&chat, None),
                Ok(None) => {}
                Err(error) => {
                    tracing::warn!(%error, %chat, "Could not read the chat's pending messages")
                }
            }
        }
    }

    /// Says "queued" only to a message that is still waiting after [`QUEUED_NOTE_DELAY`]; a
    /// click (or a resume entry, or a schedule's) is no message to say it to.
    fn note_if_still_waiting(self: &Arc<Self>, job: Job, current: Arc<Mutex<Option<String>>>) {
        if job.message.click.is_some() || schedule_entry_of(&job.message).is_some() {
            return;
        }
        let inner = self.clone();
        self.tracker.spawn(async move {
            tokio::select! {
                _ = inner.deps.stop.cancelled() => return,
                _ = tokio::time::sleep(QUEUED_NOTE_DELAY) => {}
            }
            let begun = current.lock().unwrap_or_else(|p| p.into_inner()).as_deref()
                == Some(job.journal_key.as_str());
            let waiting = matches!(
                inner.deps.journal.get(&job.journal_key),
                Ok(Some(entry)) if entry.state == JournalState::Pending
            );
            if waiting && !begun {
                let reply_to = Some(job.message.platform_message_id.as_str());
                let is_group = !job.message.is_direct;
                note(&job.runtime, &job.chat, is_group, QUEUED_NOTE, reply_to).await;
            }
        });
    }

    pub(crate) fn spawn_note(
        self: &Arc<Self>,
        runtime: Arc<ChannelRuntime>,
        key: &ChatKey,
        text: &'static str,
        message: &InboundMessage,
    ) {
        let key = key.clone();
        let is_group = !message.is_direct;
        let reply_to = message.platform_message_id.clone();
        self.tracker.spawn(async move {
            note(&runtime, &key, is_group, text, Some(&reply_to)).await;
        });
    }
}

async fn handle(deps: &TurnDeps, runtime: &ChannelRuntime, chat: &ChatKey, entry: &JournalEntry) {
    if turn::process(deps, runtime, chat, entry).await {
        deps.finish_entry(&entry.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_of_different_chats_never_share_a_name() {
        let names: HashSet<String> = [
            ChatKey::new("telegram", "1", None),
            ChatKey::new("telegram", "12", None),
            ChatKey::new("telegram", "1", Some("2".into())),
            ChatKey::new("slack", "1", None),
        ]
        .iter()
        .map(chat_claim)
        .collect();
        assert_eq!(names.len(), 4);
        assert!(names.iter().all(|name| name.starts_with("chat:")));
    }
}
