//! The channel layer: IM chats mapped to threads, exactly-once delivery, streaming replies.
//!
//! A message's life: an adapter's poller (or the webhook route) hands normalized messages to
//! the [`ChannelManager`], which checks access, journals them durably (only then is the
//! platform acknowledged), and queues them per conversation. The conversation's worker runs
//! the command or the agent turn, streams the answer into a status message, and plans the final
//! answer in the outbox, from which it is delivered once even across restarts.

pub mod access;
mod actions;
pub mod budget;
pub mod chunk;
pub mod commands;
mod deliver;
pub mod files;
pub mod health;
pub mod journal;
pub mod manager;
pub mod mapping;
pub mod outbox;
mod records;
mod stream;
pub mod supervise;
mod telegram;
mod turn;

use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::ConfigHandle;
use crate::harness::Harness;

pub use actions::{NEW_CONVERSATION, WELCOME_TEXT};
pub use health::{ChannelHealth, HealthBoard};
pub use manager::{Accepted, ChannelManager, ChannelRuntime};
pub use stream::{CURSOR, WORKING_TEXT};
pub use telegram::{TelegramWebhook, WebhookError};
pub use turn::{BUSY_REPLY, ERROR_REPLY, NO_RESPONSE, UNDELIVERED_NOTICE};

/// What the HTTP layer shares with the channels: health for `/readyz`, webhook endpoints.
#[derive(Clone, Default)]
pub struct ChannelHub {
    pub health: HealthBoard,
    telegram_webhook: Arc<RwLock<Option<Arc<TelegramWebhook>>>>,
}

impl ChannelHub {
    pub fn telegram_webhook(&self) -> Option<Arc<TelegramWebhook>> {
        self.telegram_webhook
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub(crate) fn set_telegram_webhook(&self, webhook: Arc<TelegramWebhook>) {
        *self
            .telegram_webhook
            .write()
            .unwrap_or_else(|p| p.into_inner()) = Some(webhook);
    }
}

/// The running channel layer.
pub struct Channels {
    manager: ChannelManager,
    tasks: TaskTracker,
    intake_stop: CancellationToken,
}

impl Channels {
    /// Starts every enabled channel in the background; failures show in `hub.health`.
    pub fn start(harness: Arc<Harness>, config: ConfigHandle, hub: ChannelHub) -> Self {
        let manager = ChannelManager::new(harness, config.clone());
        let tasks = TaskTracker::new();
        let intake_stop = CancellationToken::new();
        let snapshot = config.current();
        if snapshot.channels.telegram.enabled {
            tasks.spawn(telegram::run(
                manager.clone(),
                snapshot.channels.telegram.clone(),
                hub,
                intake_stop.clone(),
            ));
        }
        tasks.close();
        Self {
            manager,
            tasks,
            intake_stop,
        }
    }

    pub fn manager(&self) -> &ChannelManager {
        &self.manager
    }

    /// Stops pollers and new work; turns in flight continue until the harness drains them.
    pub fn stop_intake(&self) {
        self.intake_stop.cancel();
        self.manager.inner.stop.cancel();
    }

    /// Waits for pollers and workers to finish, up to `grace`.
    pub async fn wait(&self, grace: Duration) {
        self.stop_intake();
        if tokio::time::timeout(grace, self.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!("Channel pollers still running after the grace period");
        }
        self.manager.shutdown(grace).await;
    }
}
