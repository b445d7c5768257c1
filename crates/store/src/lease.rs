//! Leases: the right to do one piece of work (poll a bot token, work a chat, run the memory
//! queue) held by one daemon at a time, for a bounded time, with an epoch.
//!
//! Built on [`Store::apply_batch_if`] alone, so every backend has them and the single-machine
//! daemon on sled runs the same code as a cluster on PostgreSQL. Two records per lease:
//! - `leases/{name}` → [`Lease`] (holder, epoch, expiry): acquire, renew and release are each
//!   one compare-and-set of this record, so two daemons can never both believe they hold it;
//! - `lease_fences/{name}` → the holder and epoch, written only when the lease changes hands.
//!
//! Work done under a lease is written with [`Lease::fence`] as the batch's condition: renewals
//! do not touch the fence, so they never make such a write fail, while a successor's acquire
//! changes it, so a holder that was paused past its expiry and then resumes writes nothing
//! under its stale epoch.
//!
//! Expiry is wall-clock time in milliseconds since the epoch, read from the caller (an
//! injected clock in tests); daemons sharing a store need clocks within a fraction of the
//! lease (NTP gives milliseconds). A holder stops renewing once its own deadline has passed.

use serde::{Deserialize, Serialize};

use crate::{BatchOp, Expect, StoreError, StoreRef};

pub const LEASES_TREE: &str = "leases";
pub const FENCES_TREE: &str = "lease_fences";

/// How often a compare-and-set lost to a concurrent writer is retried before giving up.
const RACE_RETRIES: usize = 4;

/// One lease as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    pub name: String,
    pub holder: String,
    /// Increases by one each time the lease changes hands (never on renewal).
    pub epoch: u64,
    pub acquired_at_ms: u64,
    /// 0 once released.
    pub expires_at_ms: u64,
}

impl Lease {
    pub fn is_live(&self, now_ms: u64) -> bool {
        self.expires_at_ms > now_ms
    }

    /// The condition under which work done under this lease may be written: the lease has not
    /// changed hands since it was acquired.
    pub fn fence(&self) -> Expect {
        Expect {
            tree: FENCES_TREE,
            key: self.name.as_bytes().to_vec(),
            value: Some(fence_value(&self.holder, self.epoch)),
        }
    }
}

/// What an attempt to take a lease found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Acquired {
    /// Held by the caller now. `took_over` when it was taken from another holder whose lease
    /// had expired without being released (that holder died or stalled).
    Held { lease: Lease, took_over: bool },
    /// Another holder's lease is live.
    Busy(Lease),
}

/// Leases held under one holder name (an instance id).
#[derive(Clone)]
pub struct Leases {
    store: StoreRef,
    holder: String,
}

impl Leases {
    pub fn new(store: StoreRef, holder: impl Into<String>) -> Self {
        Self {
            store,
            holder: holder.into(),
        }
    }

    pub fn holder(&self) -> &str {
        &self.holder
    }

    pub fn store(&self) -> &StoreRef {
        &self.store
    }

    /// Takes `name` for `ttl_ms` unless another holder's lease is live. Taking a lease the
    /// caller already holds renews it (same epoch).
    pub fn try_acquire(
        &self,
        name: &str,
        ttl_ms: u64,
        now_ms: u64,
    ) -> Result<Acquired, StoreError> {
        for _ in 0..RACE_RETRIES {
            let stored = self.store.get(LEASES_TREE, name.as_bytes())?;
            let current = stored
                .as_deref()
                .map(|bytes| decode(name, bytes))
                .transpose()?;
            let (next, took_over) = match &current {
                Some(lease) if lease.holder == self.holder && lease.is_live(now_ms) => (
                    Lease {
                        expires_at_ms: now_ms + ttl_ms,
                        ..lease.clone()
                    },
                    false,
                ),
                Some(lease) if lease.is_live(now_ms) => return Ok(Acquired::Busy(lease.clone())),
                other => (
                    Lease {
                        name: name.to_string(),
                        holder: self.holder.clone(),
                        epoch: other.as_ref().map_or(0, |lease| lease.epoch) + 1,
                        acquired_at_ms: now_ms,
                        expires_at_ms: now_ms + ttl_ms,
                    },
                    other.as_ref().is_some_and(|lease| {
                        lease.expires_at_ms != 0 && lease.holder != self.holder
                    }),
                ),
            };
            let mut ops = vec![put_lease(&next)?];
            if current
                .as_ref()
                .is_none_or(|lease| lease.epoch != next.epoch)
            {
                ops.push(BatchOp::Put {
                    tree: FENCES_TREE,
                    key: name.as_bytes().to_vec(),
                    value: fence_value(&next.holder, next.epoch),
                });
            }
            let expect = Expect {
                tree: LEASES_TREE,
                key: name.as_bytes().to_vec(),
                value: stored,
            };
            if self.store.apply_batch_if(&expect, ops)? {
                return Ok(Acquired::Held {
                    lease: next,
                    took_over,
                });
            }
        }
        // Every attempt met a concurrent change: someone else is acquiring it right now.
        match self.get(name)? {
            Some(lease) if lease.is_live(now_ms) && lease.holder != self.holder => {
                Ok(Acquired::Busy(lease))
            }
            _ => Err(StoreError::Io(format!(
                "lease {name} kept changing while it was being taken; try again"
            ))),
        }
    }

