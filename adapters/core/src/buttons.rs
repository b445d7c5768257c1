//! Messages with buttons under them, and the clicks that come back: how a person answers the
//! agent with one tap (an approval request's Approve / Deny) instead of typing a command.
//!
//! A click reaches the daemon as an [`InboundMessage`](crate::InboundMessage) whose `click` is
//! set and whose `platform_message_id` is the click's own id (Telegram's callback query id,
//! Slack's `action_ts` with the user, Discord's interaction id, Feishu's event id or token), so
//! a redelivered click is deduplicated like a redelivered message. The adapter acknowledges the
//! platform at once (Slack's envelope ack, Discord's deferred update, Feishu's HTTP 200); what
//! the click means is decided by the daemon, which then calls [`SendButtons::answer_click`] and
//! [`SendButtons::settle_buttons`].

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::capabilities::{ChannelError, SentMessage};
use crate::key::ChatKey;

/// Telegram's `callback_data` limit, the smallest of the four platforms: a button's value fits.
pub const BUTTON_VALUE_MAX: usize = 64;

/// How a button looks, where the platform has styles (Slack, Discord, Feishu); Telegram shows
/// every button alike.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ButtonStyle {
    #[default]
    Default,
    Primary,
    Danger,
}

/// One button: what it says and the value its click returns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Button {
    pub label: String,
    /// Opaque to the adapter, at most [`BUTTON_VALUE_MAX`] bytes.
    pub value: String,
    #[serde(default)]
    pub style: ButtonStyle,
}

/// A click on one of the bot's buttons.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ButtonClick {
    /// The clicked button's [`Button::value`].
    pub value: String,
    /// The platform id of the message that holds the buttons.
    pub message_id: String,
    /// What the adapter needs to answer this click later (Telegram's callback query id,
    /// Slack's `response_url`, Discord's interaction token, Feishu's card token); opaque to the
    /// daemon, journalled with the click so an answer survives a restart.
    pub answer_handle: String,
}

/// Sends messages with buttons and answers their clicks.
#[async_trait]
pub trait SendButtons: Send + Sync {
    /// Sends Markdown (converted like [`crate::SendMessage::send_text`]) with one row of
    /// buttons under it.
    async fn send_buttons(
        &self,
        chat: &ChatKey,
        text: &str,
        buttons: &[Button],
        reply_to: Option<&str>,
    ) -> Result<SentMessage, ChannelError>;

    /// Replaces the message's text and removes its buttons (the question is settled: the text
    /// says how and by whom).
    async fn settle_buttons(
        &self,
        chat: &ChatKey,
        message_id: &str,
        text: &str,
    ) -> Result<(), ChannelError>;

    /// Answers the click itself, seen only by the person who clicked where the platform allows
    /// (Telegram's `answerCallbackQuery` toast, a Slack ephemeral message, a Discord ephemeral
    /// follow-up, a Feishu ephemeral card or reply): `note` is a short refusal or confirmation;
    /// `None` only ends the platform's loading state.
    async fn answer_click(
        &self,
        chat: &ChatKey,
        user_id: &str,
        click: &ButtonClick,
        note: Option<&str>,
    ) -> Result<(), ChannelError>;
}
