//! The queue with a paused clock: debounce, latest wins, restart, shutdown flush.

use std::sync::Arc;

use super::*;
use crate::config::MemoryConfig;
use crate::memory::MemorySettings;
use crate::memory::repo::MemoryRepo;
use crate::messages::Message;
use crate::model::scripted::{ScriptedModel, ScriptedTurn};
use crate::store::MemoryStore;

const ANSWER: &str =
    r#"{"newFacts":[{"content":"Prefers tea","category":"preference","confidence":0.9}]}"#;

fn model() -> Arc<ScriptedModel> {
    // One scripted answer: a second update call would fail the test.
    Arc::new(
        ScriptedModel::new("memory", [ScriptedTurn::Text(vec![ANSWER.into()])])
            .with_background_script(),
    )
}

fn start(store: StoreRef, model: Arc<ScriptedModel>) -> (MemoryQueue, MemoryRepo) {
    let repo = MemoryRepo::new(store.clone());
    let updater = MemoryUpdater::new(repo.clone(), MemoryConfig::default());
    let resolver: ModelResolver = Arc::new(move |_| Some(model.clone() as Arc<dyn ChatModel>));
    let queue = MemoryQueue::start(store, updater, resolver).unwrap();
    (queue, repo)
}

fn turn(text: &str) -> PendingConversation {
    PendingConversation {
        scope: MemoryScope::new("alice", None),
        thread_id: "t1".into(),
        model_name: None,
        earlier: Vec::new(),
        messages: vec![
            ConversationMessage {
                role: "user".into(),
                content: text.into(),
            },
            ConversationMessage {
                role: "assistant".into(),
                content: "ok".into(),
            },
        ],
    }
}

fn last_prompt(model: &ScriptedModel) -> String {
    let requests = model.requests();
    match &requests.last().unwrap().messages[0] {
        Message::Human(human) => human.content.to_string(),
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn quick_turns_make_one_update_with_the_latest_conversation() {
    let model = model();
    let (queue, repo) = start(Arc::new(MemoryStore::new()), model.clone());
    for text in ["first", "second", "third"] {
        queue.enqueue(turn(text)).unwrap();
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
    assert_eq!(model.requests().len(), 0, "still inside the debounce");
    tokio::time::sleep(Duration::from_secs(31)).await;
    assert_eq!(model.requests().len(), 1);
    assert!(last_prompt(&model).contains("user: third"));
    assert!(!last_prompt(&model).contains("user: first"));
    assert_eq!(
        repo.load(&MemoryScope::new("alice", None))
            .unwrap()
            .facts
            .len(),
        1
    );
    assert_eq!(queue.pending(), 0);
    queue.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(start_paused = true)]
async fn a_pending_update_survives_a_restart() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let first_model = model();
    let (queue, _) = start(store.clone(), first_model.clone());
    queue.enqueue(turn("remember tea")).unwrap();
    // A crash: the worker dies without flushing.
    queue.inner.cancel.cancel();
    drop(queue);
    assert_eq!(first_model.requests().len(), 0);

    let second_model = model();
    let (restarted, repo) = start(store.clone(), second_model.clone());
    assert_eq!(restarted.pending(), 1);
    tokio::time::sleep(Duration::from_secs(31)).await;
    assert_eq!(second_model.requests().len(), 1);
    assert!(last_prompt(&second_model).contains("user: remember tea"));
    assert_eq!(
        repo.load(&MemoryScope::new("alice", None))
            .unwrap()
            .facts
            .len(),
        1
    );
    assert!(store.scan_prefix(QUEUE_TREE, b"").unwrap().is_empty());
    restarted.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(start_paused = true)]
async fn shutdown_flushes_pending_updates() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let model = model();
    let (queue, repo) = start(store.clone(), model.clone());
    queue.enqueue(turn("tea please")).unwrap();
    queue.shutdown(Duration::from_secs(5)).await;
    assert_eq!(model.requests().len(), 1);
    assert_eq!(
        repo.load(&MemoryScope::new("alice", None))
            .unwrap()
            .facts
            .len(),
        1
    );
    assert!(store.scan_prefix(QUEUE_TREE, b"").unwrap().is_empty());
}

#[tokio::test(start_paused = true)]
async fn dropped_messages_go_before_the_next_conversation() {
    let model = model();
    let (queue, _) = start(Arc::new(MemoryStore::new()), model.clone());
    let dropped = [Message::human("I was born in Oslo"), Message::ai("Nice.")];
    queue
        .enqueue_dropped(MemoryScope::new("alice", None), "t1", None, &dropped)
        .unwrap();
    queue.enqueue(turn("now in Lyon")).unwrap();
    queue.shutdown(Duration::from_secs(5)).await;
    let prompt = last_prompt(&model);
    let oslo = prompt.find("user: I was born in Oslo").unwrap();
    let lyon = prompt.find("user: now in Lyon").unwrap();
    assert!(oslo < lyon);
}

#[tokio::test(start_paused = true)]
async fn a_reloaded_debounce_applies_to_new_work_and_pending_entries_keep_their_time() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let live = Arc::new(std::sync::Mutex::new(MemoryConfig::default()));
    let read = live.clone();
    let settings = MemorySettings::live(move || read.lock().unwrap().clone());
    let model = Arc::new(
        ScriptedModel::new(
            "memory",
            [
                ScriptedTurn::Text(vec![ANSWER.into()]),
                ScriptedTurn::Text(vec![ANSWER.into()]),
            ],
        )
        .with_background_script(),
    );
    let repo = MemoryRepo::new(store.clone());
    let updater = MemoryUpdater::new(repo, settings);
    let answering = model.clone();
    let resolver: ModelResolver = Arc::new(move |_| Some(answering.clone() as Arc<dyn ChatModel>));
    let queue = MemoryQueue::start(store, updater, resolver).unwrap();

    queue.enqueue(turn("tea at 30 s")).unwrap();
    live.lock().unwrap().debounce_seconds = 2;
    let mut other = turn("bikes at 2 s");
    other.thread_id = "t2".into();
    queue.enqueue(other).unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(model.requests().len(), 1, "only the new work is due");
    assert!(last_prompt(&model).contains("user: bikes at 2 s"));
    assert_eq!(queue.pending(), 1, "the earlier entry is still queued");
    tokio::time::sleep(Duration::from_secs(28)).await;
    assert_eq!(model.requests().len(), 2);
    assert!(last_prompt(&model).contains("user: tea at 30 s"));
    queue.shutdown(Duration::from_secs(5)).await;
}
