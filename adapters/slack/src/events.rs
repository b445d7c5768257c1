//! Events mode: Slack posts events, slash commands and interactivity payloads (button clicks)
//! to `/channels/slack/webhook`.
//!
//! Every request is verified before it is parsed: `X-Slack-Signature` is
//! `v0=HMAC-SHA256(signing_secret, "v0:{timestamp}:{raw body}")`, compared in constant time,
//! and a timestamp more than five minutes away is refused (a replay). The challenge of
//! `url_verification` is answered here; an event callback is handed to the daemon, which
//! answers Slack's 200 only after journalling it. Retries (`X-Slack-Retry-Num`) are journalled
//! under the message's `ts` like the first delivery, so they are dropped there.

use antler_channel::{WebhookError, WebhookHandler, WebhookReply, WebhookRequest, WebhookResponse};
use serde_json::{Map, Value, json};
use slack_morphism::SlackSigningSecret;
use slack_morphism::signature_verifier::{
    SlackEventSignatureVerifier, SlackEventSignatureVerifierError,
};

use crate::buttons::click_message;
use crate::config::DmThreading;
use crate::convert::{BotIdentity, command_message, event_message};

pub(crate) struct EventsWebhook {
    identity: BotIdentity,
    verifier: SlackEventSignatureVerifier,
    dm_threading: DmThreading,
}

impl EventsWebhook {
    pub(crate) fn new(
        identity: BotIdentity,
        signing_secret: &str,
        dm_threading: DmThreading,
    ) -> Self {
        Self {
            identity,
            verifier: SlackEventSignatureVerifier::new(&SlackSigningSecret::new(
                signing_secret.to_string(),
            )),
            dm_threading,
        }
    }

    fn verify<'a>(&self, request: &'a WebhookRequest<'_>) -> Result<&'a str, WebhookError> {
        let unauthorized = |why: &str| WebhookError::Unauthorized(why.to_string());
        let signature = request
            .header(SlackEventSignatureVerifier::SLACK_SIGNED_HASH_HEADER)
            .ok_or_else(|| unauthorized("missing X-Slack-Signature"))?;
        let timestamp = request
            .header(SlackEventSignatureVerifier::SLACK_SIGNED_TIMESTAMP)
            .ok_or_else(|| unauthorized("missing X-Slack-Request-Timestamp"))?;
        let body = std::str::from_utf8(request.body)
            .map_err(|_| unauthorized("the body is not UTF-8, so it is not from Slack"))?;
        self.verifier
            .verify(signature, body, timestamp)
            .map_err(|error| match error {
                SlackEventSignatureVerifierError::IncorrectOrExpiredTimestampError(_) => unauthorized(
                    "X-Slack-Request-Timestamp is more than 5 minutes away from now (a replay, or this host's clock is wrong)",
                ),
                SlackEventSignatureVerifierError::CryptoInitError(_) => {
                    unauthorized("channels.slack.signing_secret is empty")
                }
                _ => unauthorized("wrong X-Slack-Signature; check channels.slack.signing_secret"),
            })?;
        Ok(body)
    }

    /// Slash commands and interactivity payloads (`payload=` holding JSON) come form-encoded.
    fn form(&self, body: &str) -> WebhookReply {
        let fields: Map<String, Value> = url::form_urlencoded::parse(body.as_bytes())
            .map(|(key, value)| (key.into_owned(), Value::String(value.into_owned())))
            .collect();
        let fields = Value::Object(fields);
        if fields.get("ssl_check").is_some() {
            return WebhookReply::Respond(WebhookResponse::ok());
        }
        if let Some(payload) = fields["payload"].as_str() {
            return self.interaction(payload);
        }
        match command_message(&fields, &self.identity) {
            // An empty 200 acknowledges the command; the answer follows ephemerally.
            Some(message) => WebhookReply::Accept {
                messages: vec![message],
                ack: WebhookResponse::ok(),
            },
            None => WebhookReply::Ignore {
                reason: "a slack form post that is neither a slash command nor an interaction"
                    .into(),
                ack: WebhookResponse::ok(),
            },
        }
    }

