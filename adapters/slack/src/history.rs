//! Earlier messages of a conversation: `conversations.replies` inside a thread,
//! `conversations.history` for a top-level mention (the channel before it). One call per
//! mention: `oldest` is the newest message the conversation has seen, `latest` the mention,
//! both exclusive. The bot's own messages are left out (the thread has them); other bots'
//! and integrations' are kept and marked.
//!
//! Needs `channels:history` (public channels) or `groups:history` (private ones); without it
//! Slack answers `missing_scope` and the daemon answers without the earlier messages.

use antler_channel::{ChannelError, FetchHistory, HistoryMessage, HistoryRequest};
use async_trait::async_trait;
use slack_morphism::prelude::{
    SlackApiConversationsHistoryRequest, SlackApiConversationsRepliesRequest, SlackHistoryMessage,
};
use slack_morphism::{SlackChannelId, SlackTs};

use crate::SlackChannel;
use crate::api::api_error_code;

/// Slack returns at most this many messages a call (and asks for 200 or fewer).
const MAX_PAGE: usize = 200;

#[async_trait]
impl FetchHistory for SlackChannel {
    async fn history(
        &self,
        request: HistoryRequest<'_>,
    ) -> Result<Vec<HistoryMessage>, ChannelError> {
        let channel = SlackChannelId::new(request.chat.chat_id.clone());
        let limit = request.limit.clamp(1, MAX_PAGE) as u16;
        let latest = Some(SlackTs::new(request.before.to_string()));
        let oldest = request.after.map(|ts| SlackTs::new(ts.to_string()));
        let session = self.api.bot();
        let thread = request
            .chat
            .topic_id
            .as_deref()
            .filter(|root| *root != request.before);
        let answer = match thread {
            Some(root) => {
                let asked = SlackApiConversationsRepliesRequest::new(
                    channel,
                    SlackTs::new(root.to_string()),
                )
                .with_latest(SlackTs::new(request.before.to_string()))
                // Replies come oldest first: a full page, so the newest are among them.
                .with_limit(MAX_PAGE as u16)
                .with_inclusive(false);
                let asked = match &oldest {
                    Some(oldest) => asked.with_oldest(oldest.clone()),
                    None => asked,
                };
                self.api
                    .call(
                        "conversations.replies",
                        session.conversations_replies(&asked),
                    )
                    .await
                    .map(|answer| answer.messages)
            }
            None => {
                let mut asked = SlackApiConversationsHistoryRequest::new()
                    .with_channel(channel)
                    .with_limit(limit)
                    .with_inclusive(false);
                asked.latest = latest;
                asked.oldest = oldest;
                self.api
                    .call(
                        "conversations.history",
                        session.conversations_history(&asked),
                    )
                    .await
                    .map(|answer| answer.messages)
            }
        };
        let messages = answer.map_err(|error| missing_scope(error, &request.chat.chat_id))?;
        Ok(self.kept(messages, request))
    }
}

impl SlackChannel {
    /// The messages strictly between the cursor and the mention, not the bot's own, oldest
    /// first, the newest `limit` of them (`conversations.replies` always adds the thread's
    /// root, and a page may reach past either end).
    fn kept(
        &self,
        messages: Vec<SlackHistoryMessage>,
        request: HistoryRequest<'_>,
    ) -> Vec<HistoryMessage> {
        let before = ts_order(request.before);
        let after = request.after.map(ts_order);
        let mut kept: Vec<(_, HistoryMessage)> = messages
            .into_iter()
            .filter(|message| !self.is_own(message))
            .map(|message| (ts_order(&message.origin.ts.0), converted(message)))
            .filter(|(at, _)| *at < before && after.is_none_or(|after| *at > after))
            .collect();
        kept.sort_by_key(|(at, _)| *at);
        kept.dedup_by_key(|(at, _)| *at);
        let skip = kept.len().saturating_sub(request.limit);
        kept.into_iter()
            .skip(skip)
            .map(|(_, message)| message)
            .collect()
    }

