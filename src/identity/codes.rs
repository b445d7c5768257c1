//! One-time link codes: 8 characters of an alphabet without look-alikes (no 0/O, 1/I), valid
//! 10 minutes, stored only as their SHA-256 (tree `identity_codes`), used once (a
//! compare-and-set marks them used, so two daemons cannot both accept one). Wrong codes are
//! counted per account (tree `identity_attempts`): five in ten minutes and the account must wait.

use antler_store::{BatchOp, Expect, Store, StoreError};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::identity::{Account, Refusal};

const CODES: &str = "identity_codes";
const ATTEMPTS: &str = "identity_attempts";
/// How long a code is valid.
pub const CODE_TTL_MS: u64 = 10 * 60 * 1000;
/// Wrong codes an account may send per [`ATTEMPT_WINDOW_MS`].
pub const MAX_FAILED_ATTEMPTS: u32 = 5;
const ATTEMPT_WINDOW_MS: u64 = 10 * 60 * 1000;
/// 32 symbols, so each carries 5 random bits: 8 of them are 40 bits, which five guesses per
/// ten minutes cannot find.
const ALPHABET: &[u8; 32] = b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789";
const CODE_LEN: usize = 8;
const CAS_ATTEMPTS: usize = 8;

/// What a code stands for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct CodeRecord {
    /// The user the issuing account was when it asked: whoever uses the code joins them.
    pub(crate) user_id: String,
    /// The issuing account (`{app}:{id}`).
    pub(crate) issuer: String,
    pub(crate) expires_at_ms: u64,
    #[serde(default)]
    pub(crate) used: bool,
}

/// A fresh code from the operating system's randomness (a v4 UUID's first five bytes are all
/// random), shown as `ABCD-EFGH`.
pub(crate) fn new_code() -> String {
    let bytes = uuid::Uuid::new_v4().into_bytes();
    let mut bits = bytes[..5]
        .iter()
        .fold(0u64, |acc, byte| (acc << 8) | u64::from(*byte));
    let mut symbols = [0u8; CODE_LEN];
    for symbol in symbols.iter_mut().rev() {
        *symbol = ALPHABET[(bits & 31) as usize];
        bits >>= 5;
    }
    let text = String::from_utf8_lossy(&symbols).into_owned();
    format!("{}-{}", &text[..4], &text[4..])
}

/// A typed code as stored: case, spaces and dashes do not matter.
fn normalize(code: &str) -> String {
    code.chars()
        .filter(|c| !c.is_whitespace() && *c != '-')
        .map(|c| c.to_ascii_uppercase())
        .collect()
}

fn code_key(code: &str) -> Vec<u8> {
    hex::encode(Sha256::digest(normalize(code).as_bytes())).into_bytes()
}

/// Stores `code`, dropping the expired codes it finds on the way (the tree stays small).
pub(crate) fn save(
    store: &dyn Store,
    code: &str,
    record: &CodeRecord,
    now_ms: u64,
) -> Result<(), StoreError> {
    let mut ops: Vec<BatchOp> = store
        .scan_prefix(CODES, b"")?
        .into_iter()
        .filter(|(_, raw)| {
            serde_json::from_slice::<CodeRecord>(raw).is_ok_and(|old| old.expires_at_ms <= now_ms)
        })
        .map(|(key, _)| BatchOp::Delete { tree: CODES, key })
        .collect();
    ops.push(BatchOp::Put {
        tree: CODES,
        key: code_key(code),
        value: encode(record)?,
    });
    store.apply_batch(ops)
}

/// The code's record if it can still be used, else why not (a wrong code counts against
/// `account`). Nothing is consumed: see [`consume`].
pub(crate) fn check(
    store: &dyn Store,
    account: &Account,
    code: &str,
    now_ms: u64,
) -> Result<Result<(Vec<u8>, CodeRecord), Refusal>, StoreError> {
    if let Some(minutes) = locked_for(store, account, now_ms)? {
        return Ok(Err(Refusal::RateLimited { minutes }));
    }
    let normalized = normalize(code);
    let raw = if normalized.len() == CODE_LEN {
        store.get(CODES, &code_key(code))?
    } else {
        None
    };
    let refusal = match raw {
        None => Refusal::UnknownCode,
        Some(raw) => {
            let record: CodeRecord =
                serde_json::from_slice(&raw).map_err(|error| StoreError::Corrupt {
                    key: CODES.into(),
                    detail: error.to_string(),
                })?;
            if record.used {
                Refusal::UsedCode
            } else if record.expires_at_ms <= now_ms {
                Refusal::ExpiredCode
            } else {
                return Ok(Ok((raw, record)));
            }
        }
    };
    count_failure(store, account, now_ms)?;
    Ok(Err(refusal))
}

