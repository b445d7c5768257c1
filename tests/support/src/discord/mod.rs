//! A fake Discord: the REST endpoints the adapter uses ([`rest`]) under `/api/v10`, and a
//! gateway WebSocket ([`gateway`]) at `/gateway`.
//!
//! REST answers have Discord's shapes and headers: `Authorization: Bot <token>` is required
//! (401 otherwise), every answer carries `X-RateLimit-*` headers, a scripted 429 has the JSON
//! body `{"message", "retry_after", "global"}` with `Retry-After`, and errors are
//! `{"message", "code"}` (a second thread on one message is 400 code 160004, a post to a channel
//! that does not exist — e.g. a thread not created yet — is 404 code 10003). The gateway speaks
//! version 10: HELLO (op 10) → IDENTIFY (op 2) → READY → dispatches (op 0), heartbeats (op 1 →
//! op 11), RESUME (op 6) → replayed events and RESUMED, and on request RECONNECT (op 7),
//! INVALID_SESSION (op 9) or a close code (4004, 4014). Once IDENTIFY asked for
//! `compress: true`, every frame is a binary frame holding one whole zlib stream, as serenity
//! decodes them.

mod components;
mod gateway;
mod history;
mod rest;

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::{any, get, post, put};
use serde_json::{Value, json};
use tokio::sync::mpsc;

pub const FAKE_DISCORD_TOKEN: &str = "fake.discord.token";
pub const FAKE_DISCORD_BOT_ID: &str = "100000000000000001";
pub const FAKE_DISCORD_BOT_NAME: &str = "antlerbot";
pub const FAKE_DISCORD_GUILD: &str = "900000000000000001";

/// One REST call the fake received.
#[derive(Clone, Debug)]
pub struct DiscordCall {
    pub method: String,
    /// The path below `/api/v10/`.
    pub path: String,
    /// The channel the call concerns (`channels/{id}/…`).
    pub channel: Option<String>,
    /// JSON body, or the `payload_json` of a multipart body.
    pub body: Value,
    pub at: Instant,
}

/// Which calls a scripted failure applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DiscordRoute {
    /// `POST channels/{id}/messages`
    Send,
    /// `PATCH channels/{id}/messages/{id}`
    Edit,
    Typing,
    React,
    Thread,
    /// `GET channels/{id}/messages`
    History,
}

/// What the fake answers instead of the next call of a route.
#[derive(Clone, Debug)]
pub enum DiscordFailure {
    /// HTTP 429 asking to wait `retry_after` seconds; `global` for the bot-wide limit.
    RateLimited { retry_after: f64, global: bool },
    /// Another HTTP error with Discord's JSON code.
    Error { status: u16, code: i64 },
}

/// A message the bot posted, as it reads now.
#[derive(Clone, Debug, PartialEq)]
pub struct BotMessage {
    pub id: String,
    pub channel: String,
    pub content: String,
    /// The message it replies to (`message_reference.message_id`).
    pub reply_to: Option<String>,
    /// `allowed_mentions` as sent.
    pub allowed_mentions: Value,
    /// Uploaded files: (filename, bytes).
    pub files: Vec<(String, Vec<u8>)>,
    pub edits: usize,
    /// The action rows it shows now (`[]` without components).
    pub components: Value,
}

/// A channel the fake knows.
#[derive(Clone, Debug)]
pub(crate) struct FakeChannel {
    pub(crate) kind: u64,
    pub(crate) guild: Option<String>,
    pub(crate) parent: Option<String>,
    pub(crate) name: String,
}

/// One gateway connection.
#[derive(Clone, Debug, Default)]
pub struct GatewaySession {
    pub connection: usize,
    pub identified: bool,
    pub resumed: bool,
    /// The IDENTIFY payload's `d` (token blanked).
    pub identify: Value,
    pub closed: bool,
}

pub(crate) enum GatewayCommand {
    /// A dispatch with its sequence number.
    Send(Value),
    Reconnect,
    InvalidSession,
    Close(u16),
}

