//! The channel manager: connected channels, access checks, the journal, one queue per
//! conversation, recovery.
//!
//! Transports feed [`ChannelManager::accept_batch`] through the [`InboundSink`] it provides, and
//! the webhook route does so directly; both return only after the messages are durably
//! journalled, so the caller may then acknowledge them to the platform. Each conversation
//! (`ChatKey`) has one worker that handles its messages in order — one run per thread — and
//! goes away when idle.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use antler_channel::{ChatKey, InboundMessage, InboundSink, SinkError};
use async_trait::async_trait;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::channels::access::{Verdict, verdict};
use crate::channels::deps::TurnDeps;
use crate::channels::journal::{Journal, JournalState, RETENTION, Recorded};
use crate::channels::mapping::ChatMap;
use crate::channels::outbound::note;
use crate::channels::outbox::Outbox;
use crate::channels::runtime::ChannelRuntime;
use crate::channels::turn;
use crate::commands::{Command, parse_command};
use crate::config::ConfigHandle;
use crate::harness::Harness;
use antler_store::StoreError;

/// A conversation's worker exits after this long without messages.
const WORKER_IDLE: Duration = Duration::from_secs(60);
/// A message still waiting this long behind the conversation's current turn gets the
/// "queued" note; one answered sooner needs none.
const QUEUED_NOTE_DELAY: Duration = Duration::from_secs(2);

pub const QUEUED_NOTE: &str =
    "Queued: I'll answer this as soon as the current request in this chat finishes.";
pub const QUEUE_FULL_NOTE: &str =
    "Too many messages are waiting in this chat; please wait for the answers before sending more.";
pub const USER_RATE_NOTE: &str =
    "You are sending messages faster than I can answer; I'll skip some for a minute.";

/// What became of an inbound message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Accepted {
    /// Journalled and queued for an answer.
    Queued,
    Duplicate,
    Denied,
    NotAddressed,
    /// The sender exceeded `channels.user_messages_per_minute`.
    Throttled,
    UnknownChannel,
}

#[derive(Clone)]
pub struct ChannelManager {
    inner: Arc<ManagerInner>,
}

struct ManagerInner {
    deps: Arc<TurnDeps>,
    channels: RwLock<HashMap<String, Arc<ChannelRuntime>>>,
    queues: Mutex<HashMap<String, ChatQueue>>,
    /// The per-user limiter and the `user_messages_per_minute` it was built for.
    user_limiter: Mutex<(u32, Arc<governor::DefaultKeyedRateLimiter<String>>)>,
    user_noticed: Mutex<HashMap<String, tokio::time::Instant>>,
    /// Owns every worker and notice task.
    tracker: TaskTracker,
}

struct ChatQueue {
    sender: mpsc::Sender<String>,
    progress: Arc<QueueProgress>,
}

/// How far a conversation's worker got: a message's position against `started` tells whether it
/// is still waiting.
#[derive(Default)]
struct QueueProgress {
    /// Messages put into the queue so far.
    queued: AtomicU64,
    /// Messages the worker has begun.
    started: AtomicU64,
}

type Job = (ChatKey, String, Arc<ChannelRuntime>, InboundMessage);

impl ChannelManager {
    pub fn new(harness: Arc<Harness>, config: ConfigHandle) -> Self {
        let store = harness.threads().store().clone();
        let per_minute = config.current().channels.user_messages_per_minute;
        let deps = TurnDeps {
            harness,
            config,
            chats: ChatMap::new(store.clone()),
            journal: Journal::new(store.clone()),
            outbox: Outbox::new(store),
            stop: CancellationToken::new(),
        };
        Self {
            inner: Arc::new(ManagerInner {
                deps: Arc::new(deps),
                channels: RwLock::new(HashMap::new()),
                queues: Mutex::new(HashMap::new()),
                user_limiter: Mutex::new((per_minute, user_limiter(per_minute))),
                user_noticed: Mutex::new(HashMap::new()),
                tracker: TaskTracker::new(),
            }),
        }
    }

    /// Makes a connected channel's messages answerable (replacing an earlier connection).
    pub fn register(&self, runtime: ChannelRuntime) {
        let mut channels = self.channels_mut();
        channels.insert(runtime.name.clone(), Arc::new(runtime));
    }