/// Marks the code read as `raw` used; `false` if someone used it in between.
pub(crate) fn consume(
    store: &dyn Store,
    code: &str,
    raw: Vec<u8>,
    record: &CodeRecord,
) -> Result<bool, StoreError> {
    let key = code_key(code);
    let used = CodeRecord {
        used: true,
        ..record.clone()
    };
    let expect = Expect {
        tree: CODES,
        key: key.clone(),
        value: Some(raw),
    };
    let ops = vec![BatchOp::Put {
        tree: CODES,
        key,
        value: encode(&used)?,
    }];
    store.apply_batch_if(&expect, ops)
}

/// Wrong codes of one account in the current window.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
struct Attempts {
    window_start_ms: u64,
    failures: u32,
}

fn read_attempts(
    store: &dyn Store,
    account: &Account,
) -> Result<Option<(Vec<u8>, Attempts)>, StoreError> {
    let Some(raw) = store.get(ATTEMPTS, account.key().as_bytes())? else {
        return Ok(None);
    };
    let attempts = serde_json::from_slice(&raw).unwrap_or_default();
    Ok(Some((raw, attempts)))
}

/// Minutes `account` must still wait, if it used up its wrong codes.
fn locked_for(
    store: &dyn Store,
    account: &Account,
    now_ms: u64,
) -> Result<Option<u64>, StoreError> {
    let Some((_, attempts)) = read_attempts(store, account)? else {
        return Ok(None);
    };
    let ends = attempts.window_start_ms.saturating_add(ATTEMPT_WINDOW_MS);
    if attempts.failures >= MAX_FAILED_ATTEMPTS && now_ms < ends {
        return Ok(Some((ends - now_ms).div_ceil(60_000).max(1)));
    }
    Ok(None)
}

/// Counts a wrong code with a compare-and-set, so two daemons both count theirs.
fn count_failure(store: &dyn Store, account: &Account, now_ms: u64) -> Result<(), StoreError> {
    let key = account.key().into_bytes();
    for _ in 0..CAS_ATTEMPTS {
        let current = read_attempts(store, account)?;
        let mut attempts = current.as_ref().map(|(_, a)| *a).unwrap_or_default();
        if now_ms >= attempts.window_start_ms.saturating_add(ATTEMPT_WINDOW_MS) {
            attempts = Attempts {
                window_start_ms: now_ms,
                failures: 0,
            };
        }
        attempts.failures += 1;
        let expect = Expect {
            tree: ATTEMPTS,
            key: key.clone(),
            value: current.map(|(raw, _)| raw),
        };
        let ops = vec![BatchOp::Put {
            tree: ATTEMPTS,
            key: key.clone(),
            value: encode(&attempts)?,
        }];
        if store.apply_batch_if(&expect, ops)? {
            return Ok(());
        }
    }
    Err(StoreError::Backend(
        "could not count a wrong link code: the store kept changing; try again".into(),
    ))
}

fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(value).map_err(|error| StoreError::Corrupt {
        key: CODES.into(),
        detail: error.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_short_unambiguous_and_typed_loosely() {
        let code = new_code();
        assert_eq!(code.len(), 9, "{code}");
        assert_eq!(&code[4..5], "-");
        let symbols = normalize(&code);
        assert!(symbols.bytes().all(|b| ALPHABET.contains(&b)), "{code}");
        assert_ne!(new_code(), new_code());
        assert_eq!(code_key(&code), code_key(&symbols.to_lowercase()));
        assert_eq!(
            code_key("abcd efgh"),
            code_key("ABCD-EFGH"),
            "spaces, dashes and case do not matter"
        );
    }
}
