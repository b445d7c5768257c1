//! Card buttons: the buttons on the bot's cards, a click on one as the `card.action.trigger`
//! callback (queued, encrypted and signed like every push), and ephemeral cards
//! (`POST /open-apis/ephemeral/v1/send`, which Feishu allows only in group chats).

use std::time::{SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::{Value, json};

use super::api::{begin, error, failure_response, success};
use super::{
    FAKE_FEISHU_APP_ID, FAKE_FEISHU_TENANT, FAKE_FEISHU_VERIFICATION_TOKEN, FakeFeishu,
    FeishuMessage, SharedFeishu,
};

impl FeishuMessage {
    /// The buttons of a card: `(label, value object, type)`.
    pub fn buttons(&self) -> Vec<(String, Value, String)> {
        let elements = self.content["elements"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        elements
            .iter()
            .filter(|element| element["tag"] == "action")
            .flat_map(|element| element["actions"].as_array().cloned().unwrap_or_default())
            .filter(|action| action["tag"] == "button")
            .map(|button| {
                let label = button["text"]["content"].as_str().unwrap_or("").to_string();
                let kind = button["type"].as_str().unwrap_or("default").to_string();
                (label, button["value"].clone(), kind)
            })
            .collect()
    }
}

impl FakeFeishu {
    /// `open_id` clicks the button of the bot's card `message_id` whose value object has
    /// `key` = `value`: the callback carries that button's whole value object, as Feishu's
    /// does. Returns the callback's `event_id` (panics when the card shows no such button).
    pub fn click(&self, open_id: &str, message_id: &str, key: &str, value: &str) -> String {
        let (event_id, payload) = {
            let mut state = self.shared.lock();
            let Some(card) = state.message(message_id).cloned() else {
                panic!("fake feishu: no message {message_id} to click on")
            };
            let Some((_, button_value, _)) = card
                .buttons()
                .into_iter()
                .find(|(_, button_value, _)| button_value[key] == value)
            else {
                panic!(
                    "fake feishu: card {message_id} shows no button with {key} = {value:?}: {card:?}"
                )
            };
            let event_id = state.id("");
            let card_token = state.id("c-");
            let now_ms = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis())
                .unwrap_or_default();
            let payload = json!({
                "schema": "2.0",
                "header": {"event_id": event_id, "token": FAKE_FEISHU_VERIFICATION_TOKEN,
                    "create_time": now_ms.to_string(), "event_type": "card.action.trigger",
                    "tenant_key": FAKE_FEISHU_TENANT, "app_id": FAKE_FEISHU_APP_ID},
                "event": {
                    "operator": {"tenant_key": FAKE_FEISHU_TENANT, "user_id": format!("u_{open_id}"),
                        "open_id": open_id, "union_id": format!("on_{open_id}")},
                    "token": card_token,
                    "action": {"value": button_value, "tag": "button"},
                    "host": "im_message",
                    "context": {"open_message_id": message_id, "open_chat_id": card.chat_id}
                }
            });
            (event_id, payload)
        };
        self.queue(event_id.clone(), payload);
        event_id
    }

    /// Ephemeral cards the bot sent: `(chat_id, open_id, card)`.
    pub fn ephemerals(&self) -> Vec<(String, String, Value)> {
        self.shared.lock().ephemerals.clone()
    }
}

/// `POST /open-apis/ephemeral/v1/send`: a card only `open_id` sees, in a group chat.
pub(crate) async fn ephemeral(
    State(shared): State<SharedFeishu>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let chat = body["chat_id"].as_str().unwrap_or("").to_string();
    if let Err(refused) = begin(
        &shared,
        "ephemeral.send",
        &headers,
        body.clone(),
        Some(chat.clone()),
    ) {
        return failure_response(refused);
    }
    let open_id = body["open_id"].as_str().unwrap_or("").to_string();
    if body["msg_type"] != "interactive"
        || !body["card"]["elements"].is_array()
        || open_id.is_empty()
    {
        return error(10002, "invalid ephemeral card request");
    }
    // This fake's direct chats are oc_p2p_…; Feishu has ephemeral cards in groups only.
    if chat.starts_with("oc_p2p_") || chat.is_empty() {
        return error(10003, "ephemeral cards can only be sent to group chats");
    }
    let mut state = shared.lock();
    let message_id = state.id("om_");
    state.ephemerals.push((chat, open_id, body["card"].clone()));
    success(json!({"message_id": message_id}))
}
