//! Test fakes that speak real wire protocols on 127.0.0.1 (OpenAI Chat Completions, Anthropic
//! Messages, Telegram Bot API, Slack Web API / Socket Mode / Events API, Discord REST and gateway,
//! Feishu open API and event pushes, Docker Engine API), so tests drive the real clients end to
//! end.
//!
//! ```
//! # async fn demo() {
//! use antler_test_support::{FakeOpenAi, Reply};
//! use serde_json::json;
//!
//! let fake = FakeOpenAi::start().await;
//! fake.push(Reply::tool_call("read_file", json!({"path": "a.txt"})).split_args(4))
//!     .push(Reply::text("done"));
//! // point models[].base_url at fake.base_url(), run the agent, then:
//! assert_eq!(fake.requests().len(), 2);
//! assert_eq!(fake.unscripted_calls(), 0);
//! # }
//! ```
//!
//! A request that finds the script empty is a bug in the test: the fake answers it with HTTP
//! 500 *and* counts it, and dropping the fake then panics (fails the test) unless the test opted
//! in with `allow_unscripted()`.
//!
//! The model fakes answer antler's background calls, a thread's title and a memory update (made
//! with the defaults by the run's own model, after the answer), with a neutral reply (an empty
//! title, an update that changes nothing) and log them apart (`background_requests()`), so they
//! neither take a scripted reply nor count as unscripted. A test about them calls
//! `script_titles()` or `script_memory_updates()` and scripts them like any other call.
//!
//! [`bench`] runs the daemon binary (by path) against these fakes: the operational benchmarks.
//!
//! This crate must not depend on `antler`: it only knows the wire formats.

// Test support: a fake that cannot start fails the test that needs it (unwrap), and its server
// tasks live as long as the test runtime that spawned them.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::Router;
use axum::http::HeaderMap;
use serde_json::Value;

mod anthropic;
mod auth_server;
pub mod bench;
mod discord;
mod docker;
pub mod documents;
mod example_daemon;
mod feishu;
mod mcp_server;
mod oauth;
mod openai;
mod otel_collector;
pub mod postgres;
mod reply;
mod slack;
mod speech;
mod sse;
mod telegram;
mod telegram_body;
mod telegram_buttons;
mod telegram_entities;
mod template;
mod transcription;
mod webhook_sign;

pub use anthropic::{FAKE_SIGNATURE, FakeAnthropic};
pub use auth_server::{AuthRequest, AuthServerOptions, FakeAuthServer};
pub use discord::{
    BotMessage, DiscordCall, DiscordFailure, DiscordRoute, FAKE_DISCORD_BOT_ID,
    FAKE_DISCORD_BOT_NAME, FAKE_DISCORD_GUILD, FAKE_DISCORD_TOKEN, FakeDiscord, GatewaySession,
    discord_message, discord_user,
};
pub use docker::{DockerCall, ExecReply, FakeContainer, FakeDocker};
pub use example_daemon::{free_port, start_example_daemon};
pub use feishu::{
    FAKE_FEISHU_APP_ID, FAKE_FEISHU_APP_SECRET, FAKE_FEISHU_BOT_NAME, FAKE_FEISHU_BOT_OPEN_ID,
    FAKE_FEISHU_ENCRYPT_KEY, FAKE_FEISHU_TENANT, FAKE_FEISHU_VERIFICATION_TOKEN, FakeFeishu,
    FeishuCall, FeishuEventSender, FeishuFailure, FeishuMessage, FeishuSigning, UploadedFile,
    UserMessage, bad_padding_body, encrypt_feishu_event, p2p_chat, sign_feishu_event,
    url_verification,
};
pub use mcp_server::{
    FAKE_MCP_PRIMING_EVENT, FAKE_MCP_SESSION, FakeMcpServer, McpRequest, ToolCallReply,
};
pub use oauth::{AuthProxy, FakeTokenEndpoint, SeenTokenRequest};
pub use openai::FakeOpenAi;
pub use otel_collector::{CollectedExport, CollectedSpan, FakeCollector};
pub use reply::{Gate, Reply};
pub use slack::{
    ConnectionInfo, EnvelopeInfo, FAKE_SLACK_APP_TOKEN, FAKE_SLACK_BOT_TOKEN, FAKE_SLACK_BOT_USER,
    FAKE_SLACK_TEAM, FakeSlack, PostedMessage, SharedFile, Signing, SlackCall, SlackEventsClient,
    SlackFailure, dm_channel, sign_slack_request,
};
pub use speech::{FAKE_SPEECH_AUDIO, FakeSpeech};
pub use telegram::{
    BotCall, BotFailure, FAKE_BOT_ID, FAKE_BOT_TOKEN, FAKE_BOT_USERNAME, FakeTelegram, group_chat,
    private_chat,
};
pub use telegram_body::TelegramUpload;
pub use template::{assert_strict_alternation, check_strict_alternation};
pub use transcription::{
    FAKE_TRANSCRIPT, FakeTranscription, TranscriptionReply, TranscriptionRequest, VOICE_NOTE_OGG,
};
pub use webhook_sign::{antler_headers, antler_signature, github_signature};

