//! A fake Feishu open platform: the open API the adapter calls ([`api`]: token, bot info,
//! messages create/reply/patch, images and files upload, resource download, reactions, with
//! Feishu's answer shapes and error codes), and the event pushes ([`events`], [`delivery`]):
//! people's messages are queued and posted to the daemon's webhook, encrypted and signed, and
//! posted again until it answers 200, as Feishu retries.
//!
//! Tokens are `t-…` with `expire` seconds ([`FakeFeishu::set_token_lifetime`]); a call with an
//! unknown or expired token gets code 99991663 / 99991677, and [`FakeFeishu::expire_tokens`]
//! invalidates every token at once, as an app re-publication does.

mod api;
mod cards;
mod delivery;
mod events;
mod history;

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, patch, post};
use serde_json::{Value, json};
use tokio::sync::mpsc;

pub use delivery::UserMessage;
pub use events::{
    FeishuEventSender, FeishuSigning, bad_padding_body, encrypt_feishu_event, sign_feishu_event,
    url_verification,
};

pub const FAKE_FEISHU_APP_ID: &str = "cli_fake00000001";
pub const FAKE_FEISHU_APP_SECRET: &str = "fake-app-secret";
pub const FAKE_FEISHU_BOT_OPEN_ID: &str = "ou_fakebot000000000000000000000001";
pub const FAKE_FEISHU_BOT_NAME: &str = "Antler";
pub const FAKE_FEISHU_VERIFICATION_TOKEN: &str = "fake-verification-token";
pub const FAKE_FEISHU_ENCRYPT_KEY: &str = "fake-encrypt-key";
pub const FAKE_FEISHU_TENANT: &str = "tk_fake0001";

/// One open-API call the fake received.
#[derive(Clone, Debug)]
pub struct FeishuCall {
    /// `auth.tenant_access_token`, `bot.info`, `im.message.create`, `im.message.reply`,
    /// `im.message.patch`, `im.image.create`, `im.file.create`, `im.message.resource`,
    /// `im.message.reaction.create`, `im.message.reaction.delete`.
    pub method: String,
    /// The JSON body (multipart: the text fields and `{"filename", "size"}` for the file).
    pub body: Value,
    /// The chat the call concerns, when it concerns one.
    pub chat: Option<String>,
    pub at: Instant,
}

/// What the fake answers instead of the next call of a method.
#[derive(Clone, Debug)]
pub enum FeishuFailure {
    /// HTTP 429, `x-ogw-ratelimit-reset: seconds`, code 99991400.
    RateLimited(u64),
    /// HTTP 400 with this code and message.
    Code(i64, String),
}

/// A message in the fake, the bot's or a person's, as it reads now.
#[derive(Clone, Debug, PartialEq)]
pub struct FeishuMessage {
    pub message_id: String,
    pub chat_id: String,
    pub root_id: Option<String>,
    pub parent_id: Option<String>,
    pub msg_type: String,
    /// The content object (the JSON string Feishu carries, parsed).
    pub content: Value,
    pub from_bot: bool,
    /// How often the bot patched it.
    pub updates: usize,
    /// Who wrote it: a person's open_id, or an app's id (the bot's is `FAKE_FEISHU_APP_ID`).
    pub sender: String,
    /// `mentions` as the list API shows them (`{"key", "id", "id_type", "name"}`).
    pub mentions: Vec<Value>,
    /// `create_time`, in milliseconds since the epoch.
    pub created_ms: u128,
}

impl FeishuMessage {
    /// The text a person sees: a card's Markdown, a text's text, a file's name.
    pub fn text(&self) -> String {
        match self.msg_type.as_str() {
            "interactive" => self.content["elements"][0]["content"]
                .as_str()
                .unwrap_or("")
                .to_string(),
            "text" => self.content["text"].as_str().unwrap_or("").to_string(),
            other => format!("[{other}]"),
        }
    }
}

/// An image or file the bot uploaded.
#[derive(Clone, Debug)]
pub struct UploadedFile {
    pub key: String,
    pub name: String,
    /// `message` for images; the `file_type` for files.
    pub kind: String,
    pub bytes: Vec<u8>,
}

#[derive(Default)]
pub(crate) struct FeishuState {
    pub(crate) calls: Vec<FeishuCall>,
    pub(crate) failures: HashMap<String, VecDeque<FeishuFailure>>,
    /// Valid tokens and when each expires.
    pub(crate) tokens: HashMap<String, Instant>,
    pub(crate) token_lifetime: u64,
    pub(crate) messages: Vec<FeishuMessage>,
    pub(crate) uploads: HashMap<String, UploadedFile>,
    /// Files people sent: `(message_id, key)` → bytes.
    pub(crate) resources: HashMap<(String, String), Vec<u8>>,
    /// The bot's reactions now: `(message_id, emoji_type, reaction_id)`.
    pub(crate) reactions: Vec<(String, String, String)>,
    /// Send `uuid`s already used → the message they created.
    pub(crate) uuids: HashMap<String, String>,
    pub(crate) next_id: u64,
    pub(crate) webhook: Option<String>,
    pub(crate) encrypt_key: Option<String>,
    /// Every push delivered (answered 200): `(event_id, payload)`.
    pub(crate) delivered: Vec<(String, Value)>,
    /// Attempts answered otherwise: `(event_id, status)`.
    pub(crate) refused: Vec<(String, u16)>,
    pub(crate) event_ids: HashSet<String>,
    /// People the contact API knows: open_id → name.
    pub(crate) users: HashMap<String, String>,
    /// Ephemeral cards the bot sent: `(chat_id, open_id, card)`.
    pub(crate) ephemerals: Vec<(String, String, Value)>,
}

