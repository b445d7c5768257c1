//! Messages with buttons as Block Kit (a `section` with the text, an `actions` block of
//! `button`s), and the `block_actions` payloads their clicks send.
//!
//! A click arrives through Socket Mode (an `interactive` envelope, acknowledged once journalled)
//! or, in events mode, as the signed form field `payload=` at the same webhook as events. Its
//! message id is `click:{user}:{action_ts}`: Slack redelivers an unacknowledged envelope with the
//! same payload, so a redelivery lands on the same journal entry, while two clicks (even on the
//! same button) are two entries. Settling replaces the blocks with the settled text: a
//! `chat.update` without `blocks` would keep the buttons.

use antler_channel::{
    Button, ButtonClick, ButtonStyle, ChannelError, ChatKey, InboundMessage, SendButtons,
    SentMessage,
};
use async_trait::async_trait;
use serde::de::IgnoredAny;
use serde_json::Value;
use slack_morphism::blocks::{
    SlackActionsBlock, SlackBlock, SlackBlockButtonElement, SlackBlockButtonStyle,
    SlackBlockMarkDownText, SlackBlockText, SlackSectionBlock,
};
use slack_morphism::prelude::{
    SlackApiChatPostEphemeralRequest, SlackApiChatPostMessageRequest, SlackApiChatUpdateRequest,
};
use slack_morphism::{SlackActionId, SlackChannelId, SlackMessageContent, SlackTs, SlackUserId};

use crate::convert::BotIdentity;
use crate::markup::to_mrkdwn;
use crate::{CHANNEL_NAME, SlackChannel};

/// Message ids of clicks start with this (they are no message `ts`: nothing to react to).
pub(crate) const CLICK_PREFIX: &str = "click:";
/// A section block's text may hold 3,000 characters.
const SECTION_MAX: usize = 3000;
/// A button's label may hold 75 characters.
const LABEL_MAX: usize = 75;

fn channel_id(chat: &ChatKey) -> SlackChannelId {
    SlackChannelId::new(chat.chat_id.clone())
}

/// At most `max` characters, cut on a character boundary with an ellipsis.
fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut clipped: String = text.chars().take(max.saturating_sub(1)).collect();
    clipped.push('…');
    clipped
}

fn section(mrkdwn: &str) -> SlackBlock {
    SlackSectionBlock::new()
        .with_text(SlackBlockText::MarkDown(SlackBlockMarkDownText::new(clip(
            mrkdwn,
            SECTION_MAX,
        ))))
        .into()
}

/// The text as a section, and the buttons in one `actions` block (`action_id` `antler_{n}`,
/// unique within the message as Slack requires).
pub(crate) fn button_blocks(markdown: &str, buttons: &[Button]) -> Vec<SlackBlock> {
    let elements = buttons
        .iter()
        .enumerate()
        .map(|(idx, button)| {
            let element = SlackBlockButtonElement::new(clip(&button.label, LABEL_MAX).into())
                .with_action_id(SlackActionId::new(format!("antler_{idx}")))
                .with_value(button.value.clone());
            match button.style {
                ButtonStyle::Default => element,
                ButtonStyle::Primary => element.with_style(SlackBlockButtonStyle::Primary),
                ButtonStyle::Danger => element.with_style(SlackBlockButtonStyle::Danger),
            }
            .into()
        })
        .collect();
    vec![
        section(&to_mrkdwn(markdown)),
        SlackActionsBlock::new(elements).into(),
    ]
}

