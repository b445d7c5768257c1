//! [`MemoryQueue`]: debounced memory updates, one pending conversation per (thread, user,
//! agent), latest wins, persisted in the `memory_queue` tree so a restart loses nothing.
//!
//! A pending entry names its thread; the conversation itself is read from the thread when the
//! update runs ([`ConversationLoader`]). Why: the thread's checkpoints already hold it, and
//! persisting the newest 60 messages again on every turn wrote ~100 KB a turn for ~2 KB of new
//! text (measured with 1.5 KB questions and 2 KB answers: 381 KB of disk writes a turn, 37 KB
//! once the queue stopped copying). A turn that replaces a pending entry writes nothing now.
//!
//! The queue owns one background task (a cancellation token and its join handle) that runs an
//! update once a conversation has been quiet for `memory.debounce_seconds`. Shutdown stops the
//! task and flushes whatever is pending, within a deadline.
//!
//! An update whose model cannot be reached (connect errors, timeouts, 429 and 5xx once the
//! model client's own retries are spent) stays queued and persisted and is tried again later
//! ([`RETRY_AFTER`], doubling, at most [`MAX_ATTEMPTS`] tries). Why: dropping it lost what the
//! conversation taught whenever the model was restarting, and a shutdown with the model down
//! spent its whole deadline failing one pending update after another, dropping each.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::memory::MemoryError;
use crate::memory::conversation::Author;

use crate::memory::repo::MemoryScope;
use crate::memory::updater::{ConversationMessage, MemoryUpdater};
use crate::model::ChatModel;
use antler_store::{BatchOp, Expect, StoreRef};

#[path = "queue_shared.rs"]
pub mod shared;

use shared::QueueOwner;

pub const QUEUE_TREE: &str = "memory_queue";
/// Pending conversations beyond this are refused (logged): bounded memory and storage.
pub const MAX_PENDING: usize = 1000;
/// Messages and characters per message a pending conversation keeps (the newest).
pub const MAX_MESSAGES: usize = 60;
pub const MAX_MESSAGE_CHARS: usize = 8000;
/// The first wait before an update the model could not take is tried again; each further
/// failure doubles it.
pub const RETRY_AFTER: Duration = Duration::from_secs(60);
/// Tries an update gets while its model stays unreachable (about half an hour in all) before
/// it is dropped, logged.
pub const MAX_ATTEMPTS: u32 = 6;

/// Resolves the model for a conversation's update: `memory.model_name`, else the run's model
/// (`conversation.model_name`), metered for whoever the memory belongs to.
pub type ModelResolver =
    Arc<dyn Fn(&PendingConversation) -> Option<Arc<dyn ChatModel>> + Send + Sync>;

/// The newest conversation of a thread (at most [`MAX_MESSAGES`] entries of at most
/// [`MAX_MESSAGE_CHARS`] characters) as one user had it (thread id, user id: their own
/// messages and the answers to them, see `conversation::Author`), read when its update runs;
/// `None` when the thread is gone.
pub type ConversationLoader =
    Arc<dyn Fn(&str, &str) -> Option<Vec<ConversationMessage>> + Send + Sync>;

/// A conversation waiting for its memory update. Records written before the conversation was
/// read from the thread also hold a `messages` list; it is ignored (the thread has them).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PendingConversation {
    pub scope: MemoryScope,
    pub thread_id: String,
    /// The model the run used (the default updater model).
    pub model_name: Option<String>,
    /// Messages summarization dropped from the thread; kept across replacements.
    #[serde(default)]
    pub earlier: Vec<ConversationMessage>,
    /// The instance whose update this is, on a store several daemons share (see
    /// [`shared`]); `None` on sled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// What untrusted content the thread held (`agent_api::taint` labels): its facts wait.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub untrusted: Vec<String>,
}

impl PendingConversation {
    pub fn new(scope: MemoryScope, thread_id: String, model_name: Option<String>) -> Self {
        Self {
            scope,
            thread_id,
            model_name,
            earlier: Vec::new(),
            owner: None,
            untrusted: Vec::new(),
        }
    }

    pub(crate) fn key(&self) -> Vec<u8> {
        let agent = self.scope.agent_name.as_deref().unwrap_or("");
        format!("{}\0{}\0{agent}", self.thread_id, self.scope.user_id).into_bytes()
    }
}

