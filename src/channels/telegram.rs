//! Wiring the Telegram adapter into the manager: connect (with backoff), register, recover,
//! then poll or register the webhook.

use std::sync::Arc;

use antler_telegram::{TelegramChannel, TelegramOptions};
use subtle::ConstantTimeEq;
use tokio_util::sync::CancellationToken;

use crate::channels::ChannelHub;
use crate::channels::access::AccessPolicy;
use crate::channels::budget::{BudgetLimits, RateBudget};
use crate::channels::health::ChannelHealth;
use crate::channels::manager::{Accepted, ChannelManager, ChannelRuntime};
use crate::channels::supervise::{backoff, mark_fatal, run_poller};
use crate::config::{TelegramConfig, TelegramMode};
use crate::store::StoreError;

const NAME: &str = antler_telegram::CHANNEL_NAME;

/// The webhook endpoint's state: the adapter to parse with and the secret to check.
pub struct TelegramWebhook {
    channel: Arc<TelegramChannel>,
    secret: String,
    manager: ChannelManager,
}

/// Why a webhook request was refused.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error("missing or wrong X-Telegram-Bot-Api-Secret-Token")]
    BadSecret,
    #[error("unreadable update: {0}")]
    BadUpdate(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl TelegramWebhook {
    /// Verifies the secret (constant time), parses and journals the update. `Ok` means the
    /// update is durable and Telegram may be told so.
    pub fn receive(
        &self,
        secret: Option<&[u8]>,
        body: &[u8],
    ) -> Result<Option<Accepted>, WebhookError> {
        let given = secret.unwrap_or_default();
        if self.secret.is_empty() || !bool::from(given.ct_eq(self.secret.as_bytes())) {
            return Err(WebhookError::BadSecret);
        }
        let message = self
            .channel
            .parse_update(body)
            .map_err(|e| WebhookError::BadUpdate(e.to_string()))?;
        let Some(message) = message else {
            return Ok(None);
        };
        let outcome = self.manager.accept_batch(NAME, vec![message])?;
        Ok(outcome.into_iter().next())
    }
}

pub(crate) async fn run(
    manager: ChannelManager,
    config: TelegramConfig,
    hub: ChannelHub,
    stop: CancellationToken,
) {
    let health = hub.health.clone();
    health.set(NAME, ChannelHealth::Starting);
    let Some(token) = config.bot_token.as_ref().filter(|t| !t.is_empty()) else {
        let reason = "channels.telegram.bot_token is empty; set it (e.g. $TELEGRAM_BOT_TOKEN)";
        tracing::error!(channel = NAME, "{reason}");
        health.set(
            NAME,
            ChannelHealth::Unhealthy {
                reason: reason.into(),
            },
        );
        return;
    };
    let options = TelegramOptions {
        bot_token: token.expose().to_string(),
        api_url: config.api_url.clone(),
        poll_timeout_secs: config.poll_timeout,
    };
    let mut failures = 0;
    let channel = loop {
        let attempt = tokio::select! {
            _ = stop.cancelled() => return,
            attempt = TelegramChannel::connect(&options) => attempt,
        };
        match attempt {
            Ok(channel) => break channel,
            Err(error) if error.is_fatal() => {
                mark_fatal(&health, NAME, &error);
                return;
            }
            Err(error) => {
                failures += 1;
                let delay = backoff(failures);
                tracing::warn!(channel = NAME, %error, ?delay, "Could not reach the Telegram Bot API; retrying");
                health.set(
                    NAME,
                    ChannelHealth::Degraded {
                        reason: error.to_string(),
                    },
                );
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(delay) => {}
                }
            }
        }
    };
    let ids = |ids: &[i64]| ids.iter().map(ToString::to_string).collect::<Vec<_>>();
    manager.register(ChannelRuntime {
        parts: channel.parts(),
        policy: AccessPolicy {
            allowed_users: ids(&config.allowed_users),
            allowed_chats: ids(&config.allowed_chats),
            admins: ids(&config.admins),
            group_policy: config.group_policy,
        },
        budget: RateBudget::new(BudgetLimits::TELEGRAM),
        bot_username: Some(channel.identity().username.clone()),
        session_agent: config.session.agent.clone(),
    });
    tracing::info!(channel = NAME, bot = %channel.identity().username, mode = ?config.mode, "Channel connected");
    if let Err(error) = manager.recover(NAME) {
        tracing::error!(channel = NAME, %error, "Could not read the journal of unanswered messages");
    }
    match config.mode {
        TelegramMode::Polling => {
            let poll = channel.clone();
            run_poller(manager, NAME.into(), poll, health, stop).await;
        }
        TelegramMode::Webhook => {
            let secret = config
                .webhook_secret
                .as_ref()
                .map(|s| s.expose().to_string())
                .unwrap_or_default();
            let Some(url) = config.webhook_url.clone().filter(|_| !secret.is_empty()) else {
                let reason = "webhook mode needs channels.telegram.webhook_url and webhook_secret";
                tracing::error!(channel = NAME, "{reason}");
                health.set(
                    NAME,
                    ChannelHealth::Unhealthy {
                        reason: reason.into(),
                    },
                );
                return;
            };
            if let Err(error) = channel.set_webhook(&url, &secret).await {
                mark_fatal(&health, NAME, &error);
                return;
            }
            hub.set_telegram_webhook(Arc::new(TelegramWebhook {
                channel,
                secret,
                manager,
            }));
            health.set(NAME, ChannelHealth::Running);
        }
    }
}
