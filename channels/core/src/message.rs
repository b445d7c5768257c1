//! Normalized inbound and outbound chat messages.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::key::ChatKey;

/// A message a person sent on some platform, normalized.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InboundMessage {
    pub channel: String,
    /// Team / guild / tenant; part of the deduplication key.
    pub workspace_id: Option<String>,
    pub chat_id: String,
    pub topic_id: Option<String>,
    pub user_id: String,
    pub display_name: Option<String>,
    /// The platform's id for this message: redeliveries carry the same one.
    pub platform_message_id: String,
    pub text: String,
    pub files: Vec<InboundFile>,
    pub is_direct: bool,
    pub mentions_bot: bool,
    /// The platform message id this one replies to.
    pub reply_to: Option<String>,
    /// The raw platform payload, for adapters' own follow-ups.
    pub raw: Value,
}

impl InboundMessage {
    pub fn chat_key(&self) -> ChatKey {
        ChatKey::new(&self.channel, &self.chat_id, self.topic_id.clone())
    }
}

/// A file attached to an inbound message, fetched later through [`crate::DownloadFile`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InboundFile {
    /// Adapter-specific handle (Telegram `file_id`, Slack URL, …).
    pub handle: String,
    pub filename: Option<String>,
    pub mime_type: Option<String>,
    pub size: Option<u64>,
    pub is_image: bool,
}

/// A reply to deliver.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OutboundMessage {
    pub text: String,
    pub attachments: Vec<Attachment>,
    /// The last message of a turn (streaming updates are not final).
    pub is_final: bool,
    /// Edit this platform message instead of sending a new one.
    pub edit_target: Option<String>,
    pub reply_to: Option<String>,
}

/// A local file to upload with a reply.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Attachment {
    pub filename: String,
    pub mime_type: String,
    pub path: std::path::PathBuf,
    pub size: u64,
    pub is_image: bool,
}
