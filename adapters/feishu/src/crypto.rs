//! Feishu's event crypto: the push signature and the encrypted body.
//!
//! With an Encrypt Key configured, Feishu posts `{"encrypt": base64(iv ‖ AES-256-CBC(event))}`
//! where the key is SHA-256 of the Encrypt Key, the IV the first 16 bytes of the decoded blob and
//! the padding PKCS#7; and it signs every event push with `X-Lark-Signature` = hex SHA-256 of
//! `timestamp ‖ nonce ‖ encrypt_key ‖ raw body`. Nothing here panics on hostile input: every
//! malformed blob is a [`CryptoError`].

use aes::Aes256;
use aes::cipher::block_padding::{NoPadding, Pkcs7, RawPadding};
use aes::cipher::{BlockDecryptMut, KeyIvInit};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

type Decryptor = cbc::Decryptor<Aes256>;

const IV_LEN: usize = 16;
const BLOCK_LEN: usize = 16;

/// Why an encrypted body could not be opened.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CryptoError {
    #[error("the encrypt field is not base64")]
    NotBase64,
    #[error("the ciphertext is {0} bytes: too short, or not whole AES blocks after the IV")]
    BadLength(usize),
    #[error("the ciphertext does not decrypt with channels.feishu.encrypt_key (bad padding)")]
    BadPadding,
}

/// The 32-byte AES key Feishu derives from the Encrypt Key.
pub(crate) fn aes_key(encrypt_key: &str) -> [u8; 32] {
    Sha256::digest(encrypt_key.as_bytes()).into()
}

/// Decrypts the `encrypt` field of a push.
pub fn decrypt(encrypt_key: &str, encrypted: &str) -> Result<Vec<u8>, CryptoError> {
    match decrypt_uniform(encrypt_key, encrypted)? {
        Decrypted {
            padding_valid: true,
            plain,
        } => Ok(plain),
        Decrypted { .. } => Err(CryptoError::BadPadding),
    }
}

/// A decryption whose padding was judged but not acted on.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Decrypted {
    /// Without its padding when the padding is valid; the whole last block otherwise.
    pub(crate) plain: Vec<u8>,
    pub(crate) padding_valid: bool,
}

/// Decrypts without returning early on bad padding, so a caller can do the same work after a
/// good and a bad padding: what an unsigned push (which anyone can forge) leads to must not
/// depend on whether its padding was valid, in the answer nor in the time taken. Errors are
/// only about the input's shape (base64, length), which the sender knows anyway.
pub(crate) fn decrypt_uniform(
    encrypt_key: &str,
    encrypted: &str,
) -> Result<Decrypted, CryptoError> {
    let blob = BASE64
        .decode(encrypted.trim())
        .map_err(|_| CryptoError::NotBase64)?;
    let (iv, ciphertext) = blob
        .split_at_checked(IV_LEN)
        .ok_or(CryptoError::BadLength(blob.len()))?;
    if ciphertext.is_empty() || ciphertext.len() % BLOCK_LEN != 0 {
        return Err(CryptoError::BadLength(blob.len()));
    }
    let key = aes_key(encrypt_key);
    let mut plain = Decryptor::new_from_slices(&key, iv)
        .map_err(|_| CryptoError::BadLength(blob.len()))?
        .decrypt_padded_vec_mut::<NoPadding>(ciphertext)
        .map_err(|_| CryptoError::BadLength(blob.len()))?;
    let last_block = plain.len() - BLOCK_LEN;
    let unpadded = Pkcs7::raw_unpad(&plain[last_block..]).map(<[u8]>::len);
    let padding_valid = unpadded.is_ok();
    plain.truncate(last_block + unpadded.unwrap_or(BLOCK_LEN));
    Ok(Decrypted {
        plain,
        padding_valid,
    })
}

/// `X-Lark-Signature` of a push: lowercase hex SHA-256 over the raw bytes.
pub fn signature(timestamp: &str, nonce: &str, encrypt_key: &str, body: &[u8]) -> String {
    hex::encode(digest(timestamp, nonce, encrypt_key, body))
}

/// Whether `claimed` (the header, hex) is the push's signature; compared in constant time.
pub fn signature_matches(
    claimed: &str,
    timestamp: &str,
    nonce: &str,
    encrypt_key: &str,
    body: &[u8],
) -> bool {
    let Ok(claimed) = hex::decode(claimed.trim()) else {
        return false;
    };
    let expected = digest(timestamp, nonce, encrypt_key, body);
    claimed.len() == expected.len() && bool::from(claimed.ct_eq(&expected))
}

