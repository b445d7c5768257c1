//! The deliveries of webhook endpoints and the conversations of `per_key` endpoints.
//!
//! Tree `webhook_deliveries`: `{endpoint}\0{delivery id}` → [`Delivery`] (JSON), inserted by
//! one compare-and-set expecting nothing, so two concurrent redeliveries or two daemons on one
//! store make one run; the loser answers with the winner's ids. Tree `webhook_conversations`:
//! `{endpoint}\0{rendered key}` → the thread id, inserted the same way by the first delivery.

use antler_store::{BatchOp, Expect, StoreError, StoreRef};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

pub const DELIVERIES_TREE: &str = "webhook_deliveries";
pub const CONVERSATIONS_TREE: &str = "webhook_conversations";

/// One accepted delivery: what its run is and where its answer goes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Delivery {
    pub endpoint: String,
    pub delivery_id: String,
    pub run_id: String,
    pub thread_id: String,
    /// The Antler user the run acts as (the thread's owner).
    pub user: String,
    #[serde(default)]
    pub agent: Option<String>,
    /// The question as the model reads it: the rendered prompt, payload values quoted as
    /// untrusted content. Kept so a restart can run it without the body.
    pub prompt: String,
    /// The chat the answer goes to; `None` for `thread_only`.
    #[serde(default)]
    pub chat: Option<ChatTarget>,
    pub status: DeliveryStatus,
    pub received_at: DateTime<Utc>,
    /// Why it failed, for the log and `antler`'s operators.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// A rendered `deliver_to`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatTarget {
    pub channel: String,
    pub chat: String,
    #[serde(default)]
    pub thread: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryStatus {
    /// Recorded (and, for a chat, journalled); its run has not started.
    Received,
    /// Its run started; a restart continues it.
    Running,
    Done,
    Failed,
}

impl DeliveryStatus {
    pub fn is_finished(self) -> bool {
        matches!(self, DeliveryStatus::Done | DeliveryStatus::Failed)
    }
}

/// What [`DeliveryStore::insert`] found.
#[derive(Debug, PartialEq)]
pub enum Inserted {
    New,
    /// The delivery id was recorded before (a redelivery): the stored record.
    Existing(Box<Delivery>),
}

/// The two trees over the daemon's store.
#[derive(Clone)]
pub struct DeliveryStore {
    store: StoreRef,
}

impl DeliveryStore {
    pub fn new(store: StoreRef) -> Self {
        Self { store }
    }

    pub fn get(&self, endpoint: &str, delivery_id: &str) -> Result<Option<Delivery>, StoreError> {
        let raw = self
            .store
            .get(DELIVERIES_TREE, &key(endpoint, delivery_id))?;
        raw.map(|bytes| decode(&bytes)).transpose()
    }

    /// Records `delivery` unless its id is recorded already.
    pub fn insert(&self, delivery: &Delivery) -> Result<Inserted, StoreError> {
        let key = key(&delivery.endpoint, &delivery.delivery_id);
        let absent = Expect {
            tree: DELIVERIES_TREE,
            key: key.clone(),
            value: None,
        };
        let put = BatchOp::Put {
            tree: DELIVERIES_TREE,
            key,
            value: encode(delivery)?,
        };
        if self.store.apply_batch_if(&absent, vec![put])? {
            self.store.flush()?;
            return Ok(Inserted::New);
        }
        match self.get(&delivery.endpoint, &delivery.delivery_id)? {
            Some(existing) => Ok(Inserted::Existing(Box::new(existing))),
            None => Err(StoreError::Backend(
                "a webhook delivery vanished while it was recorded; retry the delivery".into(),
            )),
        }
    }

    /// Moves a delivery to `status` (a finished one stays finished); `false` when it is absent
    /// or was finished already.
    pub fn set_status(
        &self,
        endpoint: &str,
        delivery_id: &str,
        status: DeliveryStatus,
        detail: Option<String>,
    ) -> Result<bool, StoreError> {
        let key = key(endpoint, delivery_id);
        loop {
            let Some(raw) = self.store.get(DELIVERIES_TREE, &key)? else {
                return Ok(false);
            };
            let mut delivery = decode(&raw)?;
            if delivery.status.is_finished() || delivery.status == status {
                return Ok(false);
            }
            delivery.status = status;
            delivery.detail = detail.clone();
            let expect = Expect {
                tree: DELIVERIES_TREE,
                key: key.clone(),
                value: Some(raw),
            };
            let put = BatchOp::Put {
                tree: DELIVERIES_TREE,
                key: key.clone(),
                value: encode(&delivery)?,
            };
            if self.store.apply_batch_if(&expect, vec![put])? {
                return Ok(true);
            }
        }
    }

