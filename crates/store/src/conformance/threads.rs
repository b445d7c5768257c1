//! The thread-store stories every backend runs (in-memory and sled here; another backend
//! through `store_conformance_tests!`): append and fold, head-only
//! reads, replaced, removed and moved messages, bytes per step independent of the history,
//! atomic batches, compare-and-set, migration of the old layout, deletion, retention, and an
//! evicted thread reading back identical.

use serde_json::{Map, json};
use std::collections::BTreeMap;

use crate::conformance::Fresh;
use crate::log::{self, HEADS, LOG};
use crate::messages::{Message, ToolCall};
use crate::state::{SandboxState, StateUpdate, ThreadState, Todo, TodoStatus};
use crate::test_fixtures::{Driver, FlakyStore, write_legacy_thread};
use crate::threads::{LEGACY_CHECKPOINTS, ThreadError, ThreadStoreOptions};
use crate::{StoreError, StoreRef, ThreadStore};

pub(crate) fn open(store: &StoreRef) -> ThreadStore {
    ThreadStore::new(store.clone()).unwrap()
}

fn padded(text: &str) -> String {
    format!("{text} {}", "x".repeat(200))
}

/// One turn as the loop does it: the human message, then the answer, a checkpoint after each.
pub(crate) fn turn(driver: &mut Driver, n: usize) {
    driver.apply(StateUpdate::message(Message::human(padded(&format!(
        "q{n}"
    )))));
    driver.save().unwrap();
    driver.apply(StateUpdate::message(Message::ai(padded(&format!("a{n}")))));
    driver.save().unwrap();
}

pub fn append_fold_and_head_only_read(make: &dyn Fn() -> Fresh) {
    let fresh = make();
    let (name, store) = (fresh.name, fresh.store.clone());
    let threads = open(&store);
    threads.create("u", Some("t".into()), Map::new()).unwrap();
    assert_eq!(threads.head("t").unwrap(), None, "{name}");
    assert_eq!(threads.state("t").unwrap(), None, "{name}");
    let mut driver = Driver::new(threads.clone(), "t");
    for n in 0..5 {
        turn(&mut driver, n);
    }
    driver.apply(StateUpdate {
        title: Some("A title".into()),
        todos: Some(vec![Todo {
            content: "do".into(),
            status: TodoStatus::InProgress,
            active_form: None,
        }]),
        artifacts: vec!["/mnt/user-data/outputs/a.md".into()],
        extra: [("k".to_string(), json!(1))].into(),
        ..Default::default()
    });
    driver.save().unwrap();
    driver.assert_reads_back(&store, name);
    // The head alone, from a store that has not read the log.
    let head = open(&store).head("t").unwrap().unwrap();
    assert_eq!(
        (head.version, head.messages, head.step),
        (11, 10, 11),
        "{name}"
    );
    let record = threads.get("t").unwrap().unwrap();
    assert_eq!(record.title.as_deref(), Some("A title"), "{name}");
    assert_eq!(record.last_checkpoint, 11, "{name}");
}

pub fn replaced_removed_and_moved_messages_fold_exactly(make: &dyn Fn() -> Fresh) {
    let fresh = make();
    let (name, store) = (fresh.name, fresh.store.clone());
    let mut driver = Driver::new(open(&store), "t");
    turn(&mut driver, 0);
    // A middleware rewrites the last AI message in place (same id).
    let mut rewritten = driver.state.messages[1].clone();
    if let Message::Ai(ai) = &mut rewritten {
        ai.content = "rewritten".into();
    }
    driver.apply(StateUpdate::message(rewritten));
    driver.save().unwrap();
    driver.assert_reads_back(&store, &format!("{name}: replaced"));
    // Tool calls and results, then the empty answer is removed and a note asks again.
    let mut ai = crate::messages::AiMessage {
        id: "ai-tools".into(),
        ..Default::default()
    };
    ai.tool_calls.push(ToolCall {
        id: "c1".into(),
        name: "echo".into(),
        args: json!({"text": "a"}),
        args_error: None,
    });
    driver.apply(StateUpdate::message(Message::Ai(ai)));
    driver.apply(StateUpdate::message(Message::ai("")));
    driver.save().unwrap();
    let empty_id = driver.state.messages.last().unwrap().id().to_string();
    driver.apply(StateUpdate {
        remove_messages: vec![empty_id],
        messages: vec![Message::human("please answer")],
        ..Default::default()
    });
    driver.save().unwrap();
    driver.assert_reads_back(&store, &format!("{name}: removed"));
    // The dynamic-context pattern: the turn's tail is removed and re-added behind a
    // reminder that takes the human message's id.
    driver.apply(StateUpdate::message(Message::human("new turn")));
    let tail: Vec<Message> = driver.state.messages[driver.state.messages.len() - 1..].to_vec();
    let mut moved = tail.clone();
    let human_id = tail[0].id().to_string();
    moved[0].set_id(format!("{human_id}__user"));
    let mut messages = vec![Message::System(crate::messages::SystemMessage {
        id: human_id.clone().into(),
        content: "today is".into(),
        meta: Default::default(),
    })];
    messages.extend(moved);
    driver.apply(StateUpdate {
        remove_messages: vec![human_id],
        messages,
        sandbox: Some(SandboxState {
            sandbox_id: "s1".into(),
        }),
        ..Default::default()
    });
    driver.save().unwrap();
    driver.assert_reads_back(&store, &format!("{name}: moved"));
    // Everything dropped, then a fresh start.
    driver.apply(StateUpdate {
        remove_all_messages: true,
        messages: vec![Message::human("summary of before")],
        summary_text: Some("before".into()),
        ..Default::default()
    });
    driver.save().unwrap();
    driver.assert_reads_back(&store, &format!("{name}: cleared"));
    turn(&mut driver, 1);
    driver.assert_reads_back(&store, &format!("{name}: after clearing"));
}

