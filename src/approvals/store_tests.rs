//! The approvals tree: ids, the per-thread index, one settlement per request, one run per
//! approved call.

use std::sync::Arc;

use chrono::{TimeDelta, Utc};
use serde_json::json;

use super::*;
use crate::agent_api::RunOptions;
use crate::agent_api::approval::{ApprovalReason, Approvers, Decision};
use crate::approvals::ApprovalFilter;
use antler_store::MemoryStore;

fn request(thread: &str, call: &str, minutes_ago: i64) -> ApprovalRequest {
    let created = Utc::now() - TimeDelta::try_minutes(minutes_ago).unwrap();
    ApprovalRequest {
        id: String::new(),
        thread_id: thread.into(),
        run_id: "r1".into(),
        tool_call_id: call.into(),
        tool: "bash".into(),
        args: json!({"command": "ls"}),
        summary: "ls".into(),
        reason: ApprovalReason::Always,
        owner: "alice".into(),
        requester: "alice".into(),
        approvers: Approvers::Requester,
        options: RunOptions::default(),
        created_at: created,
        expires_at: created + TimeDelta::try_minutes(60).unwrap(),
        status: ApprovalStatus::Pending,
        decision: None,
        origin: None,
        agent_owner: None,
    }
}

fn decision(by: &str) -> DecisionRecord {
    DecisionRecord {
        decision: Decision::Approve,
        by: by.into(),
        by_name: None,
        reason: None,
        at: Utc::now(),
    }
}

#[test]
fn requests_are_listed_per_thread_newest_first_and_found_by_call() {
    let store = ApprovalStore::new(Arc::new(MemoryStore::new()));
    let old = store.insert(request("t1", "c1", 10)).unwrap();
    let new = store.insert(request("t1", "c2", 1)).unwrap();
    let other = store.insert(request("t10", "c3", 5)).unwrap();
    assert_eq!(old.id.len(), 8);
    assert_ne!(old.id, new.id);
    let ids = |list: Vec<ApprovalRequest>| list.into_iter().map(|r| r.id).collect::<Vec<_>>();
    assert_eq!(
        ids(store.list_thread("t1").unwrap()),
        [new.id.clone(), old.id.clone()]
    );
    assert_eq!(
        ids(store.list_thread("t10").unwrap()),
        vec![other.id.clone()]
    );
    assert_eq!(
        store.find_call("t1", "c1").unwrap().map(|r| r.id),
        Some(old.id.clone())
    );
    assert!(store.find_call("t1", "c3").unwrap().is_none());
    let filter = ApprovalFilter {
        limit: 2,
        ..Default::default()
    };
    assert_eq!(
        ids(store.list(&filter).unwrap()),
        [new.id.clone(), other.id.clone()]
    );
}

#[test]
fn a_request_is_settled_once_and_its_call_consumed_once() {
    let store = ApprovalStore::new(Arc::new(MemoryStore::new()));
    let pending = store.insert(request("t1", "c1", 0)).unwrap();
    let (settled, fresh) = store
        .settle(
            &pending.id,
            ApprovalStatus::Approved,
            decision("alice"),
            |_| Ok(()),
        )
        .unwrap();
    assert!(fresh);
    assert_eq!(settled.status, ApprovalStatus::Approved);
    let (again, fresh) = store
        .settle(&pending.id, ApprovalStatus::Denied, decision("bob"), |_| {
            Ok(())
        })
        .unwrap();
    assert!(!fresh);
    assert_eq!(again.decision.unwrap().by, "alice");
    let refused = store.settle(&pending.id, ApprovalStatus::Denied, decision("x"), |_| {
        Err(ApprovalError::NotAllowed { who: "no".into() })
    });
    assert!(matches!(refused, Err(ApprovalError::NotAllowed { .. })));
    assert!(matches!(
        store.settle("nope", ApprovalStatus::Denied, decision("x"), |_| Ok(())),
        Err(ApprovalError::NotFound { .. })
    ));
    assert!(!store.consumed(&pending.id).unwrap());
    assert!(store.consume(&pending.id, "run-a").unwrap());
    assert!(!store.consume(&pending.id, "run-b").unwrap());
    assert!(store.consumed(&pending.id).unwrap());
    store
        .set_origin(
            &pending.id,
            ChatOrigin {
                chat_key: "telegram:1".into(),
                message_id: Some("7".into()),
            },
        )
        .unwrap();
    let stored = store.get(&pending.id).unwrap().unwrap();
    assert_eq!(stored.origin.unwrap().message_id.as_deref(), Some("7"));
    assert_eq!(stored.status, ApprovalStatus::Approved);
}

#[test]
fn only_pending_requests_past_their_expiry_are_expired() {
    let store = ApprovalStore::new(Arc::new(MemoryStore::new()));
    // Created 90 and 30 minutes ago, each for an hour: the first expired half an hour ago.
    let late = store.insert(request("t1", "c1", 90)).unwrap();
    let fresh = store.insert(request("t1", "c2", 30)).unwrap();
    let decided = store.insert(request("t2", "c3", 120)).unwrap();
    store
        .settle(
            &decided.id,
            ApprovalStatus::Denied,
            decision("alice"),
            |_| Ok(()),
        )
        .unwrap();
    let ids = |at| -> Vec<String> {
        store
            .expired(at)
            .unwrap()
            .into_iter()
            .map(|r| r.id)
            .collect()
    };
    assert_eq!(ids(Utc::now()), vec![late.id.clone()]);
    let later = Utc::now() + TimeDelta::try_minutes(31).unwrap();
    assert_eq!(ids(later), vec![late.id.clone(), fresh.id.clone()]);
}