/// Serves `router` on an ephemeral port of 127.0.0.1 for the rest of the test's runtime.
pub async fn serve(router: Router) -> SocketAddr {
    let listener = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
        Ok(listener) => listener,
        Err(error) => panic!("test support: cannot bind 127.0.0.1:0: {error}"),
    };
    let addr = match listener.local_addr() {
        Ok(addr) => addr,
        Err(error) => panic!("test support: no local address: {error}"),
    };
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    addr
}

/// One request received by a fake server.
#[derive(Clone, Debug)]
pub struct RecordedRequest {
    pub path: String,
    /// Header names are lowercase; values that are not UTF-8 are dropped.
    pub headers: BTreeMap<String, String>,
    /// The JSON body (or the raw text as a JSON string when it was not JSON).
    pub body: Value,
    /// The body's size in bytes as it arrived (what a provider is sent and bills).
    pub body_len: usize,
}

impl RecordedRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }
}

/// The queue of replies and the log of requests shared by a fake and its handler.
#[derive(Default)]
pub(crate) struct Script {
    queue: VecDeque<Reply>,
    recorded: Vec<RecordedRequest>,
    unscripted: usize,
    allow_unscripted: bool,
    /// Title calls come from the queue too.
    script_titles: bool,
    /// Memory-update calls come from the queue too.
    script_memory: bool,
    background: Vec<RecordedRequest>,
    /// Answers requests the queue has no reply for (benchmarks: thousands of turns).
    responder: Option<Responder>,
    /// Requests the responder answered (not recorded: a long soak would keep every body).
    responded: usize,
}

/// Builds a reply from a request's JSON body.
pub type Responder = Arc<dyn Fn(&Value) -> Reply + Send + Sync>;

/// How antler's title prompt and memory-updater system prompt start (kept in step with
/// `antler::model::background`; this crate cannot depend on antler).
const TITLE_PROMPT_START: &str = "Generate a concise title";
const MEMORY_PROMPT_START: &str = "You are a memory management system.";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Background {
    Title,
    Memory,
}

/// Whether `body` is a title or memory-update request.
fn background_kind(body: &Value) -> Option<Background> {
    let texts = |value: &Value| -> Vec<String> {
        match value {
            Value::String(text) => vec![text.clone()],
            Value::Array(blocks) => blocks
                .iter()
                .filter_map(|b| b["text"].as_str().map(str::to_string))
                .collect(),
            _ => Vec::new(),
        }
    };
    let messages = body["messages"].as_array()?;
    let first = messages.first()?;
    let mut leading = texts(&body["system"]);
    leading.extend(texts(&first["content"]));
    if leading.iter().any(|t| t.starts_with(MEMORY_PROMPT_START)) {
        return Some(Background::Memory);
    }
    (messages.len() == 1 && leading.iter().any(|t| t.starts_with(TITLE_PROMPT_START)))
        .then_some(Background::Title)
}

#[derive(Clone, Default)]
pub(crate) struct SharedScript(Arc<Mutex<Script>>);