pub fn bytes_written_per_step_do_not_grow_with_the_history(make: &dyn Fn() -> Fresh) {
    let fresh = make();
    let (name, store) = (fresh.name, fresh.store.clone());
    let flaky = FlakyStore::new(store.clone());
    let flaky_ref: StoreRef = flaky.clone();
    let mut driver = Driver::new(open(&flaky_ref), "long");
    let mut at = BTreeMap::new();
    for n in 0..500 {
        turn(&mut driver, n);
        let history = driver.state.messages.len();
        if [10, 100, 1000].contains(&history) {
            at.insert(history, flaky.last_batch_bytes());
        }
    }
    let (small, large) = (at[&10], at[&1000]);
    // Only the digits of the counters in the head and the record may differ.
    assert!(
        large <= small + 32,
        "{name}: {small} bytes at history 10, {large} at 1000"
    );
    driver.assert_reads_back(&store, name);
}

pub fn a_failed_batch_leaves_the_old_head_and_log(make: &dyn Fn() -> Fresh) {
    let fresh = make();
    let (name, store) = (fresh.name, fresh.store.clone());
    let flaky = FlakyStore::new(store.clone());
    let flaky_ref: StoreRef = flaky.clone();
    let mut driver = Driver::new(open(&flaky_ref), "t");
    turn(&mut driver, 0);
    let before = driver.state.clone();
    let head = open(&store).head("t").unwrap().unwrap();
    let log_len = store.scan_prefix(LOG, &log::prefix("t")).unwrap().len();
    driver.apply(StateUpdate::message(Message::human("lost")));
    flaky.fail_next_batch();
    assert!(driver.save().is_err(), "{name}");
    // What a crash between the log write and the head update would show: nothing new.
    let cold = open(&store);
    assert_eq!(cold.head("t").unwrap().unwrap(), head, "{name}");
    assert_eq!(*cold.state("t").unwrap().unwrap().1, before, "{name}");
    assert_eq!(
        store.scan_prefix(LOG, &log::prefix("t")).unwrap().len(),
        log_len,
        "{name}"
    );
    // The run goes on: the next save carries the unsaved change too.
    driver.apply(StateUpdate::message(Message::ai("after")));
    driver.save().unwrap();
    driver.assert_reads_back(&store, name);
}

pub fn a_second_writer_on_the_same_head_is_refused(make: &dyn Fn() -> Fresh) {
    let fresh = make();
    let (name, store) = (fresh.name, fresh.store.clone());
    let mut first = Driver::new(open(&store), "t");
    turn(&mut first, 0);
    // Another process (its own thread store) continues the thread.
    let mut second = Driver::resume(open(&store), "t");
    turn(&mut second, 1);
    first.apply(StateUpdate::message(Message::human("stale")));
    let error = first.save().unwrap_err();
    assert!(
        matches!(error, ThreadError::Store(StoreError::Conflict { .. })),
        "{name}: {error}"
    );
    // The refused writer reads the winner's state afterwards.
    let (_, state) = first.threads.state("t").unwrap().unwrap();
    assert_eq!(*state, second.state, "{name}");
}

