//! The channel manager: connected channels, access checks, the journal, one worker per
//! conversation, recovery.
//!
//! Transports feed [`ChannelManager::accept_batch`] through the [`InboundSink`] it provides, and
//! the webhook route does so directly; both return only after the messages are durably
//! journalled, so the caller may then acknowledge them to the platform. Each conversation
//! (`ChatKey`) is answered by one worker at a time across every daemon sharing the store: the
//! worker holds the chat's claim (a lease, see [`crate::cluster`]) and answers the chat's
//! pending messages in received order (the `worker` module). A message received while
//! another daemon holds the chat stays pending for that daemon's worker; the sweeper claims
//! chats whose holder died.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use antler_channel::{ChatKey, InboundMessage, InboundSink, SinkError};
use async_trait::async_trait;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::channels::access::{Verdict, verdict};
use crate::channels::bot_turns::{BotTurn, BotTurns};
use crate::channels::deps::TurnDeps;
use crate::channels::journal::{Index, Journal, RETENTION, Recorded};
use crate::channels::mapping::ChatMap;
use crate::channels::outbox::Outbox;
use crate::channels::records::RecordError;
use crate::channels::runtime::ChannelRuntime;
use crate::channels::slots::{Job, Slot};
use crate::channels::turn;
use crate::cluster::Cluster;
use crate::commands::{Command, parse_command};
use crate::config::ConfigHandle;
use crate::harness::Harness;
use antler_store::StoreError;

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
    /// Another bot, in a conversation where bots already started `bot_turn_limit` turns in a
    /// row since a person spoke.
    BotLimit,
    UnknownChannel,
}

#[derive(Clone)]
pub struct ChannelManager {
    inner: Arc<ManagerInner>,
}

pub(crate) struct ManagerInner {
    pub(crate) deps: Arc<TurnDeps>,
    /// This daemon among those sharing the store: the chats' claims.
    pub(crate) cluster: Cluster,
    channels: RwLock<HashMap<String, Arc<ChannelRuntime>>>,
    /// The conversations this daemon works on now, by `ChatKey` string.
    pub(crate) queues: Mutex<HashMap<String, Slot>>,
    /// The per-user limiter and the `user_messages_per_minute` it was built for.
    user_limiter: Mutex<(u32, Arc<governor::DefaultKeyedRateLimiter<String>>)>,
    user_noticed: Mutex<HashMap<String, tokio::time::Instant>>,
    /// Bot turns in a row per conversation (`bot_turn_limit`).
    bot_turns: BotTurns,
    /// Owns every worker, notice task and the sweeper.
    pub(crate) tracker: TaskTracker,
}

