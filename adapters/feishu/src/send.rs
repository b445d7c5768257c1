//! Messages out: every text is an interactive card, so the status card can be updated in place
//! (`PATCH /open-apis/im/v1/messages/{id}`) until it holds the final answer; reactions.
//!
//! A reply goes to the message it answers (`…/reply`); without one it goes into the
//! conversation's topic (a reply to the topic's root message) or, in a direct chat, to the
//! chat (`POST /open-apis/im/v1/messages?receive_id_type=chat_id`). A reply whose target is gone
//! (recalled, deleted) is sent to the chat instead. Each send carries a `uuid` derived from its
//! target and content: Feishu delivers a repeated request (a retry after a lost answer) once.

use std::collections::VecDeque;

use antler_channel::{ChannelError, ChatKey, EditMessage, React, SendMessage, SentMessage};
use async_trait::async_trait;
use reqwest::Method;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::api::data;
use crate::buttons::CLICK_PREFIX;
use crate::markup::card;
use crate::{FEISHU_PROFILE, FeishuChannel};

/// Reaction ids remembered to take "received" away later; older ones are forgotten.
const REMEMBERED_REACTIONS: usize = 1024;

/// The bot's reactions: `(message_id, emoji_type, reaction_id)`, oldest first.
#[derive(Default)]
pub(crate) struct ReactionIds(VecDeque<(String, String, String)>);

impl ReactionIds {
    fn remember(&mut self, message_id: &str, emoji: &str, reaction_id: String) {
        if self.0.len() >= REMEMBERED_REACTIONS {
            self.0.pop_front();
        }
        self.0
            .push_back((message_id.to_string(), emoji.to_string(), reaction_id));
    }

    fn take(&mut self, message_id: &str, emoji: &str) -> Option<String> {
        let idx = self
            .0
            .iter()
            .position(|(m, e, _)| m == message_id && e == emoji)?;
        self.0.remove(idx).map(|(_, _, id)| id)
    }
}

/// A message or reaction id as a path segment; Feishu's ids are `om_…` style.
pub(crate) fn segment(id: &str) -> Result<&str, ChannelError> {
    let safe = !id.is_empty()
        && id.len() <= 128
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if safe {
        Ok(id)
    } else {
        Err(ChannelError::Platform(format!(
            "{id:?} is not a feishu message id"
        )))
    }
}

impl FeishuChannel {
    /// Sends `content` (a JSON string of `msg_type`) as a reply or into the chat; returns the
    /// new message's id.
    pub(crate) async fn post_message(
        &self,
        chat: &ChatKey,
        reply_to: Option<&str>,
        msg_type: &str,
        content: &str,
    ) -> Result<SentMessage, ChannelError> {
        // A click is no message to reply to.
        let reply_to = reply_to.filter(|id| !id.starts_with(CLICK_PREFIX));
        let target = reply_to.or(chat.topic_id.as_deref());
        if let Some(target) = target {
            let path = format!("open-apis/im/v1/messages/{}/reply", segment(target)?);
            let body = json!({"content": content, "msg_type": msg_type,
                "uuid": idempotency_key(&[target, msg_type, content])});
            match self
                .api
                .json("im.message.reply", Method::POST, &path, Some(&body))
                .await
            {
                Ok(answer) => return sent(&answer),
                // The message replied to is gone: say it in the chat instead.
                Err(ChannelError::Platform(why)) => {
                    tracing::info!(why, chat = %chat, "Feishu refused a reply; sending to the chat");
                }
                Err(other) => return Err(other),
            }
        }
        let body = json!({"receive_id": chat.chat_id, "content": content, "msg_type": msg_type,
            "uuid": idempotency_key(&[&chat.chat_id, target.unwrap_or(""), msg_type, content])});
        let answer = self
            .api
            .json(
                "im.message.create",
                Method::POST,
                "open-apis/im/v1/messages?receive_id_type=chat_id",
                Some(&body),
            )
            .await?;
        sent(&answer)
    }
}

