//! The queue with a paused clock: debounce, latest wins, restart, shutdown flush.

use std::sync::Arc;

use super::*;
use crate::config::MemoryConfig;
use crate::memory::MemorySettings;
use crate::memory::repo::MemoryRepo;
use crate::model::scripted::{ScriptedModel, ScriptedTurn};
use antler_store::MemoryStore;
use antler_store::messages::Message;

const ANSWER: &str =
    r#"{"newFacts":[{"content":"Prefers tea","category":"preference","confidence":0.9}]}"#;

fn model() -> Arc<ScriptedModel> {
    // One scripted answer: a second update call would fail the test.
    Arc::new(
        ScriptedModel::new("memory", [ScriptedTurn::Text(vec![ANSWER.into()])])
            .with_background_script(),
    )
}

/// The threads' conversations as the loader reads them (a thread missing here is gone).
type Threads = Arc<std::sync::Mutex<std::collections::HashMap<String, Vec<ConversationMessage>>>>;

fn loader(threads: &Threads) -> ConversationLoader {
    let threads = threads.clone();
    Arc::new(move |thread_id, _user| threads.lock().unwrap().get(thread_id).cloned())
}

fn start(store: StoreRef, model: Arc<ScriptedModel>) -> (MemoryQueue, MemoryRepo, Threads) {
    let repo = MemoryRepo::new(store.clone());
    let updater = MemoryUpdater::new(repo.clone(), MemoryConfig::default());
    let resolver: ModelResolver = Arc::new(move |_| Some(model.clone() as Arc<dyn ChatModel>));
    let threads = Threads::default();
    let queue = MemoryQueue::start(store, updater, resolver, loader(&threads)).unwrap();
    (queue, repo, threads)
}

/// A turn on `thread_id`: the thread now ends with `text` and an answer.
fn turn_on(threads: &Threads, thread_id: &str, text: &str) -> PendingConversation {
    let exchange =
        [("user", text), ("assistant", "ok")].map(|(role, content)| ConversationMessage {
            role: role.into(),
            content: content.into(),
        });
    threads
        .lock()
        .unwrap()
        .entry(thread_id.to_string())
        .or_default()
        .extend(exchange);
    PendingConversation::new(MemoryScope::new("alice", None), thread_id.into(), None)
}

fn turn(threads: &Threads, text: &str) -> PendingConversation {
    turn_on(threads, "t1", text)
}

/// Facts alice's memory holds.
fn fact_count(repo: &MemoryRepo) -> usize {
    repo.load(&MemoryScope::new("alice", None))
        .unwrap()
        .facts
        .len()
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
    let (queue, repo, threads) = start(Arc::new(MemoryStore::new()), model.clone());
    for text in ["first", "second", "third"] {
        queue.enqueue(turn(&threads, text)).unwrap();
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
    assert_eq!(model.requests().len(), 0, "still inside the debounce");
    tokio::time::sleep(Duration::from_secs(31)).await;
    assert_eq!(model.requests().len(), 1);
    // The thread as it is when the update runs, each turn once.
    let prompt = last_prompt(&model);
    assert!(prompt.contains("user: third"));
    assert_eq!(prompt.matches("user: first").count(), 1);
    assert_eq!(fact_count(&repo), 1);
    assert_eq!(queue.pending(), 0);
    queue.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(start_paused = true)]
async fn a_pending_update_survives_a_restart() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let first_model = model();
    let (queue, _, threads) = start(store.clone(), first_model.clone());
    queue.enqueue(turn(&threads, "remember tea")).unwrap();
    // A crash: the worker dies without flushing.
    queue.inner.cancel.cancel();
    drop(queue);
    assert_eq!(first_model.requests().len(), 0);

    let second_model = model();
    let (restarted, repo, reopened) = start(store.clone(), second_model.clone());
    // The threads outlive the process (their checkpoints are in the store).
    *reopened.lock().unwrap() = threads.lock().unwrap().clone();
    assert_eq!(restarted.pending(), 1);
    tokio::time::sleep(Duration::from_secs(31)).await;
    assert_eq!(second_model.requests().len(), 1);
    assert!(last_prompt(&second_model).contains("user: remember tea"));
    assert_eq!(fact_count(&repo), 1);
    assert!(store.scan_prefix(QUEUE_TREE, b"").unwrap().is_empty());
    restarted.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(start_paused = true)]
