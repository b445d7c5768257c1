//! What the group-conversation tests of each platform read: the model requests, scripted
//! memory updates and `/api/usage`.

use std::collections::HashMap;
use std::net::SocketAddr;

use antler_test_support::Reply;
use serde_json::{Value, json};

/// A memory update adding `facts` (content, category), each confident enough to be kept.
pub(crate) fn memory_update(facts: &[(&str, &str)]) -> Reply {
    let facts: Vec<Value> = facts
        .iter()
        .map(|(content, category)| {
            json!({"content": content, "category": category, "confidence": 0.95})
        })
        .collect();
    Reply::text(json!({ "newFacts": facts }).to_string())
}

/// The text of every user message of a chat-completions request, in order.
pub(crate) fn user_texts(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|message| message["role"] == "user")
        .filter_map(|message| message["content"].as_str().map(str::to_string))
        .collect()
}

/// Whether `text` occurs anywhere in a request (its prompt and every message).
pub(crate) fn request_mentions(request: &Value, text: &str) -> bool {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|message| message["content"].to_string().contains(text))
}

/// Runs per user today, from `GET /api/usage` (the local operator sees everyone's).
pub(crate) async fn usage_by_user(addr: SocketAddr) -> HashMap<String, u64> {
    let usage: Value = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client")
        .get(format!("http://{addr}/api/usage"))
        .send()
        .await
        .expect("usage")
        .json()
        .await
        .expect("usage json");
    let mut runs = HashMap::new();
    for row in usage["rows"].as_array().into_iter().flatten() {
        let user = row["user_id"].as_str().unwrap_or_default().to_string();
        *runs.entry(user).or_default() += row["runs"].as_u64().unwrap_or(0);
    }
    runs
}

/// A request as text with the quoted blocks of earlier messages (`<channel_context>`) left out:
/// what reached the model as anyone's own turn.
pub(crate) fn outside_quotes(request: &Value) -> String {
    let mut text = request.to_string();
    while let Some(start) = text.find("<channel_context>") {
        let end = text[start..]
            .find("</channel_context>")
            .map_or(text.len(), |end| start + end + "</channel_context>".len());
        text.replace_range(start..end, "");
    }
    text
}