impl FeishuState {
    pub(crate) fn id(&mut self, prefix: &str) -> String {
        self.next_id += 1;
        format!("{prefix}{:032x}", self.next_id)
    }

    pub(crate) fn message(&self, message_id: &str) -> Option<&FeishuMessage> {
        self.messages.iter().find(|m| m.message_id == message_id)
    }
}

#[derive(Clone)]
pub(crate) struct SharedFeishu {
    pub(crate) state: Arc<Mutex<FeishuState>>,
    pub(crate) pushes: mpsc::UnboundedSender<delivery::Push>,
}

impl SharedFeishu {
    pub(crate) fn lock(&self) -> MutexGuard<'_, FeishuState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

pub struct FakeFeishu {
    addr: SocketAddr,
    shared: SharedFeishu,
}

impl FakeFeishu {
    /// A fake whose pushes are encrypted and signed with [`FAKE_FEISHU_ENCRYPT_KEY`].
    pub async fn start() -> Self {
        Self::start_with(Some(FAKE_FEISHU_ENCRYPT_KEY)).await
    }

    /// A fake with this Encrypt Key, or plain (token-checked only) pushes without one.
    pub async fn start_with(encrypt_key: Option<&str>) -> Self {
        let (pushes, queue) = mpsc::unbounded_channel();
        let shared = SharedFeishu {
            state: Arc::default(),
            pushes,
        };
        {
            let mut state = shared.lock();
            state.token_lifetime = 7200;
            state.encrypt_key = encrypt_key.map(str::to_string);
        }
        tokio::spawn(delivery::run(shared.clone(), queue));
        let messages = "/open-apis/im/v1/messages";
        let router = Router::new()
            .route(
                "/open-apis/auth/v3/tenant_access_token/internal",
                post(api::token),
            )
            .route("/open-apis/bot/v3/info", get(api::bot_info))
            .route("/open-apis/contact/v3/users/{id}", get(api::contact_user))
            .route(messages, post(api::create).get(history::list_messages))
            .route(&format!("{messages}/{{id}}"), patch(api::patch_message))
            .route(&format!("{messages}/{{id}}/reply"), post(api::reply))
            .route(&format!("{messages}/{{id}}/reactions"), post(api::react))
            .route(
                &format!("{messages}/{{id}}/reactions/{{reaction}}"),
                axum::routing::delete(api::unreact),
            )
            .route(
                &format!("{messages}/{{id}}/resources/{{key}}"),
                get(api::resource),
            )
            .route("/open-apis/ephemeral/v1/send", post(cards::ephemeral))
            .route("/open-apis/im/v1/images", post(api::upload_image))
            .route("/open-apis/im/v1/files", post(api::upload_file))
            .layer(DefaultBodyLimit::max(64 * 1024 * 1024))
            .with_state(shared.clone());
        let addr = crate::serve(router).await;
        Self { addr, shared }
    }

    /// `http://127.0.0.1:PORT`, for `channels.feishu.domain`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn encrypt_key(&self) -> Option<String> {
        self.shared.lock().encrypt_key.clone()
    }

    /// Where pushes go (the daemon's `…/channels/feishu/webhook`); queued pushes wait for it.
    pub fn set_webhook(&self, url: impl Into<String>) {
        self.shared.lock().webhook = Some(url.into());
    }

    /// A sender that posts to the current webhook, for tests that forge or tamper.
    pub fn sender(&self) -> FeishuEventSender {
        let state = self.shared.lock();
        FeishuEventSender::new(
            state.webhook.clone().unwrap_or_default(),
            state.encrypt_key.as_deref(),
        )
    }

    /// Tokens issued from now on live this long (Feishu: 7200 s).
    pub fn set_token_lifetime(&self, seconds: u64) {
        self.shared.lock().token_lifetime = seconds;
    }

    /// Every token issued so far stops working (99991663).
    pub fn expire_tokens(&self) {
        self.shared.lock().tokens.clear();
    }

    pub fn token_requests(&self) -> usize {
        self.calls_of("auth.tenant_access_token").len()
    }

    /// The next call of `method` fails this way.
    pub fn fail_next(&self, method: &str, failure: FeishuFailure) {
        self.shared
            .lock()
            .failures
            .entry(method.to_string())
            .or_default()
            .push_back(failure);
    }

