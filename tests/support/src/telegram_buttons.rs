//! The fake Telegram's inline keyboards: kept on the messages the bot sends (and replaced or
//! removed by `editMessageText`), clicks queued as `callback_query` updates, and
//! `answerCallbackQuery` recorded like every call.

use serde_json::{Value, json};

use crate::telegram::{BotCall, FAKE_BOT_ID, FAKE_BOT_USERNAME, FakeTelegram, private_chat};

/// `content` of a sent message with the request's `reply_markup`, as Telegram echoes it.
pub(crate) fn with_keyboard(body: &Value, mut content: Value) -> Value {
    if let Some(keyboard) = body.get("reply_markup").filter(|k| !k.is_null()) {
        content["reply_markup"] = keyboard.clone();
    }
    content
}

impl FakeTelegram {
    /// The inline keyboard a bot message shows now (`None`: none, or removed by an edit).
    pub fn keyboard_of(&self, chat_id: i64, message_id: i64) -> Option<Value> {
        self.shared
            .lock()
            .keyboards
            .get(&(chat_id, message_id))
            .cloned()
    }

    /// `(label, callback_data)` of every button a bot message shows now, row by row.
    pub fn buttons_of(&self, chat_id: i64, message_id: i64) -> Vec<(String, String)> {
        let Some(keyboard) = self.keyboard_of(chat_id, message_id) else {
            return Vec::new();
        };
        keyboard["inline_keyboard"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_array)
            .flatten()
            .map(|button| {
                let text = button["text"].as_str().unwrap_or_default().to_string();
                let data = button["callback_data"].as_str().unwrap_or_default();
                (text, data.to_string())
            })
            .collect()
    }

    /// The id of the newest bot message in `chat_id` that shows a keyboard.
    pub fn last_with_keyboard(&self, chat_id: i64) -> Option<i64> {
        let state = self.shared.lock();
        state
            .keyboards
            .keys()
            .filter(|(chat, _)| *chat == chat_id)
            .map(|(_, message_id)| *message_id)
            .max()
    }

    /// `user_id` taps the button with `data` under bot message `message_id` of `chat_id`:
    /// queues a `callback_query` update carrying the message as it reads now. Returns the
    /// callback query's id (answer it with `answerCallbackQuery`).
    pub fn click(&self, chat_id: i64, user_id: i64, message_id: i64, data: &str) -> String {
        let mut state = self.shared.lock();
        let update_id = state.next_update_id;
        state.next_update_id += 1;
        let query_id = format!("{}{update_id:04}", 4_382_000 + user_id);
        let chat = state
            .chats
            .get(&chat_id)
            .cloned()
            .unwrap_or_else(|| private_chat(chat_id));
        let mut message = json!({
            "message_id": message_id, "date": 1_700_000_001, "chat": chat,
            "from": {"id": FAKE_BOT_ID, "is_bot": true, "first_name": "Antler", "username": FAKE_BOT_USERNAME},
            "text": state.texts.get(&(chat_id, message_id)).cloned().unwrap_or_default(),
        });
        if let Some(keyboard) = state.keyboards.get(&(chat_id, message_id)) {
            message["reply_markup"] = keyboard.clone();
        }
        let update = json!({
            "update_id": update_id,
            "callback_query": {
                "id": query_id,
                "from": {"id": user_id, "is_bot": false, "first_name": format!("User{user_id}")},
                "message": message,
                "chat_instance": format!("{chat_id}"),
                "data": data,
            }
        });
        state.history.push(update.clone());
        state.updates.push(update);
        drop(state);
        self.shared.news.notify_waiters();
        query_id
    }

    /// Every `answerCallbackQuery` so far: `(callback_query_id, text)`.
    pub fn answered_clicks(&self) -> Vec<(String, Option<String>)> {
        self.calls_of("answerCallbackQuery")
            .into_iter()
            .map(|BotCall { body, .. }: BotCall| {
                let id = body["callback_query_id"].as_str().unwrap_or_default();
                (id.to_string(), body["text"].as_str().map(String::from))
            })
            .collect()
    }
}
