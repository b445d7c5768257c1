//! Webhook mode: the secret header is checked in constant time before the body is parsed.

use antler_channel::{WebhookError, WebhookHandler, WebhookReply, WebhookRequest, WebhookResponse};
use subtle::ConstantTimeEq;
use teloxide::types::Update;

use crate::convert::{BotIdentity, message_of};

const SECRET_HEADER: &str = "x-telegram-bot-api-secret-token";

pub(crate) struct TelegramWebhook {
    identity: BotIdentity,
    secret: String,
}

impl TelegramWebhook {
    pub(crate) fn new(identity: BotIdentity, secret: &str) -> Self {
        Self {
            identity,
            secret: secret.to_string(),
        }
    }
}

impl WebhookHandler for TelegramWebhook {
    fn handle(&self, request: &WebhookRequest<'_>) -> Result<WebhookReply, WebhookError> {
        let given = request
            .headers
            .get(SECRET_HEADER)
            .map(|value| value.as_bytes())
            .unwrap_or_default();
        if self.secret.is_empty() || !bool::from(given.ct_eq(self.secret.as_bytes())) {
            return Err(WebhookError::Unauthorized(
                "missing or wrong X-Telegram-Bot-Api-Secret-Token".into(),
            ));
        }
        let update: Update = match serde_json::from_slice(request.body) {
            Ok(update) => update,
            // Telegram would retry a bad update forever: acknowledge and drop it.
            Err(error) => {
                return Ok(WebhookReply::Ignore {
                    reason: format!("unreadable telegram update: {error}"),
                    ack: WebhookResponse::ok(),
                });
            }
        };
        Ok(WebhookReply::Accept {
            messages: message_of(&update, &self.identity).into_iter().collect(),
            ack: WebhookResponse::ok(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handle(secret: Option<&str>, body: &str) -> Result<WebhookReply, WebhookError> {
        let webhook = TelegramWebhook::new(
            BotIdentity {
                id: 999,
                username: "AntlerBot".into(),
            },
            "s3cret",
        );
        let mut headers = http::HeaderMap::new();
        if let Some(secret) = secret {
            headers.insert(SECRET_HEADER, secret.parse().expect("header"));
        }
        webhook.handle(&WebhookRequest {
            headers: &headers,
            body: body.as_bytes(),
        })
    }

    #[test]
    fn the_secret_is_checked_before_the_body_is_read() {
        assert!(matches!(
            handle(None, "{}"),
            Err(WebhookError::Unauthorized(_))
        ));
        assert!(matches!(
            handle(Some("wrong"), "not even json"),
            Err(WebhookError::Unauthorized(_))
        ));
        assert!(matches!(
            handle(Some("s3cret"), "not json"),
            Ok(WebhookReply::Ignore { .. })
        ));
        let update = r#"{"update_id": 5, "message": {"message_id": 10, "date": 1700000000,
            "chat": {"id": 42, "type": "private", "first_name": "Ann"},
            "from": {"id": 42, "is_bot": false, "first_name": "Ann"}, "text": "hi"}}"#;
        match handle(Some("s3cret"), update) {
            Ok(WebhookReply::Accept { messages, ack }) => {
                assert_eq!(messages.len(), 1);
                assert_eq!(messages[0].text, "hi");
                assert_eq!(ack.status, 200);
            }
            other => panic!("expected the message, got {other:?}"),
        }
    }

    #[test]
    fn a_pushed_callback_query_is_a_click() {
        let update = r#"{"update_id": 6, "callback_query": {"id": "77001", "chat_instance": "1",
            "from": {"id": 42, "is_bot": false, "first_name": "Ann"},
            "message": {"message_id": 11, "date": 1700000001,
                "chat": {"id": 42, "type": "private", "first_name": "Ann"},
                "from": {"id": 999, "is_bot": true, "first_name": "Antler"}, "text": "Approve?"},
            "data": "ap:r1:d"}}"#;
        match handle(Some("s3cret"), update) {
            Ok(WebhookReply::Accept { messages, .. }) => {
                assert_eq!(messages.len(), 1);
                let click = messages[0].click.as_ref().expect("a click");
                assert_eq!(
                    (click.value.as_str(), click.message_id.as_str()),
                    ("ap:r1:d", "11")
                );
                assert_eq!(messages[0].platform_message_id, "77001");
            }
            other => panic!("expected the click, got {other:?}"),
        }
    }
}
