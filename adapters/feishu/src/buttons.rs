//! Messages with buttons as interactive cards (the Markdown, then an `action` element of
//! buttons), and the card action callbacks (`card.action.trigger`) their clicks send.
//!
//! A callback arrives at the same webhook as events, encrypted and signed like them, and is
//! answered with an empty JSON object at once (no toast: the daemon has not decided yet; the
//! card is patched once it has). Each button's `value` object carries the button's value and
//! the conversation's topic: the callback names only the chat and the card, while a group
//! conversation's chat key also holds its reply chain's root. A click's message id is
//! `click:{event_id}`, so a redelivered callback lands on the same journal entry.

use antler_channel::{
    Button, ButtonClick, ButtonStyle, ChannelError, ChatKey, InboundMessage, SendButtons,
    SentMessage,
};
use async_trait::async_trait;
use reqwest::Method;
use serde_json::{Value, json};

use crate::markup::{card, to_card_markdown};
use crate::send::segment;
use crate::{CHANNEL_NAME, FeishuChannel};

/// Message ids of clicks start with this (an event id: nothing to reply or react to).
pub(crate) const CLICK_PREFIX: &str = "click:";
/// Keys of a button's `value` object.
const VALUE_KEY: &str = "antler";
const TOPIC_KEY: &str = "topic";

/// The card JSON (the string `content` takes) with `markdown` and the buttons under it.
pub(crate) fn button_card(markdown: &str, buttons: &[Button], topic: Option<&str>) -> String {
    let actions: Vec<Value> = buttons
        .iter()
        .map(|button| {
            let kind = match button.style {
                ButtonStyle::Default => "default",
                ButtonStyle::Primary => "primary",
                ButtonStyle::Danger => "danger",
            };
            let mut value = json!({VALUE_KEY: button.value});
            if let Some(topic) = topic {
                value[TOPIC_KEY] = json!(topic);
            }
            json!({"tag": "button", "type": kind, "value": value,
                "text": {"tag": "plain_text", "content": button.label}})
        })
        .collect();
    json!({
        "config": {"wide_screen_mode": true, "update_multi": true},
        "elements": [
            {"tag": "markdown", "content": to_card_markdown(markdown)},
            {"tag": "action", "actions": actions}
        ]
    })
    .to_string()
}

/// A `card.action.trigger` event's button click as the message the daemon journals, or why
/// it is skipped.
pub(crate) fn click_message(event: &Value, header: &Value) -> Result<InboundMessage, &'static str> {
    let text = |value: &Value| value.as_str().filter(|v| !v.is_empty()).map(String::from);
    let action = &event["action"];
    if action["tag"] != "button" {
        return Err("a card action that is no button click");
    }
    let value = text(&action["value"][VALUE_KEY]).ok_or("a button that is not ours")?;
    let user =
        text(&event["operator"]["open_id"]).ok_or("a click without the operator's open_id")?;
    let context = &event["context"];
    let chat_id = text(&context["open_chat_id"]).ok_or("a click without open_chat_id")?;
    let message_id = text(&context["open_message_id"]).ok_or("a click without open_message_id")?;
    let event_id = text(&header["event_id"]).ok_or("a click without event_id")?;
    let topic_id = text(&action["value"][TOPIC_KEY]);
    let workspace = text(&header["tenant_key"]).or_else(|| text(&event["operator"]["tenant_key"]));
    Ok(InboundMessage {
        channel: CHANNEL_NAME.into(),
        workspace_id: workspace,
        chat_id,
        // A group conversation always has its reply chain's root as topic; a direct one none.
        is_direct: topic_id.is_none(),
        topic_id,
        user_id: user,
        display_name: None,
        platform_message_id: format!("{CLICK_PREFIX}{event_id}"),
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
            message_id,
            answer_handle: text(&event["token"]).unwrap_or_default(),
        }),
    })
}

impl FeishuChannel {
    /// A card only `open_id` sees in a group chat (`POST /open-apis/ephemeral/v1/send`).
    async fn ephemeral(
        &self,
        chat: &ChatKey,
        open_id: &str,
        note: &str,
    ) -> Result<(), ChannelError> {
        let card: Value = serde_json::from_str(&card(note))
            .map_err(|e| ChannelError::Platform(format!("a card that is not JSON: {e}")))?;
        let body = json!({"chat_id": chat.chat_id, "open_id": open_id,
            "msg_type": "interactive", "card": card});
        self.api
            .json(
                "ephemeral.send",
                Method::POST,
                "open-apis/ephemeral/v1/send",
                Some(&body),
            )
            .await
            .map(|_| ())
    }
}

