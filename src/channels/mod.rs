//! The channel layer: IM chats mapped to threads, exactly-once delivery, streaming replies.
//!
//! Adapters plug in through `antler_channel`'s contract: each config section under
//! `channels.<name>` builds its adapter, and one [`lifecycle`] task per section connects it,
//! supervises its transport and restarts it when its connection settings change. A message's
//! life: the transport (or the webhook route) hands normalized messages to the
//! [`ChannelManager`], which checks access, journals them durably (only then is the platform
//! acknowledged), and queues them per conversation. The conversation's worker runs the command
//! or the agent turn ([`turn`]), streams the answer into a status message, and plans the final
//! answer in the outbox, from which it is delivered once even across restarts.

pub mod access;
mod actions;
mod answer_files;
mod approvals;
mod board;
mod bot_turns;
pub mod budget;
pub mod chunk;
#[cfg(test)]
mod cluster_tests;
mod deliver;
mod deps;
pub mod files;
pub mod health;
mod hook_delivery;
mod hook_entry;
pub mod journal;
mod lifecycle;
pub mod manager;
pub mod mapping;
mod markdown;
mod outbound;
pub mod outbox;
mod received;
mod records;
mod reload;
mod resume_hook;
mod runtime;
mod schedule_entry;
mod schedule_hook;
#[cfg(test)]
mod schedule_tests;
mod sender;
mod shared_chat;
mod slots;
mod stream;
pub mod supervise;
mod transport_lease;
mod turn;
mod webhook;
mod worker;

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use antler_channel::WebhookHandler;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::ConfigHandle;
use crate::harness::Harness;

pub use crate::commands::{NEW_CONVERSATION, WELCOME_TEXT};
pub use health::{ChannelHealth, HealthBoard};
pub use manager::{Accepted, ChannelManager};
pub use outbound::UNDELIVERED_NOTICE;
pub use runtime::ChannelRuntime;
pub use stream::{CURSOR, WORKING_TEXT};
pub use turn::{BUSY_REPLY, ERROR_REPLY, NO_RESPONSE};
pub use webhook::{WebhookAnswer, WebhookEndpoint};

/// What the HTTP layer shares with the channels: health for `/readyz`, mounted webhooks.
#[derive(Clone, Default)]
pub struct ChannelHub {
    pub health: HealthBoard,
    /// Each channel's latest session, for the reload coordinator.
    sessions: reload::SessionBoard,
    webhooks: Arc<RwLock<HashMap<String, Arc<WebhookEndpoint>>>>,
}

impl ChannelHub {
    /// The webhook of a connected channel in webhook mode.
    pub fn webhook(&self, channel: &str) -> Option<Arc<WebhookEndpoint>> {
        let webhooks = self.webhooks.read().unwrap_or_else(|p| p.into_inner());
        webhooks.get(channel).cloned()
    }

    fn mount(&self, channel: &str, handler: Arc<dyn WebhookHandler>, manager: ChannelManager) {
        let endpoint = Arc::new(WebhookEndpoint::new(channel, handler, manager));
        let mut webhooks = self.webhooks.write().unwrap_or_else(|p| p.into_inner());
        webhooks.insert(channel.to_string(), endpoint);
    }

    fn unmount(&self, channel: &str) {
        let mut webhooks = self.webhooks.write().unwrap_or_else(|p| p.into_inner());
        webhooks.remove(channel);
    }
}

/// The running channel layer. Owns one lifecycle task per adapter (each owning its
/// transport's supervision) and, through the manager, every conversation worker.
pub struct Channels {
    manager: ChannelManager,
    tasks: TaskTracker,
    intake_stop: CancellationToken,
}

impl Channels {
    /// Starts a lifecycle task for every adapter; enabled ones connect in the background and
    /// failures show in `hub.health`.
    pub fn start(harness: Arc<Harness>, config: ConfigHandle, hub: ChannelHub) -> Self {
        let cluster = harness.cluster().clone();
        let manager = ChannelManager::new(harness.clone(), config.clone());
        // Decisions made away from a request's chat (HTTP, the timeout) resume it there.
        harness.set_chat_resume(Arc::new(resume_hook::ChatResumeHook::new(&manager)));
        // Fired slots of schedules created in a chat run there (see `turn::schedule`).
        harness.set_chat_schedule(Arc::new(schedule_hook::ChatScheduleHook::new(&manager)));
        let tasks = TaskTracker::new();
        let intake_stop = CancellationToken::new();
        for section in config.current().channels.sections() {
            let lifecycle = lifecycle::Lifecycle {
                name: section.name(),
                manager: manager.clone(),
                hub: hub.clone(),
                config: config.clone(),
                cluster: cluster.clone(),
            };
            tasks.spawn(lifecycle.run(intake_stop.clone()));
        }
        let coordinator = reload::ReloadCoordinator {
            config: config.clone(),
            sessions: hub.sessions.clone(),
        };
        tasks.spawn(coordinator.run(intake_stop.clone()));
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

    /// Where webhook deliveries with a chat are journalled (`Hooks::set_chat_delivery`).
    pub fn chat_delivery(&self) -> Arc<dyn crate::hooks::ChatDelivery> {
        hook_delivery::ChatHookDelivery::new(&self.manager)
    }

    /// Stops transports, webhooks and new work; turns in flight continue until the harness
    /// drains them.
    pub fn stop_intake(&self) {
        self.intake_stop.cancel();
        self.manager.stop();
    }

    /// Waits for transports and workers to finish, up to `grace`.
    pub async fn wait(&self, grace: Duration) {
        self.stop_intake();
        if tokio::time::timeout(grace, self.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!("Channel transports still running after the grace period");
        }
        self.manager.shutdown(grace).await;
    }
}