    /// Forgets a channel that disconnected; its journalled messages wait for the next
    /// connection. Turns in flight keep the runtime they started with.
    pub fn unregister(&self, channel: &str) {
        self.channels_mut().remove(channel);
    }

    pub fn chats(&self) -> &ChatMap {
        &self.inner.deps.chats
    }

    pub fn journal(&self) -> &Journal {
        &self.inner.deps.journal
    }

    pub fn outbox(&self) -> &Outbox {
        &self.inner.deps.outbox
    }

    /// The sink a channel's transport journals into.
    pub fn sink(&self, channel: &str) -> Arc<dyn InboundSink> {
        Arc::new(ManagerSink {
            manager: self.clone(),
            channel: channel.to_string(),
        })
    }

    /// Accepts a batch and makes it durable; acknowledge to the platform only after `Ok`.
    pub fn accept_batch(
        &self,
        channel: &str,
        messages: Vec<InboundMessage>,
    ) -> Result<Vec<Accepted>, StoreError> {
        let mut outcomes = Vec::with_capacity(messages.len());
        let mut queued = Vec::new();
        for message in messages {
            let (outcome, job) = self.inner.admit(channel, message)?;
            outcomes.push(outcome);
            queued.extend(job);
        }
        if !queued.is_empty() {
            self.inner.deps.journal.flush()?;
        }
        // Dispatch after the flush: a message is worked on only once it cannot be lost.
        for (key, journal_key, runtime, message) in queued {
            self.inner
                .dispatch(&key, journal_key, runtime, &message, true);
        }
        Ok(outcomes)
    }

    /// Processes what a previous run journalled for `channel` but did not answer; call once
    /// the channel is registered.
    pub fn recover(&self, channel: &str) -> Result<usize, StoreError> {
        let journal = &self.inner.deps.journal;
        // Claimed: with several instances, one prunes while the others skip it.
        let pruned = match self.inner.deps.harness.claim_job("channel-journal-prune") {
            Some(_job) => journal.prune(RETENTION)?,
            None => 0,
        };
        if pruned > 0 {
            tracing::debug!(pruned, "Forgot old answered channel messages");
        }
        let pending: Vec<_> = journal
            .pending()?
            .into_iter()
            .filter(|entry| entry.message.channel == channel)
            .collect();
        let Some(runtime) = self.inner.runtime(channel) else {
            return Ok(0);
        };
        let count = pending.len();
        for entry in pending {
            let key = self.inner.resolve_key(&entry.message)?;
            self.inner
                .dispatch(&key, entry.key, runtime.clone(), &entry.message, false);
        }
        if count > 0 {
            tracing::info!(
                channel,
                count,
                "Resuming channel messages that were not answered before the last stop"
            );
        }
        Ok(count)
    }

    /// Stops taking new work: turns cut short from now on stay pending for the next start.
    pub fn stop(&self) {
        self.inner.deps.stop.cancel();
    }

    /// Stops the workers and waits for them: turns in flight end when the harness cancels
    /// their runs.
    pub async fn shutdown(&self, grace: Duration) {
        self.stop();
        self.inner.tracker.close();
        if tokio::time::timeout(grace, self.inner.tracker.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                "Channel workers still busy after the grace period; leaving their messages for the next start"
            );
        }
    }

    fn channels_mut(
        &self,
    ) -> std::sync::RwLockWriteGuard<'_, HashMap<String, Arc<ChannelRuntime>>> {
        self.inner
            .channels
            .write()
            .unwrap_or_else(|p| p.into_inner())
    }
}

/// Journals a transport's batches off the async threads (the flush is an fsync).
struct ManagerSink {
    manager: ChannelManager,
    channel: String,
}

#[async_trait]
impl InboundSink for ManagerSink {
    async fn accept(&self, messages: Vec<InboundMessage>) -> Result<(), SinkError> {
        if messages.is_empty() {
            return Ok(());
        }
        let (manager, channel) = (self.manager.clone(), self.channel.clone());
        tokio::task::spawn_blocking(move || manager.accept_batch(&channel, messages))
            .await
            .map_err(|e| SinkError(format!("journalling did not finish: {e}")))?
            .map(|_| ())
            .map_err(|e| SinkError(e.to_string()))
    }
}

