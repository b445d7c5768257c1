//! A fake Telegram Bot API: scripted `getUpdates`, recorded sends/edits/uploads, injected
//! failures (429 with `retry_after`, 409, 5xx, 401).
//!
//! Routes imitate the real API: `POST /bot<TOKEN>/<method>` with method names matched
//! case-insensitively (teloxide sends `SendMessage`), JSON or multipart bodies, answers in the
//! `{"ok":true,"result":…}` envelope, and `GET /file/bot<TOKEN>/<path>` for downloads.
//! Inline keyboards and the clicks on them are in `telegram_buttons`.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::telegram_body::{TelegramUpload, read_body};

/// The token the fake accepts.
pub const FAKE_BOT_TOKEN: &str = "123456:TEST-TOKEN";
pub const FAKE_BOT_ID: u64 = 999;
pub const FAKE_BOT_USERNAME: &str = "AntlerBot";

/// One Bot API call the fake received.
#[derive(Clone, Debug)]
pub struct BotCall {
    /// Lowercase method name (`sendmessage`, `editmessagetext`, …).
    pub method: String,
    /// JSON body; for multipart the text fields, and files as `{"filename", "size"}`.
    pub body: Value,
    pub at: Instant,
}

/// An error the fake answers instead of the next call of a method.
#[derive(Clone, Debug)]
pub enum BotFailure {
    RetryAfter(u64),
    Conflict,
    ServerError,
    Unauthorized,
    /// 400 with this description.
    BadRequest(String),
}

#[derive(Default)]
pub(crate) struct FakeState {
    pub(crate) updates: Vec<Value>,
    /// Every update ever queued, so a confirmed one can be delivered again.
    pub(crate) history: Vec<Value>,
    pub(crate) next_update_id: i64,
    next_message_id: i64,
    calls: Vec<BotCall>,
    uploads: Vec<TelegramUpload>,
    failures: HashMap<String, VecDeque<BotFailure>>,
    always_conflict: bool,
    /// Answer 409 to a `getUpdates` that arrives while another is in flight, as Telegram does.
    one_poller: bool,
    /// `getUpdates` requests being answered now.
    polling: usize,
    /// `getUpdates` requests refused because another was in flight.
    overlaps: usize,
    pub(crate) chats: HashMap<i64, Value>,
    /// Current text of every message the bot sent, by `(chat, message id)`.
    pub(crate) texts: HashMap<(i64, i64), String>,
    /// The inline keyboard (`reply_markup`) each of those messages shows now.
    pub(crate) keyboards: HashMap<(i64, i64), Value>,
    files: HashMap<String, (String, Vec<u8>)>,
    /// The highest offset a poller confirmed.
    confirmed: i64,
}

#[derive(Clone, Default)]
pub(crate) struct Shared {
    state: Arc<Mutex<FakeState>>,
    pub(crate) news: Arc<Notify>,
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, FakeState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

pub struct FakeTelegram {
    addr: SocketAddr,
    pub(crate) shared: Shared,
}

impl FakeTelegram {
    pub async fn start() -> Self {
        let shared = Shared::default();
        {
            let mut state = shared.lock();
            state.next_update_id = 1;
            state.next_message_id = 10;
        }
        let router = Router::new()
            .route("/{token}/{method}", post(method))
            .route("/file/{token}/{*path}", get(download))
            .with_state(shared.clone());
        let addr = crate::serve(router).await;
        Self { addr, shared }
    }

    /// `http://127.0.0.1:PORT`, for `channels.telegram.api_url`.
    pub fn api_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Queues a text message from `user_id` in `chat` (a private chat when `chat == user_id`).
    /// Returns the message id.
    pub fn send_text(&self, chat: Value, user_id: i64, text: &str) -> i64 {
        self.send_message(chat, user_id, json!({"text": text}))
    }

    /// Queues a message with arbitrary extra fields (`caption`, `document`, `reply_to_message`,
    /// `message_thread_id`, …). Returns the message id.
    pub fn send_message(&self, chat: Value, user_id: i64, fields: Value) -> i64 {
        let mut state = self.shared.lock();
        let message_id = state.next_message_id;
        state.next_message_id += 1;
        let chat_id = chat["id"].as_i64().unwrap_or_default();
        state.chats.insert(chat_id, chat.clone());
        let mut message = json!({
            "message_id": message_id,
            "date": 1_700_000_000,
            "chat": chat,
            "from": {"id": user_id, "is_bot": false, "first_name": format!("User{user_id}")},
        });
        if let (Some(target), Some(extra)) = (message.as_object_mut(), fields.as_object()) {
            for (key, value) in extra {
                target.insert(key.clone(), value.clone());
            }
            // Telegram marks mentions and commands; a test may give its own entities.
            for (text, marks) in [("text", "entities"), ("caption", "caption_entities")] {
                let found = extra
                    .get(text)
                    .and_then(Value::as_str)
                    .map(crate::telegram_entities::entities)
                    .filter(|found| !found.is_empty());
                if let (Some(found), false) = (found, extra.contains_key(marks)) {
                    target.insert(marks.into(), Value::Array(found));
                }
            }
        }
        let update_id = state.next_update_id;
        state.next_update_id += 1;
        let update = json!({"update_id": update_id, "message": message});
        state.history.push(update.clone());
        state.updates.push(update);
        drop(state);
        self.shared.news.notify_waiters();
        message_id
    }

