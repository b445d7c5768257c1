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

/// Encrypts raw bytes (not necessarily JSON) under `KEY`.
fn encrypt_bytes(plain: &[u8]) -> String {
    let iv = [9u8; 16];
    let ciphertext = cbc::Encryptor::<aes::Aes256>::new_from_slices(&aes_key(KEY), &iv)
        .expect("key and iv")
        .encrypt_padded_vec_mut::<Pkcs7>(plain);
    BASE64.encode([iv.as_slice(), &ciphertext].concat())
}

/// A body whose last block's padding is broken: what a padding-oracle attacker sends.
fn bad_padding_body() -> String {
    let mut blob = BASE64
        .decode(encrypt_bytes(b"{\"type\":\"url_verification\"}"))
        .expect("b64");
    // The IV of the last block is the block before it: flipping its last byte flips the last
    // plaintext byte, the padding length.
    let at = blob.len() - 17;
    blob[at] ^= 0x5a;
    json!({"encrypt": BASE64.encode(&blob)}).to_string()
}

fn concealed(result: Result<WebhookReply, WebhookError>) -> String {
    match result {
        Err(WebhookError::Concealed { reason }) => reason,
        other => panic!("expected a concealed refusal, got {other:?}"),
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
    // Signed, it is answered too.
    let answer = challenge_answer(handle(&encrypted, &signed_headers(&body, 0, KEY), &body));
    assert_eq!(answer["challenge"], "ajls384kdj");
    let forged = encrypt(&challenge("forged"));
    concealed(handle(&encrypted, &headers(&[]), &forged));
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

/// With an Encrypt Key every refusal is one answer: the sender cannot tell a bad padding from
/// a bad JSON from a missing signature. The reasons still differ, for the log.
#[test]
fn with_an_encrypt_key_every_refusal_is_concealed_and_its_reason_kept_for_the_log() {
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
    let not_json = json!({"encrypt": encrypt_bytes(b"not json at all")}).to_string();
    let bad_padding = bad_padding_body();
    let unsigned = headers(&[]);
    let signed = |body: &str| signed_headers(body, 0, KEY);
    // (case, headers, body, a word of the logged reason)
    let cases: Vec<(&str, http::HeaderMap, String, &str)> = vec![
        ("unsigned event", unsigned.clone(), body.clone(), "unsigned"),
        (
            "unsigned bad padding",
            unsigned.clone(),
            bad_padding.clone(),
            "unsigned",
        ),
        (
            "unsigned bad JSON",
            unsigned.clone(),
            not_json.clone(),
            "unsigned",
        ),
        (
            "unsigned wrong-token challenge",
            unsigned.clone(),
            encrypt(&challenge("x")),
            "unsigned",
        ),
        (
            "unsigned not base64",
            unsigned.clone(),
            json!({"encrypt": "%%%"}).to_string(),
            "base64",
        ),
        (
            "signed with another key",
            signed_headers(&body, 0, "other"),
            body.clone(),
            "X-Lark-Signature",
        ),
        (
            "stale",
            signed_headers(&body, 6 * 60, KEY),
            body.clone(),
            "5 minutes",
        ),
        (
            "from the future",
            signed_headers(&body, -6 * 60, KEY),
            body.clone(),
            "5 minutes",
        ),
        (
            "tampered, old signature",
            signed(&body),
            tampered.clone(),
            "X-Lark-Signature",
        ),
        (
            "tampered, re-signed",
            signed(&tampered),
            tampered.clone(),
            "padding",
        ),
        (
            "signed bad padding",
            signed(&bad_padding),
            bad_padding.clone(),
            "padding",
        ),
        (
            "signed bad JSON",
            signed(&not_json),
            not_json.clone(),
            "not JSON",
        ),
        (
            "wrong verification token",
            signed(&wrong_token),
            wrong_token.clone(),
            "verification token",
        ),
        ("plain body", signed("{}"), "{}".into(), "encrypt"),
        (
            "not json",
            signed("not json"),
            "not json".into(),
            "not JSON",
        ),
        (
            "encrypt a number",
            signed(r#"{"encrypt":5}"#),
            r#"{"encrypt":5}"#.into(),
            "encrypt",
        ),
        (
            "truncated",
            signed(r#"{"encrypt":"AAECAwQFBgcICQoLDA0ODw=="}"#),
            r#"{"encrypt":"AAECAwQFBgcICQoLDA0ODw=="}"#.into(),
            "bytes",
        ),
    ];
    for (case, headers, body, reason_word) in cases {
        let reason = concealed(handle(&hook, &headers, &body));
        assert!(reason.contains(reason_word), "{case}: {reason}");
    }
}

#[test]
fn an_unsigned_push_does_the_same_work_whatever_its_padding() {
    let good = crate::crypto::decrypt_uniform(KEY, &encrypt_bytes(b"not json")).expect("shape");
    assert!(good.padding_valid);
    assert_eq!(good.plain, b"not json");
    let body: Value = serde_json::from_str(&bad_padding_body()).expect("json");
    let bad = crate::crypto::decrypt_uniform(KEY, body["encrypt"].as_str().expect("encrypt"))
        .expect("shape");
    assert!(!bad.padding_valid);
    assert_eq!(
        bad.plain.len(),
        32,
        "the whole plaintext, still parsed as JSON"
    );
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

fn card_action(token: &str) -> String {
    json!({"schema": "2.0", "header": {"event_id": "ev_click", "event_type": "card.action.trigger",
        "create_time": "1700000000000", "token": token, "app_id": "cli_1", "tenant_key": "tk1"},
        "event": {"operator": {"open_id": "ou_alice", "tenant_key": "tk1"}, "token": "c-1",
            "action": {"tag": "button", "value": {"antler": "ap:1:a", "topic": "om_root"}},
            "host": "im_message",
            "context": {"open_message_id": "om_card", "open_chat_id": "oc_1"}}})
    .to_string()
}

#[test]
fn card_clicks_are_verified_like_every_push() {
    let encrypted = webhook(Some(KEY));
    let body = encrypt(&card_action(TOKEN));
    match handle(&encrypted, &signed_headers(&body, 0, KEY), &body) {
        Ok(WebhookReply::Accept { messages, ack }) => {
            assert_eq!(messages.len(), 1);
            assert_eq!(messages[0].platform_message_id, "click:ev_click");
            let click = messages[0].click.as_ref().expect("a click");
            assert_eq!(
                (click.value.as_str(), click.message_id.as_str()),
                ("ap:1:a", "om_card")
            );
            assert_eq!((ack.status, ack.body.as_slice()), (200, b"{}".as_slice()));
        }
        other => panic!("expected the click, got {other:?}"),
    }
    // Unsigned, signed with another key, stale, or carrying another token: refused alike.
    concealed(handle(&encrypted, &headers(&[]), &body));
    concealed(handle(
        &encrypted,
        &signed_headers(&body, 0, "another-key"),
        &body,
    ));
    concealed(handle(
        &encrypted,
        &signed_headers(&body, 10 * 60, KEY),
        &body,
    ));
    let foreign = encrypt(&card_action("forged"));
    concealed(handle(
        &encrypted,
        &signed_headers(&foreign, 0, KEY),
        &foreign,
    ));
    // Without an Encrypt Key the token is the check.
    let plain = webhook(None);
    assert!(matches!(
        handle(&plain, &headers(&[]), &card_action(TOKEN)),
        Ok(WebhookReply::Accept { .. })
    ));
    assert!(matches!(
        handle(&plain, &headers(&[]), &card_action("forged")),
        Err(WebhookError::Unauthorized(_))
    ));
}