async fn shutdown_flushes_pending_updates() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let model = model();
    let (queue, repo, threads) = start(store.clone(), model.clone());
    queue.enqueue(turn(&threads, "tea please")).unwrap();
    queue.shutdown(Duration::from_secs(5)).await;
    assert_eq!(model.requests().len(), 1);
    assert_eq!(fact_count(&repo), 1);
    assert!(store.scan_prefix(QUEUE_TREE, b"").unwrap().is_empty());
}

#[tokio::test(start_paused = true)]
async fn dropped_messages_go_before_the_next_conversation() {
    let model = model();
    let (queue, _, threads) = start(Arc::new(MemoryStore::new()), model.clone());
    let dropped = [Message::human("I was born in Oslo"), Message::ai("Nice.")];
    queue
        .enqueue_dropped(
            MemoryScope::new("alice", None),
            "t1",
            None,
            Author::alone("alice"),
            &dropped,
        )
        .unwrap();
    queue.enqueue(turn(&threads, "now in Lyon")).unwrap();
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
    let threads = Threads::default();
    let queue = MemoryQueue::start(store, updater, resolver, loader(&threads)).unwrap();

    queue.enqueue(turn(&threads, "tea at 30 s")).unwrap();
    live.lock().unwrap().debounce_seconds = 2;
    let other = turn_on(&threads, "t2", "bikes at 2 s");
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

#[tokio::test(start_paused = true)]
async fn a_turn_on_a_pending_thread_writes_nothing_and_the_record_names_only_the_thread() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let model = model();
    let (queue, _, threads) = start(store.clone(), model.clone());
    queue.enqueue(turn(&threads, "tea please")).unwrap();
    let records = store.scan_prefix(QUEUE_TREE, b"").unwrap();
    assert_eq!(records.len(), 1);
    let record = String::from_utf8(records[0].1.clone()).unwrap();
    assert!(record.contains("\"t1\""), "{record}");
    assert!(
        !record.contains("tea"),
        "the conversation stays in the thread"
    );
    // Taken out behind the queue's back: the next turn must not write it again.
    store.delete(QUEUE_TREE, &records[0].0).unwrap();
    queue.enqueue(turn(&threads, "and biscuits")).unwrap();
    assert!(store.scan_prefix(QUEUE_TREE, b"").unwrap().is_empty());
    queue.shutdown(Duration::from_secs(5)).await;
    assert!(last_prompt(&model).contains("user: and biscuits"));
}

#[tokio::test(start_paused = true)]
async fn a_record_written_with_its_messages_reads_the_thread_instead() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let old = serde_json::json!({
        "scope": MemoryScope::new("alice", None),
        "thread_id": "t1",
        "model_name": null,
        "earlier": [],
        "messages": [{"role": "user", "content": "stale copy"}],
    });
    let key = PendingConversation::new(MemoryScope::new("alice", None), "t1".into(), None).key();
    store
        .put(QUEUE_TREE, &key, &serde_json::to_vec(&old).unwrap())
        .unwrap();
    let model = model();
    let (queue, _, threads) = start(store.clone(), model.clone());
    assert_eq!(queue.pending(), 1);
    turn(&threads, "tea please");
    queue.shutdown(Duration::from_secs(5)).await;
    let prompt = last_prompt(&model);
    assert!(prompt.contains("user: tea please"));
    assert!(!prompt.contains("stale copy"));
    assert!(store.scan_prefix(QUEUE_TREE, b"").unwrap().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_deleted_thread_updates_nothing() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let model = model();
    let (queue, repo, threads) = start(store.clone(), model.clone());
    queue.enqueue(turn(&threads, "tea please")).unwrap();
    threads.lock().unwrap().remove("t1");
    tokio::time::sleep(Duration::from_secs(31)).await;
    assert_eq!(model.requests().len(), 0);
    assert_eq!(queue.pending(), 0);
    assert!(store.scan_prefix(QUEUE_TREE, b"").unwrap().is_empty());
    assert_eq!(fact_count(&repo), 0);
    queue.shutdown(Duration::from_secs(5)).await;
}