    /// Queues a raw update again under a new `update_id` (a platform redelivery).
    pub fn redeliver_last(&self) {
        let mut state = self.shared.lock();
        let Some(mut last) = state.history.last().cloned() else {
            return;
        };
        last["update_id"] = json!(state.next_update_id);
        state.next_update_id += 1;
        state.history.push(last.clone());
        state.updates.push(last);
        drop(state);
        self.shared.news.notify_waiters();
    }

    /// The JSON of the newest queued update (to replay it through a webhook).
    pub fn last_update(&self) -> Option<Value> {
        self.shared.lock().history.last().cloned()
    }

    /// Registers a downloadable file; returns its `file_id`.
    pub fn add_file(&self, name: &str, bytes: Vec<u8>) -> String {
        let mut state = self.shared.lock();
        let file_id = format!("FILE{}", state.files.len() + 1);
        state
            .files
            .insert(file_id.clone(), (format!("documents/{name}"), bytes));
        file_id
    }

    /// The next call of `method` (case-insensitive) fails this way.
    pub fn fail_next(&self, method: &str, failure: BotFailure) {
        self.shared
            .lock()
            .failures
            .entry(method.to_ascii_lowercase())
            .or_default()
            .push_back(failure);
    }

    /// Every `getUpdates` answers 409 (another poller holds the token).
    pub fn set_conflict(&self, on: bool) {
        self.shared.lock().always_conflict = on;
    }

    /// From now on a `getUpdates` that arrives while another is being answered gets Telegram's
    /// 409 ("terminated by other getUpdates request") and is counted in [`Self::overlaps`].
    pub fn refuse_concurrent_polls(&self) {
        self.shared.lock().one_poller = true;
    }

    /// How many `getUpdates` met another one in flight (see [`Self::refuse_concurrent_polls`]).
    pub fn overlaps(&self) -> usize {
        self.shared.lock().overlaps
    }

    pub fn calls(&self) -> Vec<BotCall> {
        self.shared.lock().calls.clone()
    }

    /// The files the bot uploaded, in order.
    pub fn uploads(&self) -> Vec<TelegramUpload> {
        self.shared.lock().uploads.clone()
    }

    /// Calls of one method (case-insensitive).
    pub fn calls_of(&self, method: &str) -> Vec<BotCall> {
        let method = method.to_ascii_lowercase();
        self.calls()
            .into_iter()
            .filter(|c| c.method == method)
            .collect()
    }

    /// The current text of a message the bot sent.
    pub fn text_of(&self, chat_id: i64, message_id: i64) -> Option<String> {
        self.shared
            .lock()
            .texts
            .get(&(chat_id, message_id))
            .cloned()
    }

    /// Texts of every message the bot sent to `chat_id`, oldest first, as they read now.
    pub fn chat_texts(&self, chat_id: i64) -> Vec<String> {
        let state = self.shared.lock();
        let mut texts: Vec<(&(i64, i64), &String)> = state
            .texts
            .iter()
            .filter(|((chat, _), _)| *chat == chat_id)
            .collect();
        texts.sort_by_key(|(key, _)| key.1);
        texts.into_iter().map(|(_, text)| text.clone()).collect()
    }

    /// The offset the last poll confirmed (every update below it is acknowledged).
    pub fn confirmed_offset(&self) -> i64 {
        self.shared.lock().confirmed
    }

    /// Whether a poll acknowledged every update queued so far. The adapter confirms an offset
    /// only after the daemon journalled (or refused) every update below it, so this is the
    /// event to wait for before asserting that some of them were ignored.
    pub fn all_confirmed(&self) -> bool {
        let state = self.shared.lock();
        state.confirmed >= state.next_update_id
    }