/// Puts `earlier` (messages summarization handed over before) in front of the conversation's.
fn prepend_earlier(conversation: &mut PendingConversation, mut earlier: Vec<ConversationMessage>) {
    earlier.append(&mut conversation.earlier);
    conversation.earlier = earlier;
}

fn bound(messages: &mut Vec<ConversationMessage>) {
    let excess = messages.len().saturating_sub(MAX_MESSAGES);
    messages.drain(..excess);
    for message in messages.iter_mut() {
        crate::memory::conversation::truncate_chars(&mut message.content, MAX_MESSAGE_CHARS);
    }
}

struct Entry {
    conversation: PendingConversation,
    due: Instant,
    /// The entry as it is in the store (finishing deletes it only if it is still that).
    record: Vec<u8>,
    /// Tries that found the model unreachable (this process only).
    failures: u32,
}

/// Counts an entry as processed when its processing ends, by whichever return or cancellation.
struct Processed<'a>(&'a std::sync::atomic::AtomicU64);

impl Drop for Processed<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// An entry taken off the queue while its update runs. Dropped before the update finished
/// (the worker or a flush cancelled at shutdown), it goes back on the queue: its record is
/// still in the store, and a flush that still has time runs it.
struct Taken<'a> {
    queue: &'a MemoryQueue,
    key: &'a [u8],
    entry: Option<Entry>,
}

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        if let Some(entry) = self.entry.take() {
            self.queue.requeue(self.key, entry);
        }
    }
}

/// What became of one update.
#[derive(Debug, PartialEq)]
enum Outcome {
    /// Applied, or failed in a way another try would not fix (logged); the entry is gone.
    Finished,
    /// The model could not be reached; the entry is queued again (or dropped once it has had
    /// [`MAX_ATTEMPTS`] tries).
    ModelDown,
}

struct Inner {
    store: StoreRef,
    updater: MemoryUpdater,
    models: ModelResolver,
    conversations: ConversationLoader,
    pending: Mutex<HashMap<Vec<u8>, Entry>>,
    wake: Notify,
    cancel: CancellationToken,
    task: Mutex<Option<JoinHandle<()>>>,
    /// Entries taken off the queue and done with, whatever became of them: the daemon's
    /// memory release waits for these to stop too before it hands freed heap back.
    processed: std::sync::atomic::AtomicU64,
    /// This instance, when other daemons share the store (see [`shared`]).
    owner: Option<QueueOwner>,
}

/// Cheap to clone; clones share the queue.
#[derive(Clone)]
pub struct MemoryQueue {
    inner: Arc<Inner>,
}

impl MemoryQueue {
    /// Loads conversations a previous process left pending and starts the worker task (on the
    /// current tokio runtime). Pending conversations become due one debounce from now.
    pub fn start(
        store: StoreRef,
        updater: MemoryUpdater,
        models: ModelResolver,
        conversations: ConversationLoader,
    ) -> Result<Self, MemoryError> {
        Self::start_shared(store, updater, models, conversations, None)
    }

    /// Like [`MemoryQueue::start`], as `owner` among daemons sharing the store: only its own
    /// conversations and those of stopped instances are loaded (see [`shared`]).
    pub fn start_shared(
        store: StoreRef,
        updater: MemoryUpdater,
        models: ModelResolver,
        conversations: ConversationLoader,
        owner: Option<QueueOwner>,
    ) -> Result<Self, MemoryError> {
        let due = Instant::now() + debounce(&updater);
        let mut pending = HashMap::new();
        let live = match &owner {
            Some(owner) => (owner.live)()?,
            None => Default::default(),
        };
        for (key, value) in store.scan_prefix(QUEUE_TREE, b"")? {
            match serde_json::from_slice::<PendingConversation>(&value) {
                Ok(conversation) => {
                    let loaded =
                        shared::load(&store, owner.as_ref(), &live, &key, value, conversation);
                    let Some((conversation, record)) = loaded? else {
                        continue;
                    };
                    let entry = Entry {
                        conversation,
                        due,
                        record,
                        failures: 0,
                    };
                    pending.insert(key, entry);
                }
                Err(error) => {
                    tracing::warn!(%error, "Dropping an unreadable pending memory update");
                    store.delete(QUEUE_TREE, &key)?;
                }
            }
        }
        if !pending.is_empty() {
            tracing::info!(pending = pending.len(), "Resuming pending memory updates");
        }
        let queue = Self {
            inner: Arc::new(Inner {
                store,
                updater,
                models,
                conversations,
                pending: Mutex::new(pending),
                wake: Notify::new(),
                cancel: CancellationToken::new(),
                task: Mutex::new(None),
                processed: Default::default(),
                owner,
            }),
        };
        let worker = queue.clone();
        // Owned by the queue: `shutdown` stops the worker and awaits this handle.
        #[allow(clippy::disallowed_methods)]
        let task = tokio::spawn(async move { worker.run().await });
        *queue.inner.lock_task() = Some(task);
        Ok(queue)
    }

