//! The `approvals` tree: every request from its park to its decision and after (the audit
//! trail), a per-thread index, and the mark that an approved call was run. Every change is a
//! compare-and-set on the record, so two daemons (or a double click) decide a request once and
//! run its call once.

use antler_store::{BatchOp, Expect, StoreRef};
use chrono::{DateTime, Utc};

use crate::agent_api::approval::{
    ApprovalRequest, ApprovalStatus, ChatOrigin, DecisionRecord, outcome_label,
};
use crate::approvals::{ApprovalError, ApprovalFilter};

/// `{id}` → the request as JSON.
pub const APPROVALS_TREE: &str = "approvals";
/// `{thread_id}\0{u64::MAX - created ms, big-endian}{id}` → empty: a thread's requests, newest
/// first.
pub const APPROVALS_BY_THREAD_TREE: &str = "approvals_by_thread";
/// `{id}` → the run that ran the approved call: written once, by compare-and-set, just before
/// the call runs.
pub const APPROVALS_CONSUMED_TREE: &str = "approvals_consumed";
/// `{expires ms, big-endian}{id}` → empty: the requests still pending, soonest expiry first,
/// so the timeout job reads only those (the audit trail grows; this stays small).
pub const APPROVALS_PENDING_TREE: &str = "approvals_pending";

/// How many times a fresh id is drawn before giving up (ids are random; a clash is rare).
const ID_ATTEMPTS: usize = 8;

/// The requests of every thread. Cheap to clone; clones share the store.
#[derive(Clone)]
pub struct ApprovalStore {
    store: StoreRef,
}

impl ApprovalStore {
    pub fn new(store: StoreRef) -> Self {
        Self { store }
    }

    pub fn get(&self, id: &str) -> Result<Option<ApprovalRequest>, ApprovalError> {
        Ok(self.get_raw(id)?.map(|(request, _)| request))
    }

    /// The thread's requests, newest first.
    pub fn list_thread(&self, thread_id: &str) -> Result<Vec<ApprovalRequest>, ApprovalError> {
        let mut prefix = thread_id.as_bytes().to_vec();
        prefix.push(0);
        let mut requests = Vec::new();
        for (key, _) in self.store.scan_prefix(APPROVALS_BY_THREAD_TREE, &prefix)? {
            let Some(id) = key.get(prefix.len() + 8..) else {
                continue;
            };
            if let Some(request) = self.get(&String::from_utf8_lossy(id))? {
                requests.push(request);
            }
        }
        Ok(requests)
    }