fn digest(timestamp: &str, nonce: &str, encrypt_key: &str, body: &[u8]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(timestamp.as_bytes());
    hasher.update(nonce.as_bytes());
    hasher.update(encrypt_key.as_bytes());
    hasher.update(body);
    hasher.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The decryption example of Feishu's documentation ("Encrypt Key encryption configuration
    /// case"): key `test key`, plaintext `hello world`.
    const DOC_KEY: &str = "test key";
    const DOC_CIPHERTEXT: &str = "P37w+VZImNgPEO1RBhJ6RtKl7n6zymIbEG1pReEzghk=";

    #[test]
    fn the_documentation_vector_decrypts() {
        assert_eq!(
            decrypt(DOC_KEY, DOC_CIPHERTEXT).expect("decrypts"),
            b"hello world"
        );
        assert_eq!(
            hex::encode(aes_key(DOC_KEY)),
            "fa2bdca424f01f01ffb48df93acc35d439c7fd331a1a7fba6ac2fd83aa9ab31a"
        );
    }

    /// An encrypted url_verification made with Python's `cryptography` (AES-256-CBC, PKCS7,
    /// IV 00..0f), independently of this code.
    #[test]
    fn an_independently_encrypted_event_decrypts() {
        let encrypted = "AAECAwQFBgcICQoLDA0OD+rHG9wybp6SgO2vuk+OpInjJMbLhrbcslpr4vmeKEBW05KBH65ALnSVvryMDa4/H89tIJLEduMoqyIM+sgFRXoarUS2fFX1yuXTtL/EWPlpU7ewidzM4yA/NqQrhcSdDw==";
        let plain = decrypt("encrypt-key-for-tests", encrypted).expect("decrypts");
        assert_eq!(
            String::from_utf8(plain).expect("utf-8"),
            r#"{"challenge":"ajls384kdjx98XX","token":"verification-token","type":"url_verification"}"#
        );
    }

    #[test]
    fn malformed_ciphertexts_are_errors_not_panics() {
        let cases = [
            ("not base64 !!", CryptoError::NotBase64),
            ("", CryptoError::BadLength(0)),
            ("AAAA", CryptoError::BadLength(3)),
            // The IV alone.
            ("AAECAwQFBgcICQoLDA0ODw==", CryptoError::BadLength(16)),
            // IV and half a block.
            (
                "AAECAwQFBgcICQoLDA0ODwABAgMEBQYH",
                CryptoError::BadLength(24),
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(decrypt(DOC_KEY, input), Err(expected), "{input:?}");
        }
        assert_eq!(
            decrypt("another key", DOC_CIPHERTEXT),
            Err(CryptoError::BadPadding)
        );
        // A flipped bit in the last block breaks the padding.
        let mut blob = BASE64.decode(DOC_CIPHERTEXT).expect("b64");
        let last = blob.len() - 1;
        blob[last] ^= 0x01;
        assert!(decrypt(DOC_KEY, &BASE64.encode(&blob)).is_err());
    }

    /// Signature vectors computed with Python's hashlib:
    /// `sha256((ts + nonce + key + body).encode()).hexdigest()`.
    #[test]
    fn signatures_match_independent_vectors() {
        let body = br#"{"encrypt":"P37w+VZImNgPEO1RBhJ6RtKl7n6zymIbEG1pReEzghk="}"#;
        let expected = "2b2dfebae908c12c0ccd99d3772af97c1d4f89f6c73a0c24e692c53567b7d8d4";
        assert_eq!(signature("1700000000", "6iTxQ4pG", DOC_KEY, body), expected);
        assert!(signature_matches(
            expected,
            "1700000000",
            "6iTxQ4pG",
            DOC_KEY,
            body
        ));
        for (claimed, ts, nonce, key) in [
            (expected, "1700000001", "6iTxQ4pG", DOC_KEY),
            (expected, "1700000000", "other", DOC_KEY),
            (expected, "1700000000", "6iTxQ4pG", "other key"),
            ("2b2dfe", "1700000000", "6iTxQ4pG", DOC_KEY),
            ("not hex", "1700000000", "6iTxQ4pG", DOC_KEY),
        ] {
            assert!(!signature_matches(claimed, ts, nonce, key, body));
        }
        let encrypted_body = br#"{"encrypt":"AAECAwQFBgcICQoLDA0OD+rHG9wybp6SgO2vuk+OpInjJMbLhrbcslpr4vmeKEBW05KBH65ALnSVvryMDa4/H89tIJLEduMoqyIM+sgFRXoarUS2fFX1yuXTtL/EWPlpU7ewidzM4yA/NqQrhcSdDw=="}"#;
        assert_eq!(
            signature(
                "1700000000",
                "nonce42",
                "encrypt-key-for-tests",
                encrypted_body
            ),
            "020bba2099e1f28e761202a6d4391789942f8d2bc50255c5070765e1a3753d47"
        );
    }
}
