//! The fake's REST endpoints (`/api/v10/...`), answering with Discord's JSON shapes and
//! rate-limit headers.

use std::time::Instant;

use axum::body::Bytes;
use axum::extract::{FromRequest, Multipart, Path, Request, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{
    BotMessage, DiscordCall, DiscordFailure, DiscordRoute, FAKE_DISCORD_BOT_ID,
    FAKE_DISCORD_BOT_NAME, FAKE_DISCORD_TOKEN, FakeChannel, SharedDiscord, discord_message,
    discord_user,
};

/// An answer with the headers Discord puts on every one.
pub(crate) fn answer(status: StatusCode, body: Value, bucket: &str) -> Response {
    let mut response = (status, axum::Json(body)).into_response();
    let headers = response.headers_mut();
    for (name, value) in [
        ("x-ratelimit-limit", "5".to_string()),
        ("x-ratelimit-remaining", "4".to_string()),
        ("x-ratelimit-reset-after", "1.000".to_string()),
        ("x-ratelimit-bucket", format!("fake-{bucket}")),
    ] {
        if let Ok(value) = value.parse() {
            headers.insert(name, value);
        }
    }
    response
}

fn no_content() -> Response {
    StatusCode::NO_CONTENT.into_response()
}

pub(crate) fn error(status: StatusCode, code: i64, message: &str) -> Response {
    answer(status, json!({"message": message, "code": code}), "error")
}

fn failure_response(failure: DiscordFailure) -> Response {
    match failure {
        DiscordFailure::RateLimited {
            retry_after,
            global,
        } => {
            let mut response = (
                StatusCode::TOO_MANY_REQUESTS,
                axum::Json(json!({"message": "You are being rate limited.", "retry_after": retry_after, "global": global})),
            )
                .into_response();
            let headers = response.headers_mut();
            let pairs = [
                ("retry-after", format!("{}", retry_after.ceil() as u64)),
                ("x-ratelimit-limit", "5".into()),
                ("x-ratelimit-remaining", "0".into()),
                ("x-ratelimit-reset-after", format!("{retry_after:.3}")),
                (
                    "x-ratelimit-scope",
                    if global { "global" } else { "user" }.into(),
                ),
                ("x-ratelimit-global", global.to_string()),
            ];
            for (name, value) in pairs {
                if let Ok(value) = value.parse() {
                    headers.insert(name, value);
                }
            }
            response
        }
        DiscordFailure::Error { status, code } => error(
            StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST),
            code,
            "scripted failure",
        ),
    }
}

/// Records the call; the refusal when it lacks the bot token or the route has a scripted
/// failure.
pub(crate) fn admit(
    shared: &SharedDiscord,
    method: &Method,
    path: &str,
    headers: &HeaderMap,
    body: Value,
    route: Option<DiscordRoute>,
) -> Option<Response> {
    let authorized = headers.get("authorization").and_then(|v| v.to_str().ok())
        == Some(format!("Bot {FAKE_DISCORD_TOKEN}").as_str());
    let mut state = shared.lock();
    let channel = path
        .strip_prefix("channels/")
        .map(|rest| rest.split('/').next().unwrap_or("").to_string());
    state.calls.push(DiscordCall {
        method: method.to_string(),
        path: path.to_string(),
        channel,
        body,
        at: Instant::now(),
    });
    if !authorized {
        return Some(error(StatusCode::UNAUTHORIZED, 0, "401: Unauthorized"));
    }
    if let Some(route) = route
        && let Some(failure) = state
            .failures
            .get_mut(&route)
            .and_then(|queue| queue.pop_front())
    {
        return Some(failure_response(failure));
    }
    None
}

fn gateway_url(shared: &SharedDiscord) -> String {
    shared.base().replace("http://", "ws://") + "/gateway"
}

pub(crate) async fn gateway(State(shared): State<SharedDiscord>) -> Response {
    answer(
        StatusCode::OK,
        json!({"url": gateway_url(&shared)}),
        "gateway",
    )
}

