//! The links `/link` and `antler users link` record, in the store: tree `identity_links`
//! (account → [`LinkRecord`], at most one owner an account) and tree `identity_users`
//! (`{user}\0{account}` → nothing), so a user's accounts are one prefix read. Both change in
//! one compare-and-set batch, so two daemons linking one account at once leave one owner.

use antler_store::{BatchOp, Expect, Store, StoreError};
use serde::{Deserialize, Serialize};

use crate::identity::Account;

const LINKS: &str = "identity_links";
const USERS: &str = "identity_users";

/// Who an account was joined to, and how.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkRecord {
    pub user_id: String,
    /// Milliseconds since the Unix epoch.
    pub linked_at_ms: u64,
    /// `code` (the person, with a one-time code) or `admin` (`antler users link`).
    pub via: String,
}

/// The account's link and its stored bytes (the compare-and-set of an unlink expects them).
pub(crate) fn get(
    store: &dyn Store,
    account: &Account,
) -> Result<Option<(Vec<u8>, LinkRecord)>, StoreError> {
    let Some(raw) = store.get(LINKS, account.key().as_bytes())? else {
        return Ok(None);
    };
    let record = decode(&account.key(), &raw)?;
    Ok(Some((raw, record)))
}

/// Records `account` → `record` if the account has no link yet; `false` if it has one.
pub(crate) fn insert(
    store: &dyn Store,
    account: &Account,
    record: &LinkRecord,
) -> Result<bool, StoreError> {
    let key = account.key().into_bytes();
    let value = serde_json::to_vec(record).map_err(|error| StoreError::Corrupt {
        key: account.key(),
        detail: error.to_string(),
    })?;
    let expect = Expect {
        tree: LINKS,
        key: key.clone(),
        value: None,
    };
    let ops = vec![
        BatchOp::Put {
            tree: LINKS,
            key,
            value,
        },
        BatchOp::Put {
            tree: USERS,
            key: user_key(&record.user_id, account),
            value: Vec::new(),
        },
    ];
    store.apply_batch_if(&expect, ops)
}

/// Removes the link read as `raw`; `false` if it changed in between.
pub(crate) fn remove(
    store: &dyn Store,
    account: &Account,
    raw: Vec<u8>,
    record: &LinkRecord,
) -> Result<bool, StoreError> {
    let key = account.key().into_bytes();
    let expect = Expect {
        tree: LINKS,
        key: key.clone(),
        value: Some(raw),
    };
    let ops = vec![
        BatchOp::Delete { tree: LINKS, key },
        BatchOp::Delete {
            tree: USERS,
            key: user_key(&record.user_id, account),
        },
    ];
    store.apply_batch_if(&expect, ops)
}

/// The accounts linked to `user_id`, in key order.
pub(crate) fn of_user(
    store: &dyn Store,
    user_id: &str,
) -> Result<Vec<(Account, LinkRecord)>, StoreError> {
    let prefix = format!("{user_id}\0").into_bytes();
    let mut linked = Vec::new();
    for (key, _) in store.scan_prefix(USERS, &prefix)? {
        let Some(account) = parse_key(&key[prefix.len()..]) else {
            continue;
        };
        // The index may only lag the links by a crashed batch on a backend without atomic
        // batches; the link itself decides.
        if let Some((_, record)) = get(store, &account)?
            && record.user_id == user_id
        {
            linked.push((account, record));
        }
    }
    Ok(linked)
}

/// Every link, in account order.
pub(crate) fn all(store: &dyn Store) -> Result<Vec<(Account, LinkRecord)>, StoreError> {
    let mut linked = Vec::new();
    for (key, raw) in store.scan_prefix(LINKS, b"")? {
        let Some(account) = parse_key(&key) else {
            continue;
        };
        linked.push((account.clone(), decode(&account.key(), &raw)?));
    }
    Ok(linked)
}

fn user_key(user_id: &str, account: &Account) -> Vec<u8> {
    format!("{user_id}\0{account}").into_bytes()
}

fn parse_key(key: &[u8]) -> Option<Account> {
    let text = std::str::from_utf8(key).ok()?;
    let (channel, id) = text.split_once(':')?;
    Some(Account::chat(channel, id))
}

fn decode(key: &str, raw: &[u8]) -> Result<LinkRecord, StoreError> {
    serde_json::from_slice(raw).map_err(|error| StoreError::Corrupt {
        key: format!("{LINKS}/{key}"),
        detail: error.to_string(),
    })
}
