//! The shared test story every [`Store`] backend must pass.

use crate::{BatchOp, Expect, Store};

/// Runs every conformance check against `store`, which must start empty.
pub(crate) fn run_all(store: &dyn Store) {
    get_put_delete(store);
    trees_are_independent(store);
    scan_prefix_is_ordered_and_bounded(store);
    batches_apply_every_op(store);
    conditional_batches_apply_all_or_nothing(store);
    store.flush().unwrap();
}

fn get_put_delete(store: &dyn Store) {
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

fn trees_are_independent(store: &dyn Store) {
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

fn scan_prefix_is_ordered_and_bounded(store: &dyn Store) {
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

fn batches_apply_every_op(store: &dyn Store) {
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

fn conditional_batches_apply_all_or_nothing(store: &dyn Store) {
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
}