    /// An interactivity payload: a button click is journalled (the empty 200 ends the
    /// button's spinner), anything else acknowledged and dropped.
    fn interaction(&self, payload: &str) -> WebhookReply {
        let ignore = |reason: String| WebhookReply::Ignore {
            reason,
            ack: WebhookResponse::ok(),
        };
        let value: Value = match serde_json::from_str(payload) {
            Ok(value) => value,
            Err(error) => return ignore(format!("unreadable slack interaction: {error}")),
        };
        match click_message(&value, &self.identity) {
            Some(message) => WebhookReply::Accept {
                messages: vec![message],
                ack: WebhookResponse::ok(),
            },
            None => ignore(format!(
                "a slack interaction of type {:?} that is no button click",
                value["type"].as_str().unwrap_or("")
            )),
        }
    }
}

impl WebhookHandler for EventsWebhook {
    fn handle(&self, request: &WebhookRequest<'_>) -> Result<WebhookReply, WebhookError> {
        let body = self.verify(request)?;
        let form = request
            .header("content-type")
            .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
        if form {
            return Ok(self.form(body));
        }
        let value: Value = match serde_json::from_str(body) {
            Ok(value) => value,
            // A signed body Slack would resend forever: acknowledge and drop it.
            Err(error) => {
                return Ok(WebhookReply::Ignore {
                    reason: format!("unreadable slack event: {error}"),
                    ack: WebhookResponse::ok(),
                });
            }
        };
        match value["type"].as_str() {
            Some("url_verification") => Ok(WebhookReply::Respond(WebhookResponse::json(
                &json!({"challenge": value["challenge"]}),
            ))),
            Some("event_callback") => {
                if let Some(retry) = request.header("x-slack-retry-num") {
                    tracing::debug!(
                        retry,
                        reason = request.header("x-slack-retry-reason").unwrap_or(""),
                        "Slack retried an event"
                    );
                }
                Ok(WebhookReply::Accept {
                    messages: event_message(&value, &self.identity, self.dm_threading)
                        .into_iter()
                        .collect(),
                    ack: WebhookResponse::ok(),
                })
            }
            other => Ok(WebhookReply::Ignore {
                reason: format!("slack sent an event of type {other:?}"),
                ack: WebhookResponse::ok(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use hmac::{Hmac, KeyInit, Mac};
    use sha2::Sha256;

    use super::*;

    const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";

    fn sign(timestamp: &str, body: &str) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).expect("key");
        mac.update(format!("v0:{timestamp}:{body}").as_bytes());
        format!("v0={}", hex::encode(mac.finalize().into_bytes()))
    }

    fn now() -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or_default()
    }

    fn handle(headers: &[(&str, &str)], body: &str) -> Result<WebhookReply, WebhookError> {
        let webhook = EventsWebhook::new(
            BotIdentity {
                user_id: "UBOT".into(),
                bot_id: None,
                team_id: "T1".into(),
                name: "antler".into(),
            },
            SECRET,
            DmThreading::PerDm,
        );
        let mut map = http::HeaderMap::new();
        for (name, value) in headers {
            map.insert(
                http::HeaderName::from_bytes(name.as_bytes()).expect("name"),
                value.parse().expect("value"),
            );
        }
        webhook.handle(&WebhookRequest {
            headers: &map,
            body: body.as_bytes(),
        })
    }

    fn signed(body: &str, age_secs: i64) -> Result<WebhookReply, WebhookError> {
        let ts = (now() - age_secs).to_string();
        handle(
            &[
                ("x-slack-request-timestamp", &ts),
                ("x-slack-signature", &sign(&ts, body)),
            ],
            body,
        )
    }

    #[test]
    fn requests_are_verified_before_they_are_read() {
        let body = r#"{"type":"url_verification","challenge":"3eZbrw1aB"}"#;
        let ts = now().to_string();
        let refused = [
            handle(&[], body),
            handle(&[("x-slack-request-timestamp", &ts)], body),
            handle(
                &[
                    ("x-slack-request-timestamp", &ts),
                    ("x-slack-signature", "v0=00ff"),
                ],
                body,
            ),
            handle(
                &[
                    ("x-slack-request-timestamp", &ts),
                    ("x-slack-signature", &sign(&ts, body)),
                ],
                r#"{"type":"url_verification","challenge":"forged"}"#,
            ),
            signed(body, 6 * 60),
            signed(body, -6 * 60),
        ];
        for (idx, result) in refused.into_iter().enumerate() {
            assert!(
                matches!(result, Err(WebhookError::Unauthorized(_))),
                "case {idx}"
            );
        }
        match signed(body, 30) {
            Ok(WebhookReply::Respond(response)) => {
                let answer: Value = serde_json::from_slice(&response.body).expect("json");
                assert_eq!(answer["challenge"], "3eZbrw1aB");
            }
            other => panic!("expected the challenge, got {other:?}"),
        }
    }

    #[test]
    fn events_and_slash_commands_become_messages() {
        let event = json!({"type": "event_callback", "team_id": "T1", "event_id": "Ev9",
            "event": {"type": "message", "channel_type": "im", "user": "U1", "text": "hi",
                "ts": "1.1", "channel": "D1"}})
        .to_string();
        match signed(&event, 0) {
            Ok(WebhookReply::Accept { messages, ack }) => {
                assert_eq!(messages.len(), 1);
                assert_eq!(messages[0].platform_message_id, "1.1");
                assert_eq!(ack.status, 200);
            }
            other => panic!("expected the message, got {other:?}"),
        }
        let form = "token=x&team_id=T1&channel_id=D1&channel_name=directmessage&user_id=U1&command=%2Fantler&text=new&trigger_id=1.2.3";
        let ts = now().to_string();
        let result = handle(
            &[
                ("x-slack-request-timestamp", &ts),
                ("x-slack-signature", &sign(&ts, form)),
                ("content-type", "application/x-www-form-urlencoded"),
            ],
            form,
        );
        match result {
            Ok(WebhookReply::Accept { messages, .. }) => assert_eq!(messages[0].text, "/new"),
            other => panic!("expected the command, got {other:?}"),
        }
        assert!(matches!(
            signed("not json", 0),
            Ok(WebhookReply::Ignore { .. })
        ));
    }

    fn form_post(body: &str, secret_ok: bool) -> Result<WebhookReply, WebhookError> {
        let ts = now().to_string();
        let signature = if secret_ok {
            sign(&ts, body)
        } else {
            let mut mac = Hmac::<Sha256>::new_from_slice(b"another-secret").expect("key");
            mac.update(format!("v0:{ts}:{body}").as_bytes());
            format!("v0={}", hex::encode(mac.finalize().into_bytes()))
        };
        handle(
            &[
                ("x-slack-request-timestamp", &ts),
                ("x-slack-signature", &signature),
                ("content-type", "application/x-www-form-urlencoded"),
            ],
            body,
        )
    }

    #[test]
    fn a_signed_button_click_is_journalled_and_a_forged_one_refused() {
        let payload = json!({"type": "block_actions", "team": {"id": "T1"},
            "user": {"id": "U1", "name": "alice"},
            "container": {"type": "message", "message_ts": "5.5", "channel_id": "C1", "thread_ts": "4.4"},
            "actions": [{"type": "button", "action_id": "antler_2", "value": "ap:9:d",
                "action_ts": "6.6"}]});
        let body: String = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("payload", &payload.to_string())
            .finish();
        match form_post(&body, true) {
            Ok(WebhookReply::Accept { messages, ack }) => {
                assert_eq!(messages.len(), 1);
                assert_eq!(messages[0].platform_message_id, "click:U1:6.6");
                assert_eq!(messages[0].topic_id.as_deref(), Some("4.4"));
                let click = messages[0].click.as_ref().expect("a click");
                assert_eq!(
                    (click.value.as_str(), click.message_id.as_str()),
                    ("ap:9:d", "5.5")
                );
                assert_eq!((ack.status, ack.body.len()), (200, 0));
            }
            other => panic!("expected the click, got {other:?}"),
        }
        assert!(matches!(
            form_post(&body, false),
            Err(WebhookError::Unauthorized(_))
        ));
        assert!(matches!(
            handle(
                &[("content-type", "application/x-www-form-urlencoded")],
                &body
            ),
            Err(WebhookError::Unauthorized(_))
        ));
        let modal: String = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("payload", r#"{"type":"view_submission"}"#)
            .finish();
        assert!(matches!(
            form_post(&modal, true),
            Ok(WebhookReply::Ignore { .. })
        ));
    }
}