fn scripted(turns: Vec<ScriptedTurn>) -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::new("memory", turns).with_background_script())
}

fn stored(store: &StoreRef) -> usize {
    store.scan_prefix(QUEUE_TREE, b"").unwrap().len()
}

#[tokio::test(start_paused = true)]
async fn an_update_the_model_cannot_take_stays_queued_and_runs_later() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let model = scripted(vec![
        ScriptedTurn::Fail(crate::model::ModelErrorKind::Connect),
        ScriptedTurn::Text(vec![ANSWER.into()]),
    ]);
    let (queue, repo, threads) = start(store.clone(), model.clone());
    queue.enqueue(turn(&threads, "tea please")).unwrap();
    tokio::time::sleep(Duration::from_secs(31)).await;
    assert_eq!(model.requests().len(), 1);
    assert_eq!(
        (queue.pending(), stored(&store)),
        (1, 1),
        "kept, in memory and stored"
    );
    assert_eq!(fact_count(&repo), 0);
    // The failed try is work done (the daemon's memory release waits for this count to stop).
    assert_eq!(queue.processed(), 1);
    tokio::time::sleep(RETRY_AFTER - Duration::from_secs(2)).await;
    assert_eq!(model.requests().len(), 1, "not before the retry wait");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(model.requests().len(), 2);
    assert!(last_prompt(&model).contains("user: tea please"));
    assert_eq!(fact_count(&repo), 1);
    assert_eq!((queue.pending(), stored(&store)), (0, 0));
    assert_eq!(queue.processed(), 2);
    queue.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(start_paused = true)]
async fn an_update_is_dropped_once_its_model_stayed_unreachable_for_every_attempt() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let failures = (0..MAX_ATTEMPTS)
        .map(|_| ScriptedTurn::Fail(crate::model::ModelErrorKind::Connect))
        .collect();
    let model = scripted(failures);
    let (queue, _, threads) = start(store.clone(), model.clone());
    queue.enqueue(turn(&threads, "tea please")).unwrap();
    // Debounce, then waits of 1, 2, 4, 8 and 16 retry periods.
    tokio::time::sleep(Duration::from_secs(31) + RETRY_AFTER * 31).await;
    assert_eq!(model.requests().len(), MAX_ATTEMPTS as usize);
    assert_eq!((queue.pending(), stored(&store)), (0, 0));
    tokio::time::sleep(RETRY_AFTER * 64).await;
    assert_eq!(
        model.requests().len(),
        MAX_ATTEMPTS as usize,
        "no try after the last"
    );
    queue.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(start_paused = true)]
async fn a_shutdown_with_the_model_down_stops_at_the_first_failure_and_keeps_every_update() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let down = scripted(vec![ScriptedTurn::Fail(
        crate::model::ModelErrorKind::Connect,
    )]);
    let (queue, _, threads) = start(store.clone(), down.clone());
    queue
        .enqueue(turn_on(&threads, "t1", "tea please"))
        .unwrap();
    queue
        .enqueue(turn_on(&threads, "t2", "and biscuits"))
        .unwrap();
    queue.shutdown(Duration::from_secs(30)).await;
    assert_eq!(down.requests().len(), 1, "the second update was not tried");
    assert_eq!(stored(&store), 2, "both stay for the next start");

    let up = scripted(vec![
        ScriptedTurn::Text(vec![ANSWER.into()]),
        ScriptedTurn::Text(vec![ANSWER.into()]),
    ]);
    let (restarted, _, reopened) = start(store.clone(), up.clone());
    *reopened.lock().unwrap() = threads.lock().unwrap().clone();
    tokio::time::sleep(Duration::from_secs(31)).await;
    assert_eq!(up.requests().len(), 2);
    assert_eq!((restarted.pending(), stored(&store)), (0, 0));
    restarted.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(start_paused = true)]
