//! The stories every [`Store`] backend must pass, exported behind the `conformance` feature so
//! a backend in another crate (PostgreSQL) runs exactly what sled and the in-memory store run:
//! the key-value contract (below) and the thread store on top of it ([`threads`]).
//!
//! A backend's tests call [`store_conformance_tests!`](crate::store_conformance_tests) with a
//! function that makes a fresh, empty store: one `#[test]` per story, so a failure names the
//! story. [`run_all`] runs them in one go.

use std::any::Any;

use crate::{BatchOp, Expect, StoreRef};

pub mod leases;
pub mod threads;

/// A fresh, empty store for one story, and what must outlive it.
pub struct Fresh {
    /// The backend's name, in every assertion message.
    pub name: &'static str,
    pub store: StoreRef,
    /// Dropped after the story: a temporary directory, a scratch database.
    pub keep: Option<Box<dyn Any>>,
}

impl Fresh {
    /// An empty in-memory store.
    pub fn memory() -> Self {
        Self {
            name: "memory",
            store: std::sync::Arc::new(crate::MemoryStore::new()),
            keep: None,
        }
    }

    /// An empty sled store in a temporary directory, removed after the story.
    pub fn sled() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::SledStore::open(dir.path().join("store")).unwrap();
        Self {
            name: "sled",
            store: std::sync::Arc::new(store),
            keep: Some(Box::new(dir)),
        }
    }
}

/// A story: it calls `make` once for each store it needs.
pub type Story = fn(&dyn Fn() -> Fresh);

/// Every story by name, in the order [`store_conformance_tests!`](crate::store_conformance_tests)
/// expands them.
pub const STORIES: &[(&str, Story)] = &[
    ("get_put_delete", get_put_delete),
    ("trees_are_independent", trees_are_independent),
    (
        "scan_prefix_is_ordered_and_bounded",
        scan_prefix_is_ordered_and_bounded,
    ),
    ("batches_apply_every_op", batches_apply_every_op),
    (
        "trees_and_pages_enumerate_every_entry",
        trees_and_pages_enumerate_every_entry,
    ),
    (
        "conditional_batches_apply_all_or_nothing",
        conditional_batches_apply_all_or_nothing,
    ),
    (
        "append_fold_and_head_only_read",
        threads::append_fold_and_head_only_read,
    ),
    (
        "replaced_removed_and_moved_messages_fold_exactly",
        threads::replaced_removed_and_moved_messages_fold_exactly,
    ),
    (
        "bytes_written_per_step_do_not_grow_with_the_history",
        threads::bytes_written_per_step_do_not_grow_with_the_history,
    ),
    (
        "a_failed_batch_leaves_the_old_head_and_log",
        threads::a_failed_batch_leaves_the_old_head_and_log,
    ),
    (
        "a_second_writer_on_the_same_head_is_refused",
        threads::a_second_writer_on_the_same_head_is_refused,
    ),
    (
        "a_data_dir_of_the_old_layout_is_migrated_on_open",
        threads::a_data_dir_of_the_old_layout_is_migrated_on_open,
    ),
    (
        "deleting_a_thread_removes_its_head_and_log",
        threads::deleting_a_thread_removes_its_head_and_log,
    ),
    (
        "retention_drops_only_records_the_state_no_longer_needs",
        threads::retention_drops_only_records_the_state_no_longer_needs,
    ),
    (
        "evicted_threads_read_back_identical_and_the_cache_stays_bounded",
        threads::evicted_threads_read_back_identical_and_the_cache_stays_bounded,
    ),
    (
        "a_thread_larger_than_the_whole_cache_is_kept_alone",
        threads::a_thread_larger_than_the_whole_cache_is_kept_alone,
    ),
    (
        "thread_stores_sharing_a_store_never_serve_a_stale_thread",
        threads::thread_stores_sharing_a_store_never_serve_a_stale_thread,
    ),
    (
        "a_lease_has_one_holder_until_it_expires",
        leases::a_lease_has_one_holder_until_it_expires,
    ),
    (
        "racing_holders_elect_exactly_one",
        leases::racing_holders_elect_exactly_one,
    ),
];

/// Runs every story, each on a store of its own from `make`.
pub fn run_all(make: &dyn Fn() -> Fresh) {
    for (_, story) in STORIES {
        story(make);
    }
}