pub fn a_data_dir_of_the_old_layout_is_migrated_on_open(make: &dyn Fn() -> Fresh) {
    let fresh = make();
    let (name, store) = (fresh.name, fresh.store.clone());
    let mut states = Vec::new();
    let mut state = ThreadState::default();
    for n in 0..5 {
        state
            .apply(StateUpdate::message(Message::human(format!("q{n}"))))
            .unwrap();
        state
            .apply(StateUpdate {
                messages: vec![Message::ai(format!("a{n}"))],
                title: Some("Old thread".into()),
                ..Default::default()
            })
            .unwrap();
        states.push(state.clone());
    }
    write_legacy_thread(store.as_ref(), "alice", "old", &states);
    write_legacy_thread(store.as_ref(), "bob", "empty", &[]);
    let threads = open(&store);
    let (head, migrated) = threads.state("old").unwrap().unwrap();
    assert_eq!(*migrated, state, "{name}");
    assert_eq!((head.version, head.messages), (5, 10), "{name}");
    assert!(
        store
            .scan_prefix(LEGACY_CHECKPOINTS, b"")
            .unwrap()
            .is_empty(),
        "{name}: old checkpoints are gone"
    );
    let record = threads.get("old").unwrap().unwrap();
    assert_eq!(record.title.as_deref(), Some("Old thread"), "{name}");
    assert_eq!(threads.list("alice").unwrap().len(), 1, "{name}");
    assert_eq!(threads.state("empty").unwrap(), None, "{name}");
    // The migrated thread goes on where it was.
    let mut driver = Driver::resume(threads.clone(), "old");
    turn(&mut driver, 5);
    driver.assert_reads_back(&store, name);
    // A second open finds nothing left to do.
    assert_eq!(crate::migrate::run(store.as_ref()).unwrap(), 0, "{name}");
}

pub fn deleting_a_thread_removes_its_head_and_log(make: &dyn Fn() -> Fresh) {
    let fresh = make();
    let (name, store) = (fresh.name, fresh.store.clone());
    let threads = open(&store);
    threads.create("u", Some("t".into()), Map::new()).unwrap();
    threads.create("u", Some("t2".into()), Map::new()).unwrap();
    for id in ["t", "t2"] {
        let mut driver = Driver::new(threads.clone(), id);
        for n in 0..3 {
            turn(&mut driver, n);
        }
    }
    assert!(threads.delete("t").unwrap(), "{name}");
    assert!(
        store
            .scan_prefix(LOG, &log::prefix("t"))
            .unwrap()
            .is_empty(),
        "{name}"
    );
    assert_eq!(store.get(HEADS, b"t").unwrap(), None, "{name}");
    assert_eq!(threads.state("t").unwrap(), None, "{name}");
    assert_eq!(
        threads.state("t2").unwrap().unwrap().1.messages.len(),
        6,
        "{name}"
    );
}

pub fn retention_drops_only_records_the_state_no_longer_needs(make: &dyn Fn() -> Fresh) {
    let fresh = make();
    let (name, store) = (fresh.name, fresh.store.clone());
    let threads = open(&store);
    let mut driver = Driver::new(threads.clone(), "t");
    turn(&mut driver, 0);
    for n in 0..3 {
        let mut ai = driver.state.messages[1].clone();
        if let Message::Ai(a) = &mut ai {
            a.content = format!("version {n}").into();
        }
        driver.apply(StateUpdate {
            messages: vec![ai],
            title: Some(format!("title {n}")),
            ..Default::default()
        });
        driver.save().unwrap();
    }
    let records = store.scan_prefix(LOG, &log::prefix("t")).unwrap().len();
    let report = threads.drop_superseded_before(i64::MAX).unwrap();
    // Three superseded versions of the answer and two of the title.
    assert_eq!(report.records, 5, "{name}: {report:?}");
    assert_eq!(
        store.scan_prefix(LOG, &log::prefix("t")).unwrap().len(),
        records - 5,
        "{name}"
    );
    driver.assert_reads_back(&store, name);
    assert_eq!(threads.apply_retention(30).unwrap().records, 0, "{name}");
    let stats = threads.stats().unwrap();
    assert_eq!(stats.threads.len(), 1, "{name}");
    assert_eq!(stats.threads[0].messages, 2, "{name}");
}

