//! The daemon's side of a channel webhook: the adapter's handler verifies and parses, the
//! manager journals, and only then is the platform answered.
//!
//! Refusals are logged at most once a minute per channel, with how many there were: anyone can
//! post to a webhook, and a forger's flood (an oracle attack posts thousands) must not become
//! thousands of log lines.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use antler_channel::{WebhookError, WebhookHandler, WebhookReply, WebhookRequest, WebhookResponse};

use crate::channels::manager::ChannelManager;

/// How often a channel's refused deliveries may be logged.
const REFUSAL_LOG_EVERY: Duration = Duration::from_secs(60);

/// A mounted webhook: `POST /channels/{channel}/webhook`.
pub struct WebhookEndpoint {
    channel: String,
    handler: Arc<dyn WebhookHandler>,
    manager: ChannelManager,
    refusals: RefusalLog,
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
            refusals: RefusalLog::default(),
        }
    }

    /// Handles one delivery. Blocking: journalling flushes to disk.
    pub fn receive(&self, headers: &axum::http::HeaderMap, body: &[u8]) -> WebhookAnswer {
        let request = WebhookRequest { headers, body };
        match self.handler.handle(&request) {
            Err(error) => {
                if let Some(refused) = self.refusals.record(Instant::now()) {
                    tracing::info!(
                        channel = %self.channel,
                        refused,
                        latest = %error,
                        "Refused webhook deliveries (counted since the last such line, logged at most once a minute)"
                    );
                }
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

impl Drop for WebhookEndpoint {
    /// Refusals counted since the last line are not lost when the channel stops.
    fn drop(&mut self) {
        let refused = self.refusals.unlogged();
        if refused > 0 {
            tracing::info!(channel = %self.channel, refused, "Refused webhook deliveries not logged yet");
        }
    }
}

/// Counts refusals and says when a log line is due: the first at once, then at most one per
/// [`REFUSAL_LOG_EVERY`], each carrying the count since the previous line.
#[derive(Default)]
struct RefusalLog {
    window: Mutex<RefusalWindow>,
}

#[derive(Default)]
struct RefusalWindow {
    logged_at: Option<Instant>,
    unlogged: u64,
}

impl RefusalLog {
    /// Counts one refusal at `now`; `Some(count)` when a line is due, `count` being the
    /// refusals since the previous line (this one included).
    fn record(&self, now: Instant) -> Option<u64> {
        let mut window = self.window.lock().unwrap_or_else(|p| p.into_inner());
        window.unlogged += 1;
        let due = window
            .logged_at
            .is_none_or(|at| now.saturating_duration_since(at) >= REFUSAL_LOG_EVERY);
        if !due {
            return None;
        }
        window.logged_at = Some(now);
        Some(std::mem::take(&mut window.unlogged))
    }

    fn unlogged(&self) -> u64 {
        self.window
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .unlogged
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_logged_at_most_once_a_minute_with_their_count() {
        let log = RefusalLog::default();
        let start = Instant::now();
        let at = |secs: u64| start + Duration::from_secs(secs);
        assert_eq!(
            log.record(at(0)),
            Some(1),
            "the first refusal is logged at once"
        );
        for second in 1..60 {
            assert_eq!(log.record(at(second)), None, "second {second}");
        }
        assert_eq!(log.unlogged(), 59);
        assert_eq!(
            log.record(at(60)),
            Some(60),
            "a minute later: the 59 and this one"
        );
        assert_eq!(log.record(at(61)), None);
        assert_eq!(
            log.record(at(200)),
            Some(2),
            "a quiet spell, then one line at once"
        );
        assert_eq!(log.unlogged(), 0);
    }
}
