//! `conversations.history` and `conversations.replies` over the messages people and the bot
//! wrote in the fake, in Slack's shapes: history newest first (top-level messages and thread
//! roots only), replies the root first, then the thread oldest first; `latest` and `oldest`
//! exclusive unless `inclusive`, `limit` capped, `has_more` when the window held more.

use axum::response::Response;
use serde_json::{Value, json};

use super::SharedSlack;
use super::api::{error, ok};

/// A `ts` as a sortable pair.
fn order(ts: &str) -> (u64, u64) {
    let (seconds, micros) = ts.split_once('.').unwrap_or((ts, "0"));
    (seconds.parse().unwrap_or(0), micros.parse().unwrap_or(0))
}

fn param<'a>(params: &'a Value, name: &str) -> Option<&'a str> {
    params[name].as_str().filter(|value| !value.is_empty())
}

/// Whether `message` lies in the request's `oldest`..`latest` window.
fn in_window(message: &Value, params: &Value) -> bool {
    let at = order(message["ts"].as_str().unwrap_or_default());
    let inclusive = matches!(params["inclusive"].as_str(), Some("true" | "1"))
        || params["inclusive"] == json!(true);
    let after = param(params, "oldest").map(order);
    let before = param(params, "latest").map(order);
    let after_ok = after.is_none_or(|after| at > after || (inclusive && at == after));
    let before_ok = before.is_none_or(|before| at < before || (inclusive && at == before));
    after_ok && before_ok
}

fn limit(params: &Value) -> usize {
    param(params, "limit")
        .and_then(|limit| limit.parse().ok())
        .or(params["limit"].as_u64().map(|n| n as usize))
        .unwrap_or(100)
        .clamp(1, 999)
}

pub(crate) fn conversations_history(shared: &SharedSlack, params: &Value) -> Response {
    let Some(channel) = param(params, "channel") else {
        return error("channel_not_found");
    };
    let state = shared.lock();
    let mut found: Vec<Value> = state
        .history
        .iter()
        .filter(|(in_channel, _)| in_channel == channel)
        .map(|(_, message)| message)
        .filter(|m| m["thread_ts"].is_null() || m["thread_ts"] == m["ts"])
        .filter(|m| in_window(m, params))
        .cloned()
        .collect();
    found.sort_by_key(|m| std::cmp::Reverse(order(m["ts"].as_str().unwrap_or_default())));
    let has_more = found.len() > limit(params);
    found.truncate(limit(params));
    ok(
        json!({"messages": found, "has_more": has_more, "pin_count": 0,
        "response_metadata": {"next_cursor": ""}}),
    )
}

pub(crate) fn conversations_replies(shared: &SharedSlack, params: &Value) -> Response {
    let (Some(channel), Some(root)) = (param(params, "channel"), param(params, "ts")) else {
        return error("thread_not_found");
    };
    let state = shared.lock();
    let in_thread: Vec<&Value> = state
        .history
        .iter()
        .filter(|(in_channel, _)| in_channel == channel)
        .map(|(_, message)| message)
        .filter(|m| m["ts"] == root || m["thread_ts"] == root)
        .collect();
    let Some(parent) = in_thread.iter().find(|m| m["ts"] == root) else {
        return error("thread_not_found");
    };
    let mut replies: Vec<Value> = in_thread
        .iter()
        .filter(|m| m["ts"] != root && in_window(m, params))
        .map(|m| (*m).clone())
        .collect();
    replies.sort_by_key(|m| order(m["ts"].as_str().unwrap_or_default()));
    let has_more = replies.len() + 1 > limit(params);
    replies.truncate(limit(params).saturating_sub(1));
    let mut messages = vec![(*parent).clone()];
    messages.extend(replies);
    ok(json!({"messages": messages, "has_more": has_more,
        "response_metadata": {"next_cursor": ""}}))
}
