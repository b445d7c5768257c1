//! A fake Slack: the Web API methods the adapter calls ([`api`]), a Socket Mode WebSocket
//! ([`socket`]) and an Events API client that signs like Slack ([`events`]).
//!
//! Web API routes are `GET|POST /api/<method>` with `Authorization: Bearer <token>`, answered
//! in Slack's envelope (`{"ok": true, …}` or `{"ok": false, "error": "…"}` with HTTP 200, and
//! 429 with `Retry-After`). `apps.connections.open` (app token only) hands out
//! `ws://127.0.0.1:PORT/socket/N`; the socket sends `hello`, then queued event envelopes to the
//! newest live connection, records every acknowledgement and when it came, and puts envelopes
//! a connection did not acknowledge before it closed back in the queue (as Slack retries them).

mod api;
mod blocks;
mod events;
mod history;
mod interactions;
mod socket;

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::{any, get, post};
use serde_json::{Value, json};
use tokio::sync::mpsc;

pub use events::{Signing, SlackEventsClient, sign_slack_request};

pub const FAKE_SLACK_BOT_TOKEN: &str = "xoxb-fake-bot-token";
pub const FAKE_SLACK_APP_TOKEN: &str = "xapp-fake-app-token";
pub const FAKE_SLACK_BOT_USER: &str = "UBOT0001";
pub const FAKE_SLACK_TEAM: &str = "T0FAKE01";

/// One Web API call the fake received.
#[derive(Clone, Debug)]
pub struct SlackCall {
    pub method: String,
    /// Query parameters and JSON or form body fields, merged.
    pub params: Value,
    pub at: Instant,
}

impl SlackCall {
    /// The conversation the call concerns (`channel` or `channel_id`).
    pub fn channel(&self) -> Option<&str> {
        self.params["channel"]
            .as_str()
            .or(self.params["channel_id"].as_str())
    }
}

/// What the fake answers instead of the next call of a method.
#[derive(Clone, Debug)]
pub enum SlackFailure {
    /// HTTP 429 with `Retry-After: seconds`.
    RateLimited(u64),
    /// HTTP 200 `{"ok": false, "error": code}`.
    Error(String),
}

/// A message the bot posted, as it reads now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PostedMessage {
    pub channel: String,
    pub ts: String,
    pub thread_ts: Option<String>,
    pub text: String,
    /// `chat.postEphemeral`: only this user sees it.
    pub ephemeral_to: Option<String>,
    /// The Block Kit blocks it shows now (`[]` for a text-only message).
    pub blocks: Vec<Value>,
}

impl PostedMessage {
    /// Its buttons, as `(label, value, style)` (`style` empty for the default look).
    pub fn buttons(&self) -> Vec<(String, String, String)> {
        interactions::buttons(&self.blocks)
            .into_iter()
            .map(|(_, button)| {
                let field = |key: &str| button[key].as_str().unwrap_or("").to_string();
                (
                    button["text"]["text"].as_str().unwrap_or("").to_string(),
                    field("value"),
                    field("style"),
                )
            })
            .collect()
    }
}

/// A file the bot shared with `files.completeUploadExternal`.
#[derive(Clone, Debug)]
pub struct SharedFile {
    pub file_id: String,
    pub title: String,
    pub channel: Option<String>,
    pub thread_ts: Option<String>,
    pub bytes: Vec<u8>,
}

/// One Socket Mode connection.
#[derive(Clone, Debug)]
pub struct ConnectionInfo {
    pub id: usize,
    pub opened_at: Instant,
    pub hello_at: Option<Instant>,
    pub closed_at: Option<Instant>,
    /// The client sent a close frame (as opposed to the connection just dropping).
    pub closed_by_client: bool,
}

/// One envelope sent over a socket.
#[derive(Clone, Debug)]
pub struct EnvelopeInfo {
    pub envelope_id: String,
    pub event_id: String,
    pub connection: usize,
    pub sent_at: Instant,
    pub acked_at: Option<Instant>,
}

pub(crate) enum SocketCommand {
    Send(Value),
    Disconnect { with_debug_info: bool },
    Freeze,
}

