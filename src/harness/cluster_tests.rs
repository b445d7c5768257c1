//! Two harnesses on one shared store, as two daemons on one database: one run per thread
//! across them, cancels that cross instances, runs whose instance died, jobs run once.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::*;
use crate::agent_api::{RunOptions, StopReason};
use crate::cluster::{TokioWallClock, WallClock};
use crate::config::ModelConfig;
use crate::model::{ScriptedModel, ScriptedTurn};
use antler_store::MemoryStore;
use antler_store::lease::{Acquired, LEASES_TREE, Lease, Leases};
use antler_store::messages::Message;

const LEASE: Duration = Duration::from_secs(15);

struct Instance {
    harness: Harness,
    _dir: tempfile::TempDir,
}

/// A harness as instance `id` of a store several daemons share.
fn instance(store: &StoreRef, id: &str, turns: Vec<ScriptedTurn>) -> Instance {
    let dir = tempfile::tempdir().unwrap();
    let config = AppConfig {
        data_dir: Some(dir.path().to_path_buf()),
        ..AppConfig::default()
    };
    let models = ModelRegistry::new().with_model(
        "scripted",
        Arc::new(ScriptedModel::new("scripted", turns)),
        ModelConfig::default(),
    );
    let cluster = Cluster::new(
        store.clone(),
        id,
        LEASE,
        "memory",
        Arc::new(TokioWallClock::new()),
    );
    let harness = Harness::with_cluster(
        ConfigHandle::fixed(config),
        store.clone(),
        Some(models),
        cluster,
    )
    .unwrap();
    Instance { harness, _dir: dir }
}

fn request(thread: &str, text: &str) -> RunRequest {
    RunRequest {
        user_id: "alice".into(),
        speaker: Speaker::Owner,
        thread_id: thread.into(),
        input: vec![Message::human(text)],
        options: RunOptions::default(),
        want_values: false,
    }
}

fn slow() -> ScriptedTurn {
    ScriptedTurn::Slow {
        chunks: vec!["never".into()],
        delay: Duration::from_secs(3600),
    }
}

fn answer(text: &str) -> ScriptedTurn {
    ScriptedTurn::Text(vec![text.to_string()])
}

fn status(instance: &Instance, thread: &str) -> ThreadStatus {
    instance
        .harness
        .get_thread("alice", thread)
        .unwrap()
        .unwrap()
        .status
}

/// A run on `thread` by an instance that then died: its record, its lease (never renewed)
/// and the thread left busy.
fn orphan_run(store: &StoreRef, thread: &str, now_ms: u64) -> Lease {
    let threads = ThreadStore::new(store.clone()).unwrap();
    threads
        .create("alice", Some(thread.into()), Map::new())
        .unwrap();
    threads.set_status(thread, ThreadStatus::Busy).unwrap();
    let leases = Leases::new(store.clone(), "dead");
    let Acquired::Held { lease, .. } = leases
        .try_acquire(&format!("run:{thread}"), 15_000, now_ms)
        .unwrap()
    else {
        panic!("the lease is free");
    };
    let record = RunRecord {
        run_id: "r-dead".into(),
        instance: "dead".into(),
        started_at_ms: now_ms,
    };
    store
        .put(
            RUNS_TREE,
            thread.as_bytes(),
            &serde_json::to_vec(&record).unwrap(),
        )
        .unwrap();
    lease
}

