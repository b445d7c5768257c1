//! The webhook handler on pushes made like Feishu's: encrypted, signed, and the forgeries.

use aes::cipher::block_padding::Pkcs7;
use aes::cipher::{BlockEncryptMut, KeyIvInit};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;

use super::*;
use crate::crypto::{aes_key, signature};

const TOKEN: &str = "verification-token";
const KEY: &str = "encrypt-key-for-tests";

fn webhook(encrypt_key: Option<&str>) -> FeishuWebhook {
    FeishuWebhook::new(
        BotIdentity {
            open_id: "ou_bot".into(),
            name: "Antler".into(),
        },
        TOKEN,
        encrypt_key,
    )
}

fn encrypt(plain: &str) -> String {
    let iv = [7u8; 16];
    let ciphertext = cbc::Encryptor::<aes::Aes256>::new_from_slices(&aes_key(KEY), &iv)
        .expect("key and iv")
        .encrypt_padded_vec_mut::<Pkcs7>(plain.as_bytes());
    let blob = [iv.as_slice(), &ciphertext].concat();
    json!({"encrypt": BASE64.encode(blob)}).to_string()
}

fn headers(pairs: &[(&str, String)]) -> http::HeaderMap {
    let mut map = http::HeaderMap::new();
    for (name, value) in pairs {
        map.insert(
            http::HeaderName::from_bytes(name.as_bytes()).expect("name"),
            value.parse().expect("value"),
        );
    }
    map
}

fn signed_headers(body: &str, age_secs: i64, key: &str) -> http::HeaderMap {
    let timestamp = (now_secs() - age_secs).to_string();
    headers(&[
        (TIMESTAMP_HEADER, timestamp.clone()),
        (NONCE_HEADER, "nonce-1".into()),
        (
            SIGNATURE_HEADER,
            signature(&timestamp, "nonce-1", key, body.as_bytes()),
        ),
    ])
}

fn handle(
    hook: &FeishuWebhook,
    headers: &http::HeaderMap,
    body: &str,
) -> Result<WebhookReply, WebhookError> {
    hook.handle(&WebhookRequest {
        headers,
        body: body.as_bytes(),
    })
}

fn message_event(token: &str) -> String {
    json!({"schema": "2.0", "header": {"event_id": "ev_1", "event_type": "im.message.receive_v1",
        "create_time": "1700000000000", "token": token, "app_id": "cli_1", "tenant_key": "tk1"},
        "event": {"sender": {"sender_id": {"open_id": "ou_alice"}, "sender_type": "user", "tenant_key": "tk1"},
            "message": {"message_id": "om_1", "chat_id": "oc_1", "chat_type": "p2p",
                "message_type": "text", "content": "{\"text\":\"hello\"}"}}})
    .to_string()
}

fn challenge(token: &str) -> String {
    json!({"challenge": "ajls384kdj", "token": token, "type": "url_verification"}).to_string()
}

fn challenge_answer(result: Result<WebhookReply, WebhookError>) -> Value {
    match result {
        Ok(WebhookReply::Respond(response)) => {
            serde_json::from_slice(&response.body).expect("json")
        }
        other => panic!("expected the challenge's answer, got {other:?}"),
    }
}

#[test]
fn challenges_are_answered_plain_and_encrypted_when_the_token_matches() {
    let plain = webhook(None);
    let answer = challenge_answer(handle(&plain, &headers(&[]), &challenge(TOKEN)));
    assert_eq!(answer, json!({"challenge": "ajls384kdj"}));
    assert!(matches!(
        handle(&plain, &headers(&[]), &challenge("forged")),
        Err(WebhookError::Unauthorized(_))
    ));

    // Feishu does not sign the URL verification, even with an Encrypt Key.
    let encrypted = webhook(Some(KEY));
    let body = encrypt(&challenge(TOKEN));
    let answer = challenge_answer(handle(&encrypted, &headers(&[]), &body));
    assert_eq!(answer["challenge"], "ajls384kdj");
    let forged = encrypt(&challenge("forged"));
    assert!(matches!(
        handle(&encrypted, &headers(&[]), &forged),
        Err(WebhookError::Unauthorized(_))
    ));
}