#[derive(Default)]
pub(crate) struct SlackState {
    pub(crate) calls: Vec<SlackCall>,
    pub(crate) failures: HashMap<String, VecDeque<SlackFailure>>,
    pub(crate) messages: Vec<PostedMessage>,
    pub(crate) reactions: Vec<(String, String, String)>,
    pub(crate) next_ts: u64,
    pub(crate) uploads: HashMap<String, (String, Option<Vec<u8>>)>,
    pub(crate) shared: Vec<SharedFile>,
    pub(crate) files: HashMap<String, (String, String, Vec<u8>)>,
    /// Names of the files the bot fetched, in order.
    pub(crate) downloaded: Vec<String>,
    pub(crate) pending: VecDeque<Value>,
    pub(crate) payloads: Vec<Value>,
    pub(crate) connections: Vec<ConnectionInfo>,
    pub(crate) live: HashMap<usize, mpsc::UnboundedSender<SocketCommand>>,
    pub(crate) envelopes: Vec<EnvelopeInfo>,
    /// Envelopes sent and not acknowledged: envelope id → (connection, envelope).
    pub(crate) inflight: HashMap<String, (usize, Value)>,
    pub(crate) next_envelope: u64,
    pub(crate) next_event: u64,
    pub(crate) echo_bot_messages: bool,
    /// Every message people and the bot wrote, as `conversations.history` returns them:
    /// (channel, message).
    pub(crate) history: Vec<(String, Value)>,
    /// People `users.info` knows: id → (display name, real name).
    pub(crate) users: HashMap<String, (String, String)>,
}

impl SlackState {
    /// A fresh `ts`, increasing like Slack's.
    pub(crate) fn ts(&mut self) -> String {
        self.next_ts += 1;
        format!("1700000000.{:06}", self.next_ts)
    }
}

#[derive(Clone, Default)]
pub(crate) struct SharedSlack {
    pub(crate) state: Arc<Mutex<SlackState>>,
    pub(crate) addr: Arc<Mutex<Option<SocketAddr>>>,
}

impl SharedSlack {
    pub(crate) fn lock(&self) -> MutexGuard<'_, SlackState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn base(&self) -> String {
        let addr = *self.addr.lock().unwrap_or_else(|p| p.into_inner());
        addr.map(|a| format!("http://{a}")).unwrap_or_default()
    }
}

pub struct FakeSlack {
    addr: SocketAddr,
    shared: SharedSlack,
}

impl FakeSlack {
    pub async fn start() -> Self {
        let shared = SharedSlack::default();
        shared.lock().echo_bot_messages = true;
        let router = Router::new()
            .route("/api/{method}", any(api::method))
            .route("/upload/{file_id}", post(api::upload))
            .route("/files/{file_id}/{name}", get(api::download))
            .route("/socket/{n}", get(socket::upgrade))
            .with_state(shared.clone());
        let addr = crate::serve(router).await;
        *shared.addr.lock().unwrap_or_else(|p| p.into_inner()) = Some(addr);
        Self { addr, shared }
    }

