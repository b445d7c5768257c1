//! Chat models behind one trait: providers (OpenAI-compatible, Anthropic), retries and fallback.
//!
//! A provider turns a [`ModelRequest`] into a stream of [`ModelEvent`]s: text and reasoning
//! deltas as they arrive, then exactly one [`ModelEvent::Completed`] carrying the assembled
//! [`AiMessage`] (tool calls reassembled, usage, finish reason). Errors are values, never panics.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::BoxStream;

use antler_store::messages::{AiMessage, History, Message};

/// A model the agent loop can call.
#[async_trait]
pub trait ChatModel: Send + Sync {
    /// The configured name (`models[].name`), used in logs, events and errors.
    fn name(&self) -> &str;

    /// Starts one completion. Connection and HTTP-status errors are returned here (so retry and
    /// fallback can act before anything was streamed); later problems arrive inside the stream.
    /// The request is borrowed: retries and fallbacks send the same one without copying the
    /// history, and the stream owns nothing of it.
    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream, ModelError>;
}

pub type ModelStream = BoxStream<'static, Result<ModelEvent, ModelError>>;

#[derive(Clone, Debug, PartialEq)]
// `Completed` is large but sent once per call; boxing it would cost an allocation for nothing.
#[allow(clippy::large_enum_variant)]
pub enum ModelEvent {
    TextDelta(String),
    ReasoningDelta(String),
    Completed(AiMessage),
}

/// What one model call sends: the system prompt, the conversation and the tool schemas.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ModelRequest {
    /// Shared with the agent (its prompt is built once): a request does not copy it.
    pub system: Option<Arc<str>>,
    /// The system messages inside `messages` were merged into `system` (by the
    /// `SystemMessageCoalescingMiddleware`): providers leave them out of the
    /// conversation. They stay in the list because taking them out copied the whole history
    /// for every model call (and dropped the copy after it).
    pub system_merged: bool,
    pub messages: History,
    /// Shared: each spec is built once per tool registry, the list once per run.
    pub tools: Arc<[Arc<ToolSpec>]>,
    pub tool_choice: Option<ToolChoice>,
    pub thinking_enabled: bool,
    pub reasoning_effort: Option<String>,
    /// Per-request overrides of the model's configured sampling settings.
    pub temperature: Option<f64>,
    pub max_tokens: Option<u32>,
}

impl ModelRequest {
    /// The system prompt's parts in order, blank ones left out: `system`, then, once merged
    /// (`system_merged`), the conversation's system messages. Providers write them joined by a
    /// blank line ([`SystemPrompt`]) without joining them first: the joined copy lived as long
    /// as the model call, ~2 KB per run in flight.
    pub fn system_parts(&self) -> impl Iterator<Item = &str> {
        let merged = self
            .system_merged
            .then(|| {
                self.messages.iter().filter_map(|m| match m {
                    Message::System(system) => Some(system.content.as_str()),
                    _ => None,
                })
            })
            .into_iter()
            .flatten();
        self.system
            .as_deref()
            .into_iter()
            .chain(merged)
            .filter(|part| !part.trim().is_empty())
    }

    /// The messages a provider writes into the conversation: all of them, less the system
    /// messages already merged into `system` (see `system_merged`).
    pub(crate) fn conversation(&self) -> impl Iterator<Item = &Message> {
        self.messages
            .iter()
            .filter(|m| !(self.system_merged && matches!(m, Message::System(_))))
    }

    /// Serializes a provider's `body` for this request into a buffer sized once from the
    /// request: grown by doubling, a long history would be copied a dozen times.
    pub(crate) fn body_json(&self, body: &impl serde::Serialize) -> bytes::Bytes {
        self.body_with(|bytes| {
            // Serializing borrowed strings and `Value`s into a `Vec` cannot fail.
            let _ = serde_json::to_writer(bytes, body);
        })
    }

    /// Like [`body_json`](Self::body_json), for a provider that writes part of its body
    /// itself.
    pub(crate) fn body_with(&self, write: impl FnOnce(&mut Vec<u8>)) -> bytes::Bytes {
        let hint = antler_store::messages::json_size_hint(&self.messages)
            + self.system.as_ref().map_or(0, |system| system.len())
            + self.tools.len() * 1024
            + 512;
        let mut bytes = crate::body_buffers::buffer(hint);
        write(&mut bytes);
        // The body is held until the answer comes (the HTTP client keeps it to resend on a
        // redirect): a small one gives its unused tail back, a long thread's keeps its buffer
        // warm for the next turn.
        crate::body_buffers::into_body(bytes)
    }
}

/// System prompt parts written as one text, a blank line between them, straight into the
/// request body (serde_json escapes a `collect_str` piece by piece, without a joined copy).
pub(crate) struct SystemPrompt<'a>(pub(crate) Vec<&'a str>);