impl SharedScript {
    fn lock(&self) -> MutexGuard<'_, Script> {
        // A test that panicked while holding the lock already failed; keep serving the others.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn push(&self, reply: Reply) {
        self.lock().queue.push_back(reply);
    }

    /// Records the request and takes the next reply; `None` counts an unscripted call.
    pub(crate) fn take(&self, path: &str, headers: &HeaderMap, body: &[u8]) -> Option<Reply> {
        let body_len = body.len();
        let body = serde_json::from_slice(body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(body).into_owned()));
        let headers = headers
            .iter()
            .filter_map(|(name, value)| {
                Some((name.as_str().to_string(), value.to_str().ok()?.to_string()))
            })
            .collect();
        let mut script = self.lock();
        let request = RecordedRequest {
            path: path.to_string(),
            headers,
            body,
            body_len,
        };
        let neutral = match background_kind(&request.body) {
            Some(Background::Title) if !script.script_titles => Some(""),
            Some(Background::Memory) if !script.script_memory => Some("{}"),
            _ => None,
        };
        if let Some(answer) = neutral {
            script.background.push(request);
            return Some(Reply::text(answer));
        }
        if script.queue.is_empty()
            && let Some(responder) = script.responder.clone()
        {
            script.responded += 1;
            drop(script);
            return Some(responder(&request.body));
        }
        script.recorded.push(request);
        let reply = script.queue.pop_front();
        if reply.is_none() {
            script.unscripted += 1;
        }
        reply
    }

    pub(crate) fn recorded(&self) -> Vec<RecordedRequest> {
        self.lock().recorded.clone()
    }

    pub(crate) fn unscripted(&self) -> usize {
        self.lock().unscripted
    }

    pub(crate) fn remaining(&self) -> usize {
        self.lock().queue.len()
    }

    pub(crate) fn background(&self) -> Vec<RecordedRequest> {
        self.lock().background.clone()
    }

    pub(crate) fn set_responder(&self, responder: Responder) {
        self.lock().responder = Some(responder);
    }

    pub(crate) fn responded(&self) -> usize {
        self.lock().responded
    }

    pub(crate) fn script_titles(&self) {
        self.lock().script_titles = true;
    }

    pub(crate) fn script_memory_updates(&self) {
        self.lock().script_memory = true;
    }

    pub(crate) fn allow_unscripted(&self) {
        self.lock().allow_unscripted = true;
    }

    /// Panics when requests found the script empty and the test did not opt in; called when a
    /// fake is dropped (skipped while already panicking, so the first failure is reported).
    pub(crate) fn check_unscripted(&self, fake: &str) {
        if std::thread::panicking() {
            return;
        }
        let script = self.lock();
        if script.unscripted > 0 && !script.allow_unscripted {
            let last = script
                .recorded
                .last()
                .map(|r| r.body.to_string())
                .unwrap_or_default();
            let last: String = last.chars().take(2000).collect();
            panic!(
                "{fake} received {} unscripted request(s); push more replies, or call \
                 allow_unscripted() if the test is about that error. Last request: {last}",
                script.unscripted
            );
        }
    }
}

/// The scripting API both fakes share.
macro_rules! scripting_api {
    ($fake:ty) => {
        impl $fake {
            /// Queues the answer to the next request.
            pub fn push(&self, reply: $crate::Reply) -> &Self {
                self.script.push(reply);
                self
            }

            /// JSON bodies of every request received so far (scripted or not).
            pub fn requests(&self) -> Vec<serde_json::Value> {
                self.script.recorded().into_iter().map(|r| r.body).collect()
            }

            /// Every request received so far with its path and headers.
            pub fn recorded(&self) -> Vec<$crate::RecordedRequest> {
                self.script.recorded()
            }

            /// Requests that found the queue empty (answered HTTP 500 "unscripted call").
            pub fn unscripted_calls(&self) -> usize {
                self.script.unscripted()
            }

            /// Lets requests beyond the script happen without failing the test when the fake is
            /// dropped (they are still answered HTTP 500): for tests about that error.
            pub fn allow_unscripted(&self) -> &Self {
                self.script.allow_unscripted();
                self
            }

            /// Answers every request the queue has no reply for with `responder(body)`, for
            /// benchmarks that run thousands of turns. Such requests are counted
            /// (`responded()`), not recorded.
            pub fn respond_with(
                &self,
                responder: impl Fn(&serde_json::Value) -> $crate::Reply + Send + Sync + 'static,
            ) -> &Self {
                self.script.set_responder(std::sync::Arc::new(responder));
                self
            }

            /// Requests the responder answered.
            pub fn responded(&self) -> usize {
                self.script.responded()
            }

            /// Title and memory-update requests answered neutrally, outside the script.
            pub fn background_requests(&self) -> Vec<$crate::RecordedRequest> {
                self.script.background()
            }

            /// Serves title requests from the script too (logged with the others).
            pub fn script_titles(&self) -> &Self {
                self.script.script_titles();
                self
            }

            /// Serves memory-update requests from the script too (logged with the others).
            pub fn script_memory_updates(&self) -> &Self {
                self.script.script_memory_updates();
                self
            }

            /// Scripted replies not consumed yet.
            pub fn remaining(&self) -> usize {
                self.script.remaining()
            }

            pub fn addr(&self) -> std::net::SocketAddr {
                self.addr
            }
        }

        impl Drop for $fake {
            fn drop(&mut self) {
                self.script.check_unscripted(stringify!($fake));
            }
        }
    };
}
pub(crate) use scripting_api;