    /// `http://127.0.0.1:PORT/api`, for `channels.slack.api_url`.
    pub fn api_url(&self) -> String {
        format!("http://{}/api", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Queues an event callback around `event` for the socket; returns its `event_id`.
    pub fn push_event(&self, event: Value) -> String {
        socket::enqueue_event(&self.shared, event, true)
    }

    /// A person's message in their DM with the bot (`D` + user id); returns its `ts`.
    pub fn user_says_dm(&self, user: &str, text: &str) -> String {
        self.user_message(&dm_channel(user), "im", user, text, None, json!({}))
    }

    /// A person's message in a channel, optionally in a thread. A mention also produces the
    /// `app_mention` event Slack sends next to the `message` event. Returns its `ts`.
    pub fn user_says_in_channel(
        &self,
        channel: &str,
        user: &str,
        text: &str,
        mention: bool,
        thread_ts: Option<&str>,
    ) -> String {
        let text = if mention {
            format!("<@{FAKE_SLACK_BOT_USER}> {text}")
        } else {
            text.to_string()
        };
        let ts = self.user_message(channel, "channel", user, &text, thread_ts, json!({}));
        if mention {
            let mut event = json!({"type": "app_mention", "user": user, "text": text, "ts": ts,
                "channel": channel, "event_ts": ts, "team": FAKE_SLACK_TEAM,
                "blocks": blocks::rich_text_blocks(&text)});
            if let Some(thread) = thread_ts {
                event["thread_ts"] = json!(thread);
            }
            self.push_event(event);
        }
        ts
    }

    /// A person `users.info` describes, with their profile's display name and real name.
    pub fn add_user(&self, user: &str, display_name: &str, real_name: &str) {
        self.shared.lock().users.insert(
            user.to_string(),
            (display_name.to_string(), real_name.to_string()),
        );
    }

    /// A message event with extra fields (`files`, `subtype`, …); returns its `ts`. It
    /// carries the rich text (`blocks`) a Slack client makes of `text`, unless `extra` has its
    /// own.
    pub fn user_message(
        &self,
        channel: &str,
        channel_type: &str,
        user: &str,
        text: &str,
        thread_ts: Option<&str>,
        extra: Value,
    ) -> String {
        let ts = self.shared.lock().ts();
        let mut event = json!({"type": "message", "channel": channel, "channel_type": channel_type,
            "user": user, "text": text, "ts": ts, "event_ts": ts, "team": FAKE_SLACK_TEAM,
            "client_msg_id": format!("msg-{ts}"), "blocks": blocks::rich_text_blocks(text)});
        if let Some(thread) = thread_ts {
            event["thread_ts"] = json!(thread);
        }
        if let (Some(target), Some(fields)) = (event.as_object_mut(), extra.as_object()) {
            for (key, value) in fields {
                target.insert(key.clone(), value.clone());
            }
        }
        self.remember(channel, &event);
        self.push_event(event);
        ts
    }

    /// A message the app gets no event for (it is not subscribed to the channel's messages):
    /// only `conversations.history`/`replies` show it. `extra` adds fields (`files`,
    /// `bot_id`, …). Returns its `ts`.
    pub fn message_in_history(
        &self,
        channel: &str,
        user: &str,
        text: &str,
        thread_ts: Option<&str>,
        extra: Value,
    ) -> String {
        let ts = self.shared.lock().ts();
        let mut message = json!({"type": "message", "user": user, "text": text, "ts": ts,
            "team": FAKE_SLACK_TEAM, "client_msg_id": format!("msg-{ts}")});
        if let Some(thread) = thread_ts {
            message["thread_ts"] = json!(thread);
        }
        if let (Some(target), Some(fields)) = (message.as_object_mut(), extra.as_object()) {
            for (key, value) in fields {
                target.insert(key.clone(), value.clone());
            }
        }
        self.remember(channel, &message);
        ts
    }

    /// Keeps a message for `conversations.history`, as Slack stores it (no event fields).
    fn remember(&self, channel: &str, event: &Value) {
        let mut message = event.clone();
        if let Some(fields) = message.as_object_mut() {
            for key in ["channel", "channel_type", "event_ts"] {
                fields.remove(key);
            }
        }
        self.shared
            .lock()
            .history
            .push((channel.to_string(), message));
    }

    /// A slash command envelope (`/antler <text>`).
    pub fn slash_command(&self, channel: &str, user: &str, text: &str) {
        let trigger = {
            let mut state = self.shared.lock();
            state.next_event += 1;
            format!("{}.{}.trigger", state.next_event, 1_700_000_000)
        };
        let channel_name = if channel.starts_with('D') {
            "directmessage"
        } else {
            "general"
        };
        let payload = json!({"token": "verification-token", "team_id": FAKE_SLACK_TEAM,
            "team_domain": "fake", "channel_id": channel, "channel_name": channel_name,
            "user_id": user, "user_name": user.to_lowercase(), "command": "/antler", "text": text,
            "api_app_id": "A0FAKE01", "response_url": format!("{}/response", self.shared.base()),
            "trigger_id": trigger});
        socket::enqueue(&self.shared, "slash_commands", payload, 0);
    }

    /// The last event callback again, in a new envelope (Slack's redelivery of an envelope it
    /// saw no acknowledgement for).
    pub fn redeliver_last(&self) {
        let last = self.shared.lock().payloads.last().cloned();
        if let Some(payload) = last {
            socket::enqueue(&self.shared, "events_api", payload, 1);
        }
    }

    /// The newest event callback (to post it through the Events API instead).
    pub fn last_payload(&self) -> Option<Value> {
        self.shared.lock().payloads.last().cloned()
    }

    /// Sends `disconnect` (reason `refresh_requested`) on every live connection.
    pub fn disconnect_all(&self, with_debug_info: bool) {
        for sender in self.shared.lock().live.values() {
            let _ = sender.send(SocketCommand::Disconnect { with_debug_info });
        }
    }

    /// Live connections stop reading: no pongs, no acks (a half-dead network path).
    pub fn freeze_connections(&self) {
        for sender in self.shared.lock().live.values() {
            let _ = sender.send(SocketCommand::Freeze);
        }
    }

    /// The bot's own posts come back as message events (as for apps subscribed to DMs); on by
    /// default.
    pub fn set_echo_bot_messages(&self, on: bool) {
        self.shared.lock().echo_bot_messages = on;
    }

    pub fn connections(&self) -> Vec<ConnectionInfo> {
        self.shared.lock().connections.clone()
    }

    pub fn envelopes(&self) -> Vec<EnvelopeInfo> {
        self.shared.lock().envelopes.clone()
    }

    /// The next call of `method` fails this way.
    pub fn fail_next(&self, method: &str, failure: SlackFailure) {
        self.shared
            .lock()
            .failures
            .entry(method.to_string())
            .or_default()
            .push_back(failure);
    }

    pub fn calls(&self) -> Vec<SlackCall> {
        self.shared.lock().calls.clone()
    }

    pub fn calls_of(&self, method: &str) -> Vec<SlackCall> {
        self.calls()
            .into_iter()
            .filter(|call| call.method == method)
            .collect()
    }

    /// Every message the bot posted, oldest first, with its current text.
    pub fn messages(&self) -> Vec<PostedMessage> {
        self.shared.lock().messages.clone()
    }

    /// Current texts of the bot's (non-ephemeral) messages in `channel`, oldest first.
    pub fn channel_texts(&self, channel: &str) -> Vec<String> {
        self.messages()
            .into_iter()
            .filter(|m| m.channel == channel && m.ephemeral_to.is_none())
            .map(|m| m.text)
            .collect()
    }

    /// Reactions the bot has on messages now: `(channel, ts, name)`.
    pub fn reactions(&self) -> Vec<(String, String, String)> {
        self.shared.lock().reactions.clone()
    }

    pub fn shared_files(&self) -> Vec<SharedFile> {
        self.shared.lock().shared.clone()
    }

    /// Names of the files people shared that the bot fetched, in order.
    pub fn downloaded(&self) -> Vec<String> {
        self.shared.lock().downloaded.clone()
    }

    /// Registers a file people can share; returns the file object an event carries.
    pub fn add_file(&self, name: &str, mimetype: &str, bytes: Vec<u8>) -> Value {
        let mut state = self.shared.lock();
        let id = format!("F{:08}", state.files.len() + 1);
        let size = bytes.len();
        state
            .files
            .insert(id.clone(), (name.to_string(), mimetype.to_string(), bytes));
        let base = self.shared.base();
        json!({"id": id, "name": name, "title": name, "mimetype": mimetype, "filetype": "text",
            "size": size, "mode": "hosted", "is_external": false,
            "url_private": format!("{base}/files/{id}/{name}"),
            "url_private_download": format!("{base}/files/{id}/{name}")})
    }

    /// Waits until `check` holds, polling every 20 ms; panics after `limit`.
    pub async fn wait_for(&self, limit: Duration, what: &str, check: impl Fn(&Self) -> bool) {
        let deadline = Instant::now() + limit;
        while !check(self) {
            if Instant::now() > deadline {
                panic!(
                    "fake slack: timed out waiting for {what}; messages: {:#?}; calls: {:?}",
                    self.messages(),
                    self.calls()
                        .iter()
                        .map(|c| (&c.method, &c.params))
                        .collect::<Vec<_>>()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// The DM channel of `user` in this fake (`U…` → `D…`).
pub fn dm_channel(user: &str) -> String {
    format!("D{}", user.trim_start_matches('U'))
}
