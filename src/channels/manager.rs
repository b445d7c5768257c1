//! The channel manager: access checks, the journal, one queue per conversation, recovery.
//!
//! Every adapter feeds [`ChannelManager::accept_batch`] (pollers) or the webhook route does;
//! both return only after the messages are durably journalled, so the caller may then
//! acknowledge them to the platform. Each conversation (`ChatKey`) has one worker that handles
//! its messages in order — one run per thread — and goes away when idle.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use antler_channel::{ChannelParts, ChatKey, InboundMessage};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::channels::access::{AccessPolicy, Verdict};
use crate::channels::budget::RateBudget;
use crate::channels::commands::{Command, parse_command};
use crate::channels::journal::{Journal, RETENTION, Recorded};
use crate::channels::mapping::ChatMap;
use crate::channels::outbox::Outbox;
use crate::channels::turn;
use crate::config::ConfigHandle;
use crate::harness::Harness;
use crate::store::StoreError;

/// A conversation's worker exits after this long without messages.
const WORKER_IDLE: Duration = Duration::from_secs(60);

pub const QUEUED_NOTE: &str =
    "Queued: I'll answer this as soon as the current request in this chat finishes.";
pub const QUEUE_FULL_NOTE: &str =
    "Too many messages are waiting in this chat; please wait for the answers before sending more.";
pub const USER_RATE_NOTE: &str =
    "You are sending messages faster than I can answer; I'll skip some for a minute.";

/// One registered channel: its capabilities and the rules it runs under.
pub struct ChannelRuntime {
    pub parts: ChannelParts,
    pub policy: AccessPolicy,
    pub budget: RateBudget,
    /// Recognises `/cmd@BotName`.
    pub bot_username: Option<String>,
    /// `channels.<name>.session.agent`.
    pub session_agent: Option<String>,
}

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
    pub(crate) inner: Arc<ManagerInner>,
}

pub(crate) struct ManagerInner {
    pub(crate) harness: Arc<Harness>,
    pub(crate) config: ConfigHandle,
    pub(crate) chats: ChatMap,
    pub(crate) journal: Journal,
    pub(crate) outbox: Outbox,
    channels: RwLock<HashMap<String, Arc<ChannelRuntime>>>,
    queues: Mutex<HashMap<String, ChatQueue>>,
    user_limiter: governor::DefaultKeyedRateLimiter<String>,
    user_noticed: Mutex<HashMap<String, tokio::time::Instant>>,
    pub(crate) tracker: TaskTracker,
    /// Fires at shutdown: turns cut short are left pending for the next start.
    pub(crate) stop: CancellationToken,
}

struct ChatQueue {
    sender: mpsc::Sender<String>,
    busy: Arc<AtomicBool>,
}

impl ChannelManager {
    pub fn new(harness: Arc<Harness>, config: ConfigHandle) -> Self {
        let store = harness.threads().store().clone();
        let per_minute = config.current().channels.user_messages_per_minute;
        let quota = governor::Quota::per_minute(
            std::num::NonZeroU32::new(per_minute.max(1)).unwrap_or(std::num::NonZeroU32::MIN),
        );
        Self {
            inner: Arc::new(ManagerInner {
                harness,
                config,
                chats: ChatMap::new(store.clone()),
                journal: Journal::new(store.clone()),
                outbox: Outbox::new(store),
                channels: RwLock::new(HashMap::new()),
                queues: Mutex::new(HashMap::new()),
                user_limiter: governor::RateLimiter::keyed(quota),
                user_noticed: Mutex::new(HashMap::new()),
                tracker: TaskTracker::new(),
                stop: CancellationToken::new(),
            }),
        }
    }

    pub fn register(&self, runtime: ChannelRuntime) {
        let name = runtime.parts.name.clone();
        let mut channels = self
            .inner
            .channels
            .write()
            .unwrap_or_else(|p| p.into_inner());
        channels.insert(name, Arc::new(runtime));
    }

    pub fn chats(&self) -> &ChatMap {
        &self.inner.chats
    }

    pub fn journal(&self) -> &Journal {
        &self.inner.journal
    }

    pub fn outbox(&self) -> &Outbox {
        &self.inner.outbox
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
            self.inner.journal.flush()?;
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
        let pruned = self.inner.journal.prune(RETENTION)?;
        if pruned > 0 {
            tracing::debug!(pruned, "Forgot old answered channel messages");
        }
        let pending = self.inner.journal.pending()?;
        let pending: Vec<_> = pending
            .into_iter()
            .filter(|entry| entry.message.channel == channel)
            .collect();
        let count = pending.len();
        for entry in pending {
            let Some(runtime) = self.inner.runtime(&entry.message.channel) else {
                continue;
            };
            let key = self.inner.resolve_key(&entry.message)?;
            self.inner
                .dispatch(&key, entry.key, runtime, &entry.message, false);
        }
        if count > 0 {
            tracing::info!(
                count,
                "Resuming channel messages that were not answered before the last stop"
            );
        }
        Ok(count)
    }

