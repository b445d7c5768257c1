//! The Web API methods the adapter calls, with Slack's response shapes.

use std::time::Instant;

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::{
    FAKE_SLACK_APP_TOKEN, FAKE_SLACK_BOT_TOKEN, FAKE_SLACK_BOT_USER, FAKE_SLACK_TEAM,
    PostedMessage, SharedFile, SharedSlack, SlackCall, SlackFailure, socket,
};

pub(crate) fn ok(mut fields: Value) -> Response {
    fields["ok"] = json!(true);
    axum::Json(fields).into_response()
}

pub(crate) fn error(code: &str) -> Response {
    axum::Json(json!({"ok": false, "error": code})).into_response()
}

fn failure_response(failure: SlackFailure) -> Response {
    match failure {
        SlackFailure::RateLimited(seconds) => (
            StatusCode::TOO_MANY_REQUESTS,
            [(header::RETRY_AFTER, seconds.to_string())],
            axum::Json(json!({"ok": false, "error": "ratelimited"})),
        )
            .into_response(),
        SlackFailure::Error(code) => error(&code),
    }
}

/// Query string, JSON body or form body fields as one object.
fn params(query: Option<&str>, headers: &HeaderMap, body: &[u8]) -> Value {
    let mut fields = Map::new();
    let form = |raw: &[u8], fields: &mut Map<String, Value>| {
        for (key, value) in url::form_urlencoded::parse(raw) {
            fields.insert(key.into_owned(), Value::String(value.into_owned()));
        }
    };
    if let Some(query) = query {
        form(query.as_bytes(), &mut fields);
    }
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if content_type.starts_with("application/json") {
        if let Ok(Value::Object(body)) = serde_json::from_slice::<Value>(body) {
            fields.extend(body);
        }
    } else if content_type.starts_with("application/x-www-form-urlencoded") {
        form(body, &mut fields);
    }
    Value::Object(fields)
}

fn bearer(headers: &HeaderMap) -> &str {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("")
}

fn text(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_string()
}

pub(crate) async fn method(
    State(shared): State<SharedSlack>,
    Path(method): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let params = params(query.as_deref(), &headers, &body);
    let failure = {
        let mut state = shared.lock();
        state.calls.push(SlackCall {
            method: method.clone(),
            params: params.clone(),
            at: Instant::now(),
        });
        state.failures.get_mut(&method).and_then(|q| q.pop_front())
    };
    let wanted = if method == "apps.connections.open" {
        FAKE_SLACK_APP_TOKEN
    } else {
        FAKE_SLACK_BOT_TOKEN
    };
    match bearer(&headers) {
        "" => return error("not_authed"),
        given
            if given.starts_with("xapp-")
                && wanted != given
                && method != "apps.connections.open" =>
        {
            return error("not_allowed_token_type");
        }
        given if given != wanted => return error("invalid_auth"),
        _ => {}
    }
    if let Some(failure) = failure {
        return failure_response(failure);
    }
    match method.as_str() {
        "auth.test" => ok(
            json!({"url": "https://fake.slack.test/", "team": "Fake Team",
            "user": "antler", "team_id": FAKE_SLACK_TEAM, "user_id": FAKE_SLACK_BOT_USER,
            "bot_id": "B0FAKE01", "is_enterprise_install": false}),
        ),
        "apps.connections.open" => {
            let n = shared.lock().connections.len() + 1;
            let url = shared.base().replacen("http://", "ws://", 1);
            ok(json!({"url": format!("{url}/socket/{n}")}))
        }
        "chat.postMessage" => post_message(&shared, &params),
        "chat.postEphemeral" => {
            let mut state = shared.lock();
            let ts = state.ts();
            state.messages.push(PostedMessage {
                channel: text(&params["channel"]),
                ts: ts.clone(),
                thread_ts: params["thread_ts"].as_str().map(String::from),
                text: text(&params["text"]),
                ephemeral_to: Some(text(&params["user"])),
                blocks: blocks(&params["blocks"]),
            });
            ok(json!({"message_ts": ts}))
        }
        "chat.update" => update_message(&shared, &params),
        "reactions.add" | "reactions.remove" => react(&shared, &method, &params),
        "assistant.threads.setStatus" => ok(json!({})),
        "users.info" => users_info(&shared, &params),
        "conversations.history" => super::history::conversations_history(&shared, &params),
        "conversations.replies" => super::history::conversations_replies(&shared, &params),
        "files.getUploadURLExternal" => {
            let mut state = shared.lock();
            let file_id = format!("F{:08}", 9000 + state.uploads.len());
            state
                .uploads
                .insert(file_id.clone(), (text(&params["filename"]), None));
            ok(
                json!({"upload_url": format!("{}/upload/{file_id}", shared.base()), "file_id": file_id}),
            )
        }
        "files.completeUploadExternal" => complete_upload(&shared, &params),
        "files.upload" => error("method_deprecated"),
        _ => error("unknown_method"),
    }
}

/// `blocks` as sent: a JSON array, or (form-encoded) the array as a string.
fn blocks(value: &Value) -> Vec<Value> {
    match value {
        Value::Array(blocks) => blocks.clone(),
        Value::String(raw) => serde_json::from_str(raw).unwrap_or_default(),
        _ => Vec::new(),
    }
}