#[async_trait]
impl SendButtons for FeishuChannel {
    async fn send_buttons(
        &self,
        chat: &ChatKey,
        text: &str,
        buttons: &[Button],
        reply_to: Option<&str>,
    ) -> Result<SentMessage, ChannelError> {
        let content = button_card(text, buttons, chat.topic_id.as_deref());
        self.post_message(chat, reply_to, "interactive", &content)
            .await
    }

    /// The card patched to the settled text, without its buttons (cards are sent with
    /// `update_multi`, which the patch requires).
    async fn settle_buttons(
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

    /// In a group an ephemeral card only the clicker sees; in a direct chat (Feishu has no
    /// ephemeral messages there), or when the ephemeral card is refused, a reply to the card
    /// mentioning them. Without a note nothing: the callback's 200 ended the loading state.
    async fn answer_click(
        &self,
        chat: &ChatKey,
        user_id: &str,
        click: &ButtonClick,
        note: Option<&str>,
    ) -> Result<(), ChannelError> {
        let Some(note) = note else {
            return Ok(());
        };
        let open_id = segment(user_id)?;
        if chat.topic_id.is_some() {
            match self.ephemeral(chat, open_id, note).await {
                Ok(()) => return Ok(()),
                Err(error @ ChannelError::RateLimited { .. }) => return Err(error),
                Err(error) => {
                    tracing::info!(%error, "Feishu refused an ephemeral card; replying instead");
                }
            }
        }
        let mention = format!("<at id={open_id}></at> {note}");
        self.post_message(
            chat,
            Some(&click.message_id),
            "interactive",
            &card(&mention),
        )
        .await
        .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn callback(value: Value, tag: &str) -> (Value, Value) {
        let header = json!({"event_id": "f7984f25108f8137722bb63cee927e66", "token": "v",
            "create_time": "1700000000000", "event_type": "card.action.trigger",
            "tenant_key": "tk_1", "app_id": "cli_1"});
        let event = json!({"operator": {"tenant_key": "tk_1", "user_id": "u_a",
                "open_id": "ou_alice", "union_id": "on_a"},
            "token": "c-295ee57216a5dc9de90fefd0aadb4b1d7d337fc7",
            "action": {"value": value, "tag": tag},
            "host": "im_message",
            "context": {"open_message_id": "om_card", "open_chat_id": "oc_group"}});
        (event, header)
    }

    #[test]
    fn a_button_click_becomes_one_click_message() {
        let (event, header) = callback(json!({"antler": "ap:7:c", "topic": "om_root"}), "button");
        let message = click_message(&event, &header).expect("a click");
        assert_eq!(message.chat_id, "oc_group");
        assert_eq!(message.topic_id.as_deref(), Some("om_root"));
        assert!(!message.is_direct && message.text.is_empty());
        assert_eq!(message.user_id, "ou_alice");
        assert_eq!(message.workspace_id.as_deref(), Some("tk_1"));
        assert_eq!(
            message.platform_message_id,
            "click:f7984f25108f8137722bb63cee927e66"
        );
        let click = message.click.expect("click set");
        assert_eq!(click.value, "ap:7:c");
        assert_eq!(click.message_id, "om_card");
        assert_eq!(
            click.answer_handle,
            "c-295ee57216a5dc9de90fefd0aadb4b1d7d337fc7"
        );
        let (p2p, header) = callback(json!({"antler": "ap:7:a"}), "button");
        let direct = click_message(&p2p, &header).expect("a click");
        assert!(direct.is_direct && direct.topic_id.is_none());
        let (select, header) = callback(json!({"antler": "x"}), "select_static");
        assert!(click_message(&select, &header).is_err());
        let (foreign, header) = callback(json!({"key": "x"}), "button");
        assert!(click_message(&foreign, &header).is_err());
    }

    #[test]
    fn the_card_carries_the_buttons_and_the_topic() {
        let buttons = [
            Button {
                label: "Approve".into(),
                value: "ap:7:a".into(),
                style: ButtonStyle::Primary,
            },
            Button {
                label: "Deny".into(),
                value: "ap:7:d".into(),
                style: ButtonStyle::Danger,
            },
        ];
        let card: Value =
            serde_json::from_str(&button_card("# Run\n`ls`", &buttons, Some("om_root")))
                .expect("json");
        assert_eq!(card["config"]["update_multi"], true);
        assert_eq!(card["elements"][0]["content"], "**Run**\n`ls`");
        let actions = &card["elements"][1]["actions"];
        assert_eq!(
            actions[0],
            json!({"tag": "button", "type": "primary",
                "text": {"tag": "plain_text", "content": "Approve"},
                "value": {"antler": "ap:7:a", "topic": "om_root"}})
        );
        assert_eq!(actions[1]["type"], "danger");
        let direct: Value = serde_json::from_str(&button_card("x", &buttons, None)).expect("json");
        assert!(
            direct["elements"][1]["actions"][0]["value"]
                .get("topic")
                .is_none()
        );
    }
}