fn user_limiter(per_minute: u32) -> Arc<governor::DefaultKeyedRateLimiter<String>> {
    let quota =
        governor::Quota::per_minute(NonZeroU32::new(per_minute.max(1)).unwrap_or(NonZeroU32::MIN));
    Arc::new(governor::RateLimiter::keyed(quota))
}

impl ManagerInner {
    fn runtime(&self, channel: &str) -> Option<Arc<ChannelRuntime>> {
        let channels = self.channels.read().unwrap_or_else(|p| p.into_inner());
        channels.get(channel).cloned()
    }

    fn admit(
        self: &Arc<Self>,
        channel: &str,
        message: InboundMessage,
    ) -> Result<(Accepted, Option<Job>), StoreError> {
        let Some(runtime) = self.runtime(channel) else {
            return Ok((Accepted::UnknownChannel, None));
        };
        let config = self.deps.config.current();
        let Some(section) = config.channels.section(channel) else {
            return Ok((Accepted::UnknownChannel, None));
        };
        match verdict(&section.access(), &section.group_rules(), &message) {
            Verdict::Allow => {}
            Verdict::Deny(reason) => {
                tracing::info!(channel, chat = %message.chat_id, user = %message.user_id, reason, "Ignoring a message from outside the allowlist");
                return Ok((Accepted::Denied, None));
            }
            // A follow-up in a platform thread the bot already answers in is for the bot.
            Verdict::NotAddressed
                if message.thread_reply && self.deps.chats.get(&message.chat_key())?.is_some() => {}
            Verdict::NotAddressed => return Ok((Accepted::NotAddressed, None)),
        }
        let journal_key = match self.deps.journal.record(&message)? {
            Recorded::New(key) => key,
            Recorded::Duplicate => {
                tracing::debug!(channel, message_id = %message.platform_message_id, "Dropping a redelivered message");
                return Ok((Accepted::Duplicate, None));
            }
        };
        if !self.user_within_rate(channel, &message.user_id) {
            self.deps.journal.mark_done(&journal_key)?;
            self.notice_throttled(runtime, &message);
            return Ok((Accepted::Throttled, None));
        }
        let key = self.resolve_key(&message)?;
        let command = parse_command(&message.text, runtime.bot_username.as_deref());
        if command == Some(Command::Cancel) {
            // A cancel must not wait behind the turn it cancels.
            let deps = self.deps.clone();
            self.tracker.spawn(async move {
                turn::cancel_now(&deps, &runtime, &key, &journal_key, &message).await;
            });
            return Ok((Accepted::Queued, None));
        }
        Ok((Accepted::Queued, Some((key, journal_key, runtime, message))))
    }

    /// The conversation a message belongs to: a reply to a message the bot knows continues
    /// that message's topic.
    fn resolve_key(&self, message: &InboundMessage) -> Result<ChatKey, StoreError> {
        let mut key = message.chat_key();
        if !message.is_direct
            && let Some(reply_to) = &message.reply_to
            && let Some(topic) = self.deps.chats.alias(&key, reply_to)?
        {
            key.topic_id = Some(topic);
        }
        Ok(key)
    }

    fn user_within_rate(&self, channel: &str, user: &str) -> bool {
        let per_minute = self.deps.config.current().channels.user_messages_per_minute;
        if per_minute == 0 {
            return true;
        }
        let limiter = {
            let mut current = self.user_limiter.lock().unwrap_or_else(|p| p.into_inner());
            if current.0 != per_minute {
                *current = (per_minute, user_limiter(per_minute));
            }
            current.1.clone()
        };
        limiter.check_key(&format!("{channel}:{user}")).is_ok()
    }

    /// One notice per user per minute, however many messages were skipped.
    fn notice_throttled(self: &Arc<Self>, runtime: Arc<ChannelRuntime>, message: &InboundMessage) {
        let user = format!("{}:{}", message.channel, message.user_id);
        let now = tokio::time::Instant::now();
        {
            let mut noticed = self.user_noticed.lock().unwrap_or_else(|p| p.into_inner());
            noticed.retain(|_, at| now.duration_since(*at) < Duration::from_secs(60));
            if noticed.contains_key(&user) {
                return;
            }
            noticed.insert(user, now);
        }
        self.spawn_note(runtime, &message.chat_key(), USER_RATE_NOTE, message);
    }

