//! The open API's routes, answered in Feishu's shapes: `{"code": 0, "msg": "success", "data":
//! …}`, or a non-zero code (HTTP 400) and a message; 429 with `x-ogw-ratelimit-*` headers.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Multipart, Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{
    FAKE_FEISHU_APP_ID, FAKE_FEISHU_APP_SECRET, FAKE_FEISHU_BOT_NAME, FAKE_FEISHU_BOT_OPEN_ID,
    FAKE_FEISHU_TENANT, FeishuCall, FeishuFailure, FeishuMessage, FeishuState, SharedFeishu,
    UploadedFile,
};

const IMAGE_LIMIT: usize = 10 * 1024 * 1024;
const FILE_LIMIT: usize = 30 * 1024 * 1024;
const FILE_TYPES: &[&str] = &["opus", "mp4", "pdf", "doc", "xls", "ppt", "stream"];

pub(crate) fn success(data: Value) -> Response {
    Json(json!({"code": 0, "msg": "success", "data": data})).into_response()
}

pub(crate) fn error(code: i64, msg: &str) -> Response {
    (
        StatusCode::BAD_REQUEST,
        Json(json!({"code": code, "msg": msg})),
    )
        .into_response()
}

pub(crate) fn failure_response(failure: FeishuFailure) -> Response {
    match failure {
        FeishuFailure::RateLimited(seconds) => {
            let mut headers = HeaderMap::new();
            headers.insert("x-ogw-ratelimit-limit", "5".parse().expect("header"));
            headers.insert(
                "x-ogw-ratelimit-reset",
                seconds.to_string().parse().expect("header"),
            );
            (
                StatusCode::TOO_MANY_REQUESTS,
                headers,
                Json(json!({"code": 99991400, "msg": "request trigger frequency limit"})),
            )
                .into_response()
        }
        FeishuFailure::Code(code, msg) => error(code, &msg),
    }
}

/// Records the call, then checks the token and any failure queued for it.
pub(crate) fn begin(
    shared: &SharedFeishu,
    method: &str,
    headers: &HeaderMap,
    body: Value,
    chat: Option<String>,
) -> Result<(), FeishuFailure> {
    let mut state = shared.lock();
    state.calls.push(FeishuCall {
        method: method.to_string(),
        body,
        chat,
        at: Instant::now(),
    });
    let bearer = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    match state.tokens.get(bearer) {
        None if bearer.is_empty() => {
            return Err(code(99991661, "Missing access token for authorization."));
        }
        None => {
            return Err(code(
                99991663,
                "Invalid access token for authorization. Please make a request with token attached.",
            ));
        }
        Some(expires) if *expires <= Instant::now() => {
            return Err(code(99991677, "Token Expired"));
        }
        Some(_) => {}
    }
    if let Some(failure) = state.failures.get_mut(method).and_then(|q| q.pop_front()) {
        return Err(failure);
    }
    Ok(())
}

fn code(code: i64, msg: &str) -> FeishuFailure {
    FeishuFailure::Code(code, msg.to_string())
}

fn chat_of(state: &FeishuState, message_id: &str) -> Option<String> {
    state.message(message_id).map(|m| m.chat_id.clone())
}

pub(crate) async fn token(State(shared): State<SharedFeishu>, Json(body): Json<Value>) -> Response {
    let mut state = shared.lock();
    state.calls.push(FeishuCall {
        method: "auth.tenant_access_token".into(),
        body: json!({"app_id": body["app_id"]}),
        chat: None,
        at: Instant::now(),
    });
    if let Some(failure) = state
        .failures
        .get_mut("auth.tenant_access_token")
        .and_then(|q| q.pop_front())
    {
        return failure_response(failure);
    }
    if body["app_id"] != FAKE_FEISHU_APP_ID || body["app_secret"] != FAKE_FEISHU_APP_SECRET {
        return error(10014, "app secret invalid");
    }
    let token = state.id("t-g1044");
    let lifetime = state.token_lifetime;
    state.tokens.insert(
        token.clone(),
        Instant::now() + Duration::from_secs(lifetime),
    );
    Json(json!({"code": 0, "msg": "ok", "tenant_access_token": token, "expire": lifetime}))
        .into_response()
}

