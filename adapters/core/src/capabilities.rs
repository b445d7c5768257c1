//! Small capability traits: an adapter implements only what its platform can do.

use async_trait::async_trait;
use bytes::Bytes;

use crate::key::ChatKey;
use crate::message::{Attachment, InboundFile};

#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    #[error("rate limited by the platform; retry after {retry_after_secs} s")]
    RateLimited { retry_after_secs: f64 },
    #[error("the platform rejected the credentials: {0}; check the channel's token in config.yaml")]
    Unauthorized(String),
    #[error("the message was not modified")]
    NotModified,
    #[error("file too large: {size} bytes, the platform accepts at most {limit}")]
    TooLarge { size: u64, limit: u64 },
    #[error("platform request failed: {0}")]
    Platform(String),
    #[error("network error: {0}")]
    Network(String),
    /// Another consumer holds the update stream (a second poller, or a webhook is set).
    #[error("the platform refused: {0}; stop the other instance using this bot token")]
    Conflict(String),
    /// The channel's settings cannot work (a missing token, a webhook mode without its URL).
    #[error("{0}")]
    Config(String),
    /// The bot lacks a scope or permission for this call (Slack `missing_scope`, Discord's
    /// Missing Access); the text names what to grant. Only that feature degrades.
    #[error("{0}")]
    MissingPermission(String),
}

impl ChannelError {
    /// Retrying cannot help: the channel must stop until an operator acts.
    pub fn is_fatal(&self) -> bool {
        matches!(
            self,
            ChannelError::Unauthorized(_) | ChannelError::Conflict(_) | ChannelError::Config(_)
        )
    }
}

/// A message the platform accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SentMessage {
    pub platform_message_id: String,
}

#[async_trait]
pub trait SendMessage: Send + Sync {
    /// Sends Markdown as the model wrote it; the adapter converts it to the platform's markup.
    async fn send_text(
        &self,
        chat: &ChatKey,
        text: &str,
        reply_to: Option<&str>,
    ) -> Result<SentMessage, ChannelError>;
}

#[async_trait]
pub trait EditMessage: Send + Sync {
    async fn edit_text(
        &self,
        chat: &ChatKey,
        message_id: &str,
        text: &str,
    ) -> Result<(), ChannelError>;
}

#[async_trait]
pub trait TypingIndicator: Send + Sync {
    async fn typing(&self, chat: &ChatKey) -> Result<(), ChannelError>;
}

/// Marks a person's message (received, answered, failed); each call replaces the bot's previous
/// reaction on platforms that allow only one.
#[async_trait]
pub trait React: Send + Sync {
    async fn react(
        &self,
        chat: &ChatKey,
        message_id: &str,
        reaction: &str,
    ) -> Result<(), ChannelError>;
}

#[async_trait]
pub trait UploadFile: Send + Sync {
    async fn upload(
        &self,
        chat: &ChatKey,
        file: &Attachment,
        reply_to: Option<&str>,
    ) -> Result<SentMessage, ChannelError>;
}

#[async_trait]
pub trait DownloadFile: Send + Sync {
    async fn download(&self, file: &InboundFile, max_bytes: u64) -> Result<Bytes, ChannelError>;
}

/// How people are called, for platforms whose events carry only a user id (Slack): in a group
/// chat the agent is told who speaks.
#[async_trait]
pub trait UserNames: Send + Sync {
    /// The display name of `user_id`; `Ok(None)` when the platform knows none.
    async fn display_name(&self, user_id: &str) -> Result<Option<String>, ChannelError>;
}