    /// Queues `conversation`, replacing a pending one of the same (thread, user, agent) and
    /// restarting its debounce. Skipped (logged) when the queue is full. The store is written
    /// only when the entry is new or changed (dropped messages, another model), not per turn.
    pub fn enqueue(&self, mut conversation: PendingConversation) -> Result<(), MemoryError> {
        let key = conversation.key();
        // Read per conversation: a reload's debounce applies to new work; entries already
        // pending keep their time.
        let due = Instant::now() + debounce(&self.inner.updater);
        let mut pending = self.inner.lock_pending();
        match pending.get_mut(&key) {
            // The stored record already says all there is: the thread is read at update time.
            Some(previous)
                if conversation.earlier.is_empty()
                    && previous.conversation.model_name == conversation.model_name
                    && self.still_ours(&key, &previous.record) =>
            {
                previous.due = due;
            }
            previous => {
                if let Some(previous) = previous {
                    // Cloned, not taken: a failed write below leaves the pending entry whole.
                    prepend_earlier(&mut conversation, previous.conversation.earlier.clone());
                } else if pending.len() >= MAX_PENDING {
                    tracing::warn!(thread_id = %conversation.thread_id, "Memory queue is full; this conversation is not remembered");
                    return Ok(());
                }
                let record = self.persist(&key, &mut conversation)?;
                let entry = Entry {
                    conversation,
                    due,
                    record,
                    failures: 0,
                };
                pending.insert(key, entry);
            }
        }
        drop(pending);
        self.inner.wake.notify_one();
        Ok(())
    }

    /// Gives memory messages that are about to leave the thread (summarization): `author`'s
    /// among them are kept in front of the conversation until the thread's next update runs.
    pub fn enqueue_dropped(
        &self,
        scope: MemoryScope,
        thread_id: &str,
        model_name: Option<String>,
        author: Author<'_>,
        dropped: &[antler_store::messages::Message],
    ) -> Result<(), MemoryError> {
        let earlier = crate::memory::conversation::conversation_of(dropped, author);
        if earlier.is_empty() {
            return Ok(());
        }
        let mut conversation = PendingConversation::new(scope, thread_id.to_string(), model_name);
        conversation.earlier = earlier;
        self.enqueue(conversation)
    }

    pub fn pending(&self) -> usize {
        self.inner.lock_pending().len()
    }

