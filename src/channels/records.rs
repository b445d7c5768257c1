//! JSON records in a store tree: the small typed layer the journal, outbox and mapping share,
//! and [`Writes`], which fences the journal's and outbox's writes by a chat's claim.

use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::cluster::HeldLease;
use antler_store::{BatchOp, StoreError, StoreRef};

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

/// Serializes `value` as the put of one batch.
pub(crate) fn put_op<T: Serialize>(
    tree: &'static str,
    key: &str,
    value: &T,
) -> Result<BatchOp, StoreError> {
    let bytes = serde_json::to_vec(value).map_err(|e| StoreError::Corrupt {
        key: format!("{tree}/{key}"),
        detail: e.to_string(),
    })?;
    Ok(BatchOp::Put {
        tree,
        key: key.as_bytes().to_vec(),
        value: bytes,
    })
}

/// Why a record was not written.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The chat's claim changed hands (this instance stalled past its lease, or lost the store):
    /// nothing was written, and the instance that holds the claim now finishes the message.
    #[error(
        "another instance took over the chat ({claim}); it finishes this message, nothing to do"
    )]
    ClaimLost { claim: String },
}

impl RecordError {
    /// For writes made outside any claim, which can only fail in the store.
    pub(crate) fn into_store(self) -> StoreError {
        match self {
            RecordError::Store(error) => error,
            lost @ RecordError::ClaimLost { .. } => StoreError::Io(lost.to_string()),
        }
    }
}

/// Where the journal and outbox write: straight into the store, or fenced by the chat's claim
/// while a conversation's worker answers it, so an instance that lost the claim writes nothing.
#[derive(Clone)]
pub(crate) struct Writes {
    store: StoreRef,
    claim: Option<Arc<HeldLease>>,
}

impl Writes {
    pub(crate) fn direct(store: StoreRef) -> Self {
        Self { store, claim: None }
    }

    pub(crate) fn fenced(store: StoreRef, claim: Arc<HeldLease>) -> Self {
        Self {
            store,
            claim: Some(claim),
        }
    }

    pub(crate) fn store(&self) -> &StoreRef {
        &self.store
    }

    /// Applies `ops` atomically; under a claim only while the claim has not changed hands.
    pub(crate) fn apply(&self, ops: Vec<BatchOp>) -> Result<(), RecordError> {
        match &self.claim {
            None => Ok(self.store.apply_batch(ops)?),
            Some(claim) if claim.write_fenced(ops)? => Ok(()),
            Some(claim) => Err(self.lost(claim)),
        }
    }

    /// Whether the claim still holds, checked in the store (nothing written): asked before
    /// each send, so an instance that resumes after losing its claim sends nothing more.
    pub(crate) fn check(&self) -> Result<(), RecordError> {
        match &self.claim {
            None => Ok(()),
            Some(claim) if claim.write_fenced(Vec::new())? => Ok(()),
            Some(claim) => Err(self.lost(claim)),
        }
    }

    fn lost(&self, claim: &HeldLease) -> RecordError {
        crate::metrics::claim_conflict("chat");
        RecordError::ClaimLost {
            claim: claim.name().replace('\u{1f}', "/"),
        }
    }
}