fn post_message(shared: &SharedSlack, params: &Value) -> Response {
    if let Err(why) = super::interactions::check_blocks(&blocks(&params["blocks"])) {
        return invalid_blocks(&why);
    }
    let channel = text(&params["channel"]);
    let thread_ts = params["thread_ts"].as_str().map(String::from);
    let body = text(&params["text"]);
    let (ts, echo) = {
        let mut state = shared.lock();
        let ts = state.ts();
        state.messages.push(PostedMessage {
            channel: channel.clone(),
            ts: ts.clone(),
            thread_ts: thread_ts.clone(),
            text: body.clone(),
            ephemeral_to: None,
            blocks: blocks(&params["blocks"]),
        });
        (ts, state.echo_bot_messages && channel.starts_with('D'))
    };
    let mut message = json!({"type": "message", "text": body, "user": FAKE_SLACK_BOT_USER,
        "bot_id": "B0FAKE01", "ts": ts, "team": FAKE_SLACK_TEAM,
        "bot_profile": {"id": "B0FAKE01", "app_id": "A0FAKE01", "name": "antler", "deleted": false,
            "updated": 1_700_000_000, "team_id": FAKE_SLACK_TEAM,
            "icons": {"image_36": "https://a.slack-edge.test/36.png"}}});
    if let Some(thread) = &thread_ts {
        message["thread_ts"] = json!(thread);
    }
    shared
        .lock()
        .history
        .push((channel.clone(), message.clone()));
    if echo {
        // Apps subscribed to message.im see their own posts come back.
        let mut event = message.clone();
        event["channel"] = json!(channel);
        event["channel_type"] = json!("im");
        socket::enqueue_event(shared, event, false);
    }
    ok(json!({"channel": channel, "ts": ts, "message": message}))
}

fn invalid_blocks(why: &str) -> Response {
    axum::Json(json!({"ok": false, "error": "invalid_blocks", "errors": [why]})).into_response()
}

fn update_message(shared: &SharedSlack, params: &Value) -> Response {
    if let Err(why) = super::interactions::check_blocks(&blocks(&params["blocks"])) {
        return invalid_blocks(&why);
    }
    let (channel, ts, body) = (
        text(&params["channel"]),
        text(&params["ts"]),
        text(&params["text"]),
    );
    let mut state = shared.lock();
    let Some(message) = state
        .messages
        .iter_mut()
        .find(|m| m.channel == channel && m.ts == ts && m.ephemeral_to.is_none())
    else {
        return error("message_not_found");
    };
    message.text = body.clone();
    // Without `blocks` Slack keeps the message's blocks (its buttons too).
    if params.get("blocks").is_some() {
        message.blocks = blocks(&params["blocks"]);
    }
    ok(json!({"channel": channel, "ts": ts, "text": body,
        "message": {"text": body, "user": FAKE_SLACK_BOT_USER, "bot_id": "B0FAKE01"}}))
}

fn react(shared: &SharedSlack, method: &str, params: &Value) -> Response {
    let key = (
        text(&params["channel"]),
        text(&params["timestamp"]),
        text(&params["name"]),
    );
    let mut state = shared.lock();
    let present = state.reactions.contains(&key);
    match (method, present) {
        ("reactions.add", true) => error("already_reacted"),
        ("reactions.add", false) => {
            state.reactions.push(key);
            ok(json!({}))
        }
        (_, false) => error("no_reaction"),
        (_, true) => {
            state.reactions.retain(|r| *r != key);
            ok(json!({}))
        }
    }
}

fn complete_upload(shared: &SharedSlack, params: &Value) -> Response {
    let mut state = shared.lock();
    let mut files = Vec::new();
    for file in params["files"].as_array().cloned().unwrap_or_default() {
        let id = text(&file["id"]);
        let Some((filename, Some(bytes))) = state.uploads.remove(&id) else {
            return error("file_not_found");
        };
        let title = file["title"]
            .as_str()
            .map(String::from)
            .unwrap_or(filename.clone());
        state.shared.push(SharedFile {
            file_id: id.clone(),
            title: title.clone(),
            channel: params["channel_id"].as_str().map(String::from),
            thread_ts: params["thread_ts"].as_str().map(String::from),
            bytes,
        });
        files.push(json!({"id": id, "title": title, "name": filename}));
    }
    ok(json!({"files": files}))
}

/// The upload URL: raw bytes, answered `OK - <length>` in plain text like Slack's.
pub(crate) async fn upload(
    State(shared): State<SharedSlack>,
    Path(file_id): Path<String>,
    body: Bytes,
) -> Response {
    let mut state = shared.lock();
    match state.uploads.get_mut(&file_id) {
        Some(slot) => {
            slot.1 = Some(body.to_vec());
            (StatusCode::OK, format!("OK - {}", body.len())).into_response()
        }
        None => (StatusCode::NOT_FOUND, "unknown upload").into_response(),
    }
}

/// `url_private_download`: the bytes for the bot token, Slack's sign-in page otherwise.
pub(crate) async fn download(
    State(shared): State<SharedSlack>,
    Path((file_id, _name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let file = shared.lock().files.get(&file_id).cloned();
    match file {
        Some((name, mimetype, bytes)) if bearer(&headers) == FAKE_SLACK_BOT_TOKEN => {
            shared.lock().downloaded.push(name);
            (StatusCode::OK, [(header::CONTENT_TYPE, mimetype)], bytes).into_response()
        }
        Some(_) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "text/html".to_string())],
            "<html>sign in to slack</html>",
        )
            .into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

/// `users.info`: the person as Slack describes them (`user_not_found` for anyone not added with
/// `FakeSlack::add_user`).
fn users_info(shared: &SharedSlack, params: &Value) -> Response {
    let id = text(&params["user"]);
    let known = shared.lock().users.get(&id).cloned();
    match known {
        Some((display_name, real_name)) => ok(json!({"user": {
            "id": id, "team_id": FAKE_SLACK_TEAM, "name": real_name.to_lowercase().replace(' ', "."),
            "deleted": false, "real_name": real_name, "is_bot": false,
            "profile": {"display_name": display_name, "real_name": real_name,
                "display_name_normalized": display_name, "real_name_normalized": real_name},
        }})),
        None => error("user_not_found"),
    }
}