    /// Someone the contact API answers for (`GET /open-apis/contact/v3/users/{open_id}`).
    pub fn add_user(&self, open_id: &str, name: &str) {
        self.shared
            .lock()
            .users
            .insert(open_id.to_string(), name.to_string());
    }

    pub fn calls(&self) -> Vec<FeishuCall> {
        self.shared.lock().calls.clone()
    }

    pub fn calls_of(&self, method: &str) -> Vec<FeishuCall> {
        self.calls()
            .into_iter()
            .filter(|call| call.method == method)
            .collect()
    }

    /// Every message, people's and the bot's, oldest first.
    pub fn messages(&self) -> Vec<FeishuMessage> {
        self.shared.lock().messages.clone()
    }

    /// A text message in a group the daemon gets no event for (an app without the permission
    /// to receive every group message hears only its mentions), from a person's open_id or,
    /// with `from_app`, another app's id; optionally replying to `parent`. Returns its id.
    pub fn said_without_event(
        &self,
        chat: &str,
        sender: &str,
        from_app: bool,
        text: &str,
        parent: Option<&str>,
    ) -> String {
        let mut state = self.shared.lock();
        let message_id = state.id("om_");
        let root_id = parent.map(|parent| {
            state
                .message(parent)
                .and_then(|p| p.root_id.clone())
                .unwrap_or_else(|| parent.to_string())
        });
        state.messages.push(FeishuMessage {
            message_id: message_id.clone(),
            chat_id: chat.to_string(),
            root_id,
            parent_id: parent.map(str::to_string),
            msg_type: "text".into(),
            content: json!({"text": text}),
            from_bot: from_app,
            updates: 0,
            sender: sender.to_string(),
            mentions: Vec::new(),
            created_ms: now_ms(),
        });
        message_id
    }

    pub fn message(&self, message_id: &str) -> Option<FeishuMessage> {
        self.shared.lock().message(message_id).cloned()
    }

    /// The bot's messages in `chat` as they read now, oldest first.
    pub fn chat_texts(&self, chat: &str) -> Vec<String> {
        self.bot_messages(chat)
            .iter()
            .map(FeishuMessage::text)
            .collect()
    }

    pub fn bot_messages(&self, chat: &str) -> Vec<FeishuMessage> {
        self.messages()
            .into_iter()
            .filter(|m| m.from_bot && m.chat_id == chat)
            .collect()
    }

    /// Names of the images and files the bot sent to `chat`.
    pub fn chat_files(&self, chat: &str) -> Vec<String> {
        let state = self.shared.lock();
        state
            .messages
            .iter()
            .filter(|m| m.from_bot && m.chat_id == chat)
            .filter_map(|m| {
                let key = m.content["image_key"]
                    .as_str()
                    .or(m.content["file_key"].as_str())?;
                state.uploads.get(key).map(|file| file.name.clone())
            })
            .collect()
    }

    pub fn uploads(&self) -> Vec<UploadedFile> {
        self.shared.lock().uploads.values().cloned().collect()
    }

    /// The bot's reactions now: `(message_id, emoji_type)`.
    pub fn reactions(&self) -> Vec<(String, String)> {
        let state = self.shared.lock();
        state
            .reactions
            .iter()
            .map(|(m, e, _)| (m.clone(), e.clone()))
            .collect()
    }

    /// Pushes the daemon answered 200: `(event_id, payload)`.
    pub fn delivered(&self) -> Vec<(String, Value)> {
        self.shared.lock().delivered.clone()
    }

    /// Waits until `check` holds, polling every 20 ms; panics after `limit`.
    pub async fn wait_for(&self, limit: Duration, what: &str, check: impl Fn(&Self) -> bool) {
        let deadline = Instant::now() + limit;
        while !check(self) {
            if Instant::now() > deadline {
                let calls: Vec<_> = self
                    .calls()
                    .into_iter()
                    .map(|c| (c.method, c.body))
                    .collect();
                panic!(
                    "fake feishu: timed out waiting for {what}; messages: {:#?}; calls: {calls:?}; refused pushes: {:?}",
                    self.messages(),
                    self.shared.lock().refused
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// The p2p chat of a person in this fake (`ou_…` → `oc_p2p_…`).
/// Now, in milliseconds since the epoch (Feishu's `create_time`).
pub(crate) fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default()
}

pub fn p2p_chat(open_id: &str) -> String {
    format!("oc_p2p_{}", open_id.trim_start_matches("ou_"))
}

/// A mention of the bot, as `message.mentions` carries it.
pub(crate) fn bot_mention(key: &str) -> Value {
    json!({"key": key, "id": {"union_id": "on_fakebot", "user_id": "", "open_id": FAKE_FEISHU_BOT_OPEN_ID},
        "name": FAKE_FEISHU_BOT_NAME, "tenant_key": FAKE_FEISHU_TENANT})
}