#[tokio::test(start_paused = true)]
async fn a_second_run_from_another_instance_is_busy_and_a_cancel_sent_there_stops_it() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let a = instance(&store, "a", vec![slow()]);
    let b = instance(&store, "b", vec![answer("after")]);
    let first = a.harness.start_run(request("t1", "one")).await.unwrap();

    let refused = b
        .harness
        .start_run(request("t1", "two"))
        .await
        .err()
        .unwrap();
    assert!(
        matches!(&refused, RunError::Busy { thread_id } if thread_id == "t1"),
        "{refused}"
    );
    assert_eq!(b.harness.active_run("t1"), Some(first.run_id.clone()));
    assert!(
        !b.harness.cancel_run("t1", "some-other-run"),
        "only the run in flight"
    );

    let asked = tokio::time::Instant::now();
    assert!(b.harness.cancel_run("t1", &first.run_id));
    assert_eq!(first.outcome.await.unwrap().stop, StopReason::Cancelled);
    assert!(
        asked.elapsed() <= Duration::from_secs(1),
        "{:?}",
        asked.elapsed()
    );
    assert_eq!(status(&b, "t1"), ThreadStatus::Interrupted);

    // Both records are gone with the run; the thread is free for b.
    assert!(store.scan_prefix(RUNS_TREE, b"").unwrap().is_empty());
    assert!(store.scan_prefix(CANCELS_TREE, b"").unwrap().is_empty());
    assert_eq!(b.harness.active_run("t1"), None);
    let second = b.harness.start_run(request("t1", "two")).await.unwrap();
    assert_eq!(second.outcome.await.unwrap().stop, StopReason::Completed);
    assert_eq!(status(&a, "t1"), ThreadStatus::Idle);
    a.harness.shutdown(Duration::ZERO).await.unwrap();
    b.harness.shutdown(Duration::ZERO).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_thread_with_a_run_on_another_instance_cannot_be_deleted() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let a = instance(&store, "a", vec![slow()]);
    let b = instance(&store, "b", vec![]);
    let first = a.harness.start_run(request("t1", "one")).await.unwrap();
    let refused = b.harness.delete_thread("alice", "t1").err().unwrap();
    assert!(matches!(refused, RunError::Busy { .. }), "{refused}");
    assert!(a.harness.cancel_run("t1", &first.run_id));
    first.outcome.await.unwrap();
    b.harness.delete_thread("alice", "t1").unwrap();
    assert_eq!(b.harness.get_thread("alice", "t1").unwrap(), None);
    a.harness.shutdown(Duration::ZERO).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_run_that_loses_its_lease_is_cancelled_at_once() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let a = instance(&store, "a", vec![slow()]);
    let first = a.harness.start_run(request("t1", "one")).await.unwrap();
    // Another instance takes the lease over, as after a's pause past its expiry.
    let stolen = Leases::new(store.clone(), "b");
    let later = a.harness.cluster().now_ms() + LEASE.as_millis() as u64 + 1;
    assert!(matches!(
        stolen.try_acquire("run:t1", 15_000, later).unwrap(),
        Acquired::Held { .. }
    ));
    let outcome = tokio::time::timeout(LEASE, first.outcome)
        .await
        .expect("cancelled within a renewal")
        .unwrap();
    assert_eq!(outcome.stop, StopReason::Cancelled);
    // Its record was left for the new holder: a's clean-up was fenced off.
    assert_eq!(store.scan_prefix(RUNS_TREE, b"").unwrap().len(), 1);
    a.harness.shutdown(Duration::ZERO).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_run_whose_instance_died_is_interrupted_once_its_lease_expires() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let clock_start = TokioWallClock::new().now_ms();
    orphan_run(&store, "t1", clock_start);
    // Another instance still looks alive, so a does not take every busy thread for stale at
    // open: only runs whose lease expired.
    Leases::new(store.clone(), "dead")
        .try_acquire("instance:dead", 15_000, clock_start)
        .unwrap();
    let a = instance(&store, "a", vec![answer("resumed")]);
    assert!(
        a.harness.interrupt_orphaned_runs().unwrap().is_empty(),
        "still leased"
    );
    let refused = a
        .harness
        .start_run(request("t1", "hi"))
        .await
        .err()
        .unwrap();
    assert!(matches!(refused, RunError::Busy { .. }), "{refused}");

    tokio::time::sleep(LEASE + Duration::from_millis(1)).await;
    assert_eq!(a.harness.interrupt_orphaned_runs().unwrap(), ["t1"]);
    assert_eq!(status(&a, "t1"), ThreadStatus::Interrupted);
    assert!(store.scan_prefix(RUNS_TREE, b"").unwrap().is_empty());
    let run = a.harness.start_run(request("t1", "hi")).await.unwrap();
    assert_eq!(run.outcome.await.unwrap().stop, StopReason::Completed);
    a.harness.shutdown(Duration::ZERO).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn opening_next_to_a_live_instance_leaves_its_runs_alone() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let a = instance(&store, "a", vec![slow()]);
    let _joined = a.harness.cluster().join().unwrap().expect("joined");
    let first = a.harness.start_run(request("t1", "one")).await.unwrap();
    // t2: a run of an instance that died long ago.
    let long_ago = a.harness.cluster().now_ms() - 10 * LEASE.as_millis() as u64;
    orphan_run(&store, "t2", long_ago);

    let b = instance(&store, "b", vec![]);
    assert_eq!(status(&b, "t1"), ThreadStatus::Busy, "a's run is alive");
    assert_eq!(status(&b, "t2"), ThreadStatus::Interrupted);
    assert!(a.harness.cancel_run("t1", &first.run_id));
    assert_eq!(first.outcome.await.unwrap().stop, StopReason::Cancelled);
    drop(_joined);
    a.harness.shutdown(Duration::ZERO).await.unwrap();
    b.harness.shutdown(Duration::ZERO).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_periodic_job_runs_once_per_period_across_instances() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let a = instance(&store, "a", vec![]);
    let b = instance(&store, "b", vec![]);
    let rounds = Arc::new(AtomicUsize::new(0));
    for instance in [&a, &b] {
        let rounds = rounds.clone();
        let work: jobs::Work = Arc::new(move |_| {
            let rounds = rounds.clone();
            Box::pin(async move {
                rounds.fetch_add(1, Ordering::SeqCst);
                true
            })
        });
        instance
            .harness
            .spawn_job("count", Duration::from_secs(3600), work);
    }
    tokio::time::sleep(Duration::from_secs(10 * 3600 + 1800)).await;
    // At start and every hour for ten hours: once each, not once per instance.
    assert_eq!(rounds.load(Ordering::SeqCst), 11);
    a.harness.shutdown(Duration::ZERO).await.unwrap();
    b.harness.shutdown(Duration::ZERO).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_job_round_stops_when_its_lease_is_lost() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let a = instance(&store, "a", vec![]);
    let stopped = Arc::new(AtomicUsize::new(0));
    struct Stopped(Arc<AtomicUsize>);
    impl Drop for Stopped {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let flag = stopped.clone();
    let work: jobs::Work = Arc::new(move |_| {
        let guard = Stopped(flag.clone());
        Box::pin(async move {
            let _guard = guard;
            std::future::pending::<()>().await;
            true
        })
    });
    a.harness
        .spawn_job("forever", Duration::from_secs(3600), work);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(stopped.load(Ordering::SeqCst), 0, "the round is under way");
    let later = a.harness.cluster().now_ms() + LEASE.as_millis() as u64 + 1;
    assert!(matches!(
        Leases::new(store.clone(), "b")
            .try_acquire("job:forever", 3_600_000, later)
            .unwrap(),
        Acquired::Held { .. }
    ));
    tokio::time::sleep(LEASE).await;
    assert_eq!(stopped.load(Ordering::SeqCst), 1, "the round was dropped");
    a.harness.shutdown(Duration::ZERO).await.unwrap();
}

