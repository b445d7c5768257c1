//! What was said in a conversation before the message that addressed the bot: the messages
//! people did not address to it, which the daemon never journals, fetched when they are needed.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::capabilities::ChannelError;
use crate::key::ChatKey;

/// Which earlier messages a turn wants.
#[derive(Clone, Copy, Debug)]
pub struct HistoryRequest<'a> {
    pub chat: &'a ChatKey,
    /// The message that addressed the bot: only messages older than it.
    pub before: &'a str,
    /// The newest message the conversation has already seen: only messages newer than it
    /// (`None`: the conversation has seen nothing of this chat yet).
    pub after: Option<&'a str>,
    /// At most this many, the newest kept.
    pub limit: usize,
}

/// One earlier message, as the platform gave it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryMessage {
    pub platform_message_id: String,
    /// When it was sent, in seconds since the Unix epoch (`None` when the platform says not).
    #[serde(default)]
    pub sent_at: Option<i64>,
    pub user_id: String,
    /// The author's name where the payload carries one; else the daemon asks
    /// [`crate::UserNames`].
    #[serde(default)]
    pub display_name: Option<String>,
    /// Written by a bot or an integration (never by this bot: its own messages are left out).
    #[serde(default)]
    pub is_bot: bool,
    pub text: String,
    /// Names of the files it carried; they are listed, never downloaded.
    #[serde(default)]
    pub file_names: Vec<String>,
}

/// Reads a conversation's earlier messages (Slack `conversations.history`/`replies`, Discord
/// `GET /channels/{id}/messages`, Feishu `GET /im/v1/messages`): one platform call per request.
#[async_trait]
pub trait FetchHistory: Send + Sync {
    /// Oldest first. [`ChannelError::MissingPermission`] when the bot may not read the
    /// history (a scope or permission the operator has to grant).
    async fn history(
        &self,
        request: HistoryRequest<'_>,
    ) -> Result<Vec<HistoryMessage>, ChannelError>;
}

/// Unset keys follow `channels.context`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContextOverride {
    /// Earlier messages fetched at most for one mention in this channel (0 = none); unset =
    /// `channels.context.max_messages`.
    #[serde(default)]
    pub max_messages: Option<usize>,
    /// Characters of earlier messages at most for one mention in this channel; unset =
    /// `channels.context.max_chars`.
    #[serde(default)]
    pub max_chars: Option<usize>,
}