#[derive(Default)]
pub(crate) struct DiscordState {
    pub(crate) calls: Vec<DiscordCall>,
    pub(crate) failures: HashMap<DiscordRoute, VecDeque<DiscordFailure>>,
    pub(crate) channels: HashMap<String, FakeChannel>,
    pub(crate) messages: Vec<BotMessage>,
    /// Every message id with its channel (people's and the bot's).
    pub(crate) message_channels: HashMap<String, String>,
    pub(crate) threads: Vec<(String, String, String)>,
    pub(crate) reactions: HashSet<(String, String, String)>,
    pub(crate) attachments: HashMap<String, Vec<u8>>,
    pub(crate) commands: Option<Value>,
    pub(crate) interaction_answers: Vec<(String, Value)>,
    /// Button clicks sent: interaction id → (token, the INTERACTION_CREATE's `d`).
    pub(crate) clicks: HashMap<String, (String, Value)>,
    /// Follow-ups posted through interaction tokens: (token, body).
    pub(crate) followups: Vec<(String, Value)>,
    pub(crate) next_id: u64,
    pub(crate) echo_bot_messages: bool,
    /// Every message people and the bot wrote, as `GET channels/{id}/messages` lists them.
    pub(crate) history: Vec<Value>,
    /// Channels where the bot lacks Read Message History.
    pub(crate) no_history: HashSet<String>,
    // Gateway.
    pub(crate) sessions: Vec<GatewaySession>,
    pub(crate) live: Option<(usize, mpsc::UnboundedSender<GatewayCommand>)>,
    pub(crate) session_id: Option<String>,
    pub(crate) seq: u64,
    /// Dispatches of the current session: (seq, frame), for RESUME.
    pub(crate) sent: Vec<(u64, Value)>,
    /// Dispatches waiting for a ready session.
    pub(crate) pending: VecDeque<Value>,
    pub(crate) replay_last_on_resume: bool,
    pub(crate) close_next_identify: Option<u16>,
}

impl DiscordState {
    /// A fresh snowflake, increasing.
    pub(crate) fn snowflake(&mut self) -> String {
        self.next_id += 1;
        format!("{}", 1_200_000_000_000_000_000_u64 + self.next_id)
    }
}

#[derive(Clone, Default)]
pub(crate) struct SharedDiscord {
    pub(crate) state: Arc<Mutex<DiscordState>>,
    pub(crate) addr: Arc<Mutex<Option<SocketAddr>>>,
}

impl SharedDiscord {
    pub(crate) fn lock(&self) -> MutexGuard<'_, DiscordState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn base(&self) -> String {
        let addr = *self.addr.lock().unwrap_or_else(|p| p.into_inner());
        addr.map(|a| format!("http://{a}")).unwrap_or_default()
    }
}

pub struct FakeDiscord {
    addr: SocketAddr,
    shared: SharedDiscord,
}

/// A Discord user object.
pub fn discord_user(id: &str, bot: bool) -> Value {
    json!({"id": id, "username": format!("user{id}"), "global_name": format!("User {id}"),
        "discriminator": "0", "avatar": null, "bot": bot})
}

/// A message object as Discord sends it (MESSAGE_CREATE's `d`, or a REST answer).
pub fn discord_message(
    id: &str,
    channel: &str,
    guild: Option<&str>,
    author: Value,
    content: &str,
) -> Value {
    let mut message = json!({"id": id, "channel_id": channel, "author": author, "content": content,
        "timestamp": "2024-01-01T00:00:00.000000+00:00", "edited_timestamp": null, "tts": false,
        "mention_everyone": false, "mentions": [], "mention_roles": [], "attachments": [],
        "embeds": [], "pinned": false, "type": 0, "flags": 0, "components": []});
    if let Some(guild) = guild {
        message["guild_id"] = json!(guild);
    }
    message
}

impl FakeDiscord {
    pub async fn start() -> Self {
        let shared = SharedDiscord::default();
        shared.lock().echo_bot_messages = true;
        let router = Router::new()
            .route("/gateway", get(gateway::upgrade))
            .route("/api/v10/gateway", get(rest::gateway))
            .route("/api/v10/gateway/bot", get(rest::gateway_bot))
            .route("/api/v10/users/@me", get(rest::me))
            .route("/api/v10/channels/{channel}", get(rest::channel))
            .route(
                "/api/v10/channels/{channel}/messages",
                post(rest::create_message).get(history::list_messages),
            )
            .route(
                "/api/v10/channels/{channel}/messages/{message}",
                any(rest::edit_message),
            )
            .route("/api/v10/channels/{channel}/typing", post(rest::typing))
            .route(
                "/api/v10/channels/{channel}/messages/{message}/reactions/{emoji}/@me",
                any(rest::reaction),
            )
            .route(
                "/api/v10/channels/{channel}/messages/{message}/threads",
                post(rest::start_thread),
            )
            .route("/api/v10/applications/{app}/commands", put(rest::commands))
            .route(
                "/api/v10/interactions/{id}/{token}/callback",
                post(rest::interaction_callback),
            )
            .route(
                "/api/v10/webhooks/{app}/{token}",
                post(components::followup),
            )
            .route("/attachments/{id}/{name}", get(rest::attachment))
            .with_state(shared.clone());
        let addr = crate::serve(router).await;
        *shared.addr.lock().unwrap_or_else(|p| p.into_inner()) = Some(addr);
        Self { addr, shared }
    }

