//! PKCE (RFC 7636) with S256, and the `state` of an authorization request: both from the
//! operating system's CSPRNG (through `rand`'s thread-local generator), so neither the code
//! nor the callback can be guessed by another program on the machine.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngCore as _;
use sha2::{Digest, Sha256};

use crate::config::Secret;

/// A code verifier and its S256 challenge.
pub(crate) struct Pkce {
    /// 43 characters of the unreserved set (32 random bytes, base64url): sent only to the
    /// token endpoint.
    pub verifier: Secret,
    /// `BASE64URL(SHA256(verifier))`: sent in the authorization request.
    pub challenge: String,
}

impl Pkce {
    pub(crate) fn generate() -> Self {
        let verifier = random_token();
        let challenge = challenge_of(&verifier);
        Self {
            verifier: Secret::new(verifier),
            challenge,
        }
    }
}

/// The S256 challenge of `verifier`.
pub(crate) fn challenge_of(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// 256 random bits as 43 base64url characters (a PKCE verifier, an OAuth `state`).
pub(crate) fn random_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_challenge_matches_rfc_7636_appendix_b() {
        assert_eq!(
            challenge_of("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }

    #[test]
    fn verifiers_are_43_unreserved_characters_and_never_repeat() {
        let first = Pkce::generate();
        let second = Pkce::generate();
        let verifier = first.verifier.expose();
        assert_eq!(verifier.len(), 43);
        assert!(
            verifier
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '~'))
        );
        assert_ne!(verifier, second.verifier.expose());
        assert_eq!(first.challenge, challenge_of(verifier));
        assert_ne!(random_token(), random_token());
    }
}