    fn is_own(&self, message: &SlackHistoryMessage) -> bool {
        let sender = &message.sender;
        sender
            .user
            .as_ref()
            .is_some_and(|u| u.0 == self.identity.user_id)
            || sender
                .bot_id
                .as_ref()
                .is_some_and(|b| Some(&b.0) == self.identity.bot_id.as_ref())
    }
}

/// A `ts` (`1700000000.000123`) as a sortable pair.
fn ts_order(ts: &str) -> (u64, u64) {
    let (seconds, micros) = ts.split_once('.').unwrap_or((ts, "0"));
    (seconds.parse().unwrap_or(0), micros.parse().unwrap_or(0))
}

fn converted(message: SlackHistoryMessage) -> HistoryMessage {
    let sender = message.sender;
    let is_bot = sender.bot_id.is_some();
    let profile_name = sender.user_profile.as_ref().and_then(|profile| {
        [&profile.display_name, &profile.real_name]
            .into_iter()
            .flatten()
            .find(|name| !name.trim().is_empty())
            .cloned()
    });
    let bot_name = sender
        .bot_profile
        .as_ref()
        .map(|bot| bot.name.clone())
        .or(sender.username.clone());
    let user_id = sender
        .user
        .map(|user| user.0)
        .or_else(|| sender.bot_id.map(|bot| bot.0))
        .unwrap_or_default();
    let file_names = message
        .content
        .files
        .unwrap_or_default()
        .into_iter()
        .filter_map(|file| file.name.or(file.title))
        .collect();
    HistoryMessage {
        sent_at: Some(ts_order(&message.origin.ts.0).0 as i64),
        platform_message_id: message.origin.ts.0,
        user_id,
        display_name: profile_name.or(if is_bot { bot_name } else { None }),
        is_bot,
        text: message.content.text.unwrap_or_default(),
        file_names,
    }
}

/// `missing_scope` names the scope to add; other errors stay as they are.
fn missing_scope(error: ChannelError, channel: &str) -> ChannelError {
    if api_error_code(&error) != Some("missing_scope") {
        return error;
    }
    let scope = match channel.chars().next() {
        Some('G') => "groups:history",
        Some('D') => "im:history",
        _ => "channels:history",
    };
    ChannelError::MissingPermission(format!(
        "the Slack app lacks the {scope} scope; add it under OAuth & Permissions and reinstall the app"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ts_order_sorts_like_slack() {
        assert!(ts_order("1700000000.000010") > ts_order("1700000000.000009"));
        assert!(ts_order("1700000001.000000") > ts_order("1700000000.999999"));
    }

    #[test]
    fn a_history_message_keeps_author_bot_mark_and_file_names() {
        let bot: SlackHistoryMessage = serde_json::from_value(serde_json::json!({
            "type": "message", "ts": "1700000000.000002", "text": "build failed",
            "bot_id": "B0CI", "username": "CI", "bot_profile": {"id": "B0CI", "name": "CI",
            "app_id": "A0CI", "deleted": false},
            "files": [{"id": "F1", "name": "log.txt", "title": "Build log"}]
        }))
        .expect("a history message");
        let converted = converted(bot);
        assert_eq!(converted.display_name.as_deref(), Some("CI"));
        assert!(converted.is_bot);
        assert_eq!(converted.file_names, ["log.txt"]);
        assert_eq!(converted.sent_at, Some(1_700_000_000));
    }

    #[test]
    fn a_missing_scope_names_the_scope_to_grant() {
        let error =
            ChannelError::Platform("slack conversations.history failed: missing_scope".into());
        let mapped = missing_scope(error, "G0PRIVATE");
        assert!(
            matches!(&mapped, ChannelError::MissingPermission(text) if text.contains("groups:history")),
            "{mapped:?}"
        );
    }
}
