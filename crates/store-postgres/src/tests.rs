//! The store conformance suite on PostgreSQL (a fresh database per story), the migrations,
//! and what only a shared database shows: two stores racing on one head.

use std::sync::Arc;

use antler_store::conformance::Fresh;
use antler_store::{BatchOp, Expect, Store, StoreError};
use antler_test_support::postgres::{TestDatabase, admin_url, fresh_database};

use crate::{LATEST_VERSION, PgError, PgOptions, PgStore};

fn options(database: &TestDatabase) -> PgOptions {
    PgOptions {
        url: database.url.clone(),
        pool_size: 4,
    }
}

fn available() -> bool {
    admin_url().is_some()
}

fn fresh() -> Fresh {
    let database = fresh_database().expect("checked by `available`");
    let store = PgStore::open(&options(&database)).unwrap();
    Fresh {
        name: "postgres",
        store: Arc::new(store),
        keep: Some(Box::new(database)),
    }
}

mod conformance {
    antler_store::store_conformance_tests!(super::fresh, if super::available);
}

#[test]
fn an_empty_database_is_migrated_to_the_latest_schema() {
    let Some(database) = fresh_database() else {
        return;
    };
    let store = PgStore::open(&options(&database)).unwrap();
    assert_eq!(store.schema_version().unwrap(), LATEST_VERSION);
    let applied = database
        .query_strings("SELECT version::text FROM schema_version ORDER BY version")
        .unwrap();
    assert_eq!(applied, ["1", "2"]);
    // Opening again applies nothing twice.
    drop(store);
    let again = PgStore::open(&options(&database)).unwrap();
    assert_eq!(again.schema_version().unwrap(), LATEST_VERSION);
}

#[test]
fn a_database_of_the_previous_version_is_migrated_with_its_data() {
    let Some(database) = fresh_database() else {
        return;
    };
    {
        let old = PgStore::open_at(&options(&database), LATEST_VERSION - 1).unwrap();
        assert_eq!(old.schema_version().unwrap(), LATEST_VERSION - 1);
        old.put("heads", b"t", b"v1").unwrap();
        old.put("log", b"t\0\x01", b"record").unwrap();
    }
    let collation = "SELECT coalesce(collation_name, 'default') FROM information_schema.columns \
                     WHERE table_name = 'kv' AND column_name = 'tree'";
    assert_eq!(database.query_strings(collation).unwrap(), ["default"]);
    let store = PgStore::open(&options(&database)).unwrap();
    assert_eq!(store.schema_version().unwrap(), LATEST_VERSION);
    assert_eq!(database.query_strings(collation).unwrap(), ["C"]);
    assert_eq!(
        store.get("heads", b"t").unwrap().as_deref(),
        Some(&b"v1"[..])
    );
    assert_eq!(store.scan_prefix("log", b"t\0").unwrap().len(), 1);
    assert_eq!(store.trees().unwrap(), ["heads", "log"]);
}

#[test]
fn a_newer_schema_is_refused_naming_both_versions() {
    let Some(database) = fresh_database() else {
        return;
    };
    drop(PgStore::open(&options(&database)).unwrap());
    let newer = LATEST_VERSION + 1;
    database
        .execute(&format!(
            "INSERT INTO schema_version (version) VALUES ({newer})"
        ))
        .unwrap();
    let Err(err) = PgStore::open(&options(&database)) else {
        panic!("a newer schema must be refused");
    };
    assert!(
        matches!(err, PgError::NewerSchema { found, known } if found == newer && known == LATEST_VERSION),
        "{err}"
    );
    let message = StoreError::from(err).to_string();
    assert!(message.contains(&format!("version {newer}")), "{message}");
    assert!(
        message.contains(&format!("version {LATEST_VERSION}")),
        "{message}"
    );
    assert!(message.contains("upgrade antler"), "{message}");
}

#[test]
fn an_unreachable_server_is_a_clear_error() {
    // A port nothing listens on: the refusal comes at once.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let Err(err) = PgStore::open(&PgOptions {
        url: format!("postgres://antler:s3cret@127.0.0.1:{port}/antler"),
        pool_size: 2,
    }) else {
        panic!("nothing listens there");
    };
    let message = err.to_string();
    assert!(message.contains("could not reach PostgreSQL"), "{message}");
    assert!(message.contains(&format!("127.0.0.1:{port}")), "{message}");
    assert!(!message.contains("s3cret"), "{message}");
}

/// Several stores (as several daemons) and threads race compare-and-set increments of one
/// absent-then-present key: every increment that reported success is there, none twice.
#[test]
fn racing_conditional_batches_from_two_stores_lose_no_update() {
    let Some(database) = fresh_database() else {
        return;
    };
    let stores: Vec<Arc<PgStore>> = (0..2)
        .map(|_| Arc::new(PgStore::open(&options(&database)).unwrap()))
        .collect();
    let workers: Vec<_> = (0..4)
        .map(|worker| {
            let store = stores[worker % 2].clone();
            std::thread::spawn(move || {
                let mut won = 0u32;
                while won < 25 {
                    let current = store.get("heads", b"t").unwrap();
                    let next = current
                        .as_deref()
                        .map_or(0, |v| u32::from_be_bytes(v.try_into().unwrap()))
                        + 1;
                    let applied = store
                        .apply_batch_if(
                            &Expect {
                                tree: "heads",
                                key: b"t".to_vec(),
                                value: current,
                            },
                            vec![
                                BatchOp::Put {
                                    tree: "log",
                                    key: next.to_be_bytes().to_vec(),
                                    value: vec![worker as u8],
                                },
                                BatchOp::Put {
                                    tree: "heads",
                                    key: b"t".to_vec(),
                                    value: next.to_be_bytes().to_vec(),
                                },
                            ],
                        )
                        .unwrap();
                    won += u32::from(applied);
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
    let head = stores[0].get("heads", b"t").unwrap().unwrap();
    assert_eq!(u32::from_be_bytes(head.try_into().unwrap()), 100);
    assert_eq!(stores[1].scan_prefix("log", b"").unwrap().len(), 100);
}

/// The write counters see what a batch wrote, folded: the bench's rows and bytes per turn.
#[test]
fn write_counters_count_folded_rows_and_bytes() {
    let Some(database) = fresh_database() else {
        return;
    };
    let store = PgStore::open(&options(&database)).unwrap();
    store
        .apply_batch(vec![
            BatchOp::Put {
                tree: "a",
                key: b"k".to_vec(),
                value: b"12345".to_vec(),
            },
            BatchOp::Put {
                tree: "a",
                key: b"k".to_vec(),
                value: b"123".to_vec(),
            },
            BatchOp::Delete {
                tree: "a",
                key: b"gone".to_vec(),
            },
        ])
        .unwrap();
    assert_eq!(store.written().get(), (2, 1 + 3 + 4, 1));
}

/// Called from a daemon's worker threads (a multi-thread runtime), the store answers and the
/// runtime keeps running other tasks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_answers_inside_a_multi_thread_runtime() {
    let Some(database) = fresh_database() else {
        return;
    };
    let store = Arc::new(PgStore::open(&options(&database)).unwrap());
    let tasks: Vec<_> = (0..8u8)
        .map(|n| {
            let store = store.clone();
            tokio::spawn(async move {
                store.put("t", &[n], &[n]).unwrap();
                store.get("t", &[n]).unwrap()
            })
        })
        .collect();
    for (n, task) in tasks.into_iter().enumerate() {
        assert_eq!(task.await.unwrap(), Some(vec![n as u8]));
    }
    drop(store);
}