pub(crate) async fn gateway_bot(
    State(shared): State<SharedDiscord>,
    headers: HeaderMap,
) -> Response {
    if let Some(refused) = admit(
        &shared,
        &Method::GET,
        "gateway/bot",
        &headers,
        Value::Null,
        None,
    ) {
        return refused;
    }
    let limit =
        json!({"total": 1000, "remaining": 999, "reset_after": 14_400_000, "max_concurrency": 1});
    answer(
        StatusCode::OK,
        json!({"url": gateway_url(&shared), "shards": 1, "session_start_limit": limit}),
        "gateway",
    )
}

pub(crate) async fn me(State(shared): State<SharedDiscord>, headers: HeaderMap) -> Response {
    if let Some(refused) = admit(
        &shared,
        &Method::GET,
        "users/@me",
        &headers,
        Value::Null,
        None,
    ) {
        return refused;
    }
    let mut user = discord_user(FAKE_DISCORD_BOT_ID, true);
    user["username"] = json!(FAKE_DISCORD_BOT_NAME);
    answer(StatusCode::OK, user, "me")
}

fn channel_json(id: &str, channel: &FakeChannel) -> Value {
    json!({"id": id, "type": channel.kind, "guild_id": channel.guild, "parent_id": channel.parent,
        "name": channel.name, "last_message_id": null})
}

pub(crate) async fn channel(
    State(shared): State<SharedDiscord>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    if let Some(refused) = admit(
        &shared,
        &Method::GET,
        &format!("channels/{id}"),
        &headers,
        Value::Null,
        None,
    ) {
        return refused;
    }
    match shared.lock().channels.get(&id) {
        Some(channel) => answer(StatusCode::OK, channel_json(&id, channel), "channel"),
        None => error(StatusCode::NOT_FOUND, 10003, "Unknown Channel"),
    }
}

/// JSON, or multipart with `payload_json` and `files[n]`.
async fn message_body(request: Request) -> Result<(Value, Vec<(String, Vec<u8>)>), Box<Response>> {
    let multipart = request
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("multipart/form-data"));
    if !multipart {
        let bytes = Bytes::from_request(request, &())
            .await
            .map_err(|e| Box::new(e.into_response()))?;
        let body = serde_json::from_slice(&bytes).map_err(|_| {
            Box::new(error(
                StatusCode::BAD_REQUEST,
                50109,
                "The request body contains invalid JSON.",
            ))
        })?;
        return Ok((body, Vec::new()));
    }
    let mut form = Multipart::from_request(request, &())
        .await
        .map_err(|e| Box::new(e.into_response()))?;
    let (mut payload, mut files) = (Value::Null, Vec::new());
    while let Ok(Some(field)) = form.next_field().await {
        let name = field.name().unwrap_or("").to_string();
        let filename = field.file_name().map(String::from);
        let bytes = field
            .bytes()
            .await
            .map_err(|e| Box::new(e.into_response()))?;
        if name == "payload_json" {
            payload = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        } else if name.starts_with("files[") {
            files.push((filename.unwrap_or(name), bytes.to_vec()));
        }
    }
    Ok((payload, files))
}

