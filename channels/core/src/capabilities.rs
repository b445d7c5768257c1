//! Small capability traits: an adapter implements only what its platform can do.

use async_trait::async_trait;
use bytes::Bytes;

use crate::key::ChatKey;
use crate::message::{Attachment, InboundFile, InboundMessage};

/// What a platform allows; the manager sizes chunking and throttling from it.
#[derive(Clone, Debug, PartialEq)]
pub struct ChannelLimits {
    pub max_text_len: usize,
    /// Minimum seconds between edits of one message.
    pub min_edit_interval_secs: f64,
    pub max_upload_bytes: u64,
    pub max_photo_bytes: u64,
    pub max_download_bytes: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    #[error("rate limited by the platform; retry after {retry_after_secs} s")]
    RateLimited { retry_after_secs: f64 },
    #[error("the platform rejected the credentials: {0}; check the bot token in config.yaml")]
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
}

impl ChannelError {
    /// Retrying cannot help: the channel must stop until an operator acts.
    pub fn is_fatal(&self) -> bool {
        matches!(
            self,
            ChannelError::Unauthorized(_) | ChannelError::Conflict(_)
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
    fn limits(&self) -> ChannelLimits;
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

#[async_trait]
pub trait React: Send + Sync {
    async fn react(
        &self,
        chat: &ChatKey,
        message_id: &str,
        emoji: &str,
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

/// Pull-based inbound: the manager polls, journals what it got, then commits.
///
/// Nothing returned by `poll` is acknowledged to the platform until `commit`, so a crash between
/// the two only causes a redelivery, which the manager's journal recognises.
#[async_trait]
pub trait PollUpdates: Send + Sync {
    /// Waits for the next batch (a long poll); may return an empty batch.
    async fn poll(&self) -> Result<Vec<InboundMessage>, ChannelError>;
    /// Acknowledges everything returned by `poll` so far.
    fn commit(&self);
}