pub(crate) async fn bot_info(State(shared): State<SharedFeishu>, headers: HeaderMap) -> Response {
    if let Err(refused) = begin(&shared, "bot.info", &headers, Value::Null, None) {
        return failure_response(refused);
    }
    Json(json!({"code": 0, "msg": "ok", "bot": {"activate_status": 2, "app_name": FAKE_FEISHU_BOT_NAME,
        "avatar_url": "https://s1-imfile.feishucdn.com/static-resource/v1/avatar", "ip_white_list": [],
        "open_id": FAKE_FEISHU_BOT_OPEN_ID}}))
    .into_response()
}

/// `GET /open-apis/contact/v3/users/{open_id}?user_id_type=open_id`: a known user, else the
/// code Feishu answers for a user outside the app's reach (41050).
pub(crate) async fn contact_user(
    State(shared): State<SharedFeishu>,
    Path(open_id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let call = json!({"open_id": open_id, "user_id_type": query.get("user_id_type")});
    if let Err(refused) = begin(&shared, "contact.user.get", &headers, call, None) {
        return failure_response(refused);
    }
    let known = shared.lock().users.get(&open_id).cloned();
    match known {
        Some(name) => Json(json!({"code": 0, "msg": "success", "data": {"user": {
            "open_id": open_id, "union_id": format!("on_{open_id}"), "name": name,
            "en_name": "", "nickname": ""}}}))
        .into_response(),
        None => failure_response(code(41050, "no user authority error")),
    }
}

/// The message object Feishu answers sends with.
pub(crate) fn message_json(message: &FeishuMessage) -> Value {
    let sender = if message.from_bot {
        json!({"id": message.sender, "id_type": "app_id", "sender_type": "app",
            "tenant_key": FAKE_FEISHU_TENANT})
    } else {
        json!({"id": message.sender, "id_type": "open_id", "sender_type": "user",
            "tenant_key": FAKE_FEISHU_TENANT})
    };
    let created = message.created_ms.to_string();
    json!({"message_id": message.message_id, "root_id": message.root_id.clone().unwrap_or_default(),
        "parent_id": message.parent_id.clone().unwrap_or_default(), "thread_id": "",
        "msg_type": message.msg_type, "create_time": created, "update_time": created,
        "deleted": false, "updated": message.updates > 0, "chat_id": message.chat_id,
        "sender": sender, "body": {"content": message.content.to_string()},
        "mentions": message.mentions, "upper_message_id": ""})
}

/// Checks `content` for `msg_type`; the parsed content, or the error Feishu would answer.
fn checked_content(
    state: &FeishuState,
    msg_type: &str,
    content: &Value,
) -> Result<Value, FeishuFailure> {
    let parsed: Value = content
        .as_str()
        .and_then(|c| serde_json::from_str(c).ok())
        .ok_or_else(|| {
            code(
                230001,
                "invalid message content: content is not a JSON string",
            )
        })?;
    let known = |field: &str| {
        parsed[field]
            .as_str()
            .is_some_and(|key| state.uploads.contains_key(key))
    };
    let valid = match msg_type {
        "text" => parsed["text"].is_string(),
        "interactive" => parsed["elements"].is_array() || parsed["body"].is_object(),
        "image" => known("image_key"),
        // Feishu plays only what was uploaded as `opus` as an audio message.
        "audio" => {
            known("file_key")
                && parsed["file_key"]
                    .as_str()
                    .and_then(|key| state.uploads.get(key))
                    .is_some_and(|file| file.kind == "opus")
        }
        "file" | "media" => known("file_key"),
        _ => false,
    };
    if !valid {
        return Err(code(230001, &format!("invalid {msg_type} content")));
    }
    Ok(parsed)
}

/// Creates the bot's message (once per `uuid`).
fn send(
    state: &mut FeishuState,
    chat: String,
    parent: Option<&FeishuMessage>,
    body: &Value,
) -> Response {
    let msg_type = body["msg_type"].as_str().unwrap_or("");
    let content = match checked_content(state, msg_type, &body["content"]) {
        Ok(content) => content,
        Err(refused) => return failure_response(refused),
    };
    if let Some(uuid) = body["uuid"].as_str() {
        let earlier = state.uuids.get(uuid).cloned();
        if let Some(message) = earlier.and_then(|id| state.message(&id).cloned()) {
            return success(message_json(&message));
        }
    }
    let message = FeishuMessage {
        message_id: state.id("om_"),
        chat_id: chat,
        root_id: parent.map(|p| p.root_id.clone().unwrap_or_else(|| p.message_id.clone())),
        parent_id: parent.map(|p| p.message_id.clone()),
        msg_type: msg_type.to_string(),
        content,
        from_bot: true,
        updates: 0,
        sender: FAKE_FEISHU_APP_ID.to_string(),
        mentions: Vec::new(),
        created_ms: super::now_ms(),
    };
    if let Some(uuid) = body["uuid"].as_str() {
        state
            .uuids
            .insert(uuid.to_string(), message.message_id.clone());
    }
    let answer = message_json(&message);
    state.messages.push(message);
    success(answer)
}

pub(crate) async fn create(
    State(shared): State<SharedFeishu>,
    Query(query): Query<Vec<(String, String)>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let chat = body["receive_id"].as_str().unwrap_or("").to_string();
    if let Err(refused) = begin(
        &shared,
        "im.message.create",
        &headers,
        body.clone(),
        Some(chat.clone()),
    ) {
        return failure_response(refused);
    }
    if !query
        .iter()
        .any(|(k, v)| k == "receive_id_type" && v == "chat_id")
    {
        return error(230001, "this fake knows receive_id_type=chat_id only");
    }
    send(&mut shared.lock(), chat, None, &body)
}

pub(crate) async fn reply(
    State(shared): State<SharedFeishu>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let chat = chat_of(&shared.lock(), &id);
    if let Err(refused) = begin(
        &shared,
        "im.message.reply",
        &headers,
        body.clone(),
        chat.clone(),
    ) {
        return failure_response(refused);
    }
    let mut state = shared.lock();
    let Some(parent) = state.message(&id).cloned() else {
        return error(230011, "The message was withdrawn.");
    };
    send(&mut state, parent.chat_id.clone(), Some(&parent), &body)
}

pub(crate) async fn patch_message(
    State(shared): State<SharedFeishu>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let chat = chat_of(&shared.lock(), &id);
    if let Err(refused) = begin(&shared, "im.message.patch", &headers, body.clone(), chat) {
        return failure_response(refused);
    }
    let mut state = shared.lock();
    let content = match checked_content(&state, "interactive", &body["content"]) {
        Ok(content) => content,
        Err(refused) => return failure_response(refused),
    };
    let Some(message) = state.messages.iter_mut().find(|m| m.message_id == id) else {
        return error(230011, "The message was withdrawn.");
    };
    if !message.from_bot || message.msg_type != "interactive" {
        return error(230001, "only cards the bot sent can be updated");
    }
    let updatable = |card: &Value| card["config"]["update_multi"] == true;
    if !updatable(&message.content) || !updatable(&content) {
        return error(
            230099,
            "update_multi must be true in the sent and the new card",
        );
    }
    message.content = content;
    message.updates += 1;
    success(json!({}))
}

pub(crate) async fn react(
    State(shared): State<SharedFeishu>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let chat = chat_of(&shared.lock(), &id);
    if let Err(refused) = begin(
        &shared,
        "im.message.reaction.create",
        &headers,
        body.clone(),
        chat,
    ) {
        return failure_response(refused);
    }
    let mut state = shared.lock();
    let Some(emoji) = body["reaction_type"]["emoji_type"].as_str() else {
        return error(231001, "reaction type is invalid.");
    };
    if state.message(&id).is_none() {
        return error(
            231003,
            "The message is not found, maybe not exist or deleted.",
        );
    }
    let reaction_id = state.id("ZCaCIjUBVVWSrm5L-3ZTw");
    state
        .reactions
        .push((id, emoji.to_string(), reaction_id.clone()));
    success(
        json!({"reaction_id": reaction_id, "operator": {"operator_id": FAKE_FEISHU_APP_ID,
        "operator_type": "app"}, "action_time": "1700000000000", "reaction_type": {"emoji_type": emoji}}),
    )
}

pub(crate) async fn unreact(
    State(shared): State<SharedFeishu>,
    Path((id, reaction)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let chat = chat_of(&shared.lock(), &id);
    if let Err(refused) = begin(
        &shared,
        "im.message.reaction.delete",
        &headers,
        Value::Null,
        chat,
    ) {
        return failure_response(refused);
    }
    let mut state = shared.lock();
    let Some(idx) = state
        .reactions
        .iter()
        .position(|(m, _, r)| *m == id && *r == reaction)
    else {
        return error(231010, "reaction not found");
    };
    let (_, emoji, reaction_id) = state.reactions.remove(idx);
    success(json!({"reaction_id": reaction_id, "reaction_type": {"emoji_type": emoji}}))
}

pub(crate) async fn resource(
    State(shared): State<SharedFeishu>,
    Path((id, key)): Path<(String, String)>,
    Query(query): Query<Vec<(String, String)>>,
    headers: HeaderMap,
) -> Response {
    let chat = chat_of(&shared.lock(), &id);
    let kind = query
        .iter()
        .find(|(k, _)| k == "type")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    let body = json!({"type": kind, "file_key": key});
    if let Err(refused) = begin(&shared, "im.message.resource", &headers, body, chat) {
        return failure_response(refused);
    }
    let state = shared.lock();
    let expected = if key.starts_with("img_") {
        "image"
    } else {
        "file"
    };
    if kind != expected {
        return error(
            234001,
            "Invalid request param: type does not match the resource.",
        );
    }
    match state.resources.get(&(id, key)) {
        Some(bytes) => (
            [("content-type", "application/octet-stream")],
            Bytes::from(bytes.clone()),
        )
            .into_response(),
        None => error(234003, "File not in msg."),
    }
}

/// The multipart form: text fields, and the file part's name and bytes.
async fn read_form(mut form: Multipart, file_field: &str) -> (Value, Option<(String, Vec<u8>)>) {
    let mut fields = serde_json::Map::new();
    let mut file = None;
    while let Ok(Some(field)) = form.next_field().await {
        let name = field.name().unwrap_or("").to_string();
        if name == file_field {
            let filename = field.file_name().unwrap_or("").to_string();
            let bytes = field.bytes().await.map(|b| b.to_vec()).unwrap_or_default();
            fields.insert(name, json!({"filename": filename, "size": bytes.len()}));
            file = Some((filename, bytes));
        } else {
            fields.insert(name, json!(field.text().await.unwrap_or_default()));
        }
    }
    (Value::Object(fields), file)
}

pub(crate) async fn upload_image(
    State(shared): State<SharedFeishu>,
    headers: HeaderMap,
    form: Multipart,
) -> Response {
    let (fields, file) = read_form(form, "image").await;
    if let Err(refused) = begin(&shared, "im.image.create", &headers, fields.clone(), None) {
        return failure_response(refused);
    }
    if fields["image_type"] != "message" {
        return error(234001, "Invalid request param: image_type.");
    }
    let Some((name, bytes)) = file.filter(|(_, b)| !b.is_empty()) else {
        return error(234001, "Invalid request param: image is empty.");
    };
    if bytes.len() > IMAGE_LIMIT {
        return error(234006, "The file size exceeds the limit.");
    }
    let mut state = shared.lock();
    let key = state.id("img_v3_");
    state.uploads.insert(
        key.clone(),
        UploadedFile {
            key: key.clone(),
            name,
            kind: "message".into(),
            bytes,
        },
    );
    success(json!({"image_key": key}))
}

pub(crate) async fn upload_file(
    State(shared): State<SharedFeishu>,
    headers: HeaderMap,
    form: Multipart,
) -> Response {
    let (fields, file) = read_form(form, "file").await;
    if let Err(refused) = begin(&shared, "im.file.create", &headers, fields.clone(), None) {
        return failure_response(refused);
    }
    let file_type = fields["file_type"].as_str().unwrap_or("").to_string();
    if !FILE_TYPES.contains(&file_type.as_str()) {
        return error(234001, "Invalid request param: file_type.");
    }
    let Some((_, bytes)) = file else {
        return error(234001, "Invalid request param: file is missing.");
    };
    if bytes.is_empty() {
        return error(234010, "File size can't be 0.");
    }
    if bytes.len() > FILE_LIMIT {
        return error(234006, "The file size exceeds the limit.");
    }
    let name = fields["file_name"].as_str().unwrap_or("").to_string();
    let mut state = shared.lock();
    let key = state.id("file_v3_");
    state.uploads.insert(
        key.clone(),
        UploadedFile {
            key: key.clone(),
            name,
            kind: file_type,
            bytes,
        },
    );
    success(json!({"file_key": key}))
}
