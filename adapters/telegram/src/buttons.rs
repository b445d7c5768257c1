//! Approval buttons on Telegram: an inline keyboard under the message, `callback_query` updates
//! as clicks, `answerCallbackQuery` for the clicker's toast, and `editMessageText` without a
//! keyboard once the question is settled.

use antler_channel::{
    BUTTON_VALUE_MAX, Button, ButtonClick, ChannelError, ChatKey, InboundMessage, SendButtons,
    SentMessage,
};
use async_trait::async_trait;
use teloxide::payloads::{AnswerCallbackQuerySetters, EditMessageTextSetters};
use teloxide::requests::Requester;
use teloxide::types::{CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup, ParseMode};
use teloxide::{ApiError, RequestError};

use crate::error::channel_error;
use crate::markup::to_html;
use crate::send::{chat_id, message_id};
use crate::{CHANNEL_NAME, TelegramChannel};

/// One row of callback buttons; a value longer than `callback_data` allows is refused before
/// Telegram would refuse the whole message.
fn keyboard(buttons: &[Button]) -> Result<InlineKeyboardMarkup, ChannelError> {
    let row = buttons
        .iter()
        .map(|button| {
            if button.value.len() > BUTTON_VALUE_MAX {
                return Err(ChannelError::Platform(format!(
                    "button value {:?} is longer than telegram's {BUTTON_VALUE_MAX} bytes of callback_data",
                    button.value
                )));
            }
            Ok(InlineKeyboardButton::callback(
                button.label.clone(),
                button.value.clone(),
            ))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(InlineKeyboardMarkup::new([row]))
}

#[async_trait]
impl SendButtons for TelegramChannel {
    async fn send_buttons(
        &self,
        chat: &ChatKey,
        text: &str,
        buttons: &[Button],
        reply_to: Option<&str>,
    ) -> Result<SentMessage, ChannelError> {
        let markup = keyboard(buttons)?;
        self.send_markdown(chat, text, reply_to, Some(markup)).await
    }

    /// `editMessageText` without `reply_markup` removes the inline keyboard with the new text.
    async fn settle_buttons(
        &self,
        chat: &ChatKey,
        message_id_text: &str,
        text: &str,
    ) -> Result<(), ChannelError> {
        let (chat_id, message_id) = (chat_id(chat)?, message_id(message_id_text)?);
        let html = self
            .bot
            .edit_message_text(chat_id, message_id, to_html(text))
            .parse_mode(ParseMode::Html)
            .await;
        let result = match html {
            Err(RequestError::Api(ApiError::CantParseEntities(_))) => {
                self.bot.edit_message_text(chat_id, message_id, text).await
            }
            other => other,
        };
        result.map(|_| ()).map_err(channel_error)
    }

    /// The note shows as a toast to the clicker only; without one the button's spinner stops.
    async fn answer_click(
        &self,
        _chat: &ChatKey,
        _user_id: &str,
        click: &ButtonClick,
        note: Option<&str>,
    ) -> Result<(), ChannelError> {
        let mut request = self
            .bot
            .answer_callback_query(click.answer_handle.clone().into());
        if let Some(note) = note {
            request = request.text(note);
        }
        request.await.map(|_| ()).map_err(channel_error)
    }
}

/// A click on one of the bot's buttons as a message: its id is the callback query's, it
/// replies to the message holding the buttons (so a group's reply chain finds its
/// conversation), and it carries no text. `None` for inline-mode queries (no chat) and for
/// queries without data.
pub(crate) fn click_message(query: &CallbackQuery) -> Option<InboundMessage> {
    let message = query.message.as_ref()?;
    let value = query.data.clone()?;
    let chat = message.chat();
    let is_direct = chat.is_private();
    let topic_id = match message.regular_message() {
        Some(regular) if !is_direct && regular.is_topic_message => {
            regular.thread_id.map(|thread| thread.0.0.to_string())
        }
        _ => None,
    };
    let from = &query.from;
    let display_name = match &from.last_name {
        Some(last) => format!("{} {last}", from.first_name),
        None => from.first_name.clone(),
    };
    let holder = message.id().0.to_string();
    Some(InboundMessage {
        channel: CHANNEL_NAME.into(),
        workspace_id: Some(chat.id.0.to_string()),
        chat_id: chat.id.0.to_string(),
        topic_id,
        user_id: from.id.0.to_string(),
        display_name: Some(display_name),
        platform_message_id: query.id.0.clone(),
        text: String::new(),
        files: Vec::new(),
        is_direct,
        mentions_bot: false,
        reply_to: Some(holder.clone()),
        thread_reply: false,
        is_bot: from.is_bot,
        bot_id: None,
        context: Vec::new(),
        click: Some(ButtonClick {
            value,
            message_id: holder,
            answer_handle: query.id.0.clone(),
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(body: serde_json::Value) -> CallbackQuery {
        // The whole update is read by the webhook test (`a_pushed_callback_query_is_a_click`).
        serde_json::from_value(body).expect("a callback query")
    }

    fn bot_message(chat: serde_json::Value) -> serde_json::Value {
        serde_json::json!({
            "message_id": 31, "date": 1700000001, "chat": chat,
            "from": {"id": 999, "is_bot": true, "first_name": "Antler"},
            "text": "Approve?"
        })
    }

    #[test]
    fn a_callback_query_becomes_a_click_replying_to_the_message_with_the_buttons() {
        let click = click_message(&query(serde_json::json!({
            "id": "4382000001", "chat_instance": "-77",
            "from": {"id": 42, "is_bot": false, "first_name": "Ann", "last_name": "Lee"},
            "message": bot_message(serde_json::json!({"id": -100, "type": "supergroup", "title": "g"})),
            "data": "ap:abc:a"
        })))
        .expect("a click");
        assert_eq!(click.platform_message_id, "4382000001");
        assert_eq!(click.chat_id, "-100");
        assert_eq!(click.user_id, "42");
        assert_eq!(click.display_name.as_deref(), Some("Ann Lee"));
        assert_eq!(click.reply_to.as_deref(), Some("31"));
        assert!(!click.is_direct && click.text.is_empty() && click.topic_id.is_none());
        assert_eq!(
            click.click,
            Some(ButtonClick {
                value: "ap:abc:a".into(),
                message_id: "31".into(),
                answer_handle: "4382000001".into(),
            })
        );
    }

    #[test]
    fn inline_queries_and_queries_without_data_are_not_clicks() {
        let inline = query(serde_json::json!({
            "id": "1", "chat_instance": "-77", "inline_message_id": "X",
            "from": {"id": 42, "is_bot": false, "first_name": "Ann"}, "data": "ap:abc:a"
        }));
        assert!(click_message(&inline).is_none());
        let game = query(serde_json::json!({
            "id": "2", "chat_instance": "-77",
            "from": {"id": 42, "is_bot": false, "first_name": "Ann"},
            "message": bot_message(serde_json::json!({"id": 42, "type": "private", "first_name": "Ann"})),
            "game_short_name": "g"
        }));
        assert!(click_message(&game).is_none());
    }

    #[test]
    fn values_longer_than_callback_data_allows_are_refused() {
        let long = Button {
            label: "x".into(),
            value: "v".repeat(BUTTON_VALUE_MAX + 1),
            style: Default::default(),
        };
        assert!(matches!(keyboard(&[long]), Err(ChannelError::Platform(_))));
    }
}
