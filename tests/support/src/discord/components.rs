//! Message components: action rows of buttons on the bot's messages (checked like Discord's
//! form validation), clicks on them as `INTERACTION_CREATE` of type 3 (`MESSAGE_COMPONENT`),
//! and the follow-ups posted through an interaction's token
//! (`POST /api/v10/webhooks/{application}/{token}`, valid only after the interaction was
//! answered).

use std::time::Instant;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use super::rest::{answer, error};
use super::{
    BotMessage, DiscordCall, FAKE_DISCORD_BOT_ID, FakeDiscord, SharedDiscord, discord_user,
};

/// The rows as stored: what was sent, or `[]`.
pub(crate) fn rows(components: &Value) -> Value {
    match components {
        Value::Array(rows) => Value::Array(rows.clone()),
        _ => json!([]),
    }
}

/// Discord's rules for the components the bot sends: at most five action rows (type 1) of at
/// most five buttons (type 2) each, a style 1–5, a label of at most 80 characters, a
/// `custom_id` of 1–100 characters unique in the message (link buttons, style 5, take a `url`
/// instead).
pub(crate) fn check(components: &Value) -> Result<(), String> {
    let rows = match components {
        Value::Null => return Ok(()),
        Value::Array(rows) => rows,
        _ => return Err("must be a list".into()),
    };
    if rows.len() > 5 {
        return Err("Must be 5 or fewer in length.".into());
    }
    let mut ids = std::collections::HashSet::new();
    for row in rows {
        let buttons = row["components"].as_array().cloned().unwrap_or_default();
        if row["type"] != 1 || buttons.is_empty() || buttons.len() > 5 {
            return Err("an action row (type 1) holds 1 to 5 components".into());
        }
        for button in buttons {
            let style = button["style"].as_u64().unwrap_or(0);
            if button["type"] != 2 || !(1..=5).contains(&style) {
                return Err("only buttons (type 2, style 1-5) are known here".into());
            }
            if button["label"].as_str().map_or(0, |l| l.chars().count()) > 80 {
                return Err("label: Must be 80 or fewer in length.".into());
            }
            let id = button["custom_id"].as_str().unwrap_or("");
            if style != 5
                && (id.is_empty() || id.chars().count() > 100 || !ids.insert(id.to_string()))
            {
                return Err("custom_id: must be 1-100 characters and unique".into());
            }
        }
    }
    Ok(())
}

impl BotMessage {
    /// Its buttons as `(label, custom_id, style)`.
    pub fn buttons(&self) -> Vec<(String, String, u64)> {
        let rows = self.components.as_array().cloned().unwrap_or_default();
        rows.iter()
            .flat_map(|row| row["components"].as_array().cloned().unwrap_or_default())
            .map(|button| {
                let field = |key: &str| button[key].as_str().unwrap_or("").to_string();
                (
                    field("label"),
                    field("custom_id"),
                    button["style"].as_u64().unwrap_or(0),
                )
            })
            .collect()
    }
}

