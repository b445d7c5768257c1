//! Signatures of webhook deliveries, checked on the raw body before it is parsed.
//!
//! `antler`: `X-Antler-Signature: sha256=<hex of HMAC-SHA256(secret, timestamp + "." + body)>`
//! with `X-Antler-Timestamp` (Unix seconds) within [`MAX_SKEW_SECONDS`] of now, so a captured
//! delivery cannot be replayed later. `github`: `X-Hub-Signature-256: sha256=<hex of
//! HMAC-SHA256(secret, body)>`. Compared in constant time.

use chrono::{DateTime, Utc};
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::config::webhook::SignatureScheme;

/// How far a delivery's timestamp may be from now.
pub const MAX_SKEW_SECONDS: i64 = 300;

const ANTLER_SIGNATURE: &str = "X-Antler-Signature";
const ANTLER_TIMESTAMP: &str = "X-Antler-Timestamp";
const GITHUB_SIGNATURE: &str = "X-Hub-Signature-256";

/// Why a delivery's signature was refused (HTTP 401).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("missing header {0}")]
    Missing(&'static str),
    #[error("the signature does not match the body")]
    Mismatch,
    #[error("the timestamp is more than 5 minutes from now; sign each delivery when it is sent")]
    Stale,
    #[error("malformed header {0}")]
    Malformed(&'static str),
}

/// Checks `body` against the headers its `scheme` signs with (`header` looks one up by name).
pub fn verify(
    scheme: SignatureScheme,
    secret: &[u8],
    header: &dyn Fn(&str) -> Option<String>,
    body: &[u8],
    now: DateTime<Utc>,
) -> Result<(), SignatureError> {
    match scheme {
        SignatureScheme::Antler => {
            let signature = required(header, ANTLER_SIGNATURE)?;
            let timestamp = required(header, ANTLER_TIMESTAMP)?;
            let seconds: i64 = timestamp
                .trim()
                .parse()
                .map_err(|_| SignatureError::Malformed(ANTLER_TIMESTAMP))?;
            let digest = hex_digest(&signature, ANTLER_SIGNATURE)?;
            // Checked before the skew, so a forger learns nothing about the clock.
            check(secret, &[timestamp.trim().as_bytes(), b".", body], &digest)?;
            if (now.timestamp() - seconds).abs() > MAX_SKEW_SECONDS {
                return Err(SignatureError::Stale);
            }
            Ok(())
        }
        SignatureScheme::Github => {
            let signature = required(header, GITHUB_SIGNATURE)?;
            let digest = hex_digest(&signature, GITHUB_SIGNATURE)?;
            check(secret, &[body], &digest)
        }
    }
}

fn required(
    header: &dyn Fn(&str) -> Option<String>,
    name: &'static str,
) -> Result<String, SignatureError> {
    header(name)
        .filter(|value| !value.trim().is_empty())
        .ok_or(SignatureError::Missing(name))
}

/// The bytes of `sha256=<hex>`.
fn hex_digest(value: &str, name: &'static str) -> Result<Vec<u8>, SignatureError> {
    let hex_part = value
        .trim()
        .strip_prefix("sha256=")
        .ok_or(SignatureError::Malformed(name))?;
    hex::decode(hex_part).map_err(|_| SignatureError::Malformed(name))
}

fn check(secret: &[u8], parts: &[&[u8]], expected: &[u8]) -> Result<(), SignatureError> {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).map_err(|_| SignatureError::Mismatch)?;
    for part in parts {
        mac.update(part);
    }
    mac.verify_slice(expected)
        .map_err(|_| SignatureError::Mismatch)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use chrono::TimeZone;

    use super::*;

    const SECRET: &str = "It's a Secret to Everybody";

    fn headers(pairs: &[(&str, String)]) -> impl Fn(&str) -> Option<String> + use<> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_ascii_lowercase(), v.clone()))
            .collect();
        move |name: &str| map.get(&name.to_ascii_lowercase()).cloned()
    }

    fn at(seconds: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(seconds, 0).unwrap()
    }

    #[test]
    fn githubs_documented_example_verifies() {
        let signature =
            "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17".to_string();
        let lookup = headers(&[("X-Hub-Signature-256", signature)]);
        let body = b"Hello, World!";
        let verify_github = |body: &[u8]| {
            verify(
                SignatureScheme::Github,
                SECRET.as_bytes(),
                &lookup,
                body,
                at(0),
            )
        };
        assert_eq!(verify_github(body), Ok(()));
        assert_eq!(
            verify_github(b"Hello, World?"),
            Err(SignatureError::Mismatch)
        );
        let none = headers(&[]);
        assert_eq!(
            verify(
                SignatureScheme::Github,
                SECRET.as_bytes(),
                &none,
                body,
                at(0)
            ),
            Err(SignatureError::Missing("X-Hub-Signature-256"))
        );
    }

    #[test]
    fn antler_signatures_cover_the_timestamp_and_expire() {
        let body = br#"{"status":"firing"}"#;
        let now = 1_765_000_000;
        let signed = |timestamp: i64| {
            let signature =
                antler_test_support::antler_signature(SECRET, &timestamp.to_string(), body);
            headers(&[
                ("x-antler-signature", signature),
                ("x-antler-timestamp", timestamp.to_string()),
            ])
        };
        let check = |lookup: &dyn Fn(&str) -> Option<String>, body: &[u8], now: i64| {
            verify(
                SignatureScheme::Antler,
                SECRET.as_bytes(),
                lookup,
                body,
                at(now),
            )
        };
        assert_eq!(check(&signed(now), body, now), Ok(()));
        assert_eq!(check(&signed(now - 299), body, now), Ok(()));
        assert_eq!(check(&signed(now + 299), body, now), Ok(()));
        assert_eq!(
            check(&signed(now - 301), body, now),
            Err(SignatureError::Stale)
        );
        assert_eq!(
            check(&signed(now), b"{}", now),
            Err(SignatureError::Mismatch)
        );
        // The timestamp is signed: moving it forward breaks the signature.
        let moved = headers(&[
            (
                "x-antler-signature",
                antler_test_support::antler_signature(SECRET, &(now - 600).to_string(), body),
            ),
            ("x-antler-timestamp", now.to_string()),
        ]);
        assert_eq!(check(&moved, body, now), Err(SignatureError::Mismatch));
        let unsigned = headers(&[("x-antler-timestamp", now.to_string())]);
        assert_eq!(
            check(&unsigned, body, now),
            Err(SignatureError::Missing("X-Antler-Signature"))
        );
        let malformed = headers(&[
            ("x-antler-signature", "md5=abc".to_string()),
            ("x-antler-timestamp", now.to_string()),
        ]);
        assert_eq!(
            check(&malformed, body, now),
            Err(SignatureError::Malformed("X-Antler-Signature"))
        );
        let bad_time = headers(&[
            ("x-antler-signature", "sha256=00".to_string()),
            ("x-antler-timestamp", "yesterday".to_string()),
        ]);
        assert_eq!(
            check(&bad_time, body, now),
            Err(SignatureError::Malformed("X-Antler-Timestamp"))
        );
    }
}
