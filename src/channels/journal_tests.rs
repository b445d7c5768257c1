use std::sync::Arc;

use antler_store::MemoryStore;

use super::*;
use crate::cluster::{Cluster, TokioWallClock};

pub(crate) fn message(id: &str) -> InboundMessage {
    InboundMessage {
        channel: "telegram".into(),
        workspace_id: Some("42".into()),
        chat_id: "42".into(),
        topic_id: None,
        user_id: "42".into(),
        display_name: None,
        platform_message_id: id.into(),
        text: "hi".into(),
        files: Vec::new(),
        is_direct: true,
        mentions_bot: false,
        reply_to: None,
        thread_reply: false,
        is_bot: false,
        bot_id: None,
        context: Vec::new(),
        click: None,
    }
}

fn record(journal: &Journal, id: &str) -> Recorded {
    let message = message(id);
    journal
        .record(&message, &message.chat_key(), Index::Queue)
        .expect("record")
}

fn new_key(recorded: Recorded) -> String {
    match recorded {
        Recorded::New(key) => key,
        Recorded::Duplicate => panic!("expected a new message"),
    }
}

#[test]
fn duplicates_are_recognised_and_pending_survives_reopen() {
    let store: StoreRef = Arc::new(MemoryStore::default());
    let journal = Journal::new(store.clone());
    let first = new_key(record(&journal, "1"));
    assert_eq!(record(&journal, "1"), Recorded::Duplicate);
    record(&journal, "2");
    journal.mark_done(&first).expect("done");
    let reopened = Journal::new(store);
    let chat = message("2").chat_key();
    assert_eq!(
        reopened.pending_chats(None).expect("chats"),
        std::slice::from_ref(&chat)
    );
    let next = reopened.next_pending(&chat).expect("next").expect("one");
    assert_eq!(next.message.platform_message_id, "2");
    // A done entry still dedupes.
    assert_eq!(record(&reopened, "1"), Recorded::Duplicate);
    assert_eq!(reopened.prune(Duration::from_secs(3600)).expect("prune"), 0);
    assert_eq!(reopened.prune(Duration::ZERO).expect("prune"), 1);
}

#[test]
fn two_daemons_recording_one_delivery_record_it_once() {
    let store: StoreRef = Arc::new(MemoryStore::default());
    let (a, b) = (Journal::new(store.clone()), Journal::new(store.clone()));
    let outcomes: Vec<Recorded> = std::thread::scope(|scope| {
        let a = scope.spawn(|| {
            (0..200)
                .map(|i| record(&a, &i.to_string()))
                .collect::<Vec<_>>()
        });
        let b = scope.spawn(|| {
            (0..200)
                .map(|i| record(&b, &i.to_string()))
                .collect::<Vec<_>>()
        });
        let mut all = a.join().expect("a");
        all.extend(b.join().expect("b"));
        all
    });
    let new = outcomes
        .iter()
        .filter(|o| matches!(o, Recorded::New(_)))
        .count();
    assert_eq!(new, 200, "every message recorded exactly once");
    assert_eq!(a.pending_count("telegram").expect("count"), 200);
}

#[test]
fn a_chat_is_answered_in_received_order_and_done_leaves_the_index() {
    let store: StoreRef = Arc::new(MemoryStore::default());
    let journal = Journal::new(store);
    let chat = message("1").chat_key();
    let keys: Vec<String> = ["c", "a", "b"]
        .into_iter()
        .map(|id| new_key(record(&journal, id)))
        .collect();
    let mut answered = Vec::new();
    while let Some(entry) = journal.next_pending(&chat).expect("next") {
        answered.push(entry.message.platform_message_id.clone());
        journal.mark_done(&entry.key).expect("done");
    }
    assert_eq!(answered, ["c", "a", "b"]);
    assert!(journal.pending_chats(None).expect("chats").is_empty());
    assert_eq!(
        journal.get(&keys[0]).expect("get").expect("kept").state,
        JournalState::Done
    );
    // A `/cancel` is answered at once: never in the index.
    let cancel = message("d");
    journal
        .record(&cancel, &chat, Index::Immediate)
        .expect("record");
    assert!(journal.next_pending(&chat).expect("next").is_none());
}

#[test]
fn entries_of_an_older_store_are_indexed_once() {
    let store: StoreRef = Arc::new(MemoryStore::default());
    let old = message("7");
    let key = Journal::key_of(&old);
    let now = Utc::now();
    let entry = JournalEntry {
        key: key.clone(),
        message: old.clone(),
        state: JournalState::Pending,
        received_at: now,
        updated_at: now,
        pending_key: None,
    };
    records::write(&store, TREE, &key, &entry).expect("write");
    let journal = Journal::new(store);
    let chat_of = |m: &InboundMessage| Ok(m.chat_key());
    assert_eq!(journal.index_unindexed(chat_of).expect("index"), 1);
    assert_eq!(journal.index_unindexed(chat_of).expect("index"), 0);
    let next = journal
        .next_pending(&old.chat_key())
        .expect("next")
        .expect("indexed");
    assert_eq!(next.key, key);
}

#[tokio::test(start_paused = true)]
async fn an_instance_that_lost_the_chat_marks_nothing_done() {
    let store: StoreRef = Arc::new(MemoryStore::default());
    let lease = Duration::from_secs(15);
    let cluster = |id: &str| {
        Cluster::new(
            store.clone(),
            id,
            lease,
            "memory",
            Arc::new(TokioWallClock::new()),
        )
    };
    let (a, b) = (cluster("a"), cluster("b"));
    let journal = Journal::new(store.clone());
    let key = new_key(record(&journal, "1"));
    let claim = Arc::new(a.try_hold("chat:x").expect("hold").expect("free"));
    let fenced = journal.fenced(claim.clone());
    // b takes the chat over as it would once a's lease expired (a paused past it).
    let later = a.now_ms() + 16_000;
    antler_store::lease::Leases::new(store.clone(), "b")
        .try_acquire("chat:x", 15_000, later)
        .expect("take over");
    assert!(matches!(
        fenced.mark_done(&key),
        Err(RecordError::ClaimLost { .. })
    ));
    assert!(claim.is_lost(), "a refused write stops the claim's work");
    let entry = journal.get(&key).expect("get").expect("entry");
    assert_eq!(entry.state, JournalState::Pending, "still b's to answer");
    drop(claim);
    a.shutdown().await;
    b.shutdown().await;
}
