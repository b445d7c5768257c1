//! The daemon's side of a channel webhook: the adapter's handler verifies and parses, the
//! manager journals, and only then is the platform answered.

use std::sync::Arc;

use antler_channel::{WebhookError, WebhookHandler, WebhookReply, WebhookRequest, WebhookResponse};

use crate::channels::manager::ChannelManager;

/// A mounted webhook: `POST /channels/{channel}/webhook`.
pub struct WebhookEndpoint {
    channel: String,
    handler: Arc<dyn WebhookHandler>,
    manager: ChannelManager,
}

/// How to answer the platform.
#[derive(Debug)]
pub enum WebhookAnswer {
    /// The adapter's response: a challenge, or the acknowledgement of durable messages.
    Respond(WebhookResponse),
    /// Refused before anything was stored (bad signature 401, malformed 400).
    Refused(WebhookError),
    /// The messages could not be journalled: 503, so the platform delivers them again.
    Unavailable(String),
}

impl WebhookEndpoint {
    pub(crate) fn new(
        channel: &str,
        handler: Arc<dyn WebhookHandler>,
        manager: ChannelManager,
    ) -> Self {
        Self {
            channel: channel.to_string(),
            handler,
            manager,
        }
    }

    /// Handles one delivery. Blocking: journalling flushes to disk.
    pub fn receive(&self, headers: &axum::http::HeaderMap, body: &[u8]) -> WebhookAnswer {
        let request = WebhookRequest { headers, body };
        match self.handler.handle(&request) {
            Err(error) => {
                tracing::info!(channel = %self.channel, %error, "Refusing a webhook delivery");
                WebhookAnswer::Refused(error)
            }
            Ok(WebhookReply::Respond(response)) => WebhookAnswer::Respond(response),
            Ok(WebhookReply::Ignore { reason, ack }) => {
                tracing::warn!(channel = %self.channel, reason, "Dropping a webhook delivery");
                WebhookAnswer::Respond(ack)
            }
            Ok(WebhookReply::Accept { messages, ack }) => {
                match self.manager.accept_batch(&self.channel, messages) {
                    Ok(_) => WebhookAnswer::Respond(ack),
                    Err(error) => {
                        tracing::error!(channel = %self.channel, %error, "Could not journal a webhook delivery; the platform will retry");
                        WebhookAnswer::Unavailable(error.to_string())
                    }
                }
            }
        }
    }
}