fn sent(answer: &Value) -> Result<SentMessage, ChannelError> {
    let id = data(answer)["message_id"]
        .as_str()
        .filter(|id| !id.is_empty())
        .ok_or_else(|| {
            ChannelError::Platform("feishu answered a send without message_id".into())
        })?;
    Ok(SentMessage {
        platform_message_id: id.to_string(),
    })
}

/// Feishu's `uuid` (at most 50 characters): the same request within an hour sends once.
fn idempotency_key(parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part.as_bytes());
        hasher.update([0u8]);
    }
    hex::encode(&hasher.finalize()[..16])
}

#[async_trait]
impl SendMessage for FeishuChannel {
    async fn send_text(
        &self,
        chat: &ChatKey,
        text: &str,
        reply_to: Option<&str>,
    ) -> Result<SentMessage, ChannelError> {
        self.post_message(chat, reply_to, "interactive", &card(text))
            .await
    }
}

#[async_trait]
impl EditMessage for FeishuChannel {
    /// Replaces the card's content; cards are sent with `update_multi`, which PATCH requires.
    async fn edit_text(
        &self,
        _chat: &ChatKey,
        message_id: &str,
        text: &str,
    ) -> Result<(), ChannelError> {
        let path = format!("open-apis/im/v1/messages/{}", segment(message_id)?);
        let body = json!({"content": card(text)});
        self.api
            .json("im.message.patch", Method::PATCH, &path, Some(&body))
            .await
            .map(|_| ())
    }
}

#[async_trait]
impl React for FeishuChannel {
    /// Adds the reaction; a final one (answered, failed) also takes "received" away, when this
    /// connection added it.
    async fn react(
        &self,
        _chat: &ChatKey,
        message_id: &str,
        reaction: &str,
    ) -> Result<(), ChannelError> {
        if message_id.starts_with(CLICK_PREFIX) {
            return Ok(());
        }
        let message = segment(message_id)?;
        let path = format!("open-apis/im/v1/messages/{message}/reactions");
        let body = json!({"reaction_type": {"emoji_type": reaction}});
        let answer = self
            .api
            .json(
                "im.message.reaction.create",
                Method::POST,
                &path,
                Some(&body),
            )
            .await?;
        let received = FEISHU_PROFILE.reactions.received;
        let earlier = {
            let mut reactions = self.reactions.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(id) = data(&answer)["reaction_id"].as_str() {
                reactions.remember(message, reaction, id.to_string());
            }
            (reaction != received)
                .then(|| reactions.take(message, received))
                .flatten()
        };
        let Some(reaction_id) = earlier else {
            return Ok(());
        };
        let path = format!("{path}/{}", segment(&reaction_id)?);
        if let Err(error) = self
            .api
            .json("im.message.reaction.delete", Method::DELETE, &path, None)
            .await
        {
            tracing::debug!(%error, "Could not take the received reaction away");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_checked_before_they_become_paths() {
        assert!(segment("om_dc13264520392913993dd051dba21dcf").is_ok());
        for bad in ["", "../open-apis", "om_1/reply", "om 1", "om_1?x=1"] {
            assert!(segment(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn reaction_ids_are_bounded_and_taken_once() {
        let mut ids = ReactionIds::default();
        for n in 0..(REMEMBERED_REACTIONS + 5) {
            ids.remember(&format!("om_{n}"), "OnIt", format!("r{n}"));
        }
        assert_eq!(ids.0.len(), REMEMBERED_REACTIONS);
        assert_eq!(ids.take("om_0", "OnIt"), None, "the oldest were forgotten");
        assert_eq!(ids.take("om_9", "OnIt").as_deref(), Some("r9"));
        assert_eq!(ids.take("om_9", "OnIt"), None);
    }

    #[test]
    fn idempotency_keys_differ_by_target_and_content() {
        let a = idempotency_key(&["om_1", "interactive", "x"]);
        assert_eq!(a.len(), 32);
        assert_eq!(a, idempotency_key(&["om_1", "interactive", "x"]));
        assert_ne!(a, idempotency_key(&["om_2", "interactive", "x"]));
        assert_ne!(a, idempotency_key(&["om_1interactive", "", "x"]));
    }
}