    /// Waits until `check` holds, polling every 20 ms; panics after `limit`.
    pub async fn wait_for(&self, limit: Duration, what: &str, check: impl Fn(&Self) -> bool) {
        let deadline = Instant::now() + limit;
        while !check(self) {
            if Instant::now() > deadline {
                panic!(
                    "fake telegram: timed out waiting for {what}; calls: {:#?}",
                    self.calls()
                        .iter()
                        .map(|c| (&c.method, &c.body))
                        .collect::<Vec<_>>()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// A private chat with `user_id`.
pub fn private_chat(user_id: i64) -> Value {
    json!({"id": user_id, "type": "private", "first_name": format!("User{user_id}")})
}

/// A supergroup (`forum: true` for topics).
pub fn group_chat(chat_id: i64, forum: bool) -> Value {
    json!({"id": chat_id, "type": "supergroup", "title": "Test group", "is_forum": forum})
}

fn ok(result: Value) -> Response {
    axum::Json(json!({"ok": true, "result": result})).into_response()
}

fn error(status: StatusCode, description: &str, parameters: Option<Value>) -> Response {
    let mut body = json!({"ok": false, "error_code": status.as_u16(), "description": description});
    if let Some(parameters) = parameters {
        body["parameters"] = parameters;
    }
    (status, axum::Json(body)).into_response()
}

fn failure_response(failure: BotFailure) -> Response {
    match failure {
        BotFailure::RetryAfter(secs) => error(
            StatusCode::TOO_MANY_REQUESTS,
            &format!("Too Many Requests: retry after {secs}"),
            Some(json!({"retry_after": secs})),
        ),
        BotFailure::Conflict => error(
            StatusCode::CONFLICT,
            "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running",
            None,
        ),
        BotFailure::ServerError => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Internal Server Error",
            None,
        ),
        BotFailure::Unauthorized => error(StatusCode::UNAUTHORIZED, "Unauthorized", None),
        BotFailure::BadRequest(description) => error(StatusCode::BAD_REQUEST, &description, None),
    }
}

fn as_i64(value: &Value) -> i64 {
    value
        .as_i64()
        .or_else(|| value.as_str().and_then(|s| s.parse().ok()))
        .unwrap_or_default()
}

async fn method(
    State(shared): State<Shared>,
    Path((token, method)): Path<(String, String)>,
    request: Request,
) -> Response {
    let method = method.to_ascii_lowercase();
    let (body, files) = read_body(request).await;
    let failure = {
        let mut state = shared.lock();
        for (field, filename, bytes) in files {
            state.uploads.push(TelegramUpload {
                method: method.clone(),
                field,
                filename,
                bytes,
            });
        }
        state.calls.push(BotCall {
            method: method.clone(),
            body: body.clone(),
            at: Instant::now(),
        });
        state
            .failures
            .get_mut(&method)
            .and_then(VecDeque::pop_front)
    };
    if token != format!("bot{FAKE_BOT_TOKEN}") {
        return error(StatusCode::UNAUTHORIZED, "Unauthorized", None);
    }
    if let Some(failure) = failure {
        return failure_response(failure);
    }
    match method.as_str() {
        "getme" => ok(json!({
            "id": FAKE_BOT_ID, "is_bot": true, "first_name": "Antler", "username": FAKE_BOT_USERNAME,
            "can_join_groups": true, "can_read_all_group_messages": false,
            "supports_inline_queries": false, "can_connect_to_business": false, "has_main_web_app": false
        })),
        "getupdates" => get_updates(shared, &body).await,
        "sendmessage" => {
            let content = crate::telegram_buttons::with_keyboard(
                &body,
                json!({"text": body["text"].clone()}),
            );
            sent_message(&shared, &body, content)
        }
        "editmessagetext" => edit_message(&shared, &body),
        "answercallbackquery" => ok(json!(true)),
        "sendphoto" => sent_message(
            &shared,
            &body,
            json!({"photo": [{"file_id": "P1", "file_unique_id": "UP1", "width": 1, "height": 1, "file_size": body["photo"]["size"].clone()}]}),
        ),
        "senddocument" => sent_message(
            &shared,
            &body,
            json!({"document": {"file_id": "D1", "file_unique_id": "UD1", "file_name": body["document"]["filename"].clone(), "file_size": body["document"]["size"].clone()}}),
        ),
        "sendvoice" => sent_message(
            &shared,
            &body,
            json!({"voice": {"file_id": "V1", "file_unique_id": "UV1", "duration": 1, "mime_type": "audio/ogg", "file_size": body["voice"]["size"].clone()}}),
        ),
        "sendaudio" => sent_message(
            &shared,
            &body,
            json!({"audio": {"file_id": "A1", "file_unique_id": "UA1", "duration": 1, "file_name": body["audio"]["filename"].clone(), "file_size": body["audio"]["size"].clone()}}),
        ),
        "sendchataction" | "setwebhook" | "deletewebhook" | "setmessagereaction" => ok(json!(true)),
        "getwebhookinfo" => {
            ok(json!({"url": "", "has_custom_certificate": false, "pending_update_count": 0}))
        }
        "getfile" => {
            let file_id = body["file_id"].as_str().unwrap_or_default().to_string();
            let state = shared.lock();
            match state.files.get(&file_id) {
                Some((path, bytes)) => ok(
                    json!({"file_id": file_id, "file_unique_id": format!("U{file_id}"), "file_size": bytes.len(), "file_path": path}),
                ),
                None => error(
                    StatusCode::BAD_REQUEST,
                    "Bad Request: invalid file_id",
                    None,
                ),
            }
        }
        _ => error(StatusCode::NOT_FOUND, "Not Found", None),
    }
}

/// Counts a `getUpdates` in flight until its answer is sent or its client goes away.
struct InFlight(Shared);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.lock().polling -= 1;
    }
}

async fn get_updates(shared: Shared, body: &Value) -> Response {
    let _in_flight = {
        let mut state = shared.lock();
        if state.one_poller && state.polling > 0 {
            state.overlaps += 1;
            drop(state);
            return failure_response(BotFailure::Conflict);
        }
        state.polling += 1;
        InFlight(shared.clone())
    };
    let offset = body["offset"].as_i64().unwrap_or(0);
    let timeout = body["timeout"].as_u64().unwrap_or(0);
    let wait = Duration::from_millis((timeout * 1000).min(250));
    loop {
        let notified = shared.news.notified();
        {
            let mut state = shared.lock();
            if state.always_conflict {
                drop(state);
                return failure_response(BotFailure::Conflict);
            }
            // Like Telegram: an offset confirms (and forgets) every update below it.
            state.confirmed = state.confirmed.max(offset);
            let confirmed = state.confirmed;
            state
                .updates
                .retain(|u| u["update_id"].as_i64().unwrap_or(0) >= confirmed);
            let ready: Vec<Value> = state.updates.clone();
            if !ready.is_empty() || wait.is_zero() {
                return ok(Value::Array(ready));
            }
        }
        if tokio::time::timeout(wait, notified).await.is_err() {
            return ok(json!([]));
        }
    }
}

fn sent_message(shared: &Shared, body: &Value, content: Value) -> Response {
    let chat_id = as_i64(&body["chat_id"]);
    let mut state = shared.lock();
    let message_id = state.next_message_id;
    state.next_message_id += 1;
    let chat = state
        .chats
        .get(&chat_id)
        .cloned()
        .unwrap_or_else(|| private_chat(chat_id));
    let text = body["text"]
        .as_str()
        .map(String::from)
        .unwrap_or_else(|| format!("[file {content}]"));
    state.texts.insert((chat_id, message_id), text);
    if let Some(keyboard) = content.get("reply_markup") {
        state
            .keyboards
            .insert((chat_id, message_id), keyboard.clone());
    }
    let mut message = json!({
        "message_id": message_id, "date": 1_700_000_001, "chat": chat,
        "from": {"id": FAKE_BOT_ID, "is_bot": true, "first_name": "Antler", "username": FAKE_BOT_USERNAME},
    });
    if let (Some(target), Some(extra)) = (message.as_object_mut(), content.as_object()) {
        for (key, value) in extra {
            target.insert(key.clone(), value.clone());
        }
    }
    ok(message)
}

fn edit_message(shared: &Shared, body: &Value) -> Response {
    let chat_id = as_i64(&body["chat_id"]);
    let message_id = as_i64(&body["message_id"]);
    let text = body["text"].as_str().unwrap_or_default().to_string();
    let mut state = shared.lock();
    match state.texts.get(&(chat_id, message_id)) {
        None => error(
            StatusCode::BAD_REQUEST,
            "Bad Request: message to edit not found",
            None,
        ),
        Some(current)
            if *current == text
                && state.keyboards.get(&(chat_id, message_id)) == body.get("reply_markup") =>
        {
            error(
                StatusCode::BAD_REQUEST,
                "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message",
                None,
            )
        }
        Some(_) => {
            state.texts.insert((chat_id, message_id), text.clone());
            // Like Telegram: an edit without `reply_markup` removes the inline keyboard.
            match body.get("reply_markup") {
                Some(keyboard) => state
                    .keyboards
                    .insert((chat_id, message_id), keyboard.clone()),
                None => state.keyboards.remove(&(chat_id, message_id)),
            };
            let chat = state
                .chats
                .get(&chat_id)
                .cloned()
                .unwrap_or_else(|| private_chat(chat_id));
            ok(json!({
                "message_id": message_id, "date": 1_700_000_001, "edit_date": 1_700_000_002, "chat": chat,
                "from": {"id": FAKE_BOT_ID, "is_bot": true, "first_name": "Antler", "username": FAKE_BOT_USERNAME},
                "text": text
            }))
        }
    }
}

async fn download(
    State(shared): State<Shared>,
    Path((_token, path)): Path<(String, String)>,
) -> Response {
    let state = shared.lock();
    match state
        .files
        .values()
        .find(|(file_path, _)| *file_path == path)
    {
        Some((_, bytes)) => (StatusCode::OK, bytes.clone()).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}