pub fn evicted_threads_read_back_identical_and_the_cache_stays_bounded(make: &dyn Fn() -> Fresh) {
    let fresh = make();
    let (name, store) = (fresh.name, fresh.store.clone());
    let capacity = 64 * 1024;
    let threads = ThreadStore::with_options(
        store.clone(),
        ThreadStoreOptions {
            state_cache_bytes: capacity,
            cache_from_messages: 0,
            ..ThreadStoreOptions::default()
        },
    )
    .unwrap();
    let mut drivers = Vec::new();
    for t in 0..20 {
        let mut driver = Driver::new(threads.clone(), &format!("t{t}"));
        for n in 0..10 {
            turn(&mut driver, n);
        }
        let (_, weight, cap) = threads.cache_usage();
        assert!(weight <= cap, "{name}: {weight} > {cap}");
        drivers.push(driver);
    }
    let (kept, _, _) = threads.cache_usage();
    assert!(
        kept < 20,
        "{name}: the cache evicted nothing ({kept} threads kept)"
    );
    for driver in &mut drivers {
        // Evicted or not, every thread reads back identical and continues correctly.
        let (_, state) = threads.state(&driver.thread_id).unwrap().unwrap();
        assert_eq!(*state, driver.state, "{name}: {}", driver.thread_id);
        turn(driver, 99);
        driver.assert_reads_back(&store, name);
    }
    let (_, weight, cap) = threads.cache_usage();
    assert!(weight <= cap, "{name}");
}

pub fn a_thread_larger_than_the_whole_cache_is_kept_alone(make: &dyn Fn() -> Fresh) {
    let fresh = make();
    let (name, store) = (fresh.name, fresh.store.clone());
    let threads = ThreadStore::with_options(
        store.clone(),
        ThreadStoreOptions {
            state_cache_bytes: 16 * 1024,
            cache_from_messages: 0,
            ..ThreadStoreOptions::default()
        },
    )
    .unwrap();
    let mut short = Driver::new(threads.clone(), "short");
    turn(&mut short, 0);
    assert_eq!(threads.cache_usage().0, 1, "{name}: the short thread fits");
    let mut long = Driver::new(threads.clone(), "long");
    for n in 0..20 {
        turn(&mut long, n);
    }
    let (kept, weight, cap) = threads.cache_usage();
    assert_eq!(kept, 1, "{name}: the long thread stays, alone");
    assert!(
        weight > cap,
        "{name}: it outgrew the bound ({weight} <= {cap})"
    );
    assert_eq!(
        *threads.state("long").unwrap().unwrap().1,
        long.state,
        "{name}"
    );
    // The next thread used takes its place, and the bound holds again.
    turn(&mut short, 1);
    let (kept, weight, cap) = threads.cache_usage();
    assert_eq!(kept, 1, "{name}");
    assert!(weight <= cap, "{name}");
    short.assert_reads_back(&store, name);
    long.assert_reads_back(&store, name);
}

/// Two thread stores on one store, as two daemons on one database: each serves the thread as
/// the other last saved it, never its own cached copy, and continues it from there.
pub fn thread_stores_sharing_a_store_never_serve_a_stale_thread(make: &dyn Fn() -> Fresh) {
    let fresh = make();
    let (name, store) = (fresh.name, fresh.store.clone());
    let options = ThreadStoreOptions {
        cache_from_messages: 0,
        shared: true,
        ..ThreadStoreOptions::default()
    };
    let a = ThreadStore::with_options(store.clone(), options).unwrap();
    let b = ThreadStore::with_options(store.clone(), options).unwrap();
    let mut on_a = Driver::new(a.clone(), "t");
    for n in 0..3 {
        turn(&mut on_a, n);
    }
    assert_eq!(*b.state("t").unwrap().unwrap().1, on_a.state, "{name}");
    assert_eq!(b.cache_usage().0, 1, "{name}: b keeps the thread cached");
    turn(&mut on_a, 3);
    assert_eq!(
        *b.state("t").unwrap().unwrap().1,
        on_a.state,
        "{name}: b's cached copy was refreshed"
    );
    assert_eq!(
        b.head("t").unwrap().unwrap().version,
        a.head("t").unwrap().unwrap().version,
        "{name}"
    );
    let mut on_b = Driver::resume(b.clone(), "t");
    turn(&mut on_b, 4);
    let checked_out = a.checkout("t").unwrap().unwrap();
    assert_eq!(checked_out, on_b.state, "{name}: a runs from b's turn");
    a.checkin("t");
    assert_eq!(*a.state("t").unwrap().unwrap().1, on_b.state, "{name}");
    assert_eq!(a.head("t").unwrap().unwrap().messages, 10, "{name}");
}