impl ChannelManager {
    pub fn new(harness: Arc<Harness>, config: ConfigHandle) -> Self {
        let store = harness.threads().store().clone();
        let cluster = harness.cluster().clone();
        let per_minute = config.current().channels.user_messages_per_minute;
        let deps = TurnDeps {
            harness,
            config,
            chats: ChatMap::new(store.clone()),
            journal: Journal::new(store.clone()),
            outbox: Outbox::new(store.clone()),
            stop: CancellationToken::new(),
            claim_lost: CancellationToken::new(),
            claim: None,
        };
        let manager = Self {
            inner: Arc::new(ManagerInner {
                deps: Arc::new(deps),
                cluster,
                channels: RwLock::new(HashMap::new()),
                queues: Mutex::new(HashMap::new()),
                user_limiter: Mutex::new((per_minute, user_limiter(per_minute))),
                user_noticed: Mutex::new(HashMap::new()),
                bot_turns: BotTurns::new(store),
                tracker: TaskTracker::new(),
            }),
        };
        let inner = manager.inner.clone();
        // Owned by the manager's tracker; ends with the manager's stop token.
        manager
            .inner
            .tracker
            .spawn(inner.sweep_every_third_of_a_lease());
        manager
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

    /// What the manager shares with its workers (and the approvals' resume hook).
    pub(crate) fn inner(&self) -> &Arc<ManagerInner> {
        &self.inner
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
        for job in queued {
            self.inner.dispatch(&job.chat.clone(), Some(job));
        }
        Ok(outcomes)
    }

    /// Answers what was journalled for `channel` but not answered (by this daemon before a
    /// restart, or by one that died); call once the channel is registered. Returns how many
    /// messages wait.
    pub fn recover(&self, channel: &str) -> Result<usize, StoreError> {
        let journal = &self.inner.deps.journal;
        let indexed = journal.index_unindexed(|message| self.inner.resolve_key(message))?;
        if indexed > 0 {
            tracing::info!(
                indexed,
                "Indexed the unanswered channel messages of an older store"
            );
        }
        // Claimed: with several instances, one prunes while the others skip it.
        let pruned = match self.inner.deps.harness.claim_job("channel-journal-prune") {
            Some(_job) => journal.prune(RETENTION)?,
            None => 0,
        };
        if pruned > 0 {
            tracing::debug!(pruned, "Forgot old answered channel messages");
        }
        if self.inner.runtime(channel).is_none() {
            return Ok(0);
        }
        let count = journal.pending_count(channel)?;
        for chat in journal.pending_chats(Some(channel))? {
            self.inner.dispatch(&chat, None);
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
        let config = self.deps.config.current();
        let Some(section) = config.channels.section(channel) else {
            return Ok((Accepted::UnknownChannel, None));
        };
        let access = section.access();
        let addressed = match verdict(&access, &section.group_rules(), &message) {
            Verdict::Allow => true,
            Verdict::Bot => return Ok((Accepted::NotAddressed, None)),
            Verdict::Deny(reason) => {
                tracing::info!(channel, chat = %message.chat_id, user = %message.user_id, reason, "Ignoring a message from outside the allowlist");
                return Ok((Accepted::Denied, None));
            }
            // A follow-up in a platform thread the bot already answers in is for the bot,
            // unless the channel wants a mention on every message.
            Verdict::NotAddressed => {
                message.thread_reply
                    && !access.require_mention_in_threads
                    && self.deps.chats.get(&message.chat_key())?.is_some()
            }
        };
        let key = self.resolve_key(&message)?;
        if !message.is_direct && !message.is_bot {
            // A person spoke in the conversation: bots may be answered there again.
            self.bot_turns.person_spoke(&key)?;
        }
        if !addressed {
            return Ok((Accepted::NotAddressed, None));
        }
        if self.deps.journal.seen(&message)? {
            crate::metrics::inbound_duplicate(channel);
            tracing::debug!(channel, message_id = %message.platform_message_id, "Dropping a redelivered message");
            return Ok((Accepted::Duplicate, None));
        }
        if message.is_bot {
            let limit = access
                .bot_turn_limit
                .unwrap_or(config.channels.bot_turn_limit);
            if let BotTurn::Refuse { first } = self.bot_turns.bot_spoke(&key, limit)? {
                if first {
                    tracing::info!(channel, chat = %key, limit, "Bots answered each other bot_turn_limit times in a row here; not answering bots until a person speaks");
                }
                return Ok((Accepted::BotLimit, None));
            }
        }
        let throttled = !self.user_within_rate(channel, &message.user_id);
        let command = parse_command(&message.text, runtime.bot_username.as_deref());
        // Answered here and now, never by the chat's worker.
        let immediate = throttled || command == Some(Command::Cancel);
        let index = if immediate {
            Index::Immediate
        } else {
            Index::Queue
        };
        let journal_key = match self.deps.journal.record(&message, &key, index)? {
            Recorded::New(key) => key,
            Recorded::Duplicate => {
                tracing::debug!(channel, message_id = %message.platform_message_id, "Dropping a redelivered message");
                return Ok((Accepted::Duplicate, None));
            }
        };
        if throttled {
            self.deps
                .journal
                .mark_done(&journal_key)
                .map_err(RecordError::into_store)?;
            self.notice_throttled(runtime, &message);
            return Ok((Accepted::Throttled, None));
        }
        if command == Some(Command::Cancel) {
            // A cancel must not wait behind the turn it cancels.
            let deps = self.deps.clone();
            self.tracker.spawn(async move {
                turn::cancel_now(&deps, &runtime, &key, &journal_key, &message).await;
            });
            return Ok((Accepted::Queued, None));
        }
        let job = Job {
            chat: key,
            journal_key,
            runtime,
            message,
        };
        Ok((Accepted::Queued, Some(job)))
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
}
