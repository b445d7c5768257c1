//! Pushed deliveries: the daemon's generic route `POST /channels/<name>/webhook` hands the raw
//! request to the adapter's handler, which verifies it (signatures over the raw bytes, before
//! any parsing) and says what to do.

use crate::message::InboundMessage;

/// Verifies and parses one delivery. Runs on a blocking thread: no I/O, just CPU.
pub trait WebhookHandler: Send + Sync {
    fn handle(&self, request: &WebhookRequest<'_>) -> Result<WebhookReply, WebhookError>;
}

/// The raw request, exactly as received.
pub struct WebhookRequest<'a> {
    pub headers: &'a http::HeaderMap,
    pub body: &'a [u8],
}

impl WebhookRequest<'_> {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }
}

/// What the daemon does with a verified delivery.
#[derive(Debug)]
pub enum WebhookReply {
    /// Answer at once, journalling nothing (a URL-verification challenge).
    Respond(WebhookResponse),
    /// Journal `messages`, then answer `ack`; if they cannot be journalled the daemon answers
    /// 503 so the platform delivers again.
    Accept {
        messages: Vec<InboundMessage>,
        ack: WebhookResponse,
    },
    /// A well-signed delivery the bot has no use for (an unreadable or unsupported update):
    /// acknowledged, so the platform does not retry it forever, and logged.
    Ignore {
        reason: String,
        ack: WebhookResponse,
    },
}

/// An HTTP answer for the platform.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebhookResponse {
    pub status: u16,
    pub content_type: Option<&'static str>,
    pub body: Vec<u8>,
}

impl WebhookResponse {
    /// 200 with an empty body.
    pub fn ok() -> Self {
        Self {
            status: 200,
            content_type: None,
            body: Vec::new(),
        }
    }

    /// 200 with a JSON body.
    pub fn json(value: &serde_json::Value) -> Self {
        Self {
            status: 200,
            content_type: Some("application/json"),
            body: value.to_string().into_bytes(),
        }
    }
}

/// Why a delivery was refused; nothing of it is journalled.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// Missing or wrong secret or signature, or a stale timestamp (HTTP 401).
    #[error("{0}")]
    Unauthorized(String),
    /// Not a delivery the platform could have sent (HTTP 400).
    #[error("{0}")]
    Malformed(String),
    /// Refused with one answer whatever went wrong (HTTP 400, [`CONCEALED_REFUSAL`]), for
    /// handlers whose reasons would tell a forger something about a secret (which bytes
    /// decrypt, which padding is valid). `reason` is for the daemon's log only.
    #[error("{reason}")]
    Concealed { reason: String },
}

/// The one answer to every [`WebhookError::Concealed`] refusal: the same for every reason, so
/// it cannot be told apart; it points at the log, which says why.
pub const CONCEALED_REFUSAL: &str = "the delivery was refused: it is not a signed, well-formed \
    push for this channel; if the platform sent it, check the channel's encrypt_key and \
    verification_token, and the daemon's log for why";

impl WebhookError {
    /// What the sender is told: the reason, except for a concealed refusal.
    pub fn public_message(&self) -> &str {
        match self {
            WebhookError::Unauthorized(message) | WebhookError::Malformed(message) => message,
            WebhookError::Concealed { .. } => CONCEALED_REFUSAL,
        }
    }
}
