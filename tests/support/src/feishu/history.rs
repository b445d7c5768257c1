//! `GET /open-apis/im/v1/messages` (`im.message.list`): a chat's messages, people's and apps',
//! in Feishu's item shape, `ByCreateTimeAsc` (default) or `ByCreateTimeDesc`, `page_size`
//! 1–50 (default 20), `page_token` as an offset, `has_more`.

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::{Value, json};

use super::SharedFeishu;
use super::api::{begin, error, failure_response, message_json, success};

pub(crate) async fn list_messages(
    State(shared): State<SharedFeishu>,
    Query(query): Query<Vec<(String, String)>>,
    headers: HeaderMap,
) -> Response {
    let param = |name: &str| {
        query
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    };
    let chat = param("container_id").unwrap_or_default().to_string();
    let asked = json!(
        query
            .iter()
            .cloned()
            .collect::<std::collections::HashMap<_, _>>()
    );
    if let Err(refused) = begin(
        &shared,
        "im.message.list",
        &headers,
        asked,
        Some(chat.clone()),
    ) {
        return failure_response(refused);
    }
    if param("container_id_type") != Some("chat") {
        return error(230001, "this fake lists container_id_type=chat only");
    }
    let page_size: usize = match param("page_size").map(str::parse) {
        None => 20,
        Some(Ok(size)) if (1..=50).contains(&size) => size,
        Some(_) => return error(99992402, "field validation failed: page_size"),
    };
    let offset: usize = param("page_token")
        .and_then(|t| t.parse().ok())
        .unwrap_or(0);
    let state = shared.lock();
    if !state.messages.iter().any(|m| m.chat_id == chat) {
        return error(230002, "The bot is not in the chat.");
    }
    let mut items: Vec<Value> = state
        .messages
        .iter()
        .filter(|m| m.chat_id == chat)
        .map(message_json)
        .collect();
    if param("sort_type") == Some("ByCreateTimeDesc") {
        items.reverse();
    }
    let has_more = items.len() > offset + page_size;
    let page: Vec<Value> = items.into_iter().skip(offset).take(page_size).collect();
    let token = if has_more {
        (offset + page_size).to_string()
    } else {
        String::new()
    };
    success(json!({"has_more": has_more, "page_token": token, "items": page}))
}