    /// Entries processed so far (applied, failed, or put back for a retry).
    pub fn processed(&self) -> u64 {
        self.inner
            .processed
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Runs every pending update now. Stops at the first whose model cannot be reached: the
    /// rest would wait on the same outage; they stay queued (and persisted).
    pub async fn flush(&self) {
        let all: Vec<Vec<u8>> = self.inner.lock_pending().keys().cloned().collect();
        for key in all {
            if self.process(&key).await == Outcome::ModelDown {
                tracing::warn!(
                    pending = self.pending(),
                    "The memory model is unreachable; pending memory updates stay queued and run after the next start"
                );
                return;
            }
        }
    }

    /// Stops the worker and flushes pending updates, all within `deadline`: the update under
    /// way when it passes (its model call, retries included) is dropped, and what is left stays
    /// persisted for the next start.
    pub async fn shutdown(&self, deadline: Duration) {
        let deadline = Instant::now() + deadline;
        self.inner.cancel.cancel();
        let task = self.inner.lock_task().take();
        // The worker drops the update it is running at the cancellation; the deadline only
        // guards against a worker stuck in something that does not wait on it.
        if let Some(mut task) = task
            && tokio::time::timeout_at(deadline, &mut task).await.is_err()
        {
            task.abort();
        }
        if tokio::time::timeout_at(deadline, self.flush())
            .await
            .is_err()
        {
            tracing::warn!(
                pending = self.pending(),
                "Memory updates still pending at the shutdown deadline; they run after the next start"
            );
        }
    }

    async fn run(&self) {
        let mut adopt = self.inner.owner.as_ref().map(|owner| {
            let mut every = tokio::time::interval(owner.adopt_every);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            every
        });
        loop {
            let next = self.inner.lock_pending().values().map(|e| e.due).min();
            let sleep = async {
                match next {
                    Some(due) => tokio::time::sleep_until(due).await,
                    None => std::future::pending().await,
                }
            };
            let adopt_tick = async {
                match adopt.as_mut() {
                    Some(every) => every.tick().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = self.inner.cancel.cancelled() => return,
                _ = self.inner.wake.notified() => continue,
                _ = adopt_tick => {
                    self.adopt_orphans();
                    continue;
                }
                _ = sleep => {}
            }
            let now = Instant::now();
            let due: Vec<Vec<u8>> = self
                .inner
                .lock_pending()
                .iter()
                .filter(|(_, e)| e.due <= now)
                .map(|(k, _)| k.clone())
                .collect();
            for (index, key) in due.iter().enumerate() {
                let outcome = tokio::select! {
                    // The update under way stays queued (see `Taken`): shutdown flushes it
                    // within its own deadline, or the next start runs it.
                    _ = self.inner.cancel.cancelled() => return,
                    outcome = self.process(key) => outcome,
                };
                if outcome == Outcome::ModelDown {
                    // The others would wait on the same outage, each through its model's
                    // retries: they wait for the next try instead, without counting a failure.
                    self.postpone(&due[index + 1..], Instant::now() + RETRY_AFTER);
                    break;
                }
            }
        }
    }

    /// Moves the entries of `keys` that are still pending to `due`.
    fn postpone(&self, keys: &[Vec<u8>], due: Instant) {
        let mut pending = self.inner.lock_pending();
        for key in keys {
            if let Some(entry) = pending.get_mut(key) {
                entry.due = entry.due.max(due);
            }
        }
    }

    /// Runs one update. The persisted copy is removed only if no newer conversation replaced
    /// it meanwhile; an update the model could not take is queued again ([`Self::requeue`]),
    /// any other failure is logged and not retried (the next turn queues again).
    async fn process(&self, key: &[u8]) -> Outcome {
        let Some(entry) = self.inner.lock_pending().remove(key) else {
            return Outcome::Finished;
        };
        let _counted = Processed(&self.inner.processed);
        if !self.still_ours(key, &entry.record) {
            tracing::debug!(thread_id = %entry.conversation.thread_id, "Another instance took this memory update over; it runs there");
            return Outcome::Finished;
        }
        let conversation = entry.conversation.clone();
        let mut taken = Taken {
            queue: self,
            key,
            entry: Some(entry),
        };
        let mut messages = conversation.earlier.clone();
        match (self.inner.conversations)(&conversation.thread_id, &conversation.scope.user_id) {
            Some(recent) => messages.extend(recent),
            None => {
                tracing::debug!(thread_id = %conversation.thread_id, "The thread is gone; memory reads only what summarization handed over")
            }
        }
        let result = if messages.is_empty() {
            Ok(())
        } else {
            self.update(&conversation, &messages).await
        };
        // Finished, whichever way: from here on the entry is this function's to settle.
        let Some(mut entry) = taken.entry.take() else {
            return Outcome::Finished;
        };
        if let Err(wait) = result {
            entry.failures += 1;
            if entry.failures < MAX_ATTEMPTS {
                let backoff = RETRY_AFTER * 2u32.saturating_pow(entry.failures - 1);
                let wait = wait.map_or(backoff, |asked| asked.max(backoff));
                tracing::warn!(thread_id = %entry.conversation.thread_id, attempt = entry.failures, retry_in = ?wait, "The memory model is unreachable; the update stays queued");
                entry.due = Instant::now() + wait;
                self.requeue(key, entry);
                return Outcome::ModelDown;
            }
            tracing::warn!(thread_id = %entry.conversation.thread_id, attempts = entry.failures, "Dropping a memory update: its model stayed unreachable");
            self.remove_record(key, entry.record);
            return Outcome::ModelDown;
        }
        self.remove_record(key, entry.record);
        Outcome::Finished
    }

    /// Puts back an entry whose update did not run. A conversation queued meanwhile replaced
    /// it (the thread is read when the update runs), so only the messages summarization
    /// handed over are carried into the newer entry.
    fn requeue(&self, key: &[u8], entry: Entry) {
        let mut pending = self.inner.lock_pending();
        let Some(newer) = pending.get_mut(key) else {
            // The store still holds this entry's record: nothing to write.
            pending.insert(key.to_vec(), entry);
            drop(pending);
            self.inner.wake.notify_one();
            return;
        };
        if entry.conversation.earlier.is_empty() {
            return;
        }
        let mut conversation = newer.conversation.clone();
        prepend_earlier(&mut conversation, entry.conversation.earlier);
        match self.persist(key, &mut conversation) {
            Ok(record) => {
                newer.conversation = conversation;
                newer.record = record;
            }
            Err(error) => {
                tracing::warn!(%error, "Could not keep the messages of a failed memory update")
            }
        }
    }

    /// Bounds `conversation` and writes it as the pending record of `key`; the record written.
    fn persist(
        &self,
        key: &[u8],
        conversation: &mut PendingConversation,
    ) -> Result<Vec<u8>, MemoryError> {
        bound(&mut conversation.earlier);
        conversation.owner = self.inner.owner.as_ref().map(|o| o.instance_id.clone());
        let record = serde_json::to_vec(conversation)
            .map_err(|e| MemoryError::InvalidDocument(e.to_string()))?;
        self.inner.store.put(QUEUE_TREE, key, &record)?;
        Ok(record)
    }

    /// Deletes a finished entry's persisted copy unless a newer conversation replaced it.
    fn remove_record(&self, key: &[u8], record: Vec<u8>) {
        if self.inner.lock_pending().contains_key(key) {
            return;
        }
        let expect = Expect {
            tree: QUEUE_TREE,
            key: key.to_vec(),
            value: Some(record),
        };
        let delete = BatchOp::Delete {
            tree: QUEUE_TREE,
            key: key.to_vec(),
        };
        if let Err(error) = self.inner.store.apply_batch_if(&expect, vec![delete]) {
            tracing::warn!(%error, "Could not remove a finished memory update from the queue");
        }
    }

    /// Asks the model for the memory changes `messages` imply and applies them. `Err` when the
    /// model could not be reached (with the wait it asked for, if any); other failures are
    /// logged and count as done.
    async fn update(
        &self,
        conversation: &PendingConversation,
        messages: &[ConversationMessage],
    ) -> Result<(), Option<Duration>> {
        let model_name = conversation.model_name.as_deref();
        let Some(model) = (self.inner.models)(conversation) else {
            tracing::warn!(model = ?model_name, "No model for memory updates; set memory.model_name");
            return Ok(());
        };
        let thread_id = &conversation.thread_id;
        let origin = (thread_id.as_str(), conversation.untrusted.as_slice());
        let (scope, updater) = (&conversation.scope, &self.inner.updater);
        let result = updater
            .update(model.as_ref(), scope, origin, messages)
            .await;
        match result {
            Ok(report) => {
                tracing::debug!(%thread_id, added = report.added, removed = report.removed, "Memory updated")
            }
            Err(MemoryError::Model(error)) if error.is_retryable() => {
                tracing::debug!(%error, %thread_id, "Memory update could not reach its model");
                return Err(error.retry_after());
            }
            Err(error) => tracing::warn!(%error, %thread_id, "Memory update failed"),
        }
        Ok(())
    }
}

/// `memory.debounce_seconds` in force now.
fn debounce(updater: &MemoryUpdater) -> Duration {
    Duration::from_secs(updater.settings().current().debounce_seconds)
}

impl Inner {
    fn lock_pending(&self) -> MutexGuard<'_, HashMap<Vec<u8>, Entry>> {
        // Map inserts and removes only: a poisoned lock still guards consistent data.
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_task(&self) -> MutexGuard<'_, Option<JoinHandle<()>>> {
        self.task.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
#[path = "queue_tests.rs"]
mod tests;
