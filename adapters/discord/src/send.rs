//! Messages out: posts into the conversation's channel or thread, edits of the status
//! message, the typing indicator and reactions.
//!
//! Every post and edit carries `allowed_mentions: {parse: []}` (and no ping of the replied-to
//! person), so whatever the model writes, nobody is pinged. A reply refers to the person's
//! message only where Discord can show it: in the same channel (a thread's starter message sits
//! in the parent channel) and not for slash commands (`ix:` ids are interactions).

use antler_channel::{
    ChannelError, ChatKey, EditMessage, React, SendMessage, SentMessage, TypingIndicator,
};
use async_trait::async_trait;
use reqwest::Method;
use serde_json::{Value, json};

use crate::api::Body;
use crate::commands::INTERACTION_PREFIX;
use crate::markup::{messages, single};
use crate::{DISCORD_PROFILE, DiscordChannel};

pub(crate) fn no_mentions() -> Value {
    json!({"parse": [], "replied_user": false})
}

/// Whether `reply_to` can be referenced from a message posted to `chat`'s target.
pub(crate) fn referable<'a>(chat: &ChatKey, reply_to: Option<&'a str>) -> Option<&'a str> {
    reply_to
        .filter(|id| !id.starts_with(INTERACTION_PREFIX) && chat.topic_id.as_deref() != Some(*id))
}

impl DiscordChannel {
    async fn post(&self, target: &str, body: Value) -> Result<String, ChannelError> {
        let sent = self
            .api
            .call(
                Method::POST,
                &format!("send:{target}"),
                &format!("channels/{target}/messages"),
                Body::Json(body),
            )
            .await
            .map_err(|error| error.into_channel("send a message"))?;
        sent["id"]
            .as_str()
            .map(String::from)
            .ok_or_else(|| ChannelError::Platform("discord sent no message id".into()))
    }

    /// The configured emoji for one of the profile's reaction names.
    fn emoji(&self, reaction: &str) -> String {
        let names = DISCORD_PROFILE.reactions;
        let configured = &self.config.reactions;
        if reaction == names.received {
            configured.received.clone()
        } else if reaction == names.done {
            configured.done.clone()
        } else if reaction == names.failed {
            configured.failed.clone()
        } else {
            reaction.to_string()
        }
    }
}

#[async_trait]
impl SendMessage for DiscordChannel {
    /// One message, or several when escaping pushed the text past 2,000 characters; the last
    /// one's id is the answer's.
    async fn send_text(
        &self,
        chat: &ChatKey,
        text: &str,
        reply_to: Option<&str>,
    ) -> Result<SentMessage, ChannelError> {
        let target = self.target(chat).await?;
        let mut last = None;
        for (idx, part) in messages(text, DISCORD_PROFILE.max_text_len)
            .into_iter()
            .enumerate()
        {
            let mut body = json!({"content": part, "allowed_mentions": no_mentions()});
            if idx == 0
                && let Some(reference) = referable(chat, reply_to)
            {
                body["message_reference"] =
                    json!({"message_id": reference, "fail_if_not_exists": false});
            }
            last = Some(self.post(&target, body).await?);
        }
        last.map(|platform_message_id| SentMessage {
            platform_message_id,
        })
        .ok_or_else(|| ChannelError::Platform("nothing to send".into()))
    }
}

#[async_trait]
impl EditMessage for DiscordChannel {
    async fn edit_text(
        &self,
        chat: &ChatKey,
        message_id: &str,
        text: &str,
    ) -> Result<(), ChannelError> {
        let target = self.target(chat).await?;
        let body = json!({
            "content": single(text, DISCORD_PROFILE.max_text_len),
            "allowed_mentions": no_mentions(),
        });
        self.api
            .call(
                Method::PATCH,
                &format!("edit:{target}"),
                &format!("channels/{target}/messages/{message_id}"),
                Body::Json(body),
            )
            .await
            .map(|_| ())
            .map_err(|error| error.into_channel("edit a message"))
    }
}

#[async_trait]
impl TypingIndicator for DiscordChannel {
    async fn typing(&self, chat: &ChatKey) -> Result<(), ChannelError> {
        let target = self.target(chat).await?;
        self.api
            .call(
                Method::POST,
                &format!("typing:{target}"),
                &format!("channels/{target}/typing"),
                Body::Empty,
            )
            .await
            .map(|_| ())
            .map_err(|error| error.into_channel("show the typing indicator"))
    }
}

#[async_trait]
impl React for DiscordChannel {
    /// Adds the reaction; a final one (answered, failed) also takes the bot's "received" one
    /// away, so a message never shows both 👀 and ✅.
    async fn react(
        &self,
        chat: &ChatKey,
        message_id: &str,
        reaction: &str,
    ) -> Result<(), ChannelError> {
        if message_id.starts_with(INTERACTION_PREFIX) {
            return Ok(());
        }
        // A thread's starter message lives in the parent channel, follow-ups in the thread.
        let channel = match &chat.topic_id {
            Some(topic) if topic != message_id => topic.clone(),
            _ => chat.chat_id.clone(),
        };
        let path = |emoji: &str| {
            let encoded: String = url::form_urlencoded::byte_serialize(emoji.as_bytes()).collect();
            format!("channels/{channel}/messages/{message_id}/reactions/{encoded}/@me")
        };
        let route = format!("react:{channel}");
        let emoji = self.emoji(reaction);
        self.api
            .call(Method::PUT, &route, &path(&emoji), Body::Empty)
            .await
            .map_err(|error| error.into_channel("add a reaction"))?;
        if reaction != DISCORD_PROFILE.reactions.received {
            let received = self.emoji(DISCORD_PROFILE.reactions.received);
            if let Err(error) = self
                .api
                .call(Method::DELETE, &route, &path(&received), Body::Empty)
                .await
            {
                tracing::debug!(?error, "Could not take the received reaction away");
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_refer_only_to_messages_in_the_same_channel() {
        let dm = ChatKey::new("discord", "55", None);
        let thread = ChatKey::new("discord", "300", Some("201".into()));
        assert_eq!(referable(&dm, Some("9")), Some("9"));
        assert_eq!(
            referable(&thread, Some("201")),
            None,
            "the starter is in the parent"
        );
        assert_eq!(referable(&thread, Some("204")), Some("204"));
        assert_eq!(referable(&dm, Some("ix:1")), None);
        assert_eq!(referable(&dm, None), None);
    }
}