#[async_trait]
impl SendButtons for SlackChannel {
    async fn send_buttons(
        &self,
        chat: &ChatKey,
        text: &str,
        buttons: &[Button],
        _reply_to: Option<&str>,
    ) -> Result<SentMessage, ChannelError> {
        // `text` is the notification's and screen readers' fallback for the blocks.
        let content = SlackMessageContent::new()
            .with_text(to_mrkdwn(text))
            .with_blocks(button_blocks(text, buttons));
        let mut request = SlackApiChatPostMessageRequest::new(channel_id(chat), content);
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

    async fn settle_buttons(
        &self,
        chat: &ChatKey,
        message_id: &str,
        text: &str,
    ) -> Result<(), ChannelError> {
        let mrkdwn = to_mrkdwn(text);
        let content = SlackMessageContent::new()
            .with_text(mrkdwn.clone())
            .with_blocks(vec![section(&mrkdwn)]);
        let request = SlackApiChatUpdateRequest::new(
            channel_id(chat),
            content,
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

    /// An ephemeral message to the clicker, in the request's thread: only they see it.
    async fn answer_click(
        &self,
        chat: &ChatKey,
        user_id: &str,
        _click: &ButtonClick,
        note: Option<&str>,
    ) -> Result<(), ChannelError> {
        // The envelope (or the webhook's 200) already ended Slack's loading state.
        let Some(note) = note else {
            return Ok(());
        };
        let mut request = SlackApiChatPostEphemeralRequest::new(
            channel_id(chat),
            SlackUserId::new(user_id.to_string()),
            SlackMessageContent::new().with_text(to_mrkdwn(note)),
        );
        if let Some(thread) = &chat.topic_id {
            request = request.with_thread_ts(SlackTs::new(thread.clone()));
        }
        self.api
            .call(
                "chat.postEphemeral",
                self.api.bot().chat_post_ephemeral(&request),
            )
            .await
            .map(|_| ())
    }
}

/// A `block_actions` payload's button click as the message the daemon journals; `None` for
/// anything else (other interactivity, a click without a value).
pub fn click_message(payload: &Value, bot: &BotIdentity) -> Option<InboundMessage> {
    if payload["type"] != "block_actions" {
        return None;
    }
    let action = payload["actions"]
        .as_array()?
        .iter()
        .find(|action| action["type"] == "button")?;
    let text = |value: &Value| value.as_str().filter(|v| !v.is_empty()).map(String::from);
    let value = text(&action["value"])?;
    let action_ts = text(&action["action_ts"])?;
    let user = text(&payload["user"]["id"])?;
    let container = &payload["container"];
    let channel = text(&container["channel_id"]).or_else(|| text(&payload["channel"]["id"]))?;
    let message_ts = text(&container["message_ts"]).or_else(|| text(&payload["message"]["ts"]))?;
    // The conversation's thread; a request that became a thread root itself is still top level.
    let topic_id = text(&container["thread_ts"])
        .or_else(|| text(&payload["message"]["thread_ts"]))
        .filter(|thread| *thread != message_ts);
    let workspace = text(&payload["team"]["id"])
        .or_else(|| text(&payload["user"]["team_id"]))
        .unwrap_or_else(|| bot.team_id.clone());
    Some(InboundMessage {
        channel: CHANNEL_NAME.into(),
        workspace_id: Some(workspace),
        is_direct: channel.starts_with('D'),
        chat_id: channel,
        topic_id,
        platform_message_id: format!("{CLICK_PREFIX}{user}:{action_ts}"),
        user_id: user,
        // `user.name` is the handle, not the name people see: like a message event's, the
        // clicker's name is looked up (`users.info`).
        display_name: None,
        text: String::new(),
        files: Vec::new(),
        mentions_bot: true,
        reply_to: None,
        thread_reply: false,
        is_bot: false,
        bot_id: None,
        context: Vec::new(),
        click: Some(ButtonClick {
            value,
            message_id: message_ts,
            answer_handle: text(&payload["response_url"]).unwrap_or_default(),
        }),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn bot() -> BotIdentity {
        BotIdentity {
            user_id: "UBOT".into(),
            bot_id: Some("B1".into()),
            team_id: "T1".into(),
            name: "antler".into(),
        }
    }

    pub(crate) fn block_actions(channel: &str, thread_ts: Option<&str>) -> Value {
        let mut container = json!({"type": "message", "message_ts": "1700000000.000009",
            "channel_id": channel, "is_ephemeral": false});
        if let Some(thread) = thread_ts {
            container["thread_ts"] = json!(thread);
        }
        json!({"type": "block_actions", "team": {"id": "T9", "domain": "fake"},
            "user": {"id": "U7", "username": "alice", "name": "alice", "team_id": "T9"},
            "api_app_id": "A1", "token": "verification", "container": container,
            "trigger_id": "1.2.3", "channel": {"id": channel, "name": "general"},
            "message": {"type": "message", "ts": "1700000000.000009", "text": "Run `ls`?"},
            "response_url": "https://hooks.slack.com/actions/T9/1/abc",
            "actions": [{"action_id": "antler_0", "block_id": "b1", "type": "button",
                "text": {"type": "plain_text", "text": "Approve"}, "value": "ap:42:a",
                "style": "primary", "action_ts": "1700000100.000200"}]})
    }

    #[test]
    fn a_button_click_becomes_one_click_message() {
        let message = click_message(&block_actions("C5", Some("1699.1")), &bot()).expect("a click");
        assert_eq!(message.chat_id, "C5");
        assert_eq!(message.topic_id.as_deref(), Some("1699.1"));
        assert_eq!(message.workspace_id.as_deref(), Some("T9"));
        assert_eq!(message.user_id, "U7");
        assert_eq!(message.platform_message_id, "click:U7:1700000100.000200");
        assert!(message.text.is_empty() && !message.is_direct && message.mentions_bot);
        let click = message.click.expect("click set");
        assert_eq!(click.value, "ap:42:a");
        assert_eq!(click.message_id, "1700000000.000009");
        assert_eq!(
            click.answer_handle,
            "https://hooks.slack.com/actions/T9/1/abc"
        );
        let dm = click_message(&block_actions("D7", None), &bot()).expect("a click");
        assert!(dm.is_direct && dm.topic_id.is_none());
    }

    #[test]
    fn other_interactions_are_not_clicks() {
        let mut modal = block_actions("C5", None);
        modal["type"] = json!("view_submission");
        assert!(click_message(&modal, &bot()).is_none());
        let mut select = block_actions("C5", None);
        select["actions"][0]["type"] = json!("static_select");
        assert!(click_message(&select, &bot()).is_none());
        let mut empty = block_actions("C5", None);
        empty["actions"][0]["value"] = json!("");
        assert!(click_message(&empty, &bot()).is_none());
    }

    #[test]
    fn buttons_are_an_actions_block_under_the_text() {
        let buttons = [
            Button {
                label: "Approve".into(),
                value: "ap:1:a".into(),
                style: ButtonStyle::Primary,
            },
            Button {
                label: "Deny".into(),
                value: "ap:1:d".into(),
                style: ButtonStyle::Danger,
            },
            Button {
                label: "x".repeat(100),
                value: "ap:1:c".into(),
                style: ButtonStyle::Default,
            },
        ];
        let blocks = serde_json::to_value(button_blocks("**Run** `ls`", &buttons)).expect("json");
        assert_eq!(blocks[0]["type"], "section");
        assert_eq!(
            blocks[0]["text"],
            json!({"type": "mrkdwn", "text": "*Run* `ls`"})
        );
        let elements = &blocks[1]["elements"];
        assert_eq!(blocks[1]["type"], "actions");
        assert_eq!(
            elements[0],
            json!({"type": "button", "action_id": "antler_0", "value": "ap:1:a",
                "style": "primary", "text": {"type": "plain_text", "text": "Approve"}})
        );
        assert_eq!(elements[1]["style"], "danger");
        assert!(elements[2].get("style").is_none());
        let label = elements[2]["text"]["text"].as_str().expect("label");
        assert_eq!(label.chars().count(), LABEL_MAX);
    }
}