pub(crate) async fn create_message(
    State(shared): State<SharedDiscord>,
    Path(channel): Path<String>,
    request: Request,
) -> Response {
    let headers = request.headers().clone();
    let (body, files) = match message_body(request).await {
        Ok(parts) => parts,
        Err(response) => return *response,
    };
    let path = format!("channels/{channel}/messages");
    if let Some(refused) = admit(
        &shared,
        &Method::POST,
        &path,
        &headers,
        body.clone(),
        Some(DiscordRoute::Send),
    ) {
        return refused;
    }
    let content = body["content"].as_str().unwrap_or("").to_string();
    if content.chars().count() > 2000 {
        return error(
            StatusCode::BAD_REQUEST,
            50035,
            "Invalid Form Body (content: Must be 2000 or fewer in length.)",
        );
    }
    if let Err(why) = super::components::check(&body["components"]) {
        return error(
            StatusCode::BAD_REQUEST,
            50035,
            &format!("Invalid Form Body (components: {why})"),
        );
    }
    if content.is_empty() && files.is_empty() {
        return error(
            StatusCode::BAD_REQUEST,
            50006,
            "Cannot send an empty message",
        );
    }
    let mut state = shared.lock();
    let Some(target) = state.channels.get(&channel).cloned() else {
        return error(StatusCode::NOT_FOUND, 10003, "Unknown Channel");
    };
    let reply_to = body["message_reference"]["message_id"]
        .as_str()
        .map(String::from);
    if let Some(replied) = &reply_to
        && state.message_channels.get(replied) != Some(&channel)
    {
        return error(
            StatusCode::BAD_REQUEST,
            50035,
            "Invalid Form Body (message_reference: Unknown message)",
        );
    }
    let id = state.snowflake();
    state.message_channels.insert(id.clone(), channel.clone());
    state.messages.push(BotMessage {
        id: id.clone(),
        channel: channel.clone(),
        content: content.clone(),
        reply_to,
        allowed_mentions: body["allowed_mentions"].clone(),
        files: files.clone(),
        edits: 0,
        components: super::components::rows(&body["components"]),
    });
    let mut message = discord_message(
        &id,
        &channel,
        target.guild.as_deref(),
        bot_author(),
        &content,
    );
    message["components"] = super::components::rows(&body["components"]);
    message["attachments"] = files
        .iter()
        .map(|(name, bytes)| json!({"id": format!("{id}0"), "filename": name, "size": bytes.len(), "url": format!("{}/attachments/{id}/{name}", shared.base()), "proxy_url": ""}))
        .collect();
    state.history.push(message.clone());
    let echo = state.echo_bot_messages;
    drop(state);
    if echo {
        super::gateway::dispatch(
            &shared,
            json!({"op": 0, "t": "MESSAGE_CREATE", "d": message.clone()}),
        );
    }
    answer(StatusCode::OK, message, &format!("send-{channel}"))
}

fn bot_author() -> Value {
    let mut user = discord_user(FAKE_DISCORD_BOT_ID, true);
    user["username"] = json!(FAKE_DISCORD_BOT_NAME);
    user
}

pub(crate) async fn edit_message(
    State(shared): State<SharedDiscord>,
    Path((channel, message)): Path<(String, String)>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let path = format!("channels/{channel}/messages/{message}");
    if let Some(refused) = admit(
        &shared,
        &method,
        &path,
        &headers,
        body.clone(),
        Some(DiscordRoute::Edit),
    ) {
        return refused;
    }
    if method != Method::PATCH {
        return error(StatusCode::METHOD_NOT_ALLOWED, 0, "405: Method Not Allowed");
    }
    let content = body["content"].as_str().unwrap_or("").to_string();
    if content.chars().count() > 2000 {
        return error(
            StatusCode::BAD_REQUEST,
            50035,
            "Invalid Form Body (content: Must be 2000 or fewer in length.)",
        );
    }
    if let Err(why) = super::components::check(&body["components"]) {
        return error(
            StatusCode::BAD_REQUEST,
            50035,
            &format!("Invalid Form Body (components: {why})"),
        );
    }
    let mut state = shared.lock();
    let Some(posted) = state
        .messages
        .iter_mut()
        .find(|m| m.id == message && m.channel == channel)
    else {
        return error(StatusCode::NOT_FOUND, 10008, "Unknown Message");
    };
    posted.content = content.clone();
    posted.edits += 1;
    // Fields left out of an edit keep their value.
    if body.get("components").is_some() {
        posted.components = super::components::rows(&body["components"]);
    }
    posted.allowed_mentions = body["allowed_mentions"].clone();
    let guild = state.channels.get(&channel).and_then(|c| c.guild.clone());
    let mut edited = discord_message(&message, &channel, guild.as_deref(), bot_author(), &content);
    edited["edited_timestamp"] = json!("2024-01-01T00:00:01.000000+00:00");
    answer(StatusCode::OK, edited, &format!("edit-{channel}"))
}

