//! Telegram adapter: teloxide requests behind Antler's channel capability traits.
//!
//! The adapter never runs teloxide's `Dispatcher`: the manager drives `getUpdates` through
//! [`PollUpdates`] so the offset (Telegram's acknowledgement) only advances after the manager
//! journalled what it received. Webhook mode uses [`TelegramChannel::parse_update`] on the
//! body the daemon's HTTP route verified.

mod convert;
mod error;
mod markup;
mod send;

use std::sync::{Arc, Mutex};

use antler_channel::{ChannelError, ChannelLimits, ChannelParts, InboundMessage, PollUpdates};
use async_trait::async_trait;
use teloxide::Bot;
use teloxide::payloads::{GetUpdatesSetters, SetWebhookSetters};
use teloxide::requests::Requester;
use teloxide::types::{AllowedUpdate, Update, UpdateKind};

pub use convert::{BotIdentity, inbound_message};
pub use markup::to_html;

use crate::error::channel_error;

/// The channel name used in chat keys and configuration.
pub const CHANNEL_NAME: &str = "telegram";

/// Bot API limits: 4096 characters a message, 20 MB downloads, 50 MB uploads, 10 MB photos.
pub const TELEGRAM_LIMITS: ChannelLimits = ChannelLimits {
    max_text_len: 4096,
    min_edit_interval_secs: 1.0,
    max_upload_bytes: 50 * 1024 * 1024,
    max_photo_bytes: 10 * 1024 * 1024,
    max_download_bytes: 20 * 1024 * 1024,
};

/// How to reach the Bot API.
#[derive(Clone, Debug)]
pub struct TelegramOptions {
    pub bot_token: String,
    /// A self-hosted Bot API server (or a test fake); `None` = `https://api.telegram.org`.
    pub api_url: Option<String>,
    /// Seconds `getUpdates` waits for news before answering empty.
    pub poll_timeout_secs: u32,
}

/// One bot: the teloxide client, who the bot is, and the polling offset.
pub struct TelegramChannel {
    bot: Bot,
    identity: BotIdentity,
    poll_timeout_secs: u32,
    offsets: Mutex<Offsets>,
}

#[derive(Default)]
struct Offsets {
    /// The `offset` of the next `getUpdates`: everything below it is acknowledged.
    committed: i32,
    /// One past the highest update id returned by `poll` and not committed yet.
    pending: Option<i32>,
}

impl TelegramChannel {
    /// Checks the token with `getMe` and learns the bot's username.
    pub async fn connect(options: &TelegramOptions) -> Result<Arc<Self>, ChannelError> {
        let mut bot = Bot::new(&options.bot_token);
        if let Some(api_url) = &options.api_url {
            let url = url::Url::parse(api_url).map_err(|e| {
                ChannelError::Platform(format!(
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
        Ok(Arc::new(Self {
            bot,
            identity,
            poll_timeout_secs: options.poll_timeout_secs,
            offsets: Mutex::new(Offsets::default()),
        }))
    }

    pub fn identity(&self) -> &BotIdentity {
        &self.identity
    }

    /// Every capability this adapter offers, for the manager.
    pub fn parts(self: &Arc<Self>) -> ChannelParts {
        ChannelParts {
            name: CHANNEL_NAME.into(),
            send: self.clone(),
            edit: Some(self.clone()),
            typing: Some(self.clone()),
            upload: Some(self.clone()),
            download: Some(self.clone()),
            poll: Some(self.clone()),
        }
    }

    /// Parses a webhook body into a message; `Ok(None)` for updates the bot ignores.
    pub fn parse_update(&self, body: &[u8]) -> Result<Option<InboundMessage>, ChannelError> {
        let update: Update = serde_json::from_slice(body)
            .map_err(|e| ChannelError::Platform(format!("unreadable telegram update: {e}")))?;
        Ok(self.message_of(&update))
    }

    /// Registers `url` as the webhook; Telegram sends `secret` in every request's
    /// `X-Telegram-Bot-Api-Secret-Token` header.
    pub async fn set_webhook(&self, url: &str, secret: &str) -> Result<(), ChannelError> {
        let url = url::Url::parse(url)
            .map_err(|e| ChannelError::Platform(format!("webhook url {url:?} is invalid: {e}")))?;
        self.bot
            .set_webhook(url)
            .secret_token(secret)
            .allowed_updates(vec![AllowedUpdate::Message])
            .await
            .map_err(channel_error)?;
        Ok(())
    }

    fn message_of(&self, update: &Update) -> Option<InboundMessage> {
        match &update.kind {
            UpdateKind::Message(message) => inbound_message(message, &self.identity),
            _ => None,
        }
    }

    fn offsets(&self) -> std::sync::MutexGuard<'_, Offsets> {
        self.offsets
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[async_trait]
impl PollUpdates for TelegramChannel {
    async fn poll(&self) -> Result<Vec<InboundMessage>, ChannelError> {
        let offset = {
            let offsets = self.offsets();
            offsets.committed
        };
        let updates = self
            .bot
            .get_updates()
            .offset(offset)
            .timeout(self.poll_timeout_secs)
            .allowed_updates(vec![AllowedUpdate::Message])
            .await
            .map_err(channel_error)?;
        if let Some(last) = updates.iter().map(|u| u.id.0).max() {
            let next = i32::try_from(last).unwrap_or(i32::MAX).saturating_add(1);
            let mut offsets = self.offsets();
            offsets.pending = Some(offsets.pending.map_or(next, |p| p.max(next)));
        }
        Ok(updates.iter().filter_map(|u| self.message_of(u)).collect())
    }

    fn commit(&self) {
        let mut offsets = self.offsets();
        if let Some(pending) = offsets.pending.take() {
            offsets.committed = offsets.committed.max(pending);
        }
    }
}