impl FakeDiscord {
    /// `user` clicks the button `custom_id` on the bot's message `message_id`: an
    /// INTERACTION_CREATE (a `member` in guild channels, a `user` in DMs, the message as it
    /// reads now). Returns the interaction id. Panics when the message shows no such button.
    pub fn click(&self, user: &str, message_id: &str, custom_id: &str) -> String {
        let (id, data) = {
            let mut state = self.shared.lock();
            let Some(message) = state.messages.iter().find(|m| m.id == message_id).cloned() else {
                panic!("fake discord: no bot message {message_id} to click on")
            };
            if !message.buttons().iter().any(|(_, id, _)| id == custom_id) {
                panic!(
                    "fake discord: message {message_id} shows no button {custom_id:?}: {message:?}"
                );
            }
            let id = state.snowflake();
            let token = format!("aW50ZXJhY3Rpb24.{id}.tok");
            let guild = state
                .channels
                .get(&message.channel)
                .and_then(|c| c.guild.clone());
            let mut shown = super::discord_message(
                &message.id,
                &message.channel,
                guild.as_deref(),
                discord_user(FAKE_DISCORD_BOT_ID, true),
                &message.content,
            );
            shown["components"] = message.components.clone();
            let mut data = json!({"id": id, "application_id": FAKE_DISCORD_BOT_ID, "type": 3,
                "token": token, "version": 1, "channel_id": message.channel,
                "channel": {"id": message.channel, "type": state.channels.get(&message.channel).map_or(0, |c| c.kind)},
                "locale": "en-US", "app_permissions": "2248473465835073",
                "data": {"custom_id": custom_id, "component_type": 2},
                "message": shown, "entitlements": [], "authorizing_integration_owners": {},
                "attachment_size_limit": 10_485_760});
            match guild {
                Some(guild) => {
                    data["guild_id"] = json!(guild);
                    data["guild_locale"] = json!("en-US");
                    data["member"] = json!({"user": discord_user(user, false), "nick": null,
                        "roles": [], "joined_at": "2024-01-01T00:00:00.000000+00:00",
                        "deaf": false, "mute": false, "flags": 0, "permissions": "2248473465835073"});
                    data["context"] = json!(0);
                }
                None => {
                    data["user"] = discord_user(user, false);
                    data["context"] = json!(1);
                }
            }
            state.clicks.insert(id.clone(), (token, data.clone()));
            (id, data)
        };
        self.dispatch("INTERACTION_CREATE", data);
        id
    }

    /// The same INTERACTION_CREATE again (a replay after a resumed session).
    pub fn redeliver_click(&self, interaction_id: &str) {
        let data = self
            .shared
            .lock()
            .clicks
            .get(interaction_id)
            .map(|(_, d)| d.clone());
        if let Some(data) = data {
            self.dispatch("INTERACTION_CREATE", data);
        }
    }

    /// Follow-ups posted through the token of `interaction_id`, oldest first.
    pub fn followups(&self, interaction_id: &str) -> Vec<Value> {
        let state = self.shared.lock();
        let Some((token, _)) = state.clicks.get(interaction_id) else {
            return Vec::new();
        };
        state
            .followups
            .iter()
            .filter(|(t, _)| t == token)
            .map(|(_, body)| body.clone())
            .collect()
    }
}

/// `POST /api/v10/webhooks/{application}/{token}`: a follow-up message of an answered
/// interaction (10015 Unknown Webhook otherwise).
pub(crate) async fn followup(
    State(shared): State<SharedDiscord>,
    Path((app, token)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let mut state = shared.lock();
    state.calls.push(DiscordCall {
        method: "POST".into(),
        path: format!("webhooks/{app}/{token}"),
        channel: None,
        body: body.clone(),
        at: Instant::now(),
    });
    let interaction = state
        .clicks
        .iter()
        .find(|(_, (known, _))| *known == token)
        .map(|(id, (_, data))| (id.clone(), data.clone()));
    let answered = interaction.as_ref().is_some_and(|(id, _)| {
        state
            .interaction_answers
            .iter()
            .any(|(answered, _)| answered == id)
    });
    let Some((_, data)) = interaction.filter(|_| answered && app == FAKE_DISCORD_BOT_ID) else {
        return error(StatusCode::NOT_FOUND, 10015, "Unknown Webhook");
    };
    let content = body["content"].as_str().unwrap_or("");
    if content.is_empty() || content.chars().count() > 2000 {
        return error(
            StatusCode::BAD_REQUEST,
            50035,
            "Invalid Form Body (content)",
        );
    }
    state.followups.push((token, body.clone()));
    let id = state.snowflake();
    let channel = data["channel_id"].as_str().unwrap_or("").to_string();
    let mut message = super::discord_message(
        &id,
        &channel,
        None,
        discord_user(FAKE_DISCORD_BOT_ID, true),
        content,
    );
    message["flags"] = body["flags"].clone();
    message["webhook_id"] = json!(app);
    answer(StatusCode::OK, message, "followup")
}