pub(crate) async fn typing(
    State(shared): State<SharedDiscord>,
    Path(channel): Path<String>,
    headers: HeaderMap,
) -> Response {
    if let Some(refused) = admit(
        &shared,
        &Method::POST,
        &format!("channels/{channel}/typing"),
        &headers,
        Value::Null,
        Some(DiscordRoute::Typing),
    ) {
        return refused;
    }
    if !shared.lock().channels.contains_key(&channel) {
        return error(StatusCode::NOT_FOUND, 10003, "Unknown Channel");
    }
    no_content()
}

pub(crate) async fn reaction(
    State(shared): State<SharedDiscord>,
    Path((channel, message, emoji)): Path<(String, String, String)>,
    method: Method,
    headers: HeaderMap,
) -> Response {
    let path = format!("channels/{channel}/messages/{message}/reactions/{emoji}/@me");
    if let Some(refused) = admit(
        &shared,
        &method,
        &path,
        &headers,
        Value::Null,
        Some(DiscordRoute::React),
    ) {
        return refused;
    }
    let mut state = shared.lock();
    if state.message_channels.get(&message) != Some(&channel) {
        return error(StatusCode::NOT_FOUND, 10008, "Unknown Message");
    }
    let key = (channel, message, emoji);
    if method == Method::DELETE {
        state.reactions.remove(&key);
    } else {
        state.reactions.insert(key);
    }
    no_content()
}

pub(crate) async fn start_thread(
    State(shared): State<SharedDiscord>,
    Path((channel, message)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let path = format!("channels/{channel}/messages/{message}/threads");
    if let Some(refused) = admit(
        &shared,
        &Method::POST,
        &path,
        &headers,
        body.clone(),
        Some(DiscordRoute::Thread),
    ) {
        return refused;
    }
    let name = body["name"].as_str().unwrap_or("").to_string();
    if name.is_empty() || name.chars().count() > 100 {
        return error(
            StatusCode::BAD_REQUEST,
            50035,
            "Invalid Form Body (name: Must be between 1 and 100 in length.)",
        );
    }
    let mut state = shared.lock();
    if state.message_channels.get(&message) != Some(&channel) {
        return error(StatusCode::NOT_FOUND, 10008, "Unknown Message");
    }
    if state.channels.contains_key(&message) {
        return error(
            StatusCode::BAD_REQUEST,
            160_004,
            "A thread has already been created for this message",
        );
    }
    let guild = state.channels.get(&channel).and_then(|c| c.guild.clone());
    let thread = FakeChannel {
        kind: 11,
        guild,
        parent: Some(channel.clone()),
        name: name.clone(),
    };
    let json = channel_json(&message, &thread);
    state.channels.insert(message.clone(), thread);
    state.threads.push((channel, message, name));
    answer(StatusCode::CREATED, json, "thread")
}

pub(crate) async fn commands(
    State(shared): State<SharedDiscord>,
    Path(app): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if let Some(refused) = admit(
        &shared,
        &Method::PUT,
        &format!("applications/{app}/commands"),
        &headers,
        body.clone(),
        None,
    ) {
        return refused;
    }
    shared.lock().commands = Some(body.clone());
    answer(StatusCode::OK, body, "commands")
}

pub(crate) async fn interaction_callback(
    State(shared): State<SharedDiscord>,
    Path((id, token)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    // Interaction callbacks are authorised by the token in the path, not the bot token.
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let mut state = shared.lock();
    state.calls.push(DiscordCall {
        method: "POST".into(),
        path: format!("interactions/{id}/{token}/callback"),
        channel: None,
        body: body.clone(),
        at: Instant::now(),
    });
    if state
        .interaction_answers
        .iter()
        .any(|(answered, _)| *answered == id)
    {
        return error(
            StatusCode::BAD_REQUEST,
            40060,
            "Interaction has already been acknowledged.",
        );
    }
    state.interaction_answers.push((id, body));
    no_content()
}

pub(crate) async fn attachment(
    State(shared): State<SharedDiscord>,
    Path((id, name)): Path<(String, String)>,
) -> Response {
    match shared.lock().attachments.get(&format!("{id}/{name}")) {
        Some(bytes) => bytes.clone().into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}
