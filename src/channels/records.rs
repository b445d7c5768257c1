//! JSON records in a store tree: the small typed layer the journal, outbox and mapping share.

use serde::Serialize;
use serde::de::DeserializeOwned;

use antler_store::{StoreError, StoreRef};

pub(crate) fn read<T: DeserializeOwned>(
    store: &StoreRef,
    tree: &str,
    key: &str,
) -> Result<Option<T>, StoreError> {
    match store.get(tree, key.as_bytes())? {
        Some(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| StoreError::Corrupt {
                key: format!("{tree}/{key}"),
                detail: e.to_string(),
            }),
        None => Ok(None),
    }
}

pub(crate) fn write<T: Serialize>(
    store: &StoreRef,
    tree: &str,
    key: &str,
    value: &T,
) -> Result<(), StoreError> {
    let bytes = serde_json::to_vec(value).map_err(|e| StoreError::Corrupt {
        key: format!("{tree}/{key}"),
        detail: e.to_string(),
    })?;
    store.put(tree, key.as_bytes(), &bytes)
}

/// Every record under `prefix`; unreadable ones are logged and skipped so one corrupt record
/// cannot stop recovery of the others.
pub(crate) fn scan<T: DeserializeOwned>(
    store: &StoreRef,
    tree: &str,
    prefix: &str,
) -> Result<Vec<(String, T)>, StoreError> {
    let mut out = Vec::new();
    for (key, value) in store.scan_prefix(tree, prefix.as_bytes())? {
        let key = String::from_utf8_lossy(&key).into_owned();
        match serde_json::from_slice(&value) {
            Ok(record) => out.push((key, record)),
            Err(error) => {
                tracing::warn!(%error, tree, key, "Skipping an unreadable channel record")
            }
        }
    }
    Ok(out)
}
