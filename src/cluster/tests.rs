use std::sync::Arc;
use std::time::Duration;

use antler_store::{BatchOp, MemoryStore, StoreRef};
use tokio_util::sync::CancellationToken;

use super::*;

const LEASE: Duration = Duration::from_secs(15);

fn instance(store: &StoreRef, id: &str) -> Cluster {
    Cluster::new(
        store.clone(),
        id,
        LEASE,
        "memory",
        Arc::new(TokioWallClock::new()),
    )
}

fn put(key: &str) -> Vec<BatchOp> {
    vec![BatchOp::Put {
        tree: "work",
        key: key.as_bytes().to_vec(),
        value: b"x".to_vec(),
    }]
}

#[tokio::test(start_paused = true)]
async fn a_held_lease_is_renewed_while_its_holder_lives() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let a = instance(&store, "a");
    let b = instance(&store, "b");
    let held = a.try_hold("telegram:bot").unwrap().expect("free");
    // Ten lease lengths later a still holds it: the renewer kept it alive.
    tokio::time::sleep(LEASE * 10).await;
    assert!(!held.is_lost());
    assert!(b.try_hold("telegram:bot").unwrap().is_none());
    assert!(held.write_fenced(put("a")).unwrap());
    assert_eq!(a.held_names(), ["telegram:bot"]);
    // Dropped: released at once, b takes it without waiting for an expiry.
    drop(held);
    let cancel = CancellationToken::new();
    let taken = tokio::time::timeout(LEASE, b.hold("telegram:bot", &cancel))
        .await
        .expect("taken within a lease")
        .expect("held");
    assert_eq!(taken.lease().epoch, 2);
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_dead_holder_is_replaced_within_two_leases_and_fenced() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let a = instance(&store, "a");
    let b = instance(&store, "b");
    let held = a.try_hold("chat:1").unwrap().expect("free");
    let stale = held.lease();
    // a "dies": its renewer stops without releasing (as a SIGKILL would leave the record).
    a.inner.shutdown.cancel();
    std::mem::forget(held);
    let start = tokio::time::Instant::now();
    let cancel = CancellationToken::new();
    let taken = b.hold("chat:1", &cancel).await.expect("taken over");
    assert!(start.elapsed() <= LEASE * 2, "{:?}", start.elapsed());
    assert_eq!(taken.lease().epoch, stale.epoch + 1);
    // Whatever a writes under its old epoch is refused.
    let leases = Leases::new(store.clone(), "a");
    assert!(!leases.write_fenced(&stale, put("late")).unwrap());
    assert_eq!(store.get("work", b"late").unwrap(), None);
    b.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn losing_a_lease_cancels_its_work() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let a = instance(&store, "a");
    let held = a.try_hold("memory_queue").unwrap().expect("free");
    let lost = held.lost();
    // Another instance overwrites the record as a takeover after expiry would.
    let b = Leases::new(store.clone(), "b");
    let now = a.now_ms() + LEASE.as_millis() as u64 + 1;
    assert!(matches!(
        b.try_acquire("memory_queue", 15_000, now).unwrap(),
        antler_store::lease::Acquired::Held { .. }
    ));
    tokio::time::timeout(LEASE, lost.cancelled())
        .await
        .expect("the renewer notices within a lease");
    assert!(a.held_names().is_empty());
    assert!(!held.write_fenced(put("x")).unwrap());
    a.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn instances_are_listed_from_their_leases() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let a = instance(&store, "a");
    let b = instance(&store, "b");
    let _a = a.join().unwrap().expect("joined");
    let _b = b.join().unwrap().expect("joined");
    let ids: Vec<String> = a
        .instances()
        .unwrap()
        .into_iter()
        .map(|l| l.holder)
        .collect();
    assert_eq!(ids, ["a", "b"]);
    drop(_b);
    b.shutdown().await;
    let ids: Vec<String> = a
        .instances()
        .unwrap()
        .into_iter()
        .map(|l| l.holder)
        .collect();
    assert_eq!(ids, ["a"]);
    drop(_a);
    a.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn leftovers_of_a_previous_run_are_released() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let now = instance(&store, "now");
    // A daemon that died holding a lease: the record stays live, nobody renews or releases it.
    let gone = antler_store::lease::Leases::new(store.clone(), "gone");
    let left = gone
        .try_acquire("telegram:transport:x", 15_000, now.now_ms())
        .unwrap();
    assert!(matches!(left, Acquired::Held { .. }));
    assert!(now.try_hold("telegram:transport:x").unwrap().is_none());
    assert_eq!(now.release_leftovers().unwrap(), 1);
    let taken = now
        .try_hold("telegram:transport:x")
        .unwrap()
        .expect("free again");
    assert_eq!(
        taken.lease().epoch,
        2,
        "the next epoch, so the old one stays fenced"
    );
    drop(taken);
    now.shutdown().await;
}
