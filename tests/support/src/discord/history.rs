//! `GET /channels/{id}/messages`: the messages people and the bot wrote in a channel, newest
//! first, with Discord's `before`/`after`/`limit` (1–100, default 50). A channel without Read
//! Message History answers 200 with no messages, as Discord does.

use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::Response;
use serde_json::{Value, json};

use super::rest::{admit, answer, error};
use super::{DiscordRoute, SharedDiscord};

fn snowflake(value: &Value) -> u64 {
    value.as_str().and_then(|id| id.parse().ok()).unwrap_or(0)
}

pub(crate) async fn list_messages(
    State(shared): State<SharedDiscord>,
    Path(channel): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let query = query.unwrap_or_default();
    let path = format!("channels/{channel}/messages?{query}");
    if let Some(refused) = admit(
        &shared,
        &Method::GET,
        &path,
        &headers,
        Value::Null,
        Some(DiscordRoute::History),
    ) {
        return refused;
    }
    let params: Vec<(String, String)> = url::form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .collect();
    let param = |name: &str| -> Option<u64> {
        params
            .iter()
            .find(|(key, _)| key == name)
            .and_then(|(_, value)| value.parse().ok())
    };
    let state = shared.lock();
    if !state.channels.contains_key(&channel) {
        return error(StatusCode::NOT_FOUND, 10003, "Unknown Channel");
    }
    if state.no_history.contains(&channel) {
        return answer(StatusCode::OK, json!([]), "history");
    }
    let limit = param("limit").unwrap_or(50).clamp(1, 100) as usize;
    let mut found: Vec<Value> = state
        .history
        .iter()
        .filter(|message| message["channel_id"] == json!(channel))
        .filter(|message| param("before").is_none_or(|before| snowflake(&message["id"]) < before))
        .filter(|message| param("after").is_none_or(|after| snowflake(&message["id"]) > after))
        .cloned()
        .collect();
    found.sort_by_key(|message| std::cmp::Reverse(snowflake(&message["id"])));
    if param("after").is_some() {
        // Discord pages `after` from the oldest side.
        found.reverse();
        found.truncate(limit);
        found.reverse();
    } else {
        found.truncate(limit);
    }
    answer(StatusCode::OK, Value::Array(found), "history")
}