#[tokio::test]
async fn on_sled_runs_and_jobs_write_no_claim() {
    let dir = tempfile::tempdir().unwrap();
    let store: StoreRef =
        Arc::new(antler_store::SledStore::open(dir.path().join("store")).unwrap());
    let config = AppConfig {
        data_dir: Some(dir.path().to_path_buf()),
        ..AppConfig::default()
    };
    let models = ModelRegistry::new().with_model(
        "scripted",
        Arc::new(ScriptedModel::new("scripted", vec![answer("hi")])),
        ModelConfig::default(),
    );
    let harness =
        Harness::with_parts(ConfigHandle::fixed(config), store.clone(), Some(models)).unwrap();
    let run = harness.start_run(request("t1", "hi")).await.unwrap();
    assert_eq!(run.outcome.await.unwrap().stop, StopReason::Completed);
    harness.start_jobs();
    assert!(harness.claim_job("prune").is_some());
    tokio::task::yield_now().await;
    for tree in [LEASES_TREE, RUNS_TREE, CANCELS_TREE, JOBS_TREE] {
        assert!(store.scan_prefix(tree, b"").unwrap().is_empty(), "{tree}");
    }
    harness.shutdown(Duration::ZERO).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_one_off_job_is_claimed_by_one_instance_at_a_time() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let a = instance(&store, "a", vec![]);
    let b = instance(&store, "b", vec![]);
    let pruning = a.harness.claim_job("channel-journal-prune").expect("free");
    assert!(b.harness.claim_job("channel-journal-prune").is_none());
    drop(pruning);
    tokio::task::yield_now().await;
    assert!(b.harness.claim_job("channel-journal-prune").is_some());
    a.harness.shutdown(Duration::ZERO).await.unwrap();
    b.harness.shutdown(Duration::ZERO).await.unwrap();
}