    /// `http://127.0.0.1:PORT`, for `channels.discord.api_url`.
    pub fn api_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A text channel of the fake guild (people post in it, the bot may start threads on it).
    pub fn add_text_channel(&self, channel: &str) {
        self.shared.lock().channels.insert(
            channel.to_string(),
            FakeChannel {
                kind: 0,
                guild: Some(FAKE_DISCORD_GUILD.into()),
                parent: None,
                name: format!("channel-{channel}"),
            },
        );
    }

    /// A thread people started in `parent` (not on a message of the bot's).
    pub fn add_thread(&self, thread: &str, parent: &str) {
        self.shared.lock().channels.insert(
            thread.to_string(),
            FakeChannel {
                kind: 11,
                guild: Some(FAKE_DISCORD_GUILD.into()),
                parent: Some(parent.into()),
                name: "a thread".into(),
            },
        );
    }

    /// The DM channel of `user` in this fake (`5` + the user id).
    pub fn dm_channel(user: &str) -> String {
        format!("5{user}")
    }

    /// Opens the DM channel between `user` and the bot; returns its id.
    pub fn open_dm(&self, user: &str) -> String {
        let channel = Self::dm_channel(user);
        self.shared
            .lock()
            .channels
            .entry(channel.clone())
            .or_insert(FakeChannel {
                kind: 1,
                guild: None,
                parent: None,
                name: String::new(),
            });
        channel
    }

    /// A person's DM to the bot; returns the message id.
    pub fn user_says_dm(&self, user: &str, text: &str) -> String {
        let channel = self.open_dm(user);
        self.user_message(&channel, discord_user(user, false), text, json!({}))
    }

    /// A person's message in a guild channel or thread, mentioning the bot or not.
    pub fn user_says_in_channel(
        &self,
        channel: &str,
        user: &str,
        text: &str,
        mention: bool,
    ) -> String {
        let (content, extra) = if mention {
            (
                format!("<@{FAKE_DISCORD_BOT_ID}> {text}"),
                json!({"mentions": [discord_user(FAKE_DISCORD_BOT_ID, true)]}),
            )
        } else {
            (text.to_string(), json!({}))
        };
        self.user_message(channel, discord_user(user, false), &content, extra)
    }

    /// A MESSAGE_CREATE from `author` in `channel` with extra fields (`attachments`,
    /// `referenced_message`, …); the guild is the channel's. Returns the message id.
    pub fn user_message(
        &self,
        channel: &str,
        author: Value,
        content: &str,
        extra: Value,
    ) -> String {
        let (id, message) = {
            let mut state = self.shared.lock();
            let id = state.snowflake();
            state
                .message_channels
                .insert(id.clone(), channel.to_string());
            let guild = state.channels.get(channel).and_then(|c| c.guild.clone());
            let mut message = discord_message(&id, channel, guild.as_deref(), author, content);
            if let (Some(target), Some(fields)) = (message.as_object_mut(), extra.as_object()) {
                for (key, value) in fields {
                    target.insert(key.clone(), value.clone());
                }
            }
            state.history.push(message.clone());
            (id, message)
        };
        self.dispatch("MESSAGE_CREATE", message);
        id
    }

    /// A message the bot gets no event for (no Message Content intent for it, or sent while
    /// it was away): only `GET channels/{id}/messages` lists it. Returns its id.
    pub fn message_in_history(
        &self,
        channel: &str,
        author: Value,
        content: &str,
        extra: Value,
    ) -> String {
        let mut state = self.shared.lock();
        let id = state.snowflake();
        state
            .message_channels
            .insert(id.clone(), channel.to_string());
        let guild = state.channels.get(channel).and_then(|c| c.guild.clone());
        let mut message = discord_message(&id, channel, guild.as_deref(), author, content);
        if let (Some(target), Some(fields)) = (message.as_object_mut(), extra.as_object()) {
            for (key, value) in fields {
                target.insert(key.clone(), value.clone());
            }
        }
        state.history.push(message);
        id
    }

    /// The bot loses Read Message History in `channel`: listing it answers no messages.
    pub fn deny_history(&self, channel: &str) {
        self.shared.lock().no_history.insert(channel.to_string());
    }

    /// A file people can attach; returns the attachment object a message carries.
    pub fn add_attachment(&self, filename: &str, content_type: &str, bytes: Vec<u8>) -> Value {
        let mut state = self.shared.lock();
        let id = state.snowflake();
        let size = bytes.len();
        state.attachments.insert(format!("{id}/{filename}"), bytes);
        let url = format!("{}/attachments/{id}/{filename}", self.shared.base());
        json!({"id": id, "filename": filename, "size": size, "url": url, "proxy_url": url,
            "content_type": content_type})
    }