async fn a_failed_update_hands_its_dropped_messages_to_the_conversation_that_replaced_it() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let (queue, _, threads) = start(store.clone(), model());
    let dropped = [Message::human("I was born in Oslo"), Message::ai("Nice.")];
    queue
        .enqueue_dropped(
            MemoryScope::new("alice", None),
            "t1",
            None,
            Author::alone("alice"),
            &dropped,
        )
        .unwrap();
    // The update is under way (out of the map) when a newer turn queues the thread again.
    let key = turn(&threads, "x").key();
    let failed = queue.inner.lock_pending().remove(&key).unwrap();
    queue.enqueue(turn(&threads, "now in Lyon")).unwrap();
    queue.requeue(&key, failed);
    let (earlier, record) = {
        let pending = queue.inner.lock_pending();
        let entry = pending.get(&key).unwrap();
        (entry.conversation.earlier.clone(), entry.record.clone())
    };
    assert_eq!(earlier.len(), 2);
    assert_eq!(earlier[0].content, "I was born in Oslo");
    let stored_record = store.get(QUEUE_TREE, &key).unwrap().unwrap();
    assert_eq!(stored_record, record, "the store holds the merged entry");
    queue.shutdown(Duration::from_secs(5)).await;
}

/// A model that takes the request and never answers (until the hour is up).
fn hanging() -> Arc<ScriptedModel> {
    let hang = || ScriptedTurn::Slow {
        chunks: vec![ANSWER.into()],
        delay: Duration::from_secs(3600),
    };
    scripted(vec![hang(), hang(), hang()])
}

/// The worker is inside an update whose model hangs when the shutdown comes: the shutdown
/// does not wait for it (nor for the 79 behind it), the flush stops at its deadline, and every
/// update stays queued and stored.
#[tokio::test(start_paused = true)]
async fn a_shutdown_with_the_model_hanging_ends_at_its_deadline_and_keeps_every_update() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let model = hanging();
    let (queue, _, threads) = start(store.clone(), model.clone());
    for index in 0..80 {
        let thread = format!("t{index}");
        queue
            .enqueue(turn_on(&threads, &thread, "tea please"))
            .unwrap();
    }
    tokio::time::sleep(Duration::from_secs(31)).await;
    assert_eq!(model.requests().len(), 1, "the worker is inside an update");

    let started = Instant::now();
    queue.shutdown(Duration::from_secs(30)).await;
    let took = started.elapsed();
    assert!(
        took <= Duration::from_secs(30),
        "the shutdown took {took:?}"
    );
    assert!(
        took >= Duration::from_secs(30),
        "the flush gave up early: {took:?}"
    );
    assert_eq!(model.requests().len(), 2, "the flush tried one update");
    assert_eq!((queue.pending(), stored(&store)), (80, 80));
}

/// Many updates due at once with the model down: the first finds it down and the others wait
/// for the next try instead of each going through the outage (no failure counted for them).
#[tokio::test(start_paused = true)]
async fn due_updates_wait_behind_one_that_found_the_model_down() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let down = || ScriptedTurn::Fail(crate::model::ModelErrorKind::Connect);
    let model = scripted(vec![down(), down()]);
    let (queue, _, threads) = start(store.clone(), model.clone());
    for index in 0..80 {
        let thread = format!("t{index}");
        queue
            .enqueue(turn_on(&threads, &thread, "tea please"))
            .unwrap();
    }
    tokio::time::sleep(Duration::from_secs(31)).await;
    assert_eq!(model.requests().len(), 1, "one try for the outage");
    assert_eq!((queue.pending(), stored(&store)), (80, 80));
    let failures: Vec<u32> = queue
        .inner
        .lock_pending()
        .values()
        .map(|entry| entry.failures)
        .collect();
    assert_eq!(failures.iter().filter(|&&f| f == 1).count(), 1);
    let started = Instant::now();
    queue.shutdown(Duration::from_secs(30)).await;
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(
        model.requests().len(),
        2,
        "the flush stopped at its first failure"
    );
    assert_eq!(stored(&store), 80);
}

#[path = "queue_shared_tests.rs"]
mod shared;