    /// Requests matching `filter`, newest first, at most `filter.limit` (0: all).
    pub fn list(&self, filter: &ApprovalFilter) -> Result<Vec<ApprovalRequest>, ApprovalError> {
        let mut requests = Vec::new();
        for (key, value) in self.store.scan_prefix(APPROVALS_TREE, b"")? {
            let request = decode(&key, &value)?;
            if filter.matches(&request) {
                requests.push(request);
            }
        }
        requests.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(b.id.cmp(&a.id)));
        if filter.limit > 0 {
            requests.truncate(filter.limit);
        }
        Ok(requests)
    }

    /// The thread's request for this tool call, if it was ever parked.
    pub fn find_call(
        &self,
        thread_id: &str,
        tool_call_id: &str,
    ) -> Result<Option<ApprovalRequest>, ApprovalError> {
        Ok(self
            .list_thread(thread_id)?
            .into_iter()
            .find(|request| request.tool_call_id == tool_call_id))
    }

    /// Stores a new request under a fresh id (the one in `request` is replaced); returns it.
    pub fn insert(&self, mut request: ApprovalRequest) -> Result<ApprovalRequest, ApprovalError> {
        for _ in 0..ID_ATTEMPTS {
            request.id = new_id();
            let expect = Expect {
                tree: APPROVALS_TREE,
                key: request.id.as_bytes().to_vec(),
                value: None,
            };
            let ops = vec![
                put_record(&request)?,
                BatchOp::Put {
                    tree: APPROVALS_BY_THREAD_TREE,
                    key: thread_key(&request.thread_id, request.created_at, &request.id),
                    value: Vec::new(),
                },
                BatchOp::Put {
                    tree: APPROVALS_PENDING_TREE,
                    key: pending_key(request.expires_at, &request.id),
                    value: Vec::new(),
                },
            ];
            if self.store.apply_batch_if(&expect, ops)? {
                crate::metrics::approval("requested");
                return Ok(request);
            }
        }
        Err(ApprovalError::Store(
            "could not find a free approval id; try again".into(),
        ))
    }

    /// Settles a pending request as `status` with `decision`, once: `Ok((request, true))` when
    /// this call changed it, `Ok((request as stored, false))` when it was settled already.
    /// `check` may refuse before anything changes.
    pub fn settle(
        &self,
        id: &str,
        status: ApprovalStatus,
        decision: DecisionRecord,
        check: impl Fn(&ApprovalRequest) -> Result<(), ApprovalError>,
    ) -> Result<(ApprovalRequest, bool), ApprovalError> {
        loop {
            let (current, raw) = self
                .get_raw(id)?
                .ok_or_else(|| ApprovalError::NotFound { id: id.to_string() })?;
            check(&current)?;
            if current.status != ApprovalStatus::Pending {
                return Ok((current, false));
            }
            let mut settled = current;
            settled.status = status;
            settled.decision = Some(decision.clone());
            let unlisted = BatchOp::Delete {
                tree: APPROVALS_PENDING_TREE,
                key: pending_key(settled.expires_at, &settled.id),
            };
            if self.replace(&settled, raw, vec![unlisted])? {
                // Counted here, the one place a request is settled (a decision, a timeout, a
                // superseding message), and only by the call that changed it.
                if let Some(label) = outcome_label(status, Some(decision.decision)) {
                    crate::metrics::approval(label);
                }
                return Ok((settled, true));
            }
            // Changed under us (another daemon, the other button): read it again.
        }
    }

    /// Records where the request was posted in a chat (the channel layer, once it is sent).
    pub fn set_origin(&self, id: &str, origin: ChatOrigin) -> Result<(), ApprovalError> {
        loop {
            let (mut request, raw) = self
                .get_raw(id)?
                .ok_or_else(|| ApprovalError::NotFound { id: id.to_string() })?;
            request.origin = Some(origin.clone());
            if self.replace(&request, raw, Vec::new())? {
                return Ok(());
            }
        }
    }

    /// Marks the approved call of `id` as run by `run_id`; `false` when a run took it already
    /// (a redelivered decision, a resume after a crash once the call had started).
    pub fn consume(&self, id: &str, run_id: &str) -> Result<bool, ApprovalError> {
        let expect = Expect {
            tree: APPROVALS_CONSUMED_TREE,
            key: id.as_bytes().to_vec(),
            value: None,
        };
        let put = BatchOp::Put {
            tree: APPROVALS_CONSUMED_TREE,
            key: id.as_bytes().to_vec(),
            value: run_id.as_bytes().to_vec(),
        };
        Ok(self.store.apply_batch_if(&expect, vec![put])?)
    }

    /// Whether the approved call of `id` was run.
    pub fn consumed(&self, id: &str) -> Result<bool, ApprovalError> {
        Ok(self
            .store
            .get(APPROVALS_CONSUMED_TREE, id.as_bytes())?
            .is_some())
    }

    fn get_raw(&self, id: &str) -> Result<Option<(ApprovalRequest, Vec<u8>)>, ApprovalError> {
        let Some(raw) = self.store.get(APPROVALS_TREE, id.as_bytes())? else {
            return Ok(None);
        };
        Ok(Some((decode(id.as_bytes(), &raw)?, raw)))
    }

    /// The pending requests whose expiry is at or before `now`, soonest first.
    pub fn expired(&self, now: DateTime<Utc>) -> Result<Vec<ApprovalRequest>, ApprovalError> {
        let mut expired = Vec::new();
        for (key, _) in self.store.scan_prefix(APPROVALS_PENDING_TREE, b"")? {
            let (Some(at), Some(id)) = (key.get(..8), key.get(8..)) else {
                continue;
            };
            let at = u64::from_be_bytes(at.try_into().unwrap_or_default());
            if at > millis(now) {
                break;
            }
            if let Some(request) = self.get(&String::from_utf8_lossy(id))?
                && request.status == ApprovalStatus::Pending
            {
                expired.push(request);
            }
        }
        Ok(expired)
    }

    /// Writes `request` over the record `old` (and `more` in the same batch) if the record is
    /// still `old`.
    fn replace(
        &self,
        request: &ApprovalRequest,
        old: Vec<u8>,
        more: Vec<BatchOp>,
    ) -> Result<bool, ApprovalError> {
        let expect = Expect {
            tree: APPROVALS_TREE,
            key: request.id.as_bytes().to_vec(),
            value: Some(old),
        };
        let mut ops = vec![put_record(request)?];
        ops.extend(more);
        Ok(self.store.apply_batch_if(&expect, ops)?)
    }
}

fn put_record(request: &ApprovalRequest) -> Result<BatchOp, ApprovalError> {
    Ok(BatchOp::Put {
        tree: APPROVALS_TREE,
        key: request.id.as_bytes().to_vec(),
        value: serde_json::to_vec(request).map_err(|e| ApprovalError::Store(e.to_string()))?,
    })
}

fn decode(key: &[u8], value: &[u8]) -> Result<ApprovalRequest, ApprovalError> {
    serde_json::from_slice(value).map_err(|e| {
        ApprovalError::Store(format!(
            "approval {} is corrupt: {e}",
            String::from_utf8_lossy(key)
        ))
    })
}

fn thread_key(thread_id: &str, created_at: DateTime<Utc>, id: &str) -> Vec<u8> {
    let mut key = thread_id.as_bytes().to_vec();
    key.push(0);
    key.extend_from_slice(&(u64::MAX - millis(created_at)).to_be_bytes());
    key.extend_from_slice(id.as_bytes());
    key
}

fn pending_key(expires_at: DateTime<Utc>, id: &str) -> Vec<u8> {
    let mut key = millis(expires_at).to_be_bytes().to_vec();
    key.extend_from_slice(id.as_bytes());
    key
}

fn millis(at: DateTime<Utc>) -> u64 {
    u64::try_from(at.timestamp_millis()).unwrap_or(0)
}

/// Eight lowercase hex digits: short enough to type after `/approve`, safe in button values.
fn new_id() -> String {
    let mut id = uuid::Uuid::new_v4().simple().to_string();
    id.truncate(8);
    id
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