    /// Sends a dispatch (`t`, `d`) to the live session, or queues it until one is ready.
    pub fn dispatch(&self, event: &str, data: Value) {
        gateway::dispatch(&self.shared, json!({"op": 0, "t": event, "d": data}));
    }

    /// The last person's MESSAGE_CREATE again, as a new dispatch (a duplicate delivery).
    pub fn redeliver_last(&self) {
        let last = {
            let state = self.shared.lock();
            state
                .sent
                .iter()
                .rev()
                .map(|(_, frame)| frame)
                .find(|f| f["t"] == "MESSAGE_CREATE" && f["d"]["author"]["bot"] != true)
                .map(|frame| frame["d"].clone())
        };
        if let Some(message) = last {
            self.dispatch("MESSAGE_CREATE", message);
        }
    }

    /// The gateway asks the client to reconnect (op 7); with `replay_last`, the RESUME that
    /// follows re-sends the last MESSAGE_CREATE as if the client had missed it.
    pub fn reconnect(&self, replay_last: bool) {
        let mut state = self.shared.lock();
        state.replay_last_on_resume = replay_last;
        if let Some((_, live)) = &state.live {
            let _ = live.send(GatewayCommand::Reconnect);
        }
    }

    /// INVALID_SESSION (op 9, not resumable): the client must IDENTIFY again.
    pub fn invalidate_session(&self) {
        let state = self.shared.lock();
        if let Some((_, live)) = &state.live {
            let _ = live.send(GatewayCommand::InvalidSession);
        }
    }

    /// Closes the live connection with `code` (4000 lets the client resume, 4004 and 4014 end
    /// its session for good).
    pub fn close_connection(&self, code: u16) {
        let state = self.shared.lock();
        if let Some((_, live)) = &state.live {
            let _ = live.send(GatewayCommand::Close(code));
        }
    }

    /// The next IDENTIFY is answered by closing with `code` (4004 bad token, 4014 disallowed
    /// intents).
    pub fn close_next_identify(&self, code: u16) {
        self.shared.lock().close_next_identify = Some(code);
    }

    /// The bot's own posts come back as MESSAGE_CREATE (as Discord does); on by default.
    pub fn set_echo_bot_messages(&self, on: bool) {
        self.shared.lock().echo_bot_messages = on;
    }

    pub fn fail_next(&self, route: DiscordRoute, failure: DiscordFailure) {
        self.shared
            .lock()
            .failures
            .entry(route)
            .or_default()
            .push_back(failure);
    }

    pub fn calls(&self) -> Vec<DiscordCall> {
        self.shared.lock().calls.clone()
    }

    pub fn sessions(&self) -> Vec<GatewaySession> {
        self.shared.lock().sessions.clone()
    }

    /// Every message the bot posted, oldest first, as it reads now.
    pub fn messages(&self) -> Vec<BotMessage> {
        self.shared.lock().messages.clone()
    }

    /// The current texts of the bot's messages in `channel`, oldest first.
    pub fn channel_texts(&self, channel: &str) -> Vec<String> {
        self.messages()
            .into_iter()
            .filter(|m| m.channel == channel)
            .map(|m| m.content)
            .collect()
    }

    /// Threads the bot started: (parent channel, message id = thread id, name).
    pub fn threads(&self) -> Vec<(String, String, String)> {
        self.shared.lock().threads.clone()
    }

    /// The bot's reactions now: (channel, message, emoji).
    pub fn reactions(&self) -> Vec<(String, String, String)> {
        let mut reactions: Vec<_> = self.shared.lock().reactions.iter().cloned().collect();
        reactions.sort();
        reactions
    }

    /// Answers to interactions: (interaction id, callback body).
    pub fn interaction_answers(&self) -> Vec<(String, Value)> {
        self.shared.lock().interaction_answers.clone()
    }

    /// The slash commands the bot registered last.
    pub fn registered_commands(&self) -> Option<Value> {
        self.shared.lock().commands.clone()
    }

    /// Waits until `check` holds, polling every 20 ms; panics after `limit`.
    pub async fn wait_for(&self, limit: Duration, what: &str, check: impl Fn(&Self) -> bool) {
        let deadline = Instant::now() + limit;
        while !check(self) {
            if Instant::now() > deadline {
                let calls: Vec<_> = self
                    .calls()
                    .iter()
                    .map(|c| format!("{} {} {}", c.method, c.path, c.body))
                    .collect();
                panic!(
                    "fake discord: timed out waiting for {what}; messages: {:#?}; calls: {calls:#?}",
                    self.messages()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
