//! How other systems sign deliveries to Antler's webhook endpoints (`POST /hooks/{endpoint}`):
//! Antler's own scheme and GitHub's.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

fn hmac_hex(secret: &str, parts: &[&[u8]]) -> String {
    let mut mac = match Hmac::<Sha256>::new_from_slice(secret.as_bytes()) {
        Ok(mac) => mac,
        Err(error) => panic!("test support: hmac key: {error}"),
    };
    for part in parts {
        mac.update(part);
    }
    hex::encode(mac.finalize().into_bytes())
}

/// `X-Antler-Signature` of `body` sent at `timestamp` (Unix seconds, as in
/// `X-Antler-Timestamp`): `sha256=<hex of HMAC-SHA256(secret, timestamp + "." + body)>`.
pub fn antler_signature(secret: &str, timestamp: &str, body: &[u8]) -> String {
    format!(
        "sha256={}",
        hmac_hex(secret, &[timestamp.as_bytes(), b".", body])
    )
}

/// `X-Hub-Signature-256` of `body` as GitHub sends it: `sha256=<hex of HMAC-SHA256(secret,
/// body)>`.
pub fn github_signature(secret: &str, body: &[u8]) -> String {
    format!("sha256={}", hmac_hex(secret, &[body]))
}

/// The headers of one delivery signed the Antler way at `timestamp`, with `delivery` as its
/// `X-Antler-Delivery`.
pub fn antler_headers(
    secret: &str,
    timestamp: i64,
    delivery: &str,
    body: &[u8],
) -> Vec<(&'static str, String)> {
    let timestamp = timestamp.to_string();
    vec![
        ("content-type", "application/json".to_string()),
        ("x-antler-timestamp", timestamp.clone()),
        (
            "x-antler-signature",
            antler_signature(secret, &timestamp, body),
        ),
        ("x-antler-delivery", delivery.to_string()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn github_signature_matches_githubs_documented_example() {
        // docs.github.com "Validating webhook deliveries": secret "It's a Secret to Everybody",
        // payload "Hello, World!".
        assert_eq!(
            github_signature("It's a Secret to Everybody", b"Hello, World!"),
            "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
        );
    }
}