/// One `#[test]` per conformance story, each on a fresh store from `$make` (a `fn() -> Fresh` or
/// a closure), plus one that checks the list is [`conformance::STORIES`](crate::conformance::STORIES)
/// whole. Use it in a test module of the backend's crate. With `if $available` (a `fn() -> bool`)
/// each story first asks whether the backend is there (a database server), and returns
/// without running when it is not; `$available` says why.
#[macro_export]
macro_rules! store_conformance_tests {
    ($make:expr) => {
        $crate::store_conformance_tests!($make, if || true);
    };
    ($make:expr, if $available:expr) => {
        $crate::store_conformance_tests!(
            @stories $make, $available;
            get_put_delete,
            trees_are_independent,
            scan_prefix_is_ordered_and_bounded,
            batches_apply_every_op,
            trees_and_pages_enumerate_every_entry,
            conditional_batches_apply_all_or_nothing,
            append_fold_and_head_only_read,
            replaced_removed_and_moved_messages_fold_exactly,
            bytes_written_per_step_do_not_grow_with_the_history,
            a_failed_batch_leaves_the_old_head_and_log,
            a_second_writer_on_the_same_head_is_refused,
            a_data_dir_of_the_old_layout_is_migrated_on_open,
            deleting_a_thread_removes_its_head_and_log,
            retention_drops_only_records_the_state_no_longer_needs,
            evicted_threads_read_back_identical_and_the_cache_stays_bounded,
            a_thread_larger_than_the_whole_cache_is_kept_alone,
            thread_stores_sharing_a_store_never_serve_a_stale_thread,
            a_lease_has_one_holder_until_it_expires,
            racing_holders_elect_exactly_one
        );
    };
    (@stories $make:expr, $available:expr; $($story:ident),* $(,)?) => {
        $(
            #[test]
            fn $story() {
                if !($available)() {
                    return;
                }
                let story = $crate::conformance::STORIES
                    .iter()
                    .find(|(name, _)| *name == stringify!($story))
                    .map(|(_, story)| *story)
                    .expect("a story of conformance::STORIES");
                story(&$make);
            }
        )*

        #[test]
        fn every_conformance_story_has_a_test() {
            let expanded = [$(stringify!($story)),*];
            let names: Vec<&str> = $crate::conformance::STORIES.iter().map(|(name, _)| *name).collect();
            assert_eq!(names, expanded);
        }
    };
}

pub fn get_put_delete(make: &dyn Fn() -> Fresh) {
    let fresh = make();
    let store = &*fresh.store;
    assert_eq!(store.get("a", b"k").unwrap(), None);
    store.put("a", b"k", b"v1").unwrap();
    assert_eq!(store.get("a", b"k").unwrap().as_deref(), Some(&b"v1"[..]));
    store.put("a", b"k", b"v2").unwrap();
    assert_eq!(store.get("a", b"k").unwrap().as_deref(), Some(&b"v2"[..]));
    store.delete("a", b"k").unwrap();
    assert_eq!(store.get("a", b"k").unwrap(), None);
    store.delete("a", b"missing").unwrap();
    store.delete("never-written", b"x").unwrap();
}

pub fn trees_are_independent(make: &dyn Fn() -> Fresh) {
    let fresh = make();
    let store = &*fresh.store;
    store.put("left", b"k", b"l").unwrap();
    store.put("right", b"k", b"r").unwrap();
    // A tree whose name is a prefix of another must not see the other's keys.
    store.put("lef", b"t\0k", b"x").unwrap();
    assert_eq!(store.get("left", b"k").unwrap().as_deref(), Some(&b"l"[..]));
    assert_eq!(
        store.get("right", b"k").unwrap().as_deref(),
        Some(&b"r"[..])
    );
    assert_eq!(store.scan_prefix("left", b"").unwrap().len(), 1);
    assert_eq!(store.scan_prefix("lef", b"").unwrap().len(), 1);
}

pub fn scan_prefix_is_ordered_and_bounded(make: &dyn Fn() -> Fresh) {
    let fresh = make();
    let store = &*fresh.store;
    for key in ["p/b", "p/a", "p/c", "q/a", "p"] {
        store.put("scan", key.as_bytes(), key.as_bytes()).unwrap();
    }
    let keys: Vec<Vec<u8>> = store
        .scan_prefix("scan", b"p/")
        .unwrap()
        .into_iter()
        .map(|(k, v)| {
            assert_eq!(k, v);
            k
        })
        .collect();
    assert_eq!(keys, [b"p/a".to_vec(), b"p/b".to_vec(), b"p/c".to_vec()]);
    assert_eq!(store.scan_prefix("scan", b"").unwrap().len(), 5);
    assert!(store.scan_prefix("scan", b"z").unwrap().is_empty());
    assert!(store.scan_prefix("empty-tree", b"").unwrap().is_empty());
}