impl std::fmt::Display for SystemPrompt<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (index, part) in self.0.iter().enumerate() {
            if index > 0 {
                f.write_str("\n\n")?;
            }
            f.write_str(part)?;
        }
        Ok(())
    }
}

impl serde::Serialize for SystemPrompt<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: Schema,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ToolChoice {
    Auto,
    None,
    Required,
    Named(String),
}

/// Why a model call failed. Callers branch on the variant, never on the text.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// `fix` is what to set to point the model elsewhere (`ANTLER_MODEL_URL`, or the key).
    #[error(
        "could not reach model '{model}' at {base_url} ({detail}); start the model server there, \
         or set {fix} to the address of one that runs"
    )]
    Connect {
        model: String,
        base_url: String,
        detail: String,
        fix: String,
    },
    #[error(
        "model '{model}' did not answer within {timeout:?}; raise models[].timeout or try again"
    )]
    Timeout { model: String, timeout: Duration },
    #[error("model '{model}' is rate limited (HTTP 429); retry after {retry_after:?}")]
    RateLimited {
        model: String,
        retry_after: Option<Duration>,
    },
    /// `body` is the provider's own message (never the raw JSON body, which is logged at
    /// debug), `hint` what to do about this status (may be empty).
    #[error("{}", status_text(.model, *.status, .body, .hint))]
    Status {
        model: String,
        status: u16,
        body: String,
        retry_after: Option<Duration>,
        hint: String,
    },
    /// `fix` is what holds the key (`ANTLER_MODEL_API_KEY`, or `models[N].api_key`).
    #[error(
        "model '{model}' at {endpoint} refused {} (HTTP {status}); set {fix} to a key that \
         server accepts",
        if *.keyless { "to answer without an API key" } else { "the API key" }
    )]
    Unauthorized {
        model: String,
        status: u16,
        endpoint: String,
        fix: String,
        /// No key was sent at all.
        keyless: bool,
    },
    /// The server answers but does not know the model id; `fix` is what holds the id.
    #[error(
        "model id '{model_id}' is not served at {endpoint} (HTTP {status}); set {fix} to a model \
         id that server has (`antler status` lists them)"
    )]
    ModelNotFound {
        model: String,
        model_id: String,
        endpoint: String,
        status: u16,
        fix: String,
    },
    #[error("the stream from model '{model}' broke: {detail}")]
    Stream { model: String, detail: String },
    #[error("model '{model}' sent a malformed chunk: {detail}")]
    Malformed { model: String, detail: String },
    #[error("model '{model}' reported an error: {detail}")]
    Provider { model: String, detail: String },
    #[error("the model call was cancelled")]
    Cancelled,
    /// A budget (`budgets:`) of whoever pays for the call is spent; `notice` says which and
    /// when it resets ("stopped: daily budget of $5.00 reached; resets at 00:00 UTC").
    #[error("{notice}")]
    BudgetExceeded { notice: String },
    #[error("model configuration error: {0}")]
    Config(String),
}

/// One sentence for an HTTP error answer: what happened, the provider's message, what to do.
fn status_text(model: &str, status: u16, message: &str, hint: &str) -> String {
    let what = match status {
        500..=599 => "failed on the server's side",
        _ => "refused the request",
    };
    let mut text = format!("model '{model}' {what} (HTTP {status})");
    if !message.is_empty() {
        text.push_str(": ");
        text.push_str(message.trim_end_matches('.'));
    }
    if !hint.is_empty() {
        text.push_str("; ");
        text.push_str(hint);
    }
    text
}

impl ModelError {
    /// Transient failures worth retrying: connect errors, 408/409/425/429/5xx, timeouts.
    pub fn is_retryable(&self) -> bool {
        match self {
            ModelError::Connect { .. } | ModelError::Timeout { .. } => true,
            ModelError::RateLimited { .. } => true,
            ModelError::Status { status, .. } => {
                matches!(status, 408 | 409 | 425 | 429) || (500..=599).contains(status)
            }
            _ => false,
        }
    }

    /// The delay the server asked for, if any.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ModelError::RateLimited { retry_after, .. }
            | ModelError::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

pub mod background;
pub mod scripted;

pub use scripted::{ModelErrorKind, ScriptedModel, ScriptedTurn};

pub mod anthropic;
mod anthropic_request;
pub mod fallback;
pub(crate) mod http;
pub mod openai;
pub(crate) mod openai_request;
pub mod probe;
pub(crate) mod provider_error;
pub mod registry;
pub mod retry;
mod schema;

pub use anthropic::AnthropicModel;
pub use fallback::FallbackModel;
pub use http::display_endpoint;
pub use openai::OpenAiModel;
pub use registry::ModelRegistry;
pub use retry::{RetryPolicy, RetryingModel};
pub use schema::Schema;
