//! Event subscription v2: Feishu posts to `/channels/feishu/webhook`.
//!
//! With an Encrypt Key every push but the URL verification must be signed: `X-Lark-Signature`
//! the SHA-256 of timestamp, nonce, key and the exact bytes received (constant-time compare),
//! the timestamp within five minutes. Feishu does not sign the URL verification, so an
//! unsigned push is answered only when it decrypts to a `url_verification` whose `token` is
//! ours. Every refusal then gets one answer ([`WebhookError::Concealed`]): were a bad padding
//! told apart from a bad JSON, anyone could decrypt a captured push one byte at a time (a CBC
//! padding oracle); an unsigned push does the same work whatever its padding. Without an
//! Encrypt Key nothing is secret but the Verification Token, checked on every payload.
//! The challenge is answered at once; a message event or a card action callback (a button
//! click, [`crate::buttons`]) is handed to the daemon, which answers 200 only after journalling
//! it. Feishu redelivers an event it got no 200 for under the same
//! `event_id` and message id: the journal, keyed by message id, drops the copies.

use std::time::{SystemTime, UNIX_EPOCH};

use antler_channel::{WebhookError, WebhookHandler, WebhookReply, WebhookRequest, WebhookResponse};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::buttons::click_message;
use crate::convert::{BotIdentity, event_message};
use crate::crypto::{decrypt_uniform, signature_matches};

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

    /// Whether the push is signed by Feishu: `Ok(true)` signed and fresh, `Ok(false)` unsigned,
    /// `Err` why a signature is wrong (for the log).
    fn check_signature(&self, key: &str, request: &WebhookRequest<'_>) -> Result<bool, String> {
        let Some(signature) = request.header(SIGNATURE_HEADER) else {
            return Ok(false);
        };
        let timestamp = request
            .header(TIMESTAMP_HEADER)
            .ok_or("X-Lark-Signature without X-Lark-Request-Timestamp")?;
        let nonce = request
            .header(NONCE_HEADER)
            .ok_or("X-Lark-Signature without X-Lark-Request-Nonce")?;
        if !signature_matches(signature, timestamp, nonce, key, request.body) {
            return Err("wrong X-Lark-Signature; check channels.feishu.encrypt_key".into());
        }
        let sent_at: i64 = timestamp
            .trim()
            .parse()
            .map_err(|_| "X-Lark-Request-Timestamp is not a number")?;
        if (now_secs() - sent_at).abs() > MAX_SKEW_SECS {
            return Err(
                "X-Lark-Request-Timestamp is more than 5 minutes away from now (a replay, or this host's clock is wrong)".into(),
            );
        }
        Ok(true)
    }

    /// A push with an Encrypt Key set; `Err` is the reason, for the log only.
    fn handle_encrypted(
        &self,
        key: &str,
        request: &WebhookRequest<'_>,
    ) -> Result<WebhookReply, String> {
        let signed = self.check_signature(key, request)?;
        let outer: Value = serde_json::from_slice(request.body)
            .map_err(|e| format!("the body is not JSON: {e}"))?;
        let encrypted = outer["encrypt"].as_str().ok_or(
            "no `encrypt` string in the body, but channels.feishu.encrypt_key is set: Feishu encrypts every event then",
        )?;
        let decrypted = decrypt_uniform(key, encrypted).map_err(|e| e.to_string())?;
        // Parsed whatever the padding, so a good and a bad padding cost the same.
        let payload = serde_json::from_slice::<Value>(&decrypted.plain);
        if !signed {
            let answer = payload
                .ok()
                .filter(|_| decrypted.padding_valid)
                .and_then(|payload| self.url_check(&payload));
            return answer.ok_or_else(|| {
                "an unsigned push that is not Feishu's URL verification with our verification token; Feishu signs every other push when an Encrypt Key is set".into()
            });
        }
        if !decrypted.padding_valid {
            return Err(
                "the push does not decrypt with channels.feishu.encrypt_key (bad padding)".into(),
            );
        }
        let payload = payload.map_err(|e| format!("the decrypted event is not JSON: {e}"))?;
        if payload["type"].as_str() == Some("url_verification") {
            return self
                .url_check(&payload)
                .ok_or_else(|| wrong_token().to_string());
        }
        self.event(&payload)
    }

    /// A push without an Encrypt Key: plain JSON, the token the only secret.
    fn handle_plain(&self, body: &[u8]) -> Result<WebhookReply, WebhookError> {
        let payload: Value = serde_json::from_slice(body)
            .map_err(|e| WebhookError::Malformed(format!("the body is not JSON: {e}")))?;
        if payload.get("encrypt").is_some() {
            return Err(WebhookError::Malformed(
                "the push is encrypted; set channels.feishu.encrypt_key to the app's Encrypt Key"
                    .into(),
            ));
        }
        if payload["type"].as_str() == Some("url_verification") {
            return self
                .url_check(&payload)
                .ok_or_else(|| WebhookError::Unauthorized(wrong_token().into()));
        }
        self.event(&payload).map_err(WebhookError::Unauthorized)
    }

    /// The answer to a URL verification carrying our token.
    fn url_check(&self, payload: &Value) -> Option<WebhookReply> {
        let is_ours = payload["type"].as_str() == Some("url_verification")
            && self.token_matches(payload["token"].as_str());
        is_ours.then(|| {
            WebhookReply::Respond(WebhookResponse::json(
                &json!({"challenge": payload["challenge"]}),
            ))
        })
    }

    /// An authentic event: its token checked, then a message or a reason to skip it. `Err`
    /// only for a wrong token.
    fn event(&self, payload: &Value) -> Result<WebhookReply, String> {
        let header = &payload["header"];
        if payload["schema"].as_str() != Some("2.0") {
            // A v1 payload carries its token at the top level.
            if !self.token_matches(payload["token"].as_str()) {
                return Err(wrong_token().into());
            }
            return Ok(ignore(
                "a v1 event (subscribe to im.message.receive_v1, schema 2.0)".into(),
            ));
        }
        if !self.token_matches(header["token"].as_str()) {
            return Err(wrong_token().into());
        }
        let event_type = header["event_type"].as_str().unwrap_or("");
        if event_type == "card.action.trigger" {
            return Ok(card_action(&payload["event"], header));
        }
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

    /// Compared as SHA-256 digests in constant time, so neither the bytes nor the length of
    /// the token show in how long a wrong guess takes.
    fn token_matches(&self, claimed: Option<&str>) -> bool {
        let claimed = Sha256::digest(claimed.unwrap_or("").as_bytes());
        let ours = Sha256::digest(self.verification_token.as_bytes());
        bool::from(claimed.as_slice().ct_eq(ours.as_slice()))
    }
}

impl WebhookHandler for FeishuWebhook {
    fn handle(&self, request: &WebhookRequest<'_>) -> Result<WebhookReply, WebhookError> {
        match &self.encrypt_key {
            Some(key) => self
                .handle_encrypted(key, request)
                .map_err(|reason| WebhookError::Concealed { reason }),
            None => self.handle_plain(request.body),
        }
    }
}

/// A verified card action callback: a button click is journalled; the answer is an empty
/// object (no toast, the card unchanged until the daemon decided and patches it).
fn card_action(event: &Value, header: &Value) -> WebhookReply {
    let ack = WebhookResponse::json(&json!({}));
    match click_message(event, header) {
        Ok(message) => WebhookReply::Accept {
            messages: vec![message],
            ack,
        },
        Err(why) => WebhookReply::Ignore {
            reason: why.into(),
            ack,
        },
    }
}

fn wrong_token() -> &'static str {
    "wrong verification token; check channels.feishu.verification_token"
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