    /// Deliveries whose run has not ended (received or running), oldest first.
    pub fn unfinished(&self) -> Result<Vec<Delivery>, StoreError> {
        let mut deliveries = Vec::new();
        for (_, raw) in self.store.scan_prefix(DELIVERIES_TREE, b"")? {
            match decode(&raw) {
                Ok(delivery) if !delivery.status.is_finished() => deliveries.push(delivery),
                Ok(_) => {}
                Err(error) => tracing::warn!(%error, "Skipping an unreadable webhook delivery"),
            }
        }
        deliveries.sort_by_key(|d| d.received_at);
        Ok(deliveries)
    }

    /// The thread of the conversation `conversation_key` of `endpoint`: the one stored, else
    /// `proposed`, stored now (the first delivery's wins when two race).
    pub fn conversation(
        &self,
        endpoint: &str,
        conversation_key: &str,
        proposed: &str,
    ) -> Result<(String, bool), StoreError> {
        let key = key(endpoint, conversation_key);
        if let Some(raw) = self.store.get(CONVERSATIONS_TREE, &key)? {
            return Ok((String::from_utf8_lossy(&raw).into_owned(), false));
        }
        let absent = Expect {
            tree: CONVERSATIONS_TREE,
            key: key.clone(),
            value: None,
        };
        let put = BatchOp::Put {
            tree: CONVERSATIONS_TREE,
            key: key.clone(),
            value: proposed.as_bytes().to_vec(),
        };
        if self.store.apply_batch_if(&absent, vec![put])? {
            return Ok((proposed.to_string(), true));
        }
        let raw = self
            .store
            .get(CONVERSATIONS_TREE, &key)?
            .unwrap_or_default();
        Ok((String::from_utf8_lossy(&raw).into_owned(), false))
    }
}

fn key(endpoint: &str, id: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(endpoint.len() + 1 + id.len());
    key.extend_from_slice(endpoint.as_bytes());
    key.push(0);
    key.extend_from_slice(id.as_bytes());
    key
}

fn encode(delivery: &Delivery) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(delivery).map_err(|e| StoreError::Backend(e.to_string()))
}

fn decode(raw: &[u8]) -> Result<Delivery, StoreError> {
    serde_json::from_slice(raw)
        .map_err(|e| StoreError::Backend(format!("unreadable webhook delivery: {e}")))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn store() -> DeliveryStore {
        DeliveryStore::new(Arc::new(antler_store::memory::MemoryStore::default()))
    }

    fn delivery(id: &str, run_id: &str) -> Delivery {
        Delivery {
            endpoint: "alerts".into(),
            delivery_id: id.into(),
            run_id: run_id.into(),
            thread_id: format!("t-{run_id}"),
            user: "alice".into(),
            agent: None,
            prompt: "p".into(),
            chat: None,
            status: DeliveryStatus::Received,
            received_at: Utc::now(),
            detail: None,
        }
    }

    #[test]
    fn a_delivery_id_is_recorded_once() {
        let store = store();
        assert_eq!(store.insert(&delivery("d1", "r1")).unwrap(), Inserted::New);
        let Inserted::Existing(first) = store.insert(&delivery("d1", "r2")).unwrap() else {
            panic!("a redelivery is not new");
        };
        assert_eq!(first.run_id, "r1");
        assert_eq!(store.insert(&delivery("d2", "r3")).unwrap(), Inserted::New);
        assert_eq!(store.unfinished().unwrap().len(), 2);
        assert!(
            store
                .set_status("alerts", "d1", DeliveryStatus::Done, None)
                .unwrap()
        );
        assert!(
            !store
                .set_status("alerts", "d1", DeliveryStatus::Running, None)
                .unwrap(),
            "finished stays finished"
        );
        let unfinished = store.unfinished().unwrap();
        assert_eq!(unfinished.len(), 1);
        assert_eq!(unfinished[0].delivery_id, "d2");
    }

    #[test]
    fn the_first_delivery_of_a_key_names_its_thread() {
        let store = store();
        assert_eq!(
            store.conversation("alerts", "fp1", "t1").unwrap(),
            ("t1".to_string(), true)
        );
        assert_eq!(
            store.conversation("alerts", "fp1", "t2").unwrap(),
            ("t1".to_string(), false)
        );
        assert_eq!(
            store.conversation("other", "fp1", "t3").unwrap(),
            ("t3".to_string(), true)
        );
    }
}
