//! Messages out: post into the conversation's Slack thread, update the status message, the
//! "is thinking…" status and reactions.
//!
//! A chat key's topic is the Slack thread (`thread_ts`) every message of that conversation
//! goes into. Answers to a slash command go only to the person who typed it
//! (`chat.postEphemeral`); ephemeral messages cannot be updated, so an edit of one is refused
//! here and the daemon posts the final text as a new message instead.

use std::sync::atomic::Ordering;

use antler_channel::{
    ChannelError, ChatKey, EditMessage, React, SendMessage, SentMessage, TypingIndicator,
};
use async_trait::async_trait;
use serde::de::IgnoredAny;
use slack_morphism::prelude::{
    SlackApiAssistantThreadsSetStatusRequest, SlackApiChatPostEphemeralRequest,
    SlackApiChatPostMessageRequest, SlackApiChatUpdateRequest, SlackApiReactionsAddRequest,
    SlackApiReactionsRemoveRequest,
};
use slack_morphism::{
    SlackChannelId, SlackMessageContent, SlackReactionName, SlackTs, SlackUserId,
};

use crate::api::api_error_code;
use crate::buttons::CLICK_PREFIX;
use crate::convert::slash_user;
use crate::markup::to_mrkdwn;
use crate::{SLACK_PROFILE, SlackChannel};

/// Ids of ephemeral answers start with this (they have no `ts` that could be updated).
const EPHEMERAL_PREFIX: &str = "ephemeral:";
/// What the assistant status shows while the agent works.
const THINKING: &str = "is thinking…";

fn channel_id(chat: &ChatKey) -> SlackChannelId {
    SlackChannelId::new(chat.chat_id.clone())
}

fn content(markdown: &str) -> SlackMessageContent {
    SlackMessageContent::new().with_text(to_mrkdwn(markdown))
}

#[async_trait]
impl SendMessage for SlackChannel {
    async fn send_text(
        &self,
        chat: &ChatKey,
        text: &str,
        reply_to: Option<&str>,
    ) -> Result<SentMessage, ChannelError> {
        if let Some(user) = reply_to.and_then(slash_user) {
            let request = SlackApiChatPostEphemeralRequest::new(
                channel_id(chat),
                SlackUserId::new(user.to_string()),
                content(text),
            );
            self.api
                .call(
                    "chat.postEphemeral",
                    self.api.bot().chat_post_ephemeral(&request),
                )
                .await?;
            return Ok(SentMessage {
                platform_message_id: format!("{EPHEMERAL_PREFIX}{}", reply_to.unwrap_or("")),
            });
        }
        let mut request = SlackApiChatPostMessageRequest::new(channel_id(chat), content(text));
        if let Some(thread) = &chat.topic_id {
            request = request.with_thread_ts(SlackTs::new(thread.clone()));
        }
        let sent = self
            .api
            .call(
                "chat.postMessage",
                self.api.bot().chat_post_message(&request),
            )
            .await?;
        Ok(SentMessage {
            platform_message_id: sent.ts.0,
        })
    }
}

#[async_trait]
impl EditMessage for SlackChannel {
    async fn edit_text(
        &self,
        chat: &ChatKey,
        message_id: &str,
        text: &str,
    ) -> Result<(), ChannelError> {
        if message_id.starts_with(EPHEMERAL_PREFIX) {
            return Err(ChannelError::Platform(
                "slack cannot update an ephemeral message".into(),
            ));
        }
        let request = SlackApiChatUpdateRequest::new(
            channel_id(chat),
            content(text),
            SlackTs::new(message_id.to_string()),
        );
        let session = self.api.bot();
        self.api
            .call(
                "chat.update",
                session
                    .http_session_api
                    .http_post::<_, IgnoredAny>("chat.update", &request, None),
            )
            .await
            .map(|_| ())
    }
}

#[async_trait]
impl TypingIndicator for SlackChannel {
    /// `assistant.threads.setStatus` works only in the threads of apps with Slack's AI app
    /// feature; the first refusal turns it off for this connection (it is decoration, and a
    /// refused call per tick would waste the rate budget). Top-level DM conversations have no
    /// thread to show it in.
    async fn typing(&self, chat: &ChatKey) -> Result<(), ChannelError> {
        let Some(thread) = &chat.topic_id else {
            return Ok(());
        };
        if self.typing_unsupported.load(Ordering::Relaxed) {
            return Ok(());
        }
        let request = SlackApiAssistantThreadsSetStatusRequest::new(
            channel_id(chat),
            THINKING.to_string(),
            SlackTs::new(thread.clone()),
        );
        let result = self
            .api
            .call(
                "assistant.threads.setStatus",
                self.api.bot().assistant_threads_set_status(&request),
            )
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(error @ ChannelError::RateLimited { .. }) => Err(error),
            Err(error) => {
                if !self.typing_unsupported.swap(true, Ordering::Relaxed) {
                    tracing::info!(%error, "Slack refused the assistant status; no \"is thinking…\" indicator on this connection");
                }
                Ok(())
            }
        }
    }
}

#[async_trait]
impl React for SlackChannel {
    /// Adds the reaction; a final one (answered, failed) also takes the "received" one away, so
    /// a message never shows both :eyes: and :white_check_mark:.
    async fn react(
        &self,
        chat: &ChatKey,
        message_id: &str,
        reaction: &str,
    ) -> Result<(), ChannelError> {
        if slash_user(message_id).is_some() || message_id.starts_with(CLICK_PREFIX) {
            return Ok(());
        }
        let timestamp = SlackTs::new(message_id.to_string());
        let add = SlackApiReactionsAddRequest::new(
            channel_id(chat),
            SlackReactionName::new(reaction.to_string()),
            timestamp.clone(),
        );
        match self
            .api
            .call("reactions.add", self.api.bot().reactions_add(&add))
            .await
        {
            Err(error) if api_error_code(&error) != Some("already_reacted") => return Err(error),
            _ => {}
        }
        let received = SLACK_PROFILE.reactions.received;
        if reaction != received {
            let remove =
                SlackApiReactionsRemoveRequest::new(SlackReactionName::new(received.into()))
                    .with_channel(channel_id(chat))
                    .with_timestamp(timestamp);
            let removed = self
                .api
                .call("reactions.remove", self.api.bot().reactions_remove(&remove))
                .await;
            if let Err(error) = removed
                && api_error_code(&error) != Some("no_reaction")
            {
                tracing::debug!(%error, "Could not take the received reaction away");
            }
        }
        Ok(())
    }
}