    /// Extends a held lease; `None` when it is lost (its deadline passed before the renewal,
    /// or the record changed: released, taken over).
    pub fn renew(
        &self,
        held: &Lease,
        ttl_ms: u64,
        now_ms: u64,
    ) -> Result<Option<Lease>, StoreError> {
        if !held.is_live(now_ms) {
            return Ok(None);
        }
        let next = Lease {
            expires_at_ms: now_ms + ttl_ms,
            ..held.clone()
        };
        let expect = Expect {
            tree: LEASES_TREE,
            key: held.name.as_bytes().to_vec(),
            value: Some(encode(held)?),
        };
        Ok(self
            .store
            .apply_batch_if(&expect, vec![put_lease(&next)?])?
            .then_some(next))
    }

    /// Gives a held lease up so another holder can take it at once; a lease already lost is
    /// left as it is. The record stays (expired) so the next epoch follows this one.
    pub fn release(&self, held: &Lease) -> Result<bool, StoreError> {
        let released = Lease {
            expires_at_ms: 0,
            ..held.clone()
        };
        let expect = Expect {
            tree: LEASES_TREE,
            key: held.name.as_bytes().to_vec(),
            value: Some(encode(held)?),
        };
        self.store
            .apply_batch_if(&expect, vec![put_lease(&released)?])
    }

    pub fn get(&self, name: &str) -> Result<Option<Lease>, StoreError> {
        self.store
            .get(LEASES_TREE, name.as_bytes())?
            .map(|bytes| decode(name, &bytes))
            .transpose()
    }

    /// Every lease whose name starts with `prefix`, live or not, in name order.
    pub fn list(&self, prefix: &str) -> Result<Vec<Lease>, StoreError> {
        self.store
            .scan_prefix(LEASES_TREE, prefix.as_bytes())?
            .into_iter()
            .map(|(key, value)| decode(&String::from_utf8_lossy(&key), &value))
            .collect()
    }

    /// Applies `ops` only if `held` has not changed hands since it was acquired (fencing);
    /// `Ok(false)` and nothing written otherwise.
    pub fn write_fenced(&self, held: &Lease, ops: Vec<BatchOp>) -> Result<bool, StoreError> {
        self.store.apply_batch_if(&held.fence(), ops)
    }
}

fn fence_value(holder: &str, epoch: u64) -> Vec<u8> {
    let mut value = epoch.to_be_bytes().to_vec();
    value.extend_from_slice(holder.as_bytes());
    value
}

fn put_lease(lease: &Lease) -> Result<BatchOp, StoreError> {
    Ok(BatchOp::Put {
        tree: LEASES_TREE,
        key: lease.name.as_bytes().to_vec(),
        value: encode(lease)?,
    })
}

fn encode(lease: &Lease) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(lease).map_err(|e| StoreError::Corrupt {
        key: format!("{LEASES_TREE}/{}", lease.name),
        detail: e.to_string(),
    })
}

fn decode(name: &str, bytes: &[u8]) -> Result<Lease, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::Corrupt {
        key: format!("{LEASES_TREE}/{name}"),
        detail: e.to_string(),
    })
}
