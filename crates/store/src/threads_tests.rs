//! Thread records and per-user isolation (checkpoints: `conformance::threads`).

use std::sync::Arc;

use serde_json::{Map, json};

use super::*;
use crate::MemoryStore;

fn threads() -> ThreadStore {
    ThreadStore::new(Arc::new(MemoryStore::new())).unwrap()
}

#[test]
fn create_get_list_delete_round_trip() {
    let threads = threads();
    let mut metadata = Map::new();
    metadata.insert("channel".into(), json!("cli"));
    let a = threads
        .create("alice", Some("t-a".into()), metadata.clone())
        .unwrap();
    assert_eq!(a.status, ThreadStatus::Idle);
    assert_eq!(a.metadata, metadata);
    let generated = threads.create("alice", None, Map::new()).unwrap();
    assert!(!generated.thread_id.is_empty());
    assert_eq!(threads.get("t-a").unwrap().unwrap(), a);
    threads.set_status("t-a", ThreadStatus::Busy).unwrap();
    let listed: Vec<String> = threads
        .list("alice")
        .unwrap()
        .into_iter()
        .map(|r| r.thread_id)
        .collect();
    assert_eq!(
        listed,
        ["t-a".to_string(), generated.thread_id.clone()],
        "most recently updated first"
    );
    assert!(threads.delete("t-a").unwrap());
    assert!(!threads.delete("t-a").unwrap());
    assert_eq!(threads.get("t-a").unwrap(), None);
    assert_eq!(threads.list("alice").unwrap().len(), 1);
}

#[test]
fn create_is_idempotent_for_the_owner_and_refused_for_others() {
    let threads = threads();
    let first = threads
        .create("alice", Some("shared".into()), Map::new())
        .unwrap();
    let again = threads
        .create("alice", Some("shared".into()), Map::new())
        .unwrap();
    assert_eq!(first, again);
    let err = threads
        .create("bob", Some("shared".into()), Map::new())
        .unwrap_err();
    assert!(matches!(err, ThreadError::Unavailable { .. }));
    assert!(threads.list("bob").unwrap().is_empty());
    assert_eq!(threads.list("alice").unwrap().len(), 1);
}

#[test]
fn users_only_see_their_own_threads_even_with_prefix_names() {
    let threads = threads();
    threads.create("al", Some("t1".into()), Map::new()).unwrap();
    threads
        .create("alice", Some("t2".into()), Map::new())
        .unwrap();
    let ids = |user: &str| -> Vec<String> {
        threads
            .list(user)
            .unwrap()
            .into_iter()
            .map(|r| r.thread_id)
            .collect()
    };
    assert_eq!(ids("al"), ["t1"]);
    assert_eq!(ids("alice"), ["t2"]);
    assert!(ids("nobody").is_empty());
}

#[test]
fn invalid_thread_ids_are_rejected() {
    let threads = threads();
    for bad in ["", "a\0b", &"x".repeat(300)] {
        let err = threads
            .create("u", Some(bad.to_string()), Map::new())
            .unwrap_err();
        assert!(matches!(err, ThreadError::InvalidId { .. }), "{bad:?}");
    }
}

#[tokio::test]
async fn busy_threads_are_reset_to_interrupted() {
    let threads = threads();
    threads
        .create("u", Some("busy".into()), Map::new())
        .unwrap();
    threads
        .create("u", Some("idle".into()), Map::new())
        .unwrap();
    threads.set_status("busy", ThreadStatus::Busy).unwrap();
    assert_eq!(threads.reset_busy().unwrap(), ["busy"]);
    assert_eq!(
        threads.get("busy").unwrap().unwrap().status,
        ThreadStatus::Interrupted
    );
    assert_eq!(
        threads.get("idle").unwrap().unwrap().status,
        ThreadStatus::Idle
    );
}

/// Two daemons on one store change the same record at once: the one whose compare-and-set
/// loses reads the other's version and applies its change to it, so both changes survive.
#[test]
fn a_record_update_racing_another_writer_keeps_both_changes() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let threads = ThreadStore::new(store.clone()).unwrap();
    threads
        .create("alice", Some("t".into()), Map::new())
        .unwrap();
    let other = ThreadStore::new(store).unwrap();
    let mut attempts = 0;
    let record = threads
        .update("t", |record| {
            attempts += 1;
            if attempts == 1 {
                // Between this read and its write, the other daemon renames the thread.
                other
                    .update("t", |theirs| theirs.title = Some("renamed".into()))
                    .unwrap();
            }
            record.status = ThreadStatus::Busy;
        })
        .unwrap();
    assert_eq!(attempts, 2);
    assert_eq!(record.title.as_deref(), Some("renamed"));
    let stored = threads.get("t").unwrap().unwrap();
    assert_eq!(
        (stored.title.as_deref(), stored.status),
        (Some("renamed"), ThreadStatus::Busy)
    );
}

#[test]
fn transfer_moves_the_record_and_the_index_once() {
    let threads = threads();
    threads
        .create("alice", Some("t-g".into()), Map::new())
        .unwrap();
    let moved = threads.transfer("t-g", "chat-slack-1").unwrap();
    assert_eq!(moved.user_id, "chat-slack-1");
    assert!(threads.list("alice").unwrap().is_empty());
    assert_eq!(
        threads.list("chat-slack-1").unwrap(),
        std::slice::from_ref(&moved)
    );
    // Again (a migration finishing after a crash): nothing changes.
    assert_eq!(threads.transfer("t-g", "chat-slack-1").unwrap(), moved);
    assert!(matches!(
        threads.transfer("missing", "chat-slack-1"),
        Err(ThreadError::NotFound { .. })
    ));
}
