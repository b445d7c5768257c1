//! Event pushes made like Feishu's: the v2 envelope, encrypted with the Encrypt Key
//! (`base64(iv ‖ AES-256-CBC(SHA-256(key), PKCS#7))`) and signed (`X-Lark-Signature` = hex
//! SHA-256 of timestamp ‖ nonce ‖ key ‖ body); and the forgeries Feishu would never send.
//! Written from the documentation, independently of the adapter's decryptor.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aes::cipher::block_padding::Pkcs7;
use aes::cipher::{BlockEncryptMut, KeyIvInit};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// Encrypts `plain` as Feishu does, with an IV derived from `iv_seed` (deterministic in tests).
pub fn encrypt_feishu_event(encrypt_key: &str, plain: &str, iv_seed: &str) -> String {
    let key = Sha256::digest(encrypt_key.as_bytes());
    let iv_full = Sha256::digest(iv_seed.as_bytes());
    let iv = &iv_full[..16];
    let ciphertext = match cbc::Encryptor::<aes::Aes256>::new_from_slices(&key, iv) {
        Ok(cipher) => cipher.encrypt_padded_vec_mut::<Pkcs7>(plain.as_bytes()),
        Err(error) => panic!("test support: aes key/iv: {error}"),
    };
    BASE64.encode([iv, ciphertext.as_slice()].concat())
}

/// A body a padding-oracle attacker posts: `plain` encrypted with the Encrypt Key, then the
/// last byte of the block before the last flipped, which breaks the padding (PKCS#7's length
/// byte) of the decrypted last block. Needs a `plain` of 16 bytes or more.
pub fn bad_padding_body(encrypt_key: &str, plain: &str) -> String {
    let encrypted = encrypt_feishu_event(encrypt_key, plain, "attack");
    let mut blob = match BASE64.decode(encrypted) {
        Ok(blob) => blob,
        Err(error) => panic!("test support: base64: {error}"),
    };
    let at = blob.len() - 17;
    blob[at] ^= 0x5a;
    json!({"encrypt": BASE64.encode(blob)}).to_string()
}

/// `X-Lark-Signature` of `body`.
pub fn sign_feishu_event(timestamp: &str, nonce: &str, encrypt_key: &str, body: &str) -> String {
    let mut hasher = Sha256::new();
    for part in [timestamp, nonce, encrypt_key, body] {
        hasher.update(part.as_bytes());
    }
    hex::encode(hasher.finalize())
}

/// How a push is signed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FeishuSigning {
    Valid,
    /// Signed with another Encrypt Key.
    Forged,
    /// No signature headers (as Feishu sends the URL verification).
    Missing,
    /// Correctly signed, but the timestamp is this old (a replay).
    Stale(Duration),
}

/// Posts pushes to a daemon's `/channels/feishu/webhook`.
#[derive(Clone)]
pub struct FeishuEventSender {
    url: String,
    encrypt_key: Option<String>,
    http: reqwest::Client,
}

impl FeishuEventSender {
    /// `url` is the full webhook URL; `encrypt_key` the app's Encrypt Key (None = plain pushes).
    pub fn new(url: impl Into<String>, encrypt_key: Option<&str>) -> Self {
        let http = match reqwest::Client::builder().no_proxy().build() {
            Ok(http) => http,
            Err(error) => panic!("test support: http client: {error}"),
        };
        Self {
            url: url.into(),
            encrypt_key: encrypt_key.map(str::to_string),
            http,
        }
    }

    /// The body Feishu posts for `payload`: encrypted when there is a key.
    pub fn body(&self, payload: &Value, iv_seed: &str) -> String {
        match &self.encrypt_key {
            Some(key) => {
                json!({"encrypt": encrypt_feishu_event(key, &payload.to_string(), iv_seed)})
                    .to_string()
            }
            None => payload.to_string(),
        }
    }

    /// Posts `body` signed as asked; returns the status and the answer.
    pub async fn post(&self, body: &str, signing: FeishuSigning) -> (u16, String) {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or_default();
        let mut request = self
            .http
            .post(&self.url)
            .header("content-type", "application/json; charset=utf-8")
            .body(body.to_string());
        let key = self.encrypt_key.clone().unwrap_or_default();
        let signed = match signing {
            FeishuSigning::Valid => Some((now, key)),
            FeishuSigning::Forged => Some((now, "not-the-encrypt-key".to_string())),
            FeishuSigning::Missing => None,
            FeishuSigning::Stale(age) => Some((now.saturating_sub(age.as_secs()), key)),
        };
        if let Some((timestamp, key)) = signed {
            let timestamp = timestamp.to_string();
            let nonce = format!("{:x}", Sha256::digest(body.as_bytes())[0]);
            let signature = sign_feishu_event(&timestamp, &nonce, &key, body);
            request = request
                .header("x-lark-request-timestamp", timestamp)
                .header("x-lark-request-nonce", nonce)
                .header("x-lark-signature", signature);
        }
        match request.send().await {
            Ok(response) => {
                let status = response.status().as_u16();
                (status, response.text().await.unwrap_or_default())
            }
            Err(error) => (0, format!("test support: posting to {}: {error}", self.url)),
        }
    }
}

/// The URL-verification request Feishu sends when the Request URL is saved.
pub fn url_verification(challenge: &str, token: &str) -> Value {
    json!({"challenge": challenge, "token": token, "type": "url_verification"})
}

/// An `im.message.receive_v1` push around `message` (the `event.message` object).
pub(crate) fn message_receive(
    event_id: &str,
    token: &str,
    app_id: &str,
    tenant: &str,
    sender_open_id: &str,
    message: Value,
) -> Value {
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default();
    json!({
        "schema": "2.0",
        "header": {"event_id": event_id, "event_type": "im.message.receive_v1",
            "create_time": now_ms.to_string(), "token": token, "app_id": app_id,
            "tenant_key": tenant},
        "event": {
            "sender": {"sender_id": {"union_id": format!("on_{sender_open_id}"),
                "user_id": format!("u_{sender_open_id}"), "open_id": sender_open_id},
                "sender_type": "user", "tenant_key": tenant},
            "message": message
        }
    })
}