pub fn batches_apply_every_op(make: &dyn Fn() -> Fresh) {
    let fresh = make();
    let store = &*fresh.store;
    store.put("batch", b"old", b"1").unwrap();
    store
        .apply_batch(vec![
            BatchOp::Put {
                tree: "batch",
                key: b"new".to_vec(),
                value: b"2".to_vec(),
            },
            BatchOp::Put {
                tree: "other",
                key: b"k".to_vec(),
                value: b"3".to_vec(),
            },
            BatchOp::Delete {
                tree: "batch",
                key: b"old".to_vec(),
            },
            BatchOp::Put {
                tree: "batch",
                key: b"new".to_vec(),
                value: b"4".to_vec(),
            },
        ])
        .unwrap();
    assert_eq!(store.get("batch", b"old").unwrap(), None);
    assert_eq!(
        store.get("batch", b"new").unwrap().as_deref(),
        Some(&b"4"[..])
    );
    assert_eq!(
        store.get("other", b"k").unwrap().as_deref(),
        Some(&b"3"[..])
    );
    store.apply_batch(Vec::new()).unwrap();
}

pub fn trees_and_pages_enumerate_every_entry(make: &dyn Fn() -> Fresh) {
    let fresh = make();
    let (name, store) = (fresh.name, &*fresh.store);
    assert!(store.trees().unwrap().is_empty(), "{name}");
    for i in 0..7u8 {
        store.put("pages", &[b'k', i], &[i]).unwrap();
    }
    // Keys ending in 0xff and a tree whose name is a prefix of another.
    store.put("pages", b"k\xff\xff", b"last").unwrap();
    store.put("page", b"\xff", b"x").unwrap();
    store.put("pages2", b"", b"empty key").unwrap();
    store.put("gone", b"k", b"v").unwrap();
    store.delete("gone", b"k").unwrap();
    assert_eq!(
        store.trees().unwrap(),
        ["page", "pages", "pages2"],
        "{name}"
    );
    let mut all = Vec::new();
    let mut after: Option<Vec<u8>> = None;
    loop {
        let page = store.scan_page("pages", after.as_deref(), 3).unwrap();
        assert!(page.len() <= 3, "{name}");
        let Some((last, _)) = page.last() else { break };
        after = Some(last.clone());
        all.extend(page);
    }
    assert_eq!(all, store.scan_prefix("pages", b"").unwrap(), "{name}");
    assert_eq!(all.len(), 8, "{name}");
    assert_eq!(
        store.scan_page("pages2", None, 10).unwrap(),
        [(Vec::new(), b"empty key".to_vec())],
        "{name}"
    );
    assert!(store.scan_page("missing", None, 10).unwrap().is_empty());
}

pub fn conditional_batches_apply_all_or_nothing(make: &dyn Fn() -> Fresh) {
    let fresh = make();
    let store = &*fresh.store;
    let head = |value: Option<&[u8]>| Expect {
        tree: "heads",
        key: b"t".to_vec(),
        value: value.map(<[u8]>::to_vec),
    };
    let log = |seq: u8| BatchOp::Put {
        tree: "log",
        key: vec![b't', 0, seq],
        value: vec![seq],
    };
    let set_head = |value: &[u8]| BatchOp::Put {
        tree: "heads",
        key: b"t".to_vec(),
        value: value.to_vec(),
    };
    // First write: the head must be absent.
    assert!(
        store
            .apply_batch_if(&head(None), vec![log(1), set_head(b"v1")])
            .unwrap()
    );
    // A writer that read no head (or an old one) loses, and writes nothing at all.
    assert!(
        !store
            .apply_batch_if(&head(None), vec![log(2), set_head(b"other")])
            .unwrap()
    );
    assert!(
        !store
            .apply_batch_if(&head(Some(b"v0")), vec![log(2), set_head(b"other")])
            .unwrap()
    );
    assert_eq!(
        store.get("heads", b"t").unwrap().as_deref(),
        Some(&b"v1"[..])
    );
    assert_eq!(store.scan_prefix("log", b"t\0").unwrap().len(), 1);
    // The writer that read the current head wins, deletes included.
    assert!(
        store
            .apply_batch_if(
                &head(Some(b"v1")),
                vec![
                    log(2),
                    BatchOp::Delete {
                        tree: "log",
                        key: vec![b't', 0, 1],
                    },
                    set_head(b"v2"),
                ]
            )
            .unwrap()
    );
    let keys: Vec<Vec<u8>> = store
        .scan_prefix("log", b"t\0")
        .unwrap()
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(keys, [vec![b't', 0, 2]]);
    assert_eq!(
        store.get("heads", b"t").unwrap().as_deref(),
        Some(&b"v2"[..])
    );
    store.flush().unwrap();
}