#[test]
fn signed_encrypted_events_become_messages() {
    let hook = webhook(Some(KEY));
    let body = encrypt(&message_event(TOKEN));
    match handle(&hook, &signed_headers(&body, 10, KEY), &body) {
        Ok(WebhookReply::Accept { messages, ack }) => {
            assert_eq!(messages.len(), 1);
            assert_eq!(messages[0].text, "hello");
            assert_eq!(messages[0].platform_message_id, "om_1");
            assert_eq!(ack.status, 200);
        }
        other => panic!("expected the message, got {other:?}"),
    }
}

#[test]
fn forged_stale_unsigned_tampered_or_mistokened_pushes_are_refused() {
    let hook = webhook(Some(KEY));
    let body = encrypt(&message_event(TOKEN));
    let mut tampered: Value = serde_json::from_str(&body).expect("json");
    let mut blob = BASE64
        .decode(tampered["encrypt"].as_str().expect("encrypt"))
        .expect("b64");
    let last = blob.len() - 1;
    blob[last] ^= 0x40;
    tampered["encrypt"] = json!(BASE64.encode(&blob));
    let tampered = tampered.to_string();
    let wrong_token = encrypt(&message_event("not-our-token"));
    let unauthorized = [
        ("unsigned", handle(&hook, &headers(&[]), &body)),
        (
            "signed with another key",
            handle(&hook, &signed_headers(&body, 0, "other"), &body),
        ),
        (
            "stale",
            handle(&hook, &signed_headers(&body, 6 * 60, KEY), &body),
        ),
        (
            "from the future",
            handle(&hook, &signed_headers(&body, -6 * 60, KEY), &body),
        ),
        // The signature covers the exact bytes: the original one no longer matches.
        (
            "tampered, old signature",
            handle(&hook, &signed_headers(&body, 0, KEY), &tampered),
        ),
        (
            "wrong verification token",
            handle(&hook, &signed_headers(&wrong_token, 0, KEY), &wrong_token),
        ),
        (
            "plain body",
            handle(&hook, &signed_headers("{}", 0, KEY), "{}"),
        ),
    ];
    for (case, result) in unauthorized {
        assert!(
            matches!(result, Err(WebhookError::Unauthorized(_))),
            "{case}: {result:?}"
        );
    }
    let malformed = [
        ("tampered, re-signed", tampered.clone()),
        ("not json", "not json".to_string()),
        ("encrypt not base64", json!({"encrypt": "%%%"}).to_string()),
        ("encrypt a number", json!({"encrypt": 5}).to_string()),
        (
            "truncated",
            json!({"encrypt": "AAECAwQFBgcICQoLDA0ODw=="}).to_string(),
        ),
    ];
    for (case, body) in malformed {
        let result = handle(&hook, &signed_headers(&body, 0, KEY), &body);
        assert!(
            matches!(result, Err(WebhookError::Malformed(_))),
            "{case}: {result:?}"
        );
    }
}

#[test]
fn without_an_encrypt_key_the_token_is_the_check() {
    let hook = webhook(None);
    assert!(matches!(
        handle(&hook, &headers(&[]), &message_event(TOKEN)),
        Ok(WebhookReply::Accept { .. })
    ));
    assert!(matches!(
        handle(&hook, &headers(&[]), &message_event("forged")),
        Err(WebhookError::Unauthorized(_))
    ));
    let encrypted = encrypt(&message_event(TOKEN));
    assert!(
        matches!(handle(&hook, &headers(&[]), &encrypted), Err(WebhookError::Malformed(why)) if why.contains("encrypt_key"))
    );
    let read = json!({"schema": "2.0", "header": {"event_type": "im.message.message_read_v1", "token": TOKEN}, "event": {}}).to_string();
    assert!(matches!(
        handle(&hook, &headers(&[]), &read),
        Ok(WebhookReply::Ignore { .. })
    ));
    let v1 = json!({"uuid": "u", "token": TOKEN, "ts": "1", "type": "event_callback", "event": {"type": "message"}}).to_string();
    assert!(matches!(
        handle(&hook, &headers(&[]), &v1),
        Ok(WebhookReply::Ignore { .. })
    ));
}
