//! Earlier messages of a conversation: `GET /channels/{id}/messages?before=…&limit=…` on the
//! Discord thread, or on the text channel for a mention outside one. One call per mention:
//! Discord takes only one of `before`/`after`, so the newest `limit` before the mention are
//! read and those the conversation has seen (snowflakes up to the cursor) dropped here.
//!
//! Permissions: without View Channel Discord answers 403 (50001 Missing Access); without
//! Read Message History it answers 200 with no messages at all. So `before` is the mention's
//! id + 1 and the mention itself must come back: a list without it means the permission is
//! missing, not that nobody spoke.

use antler_channel::{ChannelError, FetchHistory, HistoryMessage, HistoryRequest};
use async_trait::async_trait;
use reqwest::Method;
use serenity::model::channel::{Message, MessageType};

use crate::DiscordChannel;
use crate::api::{ApiError, Body};

/// Discord's page size limit.
const MAX_PAGE: usize = 100;
/// Missing Access, Missing Permissions.
const PERMISSION_CODES: [i64; 2] = [50001, 50013];

#[async_trait]
impl FetchHistory for DiscordChannel {
    async fn history(
        &self,
        request: HistoryRequest<'_>,
    ) -> Result<Vec<HistoryMessage>, ChannelError> {
        let mention: u64 = request
            .before
            .parse()
            .map_err(|_| ChannelError::Platform(format!("not a snowflake: {}", request.before)))?;
        let channel = request
            .chat
            .topic_id
            .as_deref()
            .filter(|thread| *thread != request.before)
            .unwrap_or(&request.chat.chat_id);
        let limit = (request.limit + 1).min(MAX_PAGE);
        let path = format!(
            "channels/{channel}/messages?before={}&limit={limit}",
            mention + 1
        );
        let route = format!("history:{channel}");
        let answer = self
            .api
            .call(Method::GET, &route, &path, Body::Empty)
            .await
            .map_err(|error| match error {
                ApiError::Discord { code, .. } if PERMISSION_CODES.contains(&code) => {
                    missing_permission()
                }
                other => other.into_channel("read the messages before a mention"),
            })?;
        let messages: Vec<Message> = serde_json::from_value(answer)
            .map_err(|e| ChannelError::Platform(format!("discord messages: {e}")))?;
        if !messages.iter().any(|m| m.id.get() == mention) {
            return Err(missing_permission());
        }
        let after: u64 = request.after.and_then(|id| id.parse().ok()).unwrap_or(0);
        let mut kept: Vec<HistoryMessage> = messages
            .into_iter()
            .filter(|m| m.id.get() < mention && m.id.get() > after)
            .filter(|m| m.author.id.to_string() != self.identity.user_id)
            .filter(|m| matches!(m.kind, MessageType::Regular | MessageType::InlineReply))
            .map(converted)
            .collect();
        // Discord lists newest first.
        kept.reverse();
        let skip = kept.len().saturating_sub(request.limit);
        Ok(kept.split_off(skip))
    }
}

fn missing_permission() -> ChannelError {
    ChannelError::MissingPermission(
        "the Discord bot lacks Read Message History in this channel; grant it to the bot's role"
            .into(),
    )
}

fn converted(message: Message) -> HistoryMessage {
    let author = &message.author;
    HistoryMessage {
        platform_message_id: message.id.to_string(),
        sent_at: Some(message.timestamp.unix_timestamp()),
        user_id: author.id.to_string(),
        display_name: Some(
            author
                .global_name
                .clone()
                .unwrap_or_else(|| author.name.clone()),
        ),
        is_bot: author.bot || message.webhook_id.is_some(),
        file_names: message
            .attachments
            .iter()
            .map(|file| file.filename.clone())
            .collect(),
        text: message.content,
    }
}
