//! Telegram adapter: teloxide requests behind Antler's channel contract.
//!
//! The adapter never runs teloxide's `Dispatcher`: its [`Transport`] drives `getUpdates` so the
//! offset (Telegram's acknowledgement) only advances after the daemon journalled what it
//! received. Webhook mode registers the URL at connect and verifies each push's secret header
//! in [`webhook`].

// Tests own their tasks through the test runtime, which ends them with the test.
#![cfg_attr(test, allow(clippy::disallowed_methods))]

mod buttons;
mod config;
mod convert;
mod error;
mod markup;
mod mentions;
mod poll;
mod send;
mod webhook;

use std::sync::Arc;
use std::time::Duration;

use antler_channel::{
    BudgetLimits, ChannelAdapter, ChannelError, ChannelParts, ChannelProfile, Connection, Pace,
    ReactionSet,
};
use async_trait::async_trait;
use teloxide::Bot;
use teloxide::payloads::SetWebhookSetters;
use teloxide::requests::Requester;
use teloxide::types::AllowedUpdate;

pub use config::{TelegramConfig, TelegramMode};
pub use convert::{BotIdentity, inbound_message};
pub use markup::to_html;

use crate::error::channel_error;

/// The updates the bot asks for, polling or by webhook: messages, and the clicks on its
/// buttons (without `callback_query` Telegram never sends them).
pub(crate) const ALLOWED_UPDATES: [AllowedUpdate; 2] =
    [AllowedUpdate::Message, AllowedUpdate::CallbackQuery];

/// The channel name used in chat keys and configuration.
pub const CHANNEL_NAME: &str = "telegram";

/// Bot API rules: 4096 characters a message; about 30 messages a second per bot, one a second
/// per chat and 20 a minute per group; 50 MB uploads, 10 MB photos, 20 MB downloads. The typing
/// indicator lasts 5 s; groups get it less often to leave their smaller budget to edits.
pub const TELEGRAM_PROFILE: ChannelProfile = ChannelProfile {
    max_text_len: 4096,
    edit_interval: Pace {
        direct: Duration::from_secs(1),
        group: Duration::from_secs(3),
    },
    typing_interval: Pace {
        direct: Duration::from_secs(4),
        group: Duration::from_secs(8),
    },
    budget: BudgetLimits {
        global_per_second: 30,
        direct_per_minute: 60,
        group_per_minute: 20,
        burst: 3,
    },
    max_upload_bytes: 50 * 1024 * 1024,
    max_photo_bytes: 10 * 1024 * 1024,
    max_download_bytes: 20 * 1024 * 1024,
    reactions: ReactionSet {
        received: "👀",
        done: "👍",
        failed: "😢",
    },
};

/// Builds the connection from `channels.telegram`.
pub struct TelegramAdapter {
    config: TelegramConfig,
}

impl TelegramAdapter {
    pub fn new(config: TelegramConfig) -> Self {
        Self { config }
    }
}

#[async_trait]
impl ChannelAdapter for TelegramAdapter {
    fn profile(&self) -> ChannelProfile {
        TELEGRAM_PROFILE
    }

    /// `getMe` checks the token; webhook mode then registers the URL and secret.
    async fn connect(&self) -> Result<Connection, ChannelError> {
        let config = &self.config;
        let token = config
            .bot_token
            .as_ref()
            .filter(|token| !token.is_empty())
            .ok_or_else(|| {
                ChannelError::Config(
                    "channels.telegram.bot_token is empty; set it (e.g. $TELEGRAM_BOT_TOKEN)"
                        .into(),
                )
            })?;
        let channel = TelegramChannel::connect(token.expose(), config.api_url.as_deref()).await?;
        let parts = channel.parts();
        let bot_username = Some(channel.identity.username.clone());
        match config.mode {
            TelegramMode::Polling => Ok(Connection {
                parts,
                bot_username,
                webhook: None,
                transport: Some(Arc::new(poll::Poller::new(channel, config.poll_timeout))),
            }),
            TelegramMode::Webhook => {
                let (url, secret) = match (&config.webhook_url, &config.webhook_secret) {
                    (Some(url), Some(secret)) if !secret.is_empty() => (url, secret.expose()),
                    _ => {
                        return Err(ChannelError::Config(
                            "webhook mode needs channels.telegram.webhook_url and webhook_secret"
                                .into(),
                        ));
                    }
                };
                channel.set_webhook(url, secret).await?;
                Ok(Connection {
                    parts,
                    bot_username,
                    webhook: Some(Arc::new(webhook::TelegramWebhook::new(
                        channel.identity.clone(),
                        secret,
                    ))),
                    transport: None,
                })
            }
        }
    }
}

/// One bot: the teloxide client and who the bot is.
pub(crate) struct TelegramChannel {
    bot: Bot,
    identity: BotIdentity,
}

impl TelegramChannel {
    /// Checks the token with `getMe` and learns the bot's username.
    async fn connect(token: &str, api_url: Option<&str>) -> Result<Arc<Self>, ChannelError> {
        let mut bot = Bot::new(token);
        if let Some(api_url) = api_url {
            let url = url::Url::parse(api_url).map_err(|e| {
                ChannelError::Config(format!(
                    "channels.telegram.api_url {api_url:?} is not a URL: {e}"
                ))
            })?;
            bot = bot.set_api_url(url);
        }
        let me = bot.get_me().await.map_err(channel_error)?;
        let identity = BotIdentity {
            id: me.user.id.0,
            username: me.user.username.clone().unwrap_or_default(),
        };
        Ok(Arc::new(Self { bot, identity }))
    }

    fn parts(self: &Arc<Self>) -> ChannelParts {
        ChannelParts {
            send: self.clone(),
            edit: Some(self.clone()),
            typing: Some(self.clone()),
            react: Some(self.clone()),
            upload: Some(self.clone()),
            download: Some(self.clone()),
            // Its messages carry the sender's name.
            names: None,
            history: None,
            buttons: Some(self.clone()),
        }
    }

    /// Registers `url` as the webhook; Telegram sends `secret` in every request's
    /// `X-Telegram-Bot-Api-Secret-Token` header.
    async fn set_webhook(&self, url: &str, secret: &str) -> Result<(), ChannelError> {
        let url = url::Url::parse(url).map_err(|e| {
            ChannelError::Config(format!(
                "channels.telegram.webhook_url {url:?} is invalid: {e}"
            ))
        })?;
        self.bot
            .set_webhook(url)
            .secret_token(secret)
            .allowed_updates(ALLOWED_UPDATES.to_vec())
            .await
            .map_err(channel_error)?;
        Ok(())
    }
}
