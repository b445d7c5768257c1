//! Event subscription v2: Feishu posts to `/channels/feishu/webhook`.
//!
//! With an Encrypt Key the raw body is checked first: `X-Lark-Signature` must be the SHA-256 of
//! timestamp, nonce, key and the exact bytes received (constant-time compare) and the timestamp
//! within five minutes; only then is `{"encrypt": …}` parsed and decrypted. Feishu does not
//! sign the URL-verification request, so an unsigned body is accepted only when it decrypts to
//! a `url_verification` whose `token` is ours. Every payload's Verification Token is checked.
//! The challenge is answered at once; a message event is handed to the daemon, which answers
//! 200 only after journalling it. Feishu redelivers an event it got no 200 for under the same
//! `event_id` and message id: the journal, keyed by message id, drops the copies.

use std::time::{SystemTime, UNIX_EPOCH};

use antler_channel::{WebhookError, WebhookHandler, WebhookReply, WebhookRequest, WebhookResponse};
use serde_json::{Value, json};
use subtle::ConstantTimeEq;

use crate::convert::{BotIdentity, event_message};
use crate::crypto::{decrypt, signature_matches};

pub(crate) const TIMESTAMP_HEADER: &str = "x-lark-request-timestamp";
pub(crate) const NONCE_HEADER: &str = "x-lark-request-nonce";
pub(crate) const SIGNATURE_HEADER: &str = "x-lark-signature";
/// A signed push older (or newer) than this is a replay, or this host's clock is wrong.
const MAX_SKEW_SECS: i64 = 5 * 60;

pub(crate) struct FeishuWebhook {
    bot: BotIdentity,
    verification_token: String,
    encrypt_key: Option<String>,
}

impl FeishuWebhook {
    pub(crate) fn new(
        bot: BotIdentity,
        verification_token: &str,
        encrypt_key: Option<&str>,
    ) -> Self {
        Self {
            bot,
            verification_token: verification_token.to_string(),
            encrypt_key: encrypt_key.filter(|k| !k.is_empty()).map(str::to_string),
        }
    }

    /// Whether the push is signed by Feishu: `Ok(true)` signed and fresh, `Ok(false)` unsigned.
    fn check_signature(
        &self,
        key: &str,
        request: &WebhookRequest<'_>,
    ) -> Result<bool, WebhookError> {
        let Some(signature) = request.header(SIGNATURE_HEADER) else {
            return Ok(false);
        };
        let unauthorized = |why: &str| WebhookError::Unauthorized(why.to_string());
        let timestamp = request
            .header(TIMESTAMP_HEADER)
            .ok_or_else(|| unauthorized("X-Lark-Signature without X-Lark-Request-Timestamp"))?;
        let nonce = request
            .header(NONCE_HEADER)
            .ok_or_else(|| unauthorized("X-Lark-Signature without X-Lark-Request-Nonce"))?;
        if !signature_matches(signature, timestamp, nonce, key, request.body) {
            return Err(unauthorized(
                "wrong X-Lark-Signature; check channels.feishu.encrypt_key",
            ));
        }
        let sent_at: i64 = timestamp
            .trim()
            .parse()
            .map_err(|_| unauthorized("X-Lark-Request-Timestamp is not a number"))?;
        if (now_secs() - sent_at).abs() > MAX_SKEW_SECS {
            return Err(unauthorized(
                "X-Lark-Request-Timestamp is more than 5 minutes away from now (a replay, or this host's clock is wrong)",
            ));
        }
        Ok(true)
    }

    /// The event JSON: decrypted when an Encrypt Key is set.
    fn payload(&self, body: &[u8]) -> Result<Value, WebhookError> {
        let outer: Value = serde_json::from_slice(body)
            .map_err(|e| WebhookError::Malformed(format!("the body is not JSON: {e}")))?;
        let Some(encrypted) = outer.get("encrypt") else {
            if self.encrypt_key.is_some() {
                return Err(WebhookError::Unauthorized(
                    "an unencrypted push, but channels.feishu.encrypt_key is set: Feishu encrypts every event then".into(),
                ));
            }
            return Ok(outer);
        };
        let Some(key) = &self.encrypt_key else {
            return Err(WebhookError::Malformed(
                "the push is encrypted; set channels.feishu.encrypt_key to the app's Encrypt Key"
                    .into(),
            ));
        };
        let encrypted = encrypted
            .as_str()
            .ok_or_else(|| WebhookError::Malformed("`encrypt` is not a string".into()))?;
        let plain = decrypt(key, encrypted).map_err(|e| WebhookError::Malformed(e.to_string()))?;
        serde_json::from_slice(&plain)
            .map_err(|e| WebhookError::Malformed(format!("the decrypted event is not JSON: {e}")))
    }

    fn check_token(&self, claimed: Option<&str>) -> Result<(), WebhookError> {
        let claimed = claimed.unwrap_or("");
        let matches = claimed.len() == self.verification_token.len()
            && bool::from(claimed.as_bytes().ct_eq(self.verification_token.as_bytes()));
        if matches {
            Ok(())
        } else {
            Err(WebhookError::Unauthorized(
                "wrong verification token; check channels.feishu.verification_token".into(),
            ))
        }
    }
}

impl WebhookHandler for FeishuWebhook {
    fn handle(&self, request: &WebhookRequest<'_>) -> Result<WebhookReply, WebhookError> {
        let signed = match &self.encrypt_key {
            Some(key) => self.check_signature(key, request)?,
            None => false,
        };
        let payload = self.payload(request.body)?;
        if payload["type"].as_str() == Some("url_verification") {
            self.check_token(payload["token"].as_str())?;
            return Ok(WebhookReply::Respond(WebhookResponse::json(
                &json!({"challenge": payload["challenge"]}),
            )));
        }
        if self.encrypt_key.is_some() && !signed {
            return Err(WebhookError::Unauthorized(
                "an event push without X-Lark-Signature; Feishu signs every event when an Encrypt Key is set".into(),
            ));
        }
        let header = &payload["header"];
        if payload["schema"].as_str() != Some("2.0") {
            // A v1 payload carries its token at the top level.
            self.check_token(payload["token"].as_str())?;
            return Ok(ignore(
                "a v1 event (subscribe to im.message.receive_v1, schema 2.0)".into(),
            ));
        }
        self.check_token(header["token"].as_str())?;
        let event_type = header["event_type"].as_str().unwrap_or("");
        if event_type != "im.message.receive_v1" {
            return Ok(ignore(format!("a {event_type:?} event")));
        }
        match event_message(&payload["event"], header["tenant_key"].as_str(), &self.bot) {
            Ok(message) => Ok(WebhookReply::Accept {
                messages: vec![message],
                ack: success(),
            }),
            Err(why) => {
                tracing::debug!(
                    event_id = header["event_id"].as_str().unwrap_or(""),
                    why,
                    "Skipping a Feishu message"
                );
                Ok(ignore(why))
            }
        }
    }
}

fn ignore(reason: String) -> WebhookReply {
    WebhookReply::Ignore {
        reason,
        ack: success(),
    }
}

/// What Feishu expects within 3 s: HTTP 200 (the body is not read).
fn success() -> WebhookResponse {
    WebhookResponse::json(&json!({"msg": "success"}))
}

fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default()
}

#[cfg(test)]
#[path = "webhook_tests.rs"]
mod tests;