    fn dispatch(
        self: &Arc<Self>,
        key: &ChatKey,
        journal_key: String,
        runtime: Arc<ChannelRuntime>,
        message: &InboundMessage,
        notify_queued: bool,
    ) {
        let queue_name = key.to_string();
        let mut queues = self.queues.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(queue) = queues.get(&queue_name) {
            match queue.sender.try_send(journal_key.clone()) {
                Ok(()) => {
                    crate::metrics::chat_queue_added();
                    let position = queue.progress.queued.fetch_add(1, Ordering::SeqCst) + 1;
                    if notify_queued {
                        self.note_if_still_waiting(
                            runtime,
                            key,
                            message,
                            &queue.progress,
                            position,
                        );
                    }
                    return;
                }
                Err(mpsc::error::TrySendError::Full(_)) => {
                    crate::metrics::queue_full("chat_messages");
                    // Still journalled as pending: answered after a restart if not before.
                    self.spawn_note(runtime, key, QUEUE_FULL_NOTE, message);
                    return;
                }
                Err(mpsc::error::TrySendError::Closed(_)) => {
                    queues.remove(&queue_name);
                }
            }
        }
        let limit = self.deps.config.current().channels.queue_limit.max(1);
        let (sender, receiver) = mpsc::channel(limit);
        let progress = Arc::new(QueueProgress::default());
        if sender.try_send(journal_key).is_ok() {
            crate::metrics::chat_queue_added();
        }
        progress.queued.store(1, Ordering::SeqCst);
        queues.insert(
            queue_name.clone(),
            ChatQueue {
                sender,
                progress: progress.clone(),
            },
        );
        drop(queues);
        let inner = self.clone();
        let key = key.clone();
        self.tracker.spawn(async move {
            inner.worker(queue_name, key, receiver, progress).await;
        });
    }

    /// Says "queued" only to a message that is still waiting after [`QUEUED_NOTE_DELAY`].
    fn note_if_still_waiting(
        self: &Arc<Self>,
        runtime: Arc<ChannelRuntime>,
        key: &ChatKey,
        message: &InboundMessage,
        progress: &Arc<QueueProgress>,
        position: u64,
    ) {
        let (inner, progress) = (self.clone(), progress.clone());
        let (key, is_group) = (key.clone(), !message.is_direct);
        let reply_to = message.platform_message_id.clone();
        self.tracker.spawn(async move {
            tokio::select! {
                _ = inner.deps.stop.cancelled() => return,
                _ = tokio::time::sleep(QUEUED_NOTE_DELAY) => {}
            }
            if progress.started.load(Ordering::SeqCst) < position {
                note(&runtime, &key, is_group, QUEUED_NOTE, Some(&reply_to)).await;
            }
        });
    }

    fn spawn_note(
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

    async fn worker(
        self: Arc<Self>,
        queue_name: String,
        key: ChatKey,
        mut receiver: mpsc::Receiver<String>,
        progress: Arc<QueueProgress>,
    ) {
        loop {
            let journal_key = tokio::select! {
                _ = self.deps.stop.cancelled() => return,
                next = tokio::time::timeout(WORKER_IDLE, receiver.recv()) => match next {
                    Ok(Some(journal_key)) => journal_key,
                    Ok(None) => return,
                    Err(_) => {
                        // Re-check under the lock senders use, so nothing slips in as we leave.
                        let mut queues = self.queues.lock().unwrap_or_else(|p| p.into_inner());
                        match receiver.try_recv() {
                            Ok(journal_key) => journal_key,
                            Err(_) => {
                                queues.remove(&queue_name);
                                return;
                            }
                        }
                    }
                },
            };
            progress.started.fetch_add(1, Ordering::SeqCst);
            crate::metrics::chat_queue_taken();
            self.handle(&key, &journal_key).await;
        }
    }

    async fn handle(&self, key: &ChatKey, journal_key: &str) {
        let entry = match self.deps.journal.get(journal_key) {
            Ok(Some(entry)) => entry,
            Ok(None) => return,
            Err(error) => {
                tracing::warn!(%error, journal_key, "Could not read a journalled message");
                return;
            }
        };
        if entry.state == JournalState::Done {
            return;
        }
        // A channel that disconnected meanwhile answers after it reconnects (`recover`).
        let Some(runtime) = self.runtime(&entry.message.channel) else {
            return;
        };
        if turn::process(&self.deps, &runtime, key, &entry).await {
            self.deps.finish_entry(journal_key);
        }
    }
}