    /// Stops the workers: turns in flight end when the harness cancels their runs.
    pub async fn shutdown(&self, grace: Duration) {
        self.inner.stop.cancel();
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
}

type Job = (ChatKey, String, Arc<ChannelRuntime>, InboundMessage);

impl ManagerInner {
    pub(crate) fn runtime(&self, channel: &str) -> Option<Arc<ChannelRuntime>> {
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
        match runtime.policy.check(&message) {
            Verdict::Allow => {}
            Verdict::Deny(reason) => {
                tracing::info!(channel, chat = %message.chat_id, user = %message.user_id, reason, "Ignoring a message from outside the allowlist");
                return Ok((Accepted::Denied, None));
            }
            Verdict::NotAddressed => return Ok((Accepted::NotAddressed, None)),
        }
        let journal_key = match self.journal.record(&message)? {
            Recorded::New(key) => key,
            Recorded::Duplicate => {
                tracing::debug!(channel, message_id = %message.platform_message_id, "Dropping a redelivered message");
                return Ok((Accepted::Duplicate, None));
            }
        };
        if !self.user_within_rate(channel, &message.user_id) {
            self.journal.mark_done(&journal_key)?;
            self.notice_throttled(runtime, &message);
            return Ok((Accepted::Throttled, None));
        }
        let key = self.resolve_key(&message)?;
        let command = parse_command(&message.text, runtime.bot_username.as_deref());
        if command == Some(Command::Cancel) {
            // A cancel must not wait behind the turn it cancels.
            let inner = self.clone();
            self.tracker.spawn(async move {
                turn::cancel_now(&inner, &runtime, &key, &journal_key, &message).await;
            });
            return Ok((Accepted::Queued, None));
        }
        Ok((Accepted::Queued, Some((key, journal_key, runtime, message))))
    }

    /// The conversation a message belongs to: a reply to a message the bot knows continues
    /// that message's topic.
    pub(crate) fn resolve_key(&self, message: &InboundMessage) -> Result<ChatKey, StoreError> {
        let mut key = message.chat_key();
        if !message.is_direct
            && let Some(reply_to) = &message.reply_to
            && let Some(topic) = self.chats.alias(&key, reply_to)?
        {
            key.topic_id = Some(topic);
        }
        Ok(key)
    }

    fn user_within_rate(&self, channel: &str, user: &str) -> bool {
        if self.config.current().channels.user_messages_per_minute == 0 {
            return true;
        }
        self.user_limiter
            .check_key(&format!("{channel}:{user}"))
            .is_ok()
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
        let key = message.chat_key();
        let is_group = !message.is_direct;
        let reply_to = message.platform_message_id.clone();
        self.tracker.spawn(async move {
            turn::note(&runtime, &key, is_group, USER_RATE_NOTE, Some(&reply_to)).await;
        });
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
        let is_group = !message.is_direct;
        let mut queues = self.queues.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(queue) = queues.get(&queue_name) {
            match queue.sender.try_send(journal_key.clone()) {
                Ok(()) => {
                    if notify_queued && queue.busy.load(Ordering::SeqCst) {
                        self.spawn_note(runtime, key, is_group, QUEUED_NOTE, message);
                    }
                    return;
                }
                Err(mpsc::error::TrySendError::Full(_)) => {
                    // Still journalled as pending: answered after a restart if not before.
                    self.spawn_note(runtime, key, is_group, QUEUE_FULL_NOTE, message);
                    return;
                }
                Err(mpsc::error::TrySendError::Closed(_)) => {
                    queues.remove(&queue_name);
                }
            }
        }
        let limit = self.config.current().channels.queue_limit.max(1);
        let (sender, receiver) = mpsc::channel(limit);
        let busy = Arc::new(AtomicBool::new(false));
        let _ = sender.try_send(journal_key);
        queues.insert(
            queue_name.clone(),
            ChatQueue {
                sender,
                busy: busy.clone(),
            },
        );
        drop(queues);
        let inner = self.clone();
        let key = key.clone();
        self.tracker.spawn(async move {
            inner.worker(queue_name, key, receiver, busy).await;
        });
    }

    fn spawn_note(
        self: &Arc<Self>,
        runtime: Arc<ChannelRuntime>,
        key: &ChatKey,
        is_group: bool,
        text: &'static str,
        message: &InboundMessage,
    ) {
        let key = key.clone();
        let reply_to = message.platform_message_id.clone();
        self.tracker.spawn(async move {
            turn::note(&runtime, &key, is_group, text, Some(&reply_to)).await;
        });
    }

    async fn worker(
        self: Arc<Self>,
        queue_name: String,
        key: ChatKey,
        mut receiver: mpsc::Receiver<String>,
        busy: Arc<AtomicBool>,
    ) {
        loop {
            let journal_key = tokio::select! {
                _ = self.stop.cancelled() => return,
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
            busy.store(true, Ordering::SeqCst);
            self.handle(&key, &journal_key).await;
            busy.store(false, Ordering::SeqCst);
        }
    }

    async fn handle(self: &Arc<Self>, key: &ChatKey, journal_key: &str) {
        let entry = match self.journal.get(journal_key) {
            Ok(Some(entry)) => entry,
            Ok(None) => return,
            Err(error) => {
                tracing::warn!(%error, journal_key, "Could not read a journalled message");
                return;
            }
        };
        if entry.state == crate::channels::journal::JournalState::Done {
            return;
        }
        let Some(runtime) = self.runtime(&entry.message.channel) else {
            return;
        };
        let finished = turn::process(self, &runtime, key, &entry).await;
        if finished
            && let Err(error) = self
                .journal
                .mark_done(journal_key)
                .and_then(|()| self.outbox.clear_entry(journal_key))
        {
            tracing::warn!(%error, journal_key, "Could not mark a channel message answered");
        }
    }
}
