//! One run per thread across every instance sharing the store, and cancels that reach a run
//! from whichever instance received them.
//!
//! Within one process the run registry (`Inner::runs`) decides. On a shared store a run also
//! holds the lease `run:{thread_id}` for its life, so a second run on the thread is refused
//! (409) whichever instance holds the first, and it writes `runs_active/{thread_id}` → which
//! run, on which instance, under that lease, so the other instances can name the run in
//! flight. A cancel received by another instance is written to `run_cancels/{thread_id}` (the
//! run's id); the running instance reads it every [`CANCEL_POLL`]: one point read per run in
//! flight, the same on every backend, no LISTEN/NOTIFY to keep connected. Both records are
//! removed when the run ends (a cancel that raced the end is removed by the thread's next run).
//! A run whose lease is lost (its instance paused or cut off past the lease) is cancelled at
//! once.
//!
//! sled is held by one process only, so there the registry already sees every run: nothing of
//! this is written, and a single daemon behaves as it did before clusters.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::{Harness, RunError};
use crate::cluster::{Cluster, HeldLease};
use antler_store::lease::{Acquired, Lease, Leases};
use antler_store::threads::ThreadError;
use antler_store::{BatchOp, StoreError, StoreRef, ThreadStatus, ThreadStore};

/// Lease names of runs in flight: `run:{thread_id}`.
pub(crate) const RUN_PREFIX: &str = "run:";
/// `thread_id` → [`RunRecord`] while a run holds the thread's lease.
pub const RUNS_TREE: &str = "runs_active";
/// `thread_id` → the id of the run asked to stop.
pub const CANCELS_TREE: &str = "run_cancels";
/// How often a run in flight looks for a cancel sent to another instance: a cancel takes
/// effect within this (well within the second a user waits for the stop button).
pub(crate) const CANCEL_POLL: Duration = Duration::from_millis(500);

/// The run in flight on a thread, as the other instances see it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunRecord {
    pub run_id: String,
    pub instance: String,
    pub started_at_ms: u64,
}

/// What a run holds on a shared store; released when the run ends.
pub(super) struct RunClaim {
    held: HeldLease,
    /// Stops the run's cancel watcher.
    done: CancellationToken,
}

pub(crate) fn run_lease(thread_id: &str) -> String {
    format!("{RUN_PREFIX}{thread_id}")
}

/// Whether other daemons may share this store: the store says so (PostgreSQL), or the cluster
/// was named for another backend than sled (tests run two instances on one in-memory store).
/// sled is held by one process only: a second one cannot open its directory.
pub(super) fn is_shared(cluster: &Cluster) -> bool {
    cluster.store().is_shared() || cluster.backend() != "sled"
}

impl Harness {
    /// On a shared store, takes the thread for the run across instances: `Busy` while another
    /// instance runs on it. `None` on sled (the registry is enough there).
    pub(super) fn claim_thread(
        &self,
        thread_id: &str,
        run_id: &str,
        cancel: &CancellationToken,
    ) -> Result<Option<RunClaim>, RunError> {
        if !self.inner.shared {
            return Ok(None);
        }
        let cluster = &self.inner.cluster;
        let busy = || RunError::Busy {
            thread_id: thread_id.to_string(),
        };
        let held = cluster
            .try_hold(&run_lease(thread_id))
            .map_err(ThreadError::Store)?
            .ok_or_else(busy)?;
        let active = RunRecord {
            run_id: run_id.to_string(),
            instance: cluster.instance_id().to_string(),
            started_at_ms: cluster.now_ms(),
        };
        let ops = vec![
            BatchOp::Put {
                tree: RUNS_TREE,
                key: thread_id.as_bytes().to_vec(),
                value: serde_json::to_vec(&active).map_err(|e| {
                    ThreadError::Store(StoreError::Io(format!("encoding a run record: {e}")))
                })?,
            },
            BatchOp::Delete {
                tree: CANCELS_TREE,
                key: thread_id.as_bytes().to_vec(),
            },
        ];
        if !held.write_fenced(ops).map_err(ThreadError::Store)? {
            return Err(busy());
        }
        let done = CancellationToken::new();
        let watcher = CancelWatcher {
            store: cluster.store().clone(),
            thread_id: thread_id.to_string(),
            run_id: run_id.to_string(),
            lost: held.lost(),
            cancel: cancel.clone(),
            done: done.clone(),
        };
        // Owned by the harness's tracker (awaited at shutdown); it ends with the run.
        self.inner.tracker.spawn(watcher.run());
        Ok(Some(RunClaim { held, done }))
    }

    /// Cancels the run `run_id` of `thread_id`, here or (on a shared store) on the instance
    /// running it; `false` if no such run is in flight anywhere.
    pub fn cancel_run(&self, thread_id: &str, run_id: &str) -> bool {
        match self.runs().get(thread_id) {
            Some(active) if active.run_id == run_id => {
                active.cancel.cancel();
                return true;
            }
            _ => {}
        }
        if !self.inner.shared {
            return false;
        }
        match self.remote_run(thread_id) {
            Some(active) if active.run_id == run_id => {
                let store = self.inner.cluster.store();
                match store.put(CANCELS_TREE, thread_id.as_bytes(), run_id.as_bytes()) {
                    Ok(()) => {
                        tracing::info!(thread_id, run_id, instance = %active.instance, "Asked the instance running a run to cancel it");
                        true
                    }
                    Err(error) => {
                        tracing::warn!(%error, thread_id, "Could not record a cancel for another instance's run");
                        false
                    }
                }
            }
            _ => false,
        }
    }

    /// The id of the run in progress on a thread, on this instance or another, if any.
    pub fn active_run(&self, thread_id: &str) -> Option<String> {
        if let Some(active) = self.runs().get(thread_id) {
            return Some(active.run_id.clone());
        }
        if !self.inner.shared {
            return None;
        }
        self.remote_run(thread_id).map(|active| active.run_id)
    }

    /// The run another instance has in flight on `thread_id`: its record, while the run's lease
    /// is live and held by the instance the record names.
    fn remote_run(&self, thread_id: &str) -> Option<RunRecord> {
        let cluster = &self.inner.cluster;
        let read = || -> Result<Option<RunRecord>, StoreError> {
            let Some(bytes) = cluster.store().get(RUNS_TREE, thread_id.as_bytes())? else {
                return Ok(None);
            };
            let active: RunRecord = serde_json::from_slice(&bytes).map_err(|e| {
                StoreError::Io(format!("reading the run record of {thread_id}: {e}"))
            })?;
            let lease = leases(cluster).get(&run_lease(thread_id))?;
            Ok(lease
                .filter(|lease| lease.is_live(cluster.now_ms()) && lease.holder == active.instance)
                .map(|_| active))
        };
        read().unwrap_or_else(|error| {
            tracing::warn!(%error, thread_id, "Could not read which run is in flight on a thread");
            None
        })
    }

    /// Takes the thread's run lease for a moment (deleting it, say): `Busy` while a run on any
    /// instance holds it. `None` on sled.
    pub(super) fn hold_thread(&self, thread_id: &str) -> Result<Option<HeldLease>, RunError> {
        if !self.inner.shared {
            return Ok(None);
        }
        match self.inner.cluster.try_hold(&run_lease(thread_id)) {
            Ok(Some(held)) => Ok(Some(held)),
            Ok(None) => Err(RunError::Busy {
                thread_id: thread_id.to_string(),
            }),
            Err(e) => Err(ThreadError::Store(e).into()),
        }
    }

    /// Marks interrupted the threads whose run's instance died (a run record whose lease is
    /// no longer live) and clears their records; returns their ids. The `job:runs` sweep.
    pub fn interrupt_orphaned_runs(&self) -> Result<Vec<String>, ThreadError> {
        let store = self.inner.cluster.store();
        let mut reset = Vec::new();
        for (key, _) in store.scan_prefix(RUNS_TREE, b"")? {
            let thread_id = String::from_utf8_lossy(&key).into_owned();
            // Held across the check so no run of this instance claims the thread meanwhile
            // (`register` claims under the same lock).
            let runs = self.runs();
            if runs.contains_key(&thread_id) {
                continue;
            }
            if interrupt_orphan(&self.inner.threads, &self.inner.cluster, &thread_id)? {
                reset.push(thread_id);
            }
            drop(runs);
        }
        if !reset.is_empty() {
            tracing::warn!(threads = ?reset, "Runs whose instance stopped were marked interrupted");
        }
        Ok(reset)
    }
}

/// Ends a run's claim: its records removed (only while the lease is still this run's), then
/// the lease released.
pub(super) fn release(claim: RunClaim, thread_id: &str) {
    claim.done.cancel();
    let ops = [RUNS_TREE, CANCELS_TREE]
        .into_iter()
        .map(|tree| BatchOp::Delete {
            tree,
            key: thread_id.as_bytes().to_vec(),
        })
        .collect();
    if let Err(error) = claim.held.write_fenced(ops) {
        tracing::warn!(%error, thread_id, "Could not clear the record of a finished run; the next run on the thread replaces it");
    }
}

/// Threads left busy when the harness opens: on sled every one of them (no other process can
/// be running them); on a shared store only those whose run lease is not live, or, when no
/// other instance is alive at all, every one (the first daemon after a full stop or a copy).
pub(super) fn reset_at_open(
    threads: &ThreadStore,
    cluster: &Cluster,
    shared: bool,
) -> Result<Vec<String>, ThreadError> {
    if !shared {
        return threads.reset_busy();
    }
    let others_alive = cluster
        .instances()?
        .iter()
        .any(|lease| lease.holder != cluster.instance_id());
    if others_alive {
        interrupt_orphans(threads, cluster)
    } else {
        let mut reset = threads.reset_busy()?;
        reset.extend(interrupt_orphans(threads, cluster)?);
        reset.sort();
        reset.dedup();
        Ok(reset)
    }
}

/// The orphans among the run records (the open-time part of [`Harness::interrupt_orphaned_runs`]:
/// no run of this harness exists yet).
fn interrupt_orphans(threads: &ThreadStore, cluster: &Cluster) -> Result<Vec<String>, ThreadError> {
    let mut reset = Vec::new();
    for (key, _) in cluster.store().scan_prefix(RUNS_TREE, b"")? {
        let thread_id = String::from_utf8_lossy(&key).into_owned();
        if interrupt_orphan(threads, cluster, &thread_id)? {
            reset.push(thread_id);
        }
    }
    Ok(reset)
}

/// If no live lease guards the run recorded on `thread_id`, marks the thread interrupted
/// (when it is still busy) and clears the record; whether it was marked. Taking the lease
/// proves no run holds it and keeps one from starting meanwhile: acquire, mark, release,
/// without a renewer (so it also runs before the runtime is up).
fn interrupt_orphan(
    threads: &ThreadStore,
    cluster: &Cluster,
    thread_id: &str,
) -> Result<bool, ThreadError> {
    let leases = leases(cluster);
    let name = run_lease(thread_id);
    let now = cluster.now_ms();
    // A live lease of this instance's own is a run of ours (`try_acquire` would renew it).
    if leases.get(&name)?.is_some_and(|lease| lease.is_live(now)) {
        return Ok(false);
    }
    let lease = match leases.try_acquire(&name, ttl_ms(cluster), now)? {
        Acquired::Held { lease, .. } => lease,
        Acquired::Busy(_) => return Ok(false),
    };
    let marked = mark_interrupted(threads, &leases, &lease, thread_id);
    leases.release(&lease)?;
    marked
}

fn mark_interrupted(
    threads: &ThreadStore,
    leases: &Leases,
    lease: &Lease,
    thread_id: &str,
) -> Result<bool, ThreadError> {
    let busy = threads
        .get(thread_id)?
        .is_some_and(|record| record.status == ThreadStatus::Busy);
    if busy {
        threads.set_status(thread_id, ThreadStatus::Interrupted)?;
    }
    let ops = [RUNS_TREE, CANCELS_TREE]
        .into_iter()
        .map(|tree| BatchOp::Delete {
            tree,
            key: thread_id.as_bytes().to_vec(),
        })
        .collect();
    leases.write_fenced(lease, ops)?;
    Ok(busy)
}

fn leases(cluster: &Cluster) -> Leases {
    Leases::new(cluster.store().clone(), cluster.instance_id())
}

fn ttl_ms(cluster: &Cluster) -> u64 {
    u64::try_from(cluster.lease_duration().as_millis()).unwrap_or(u64::MAX)
}

/// Watches one run in flight for a cancel recorded by another instance, or the loss of its
/// lease; either cancels the run.
struct CancelWatcher {
    store: StoreRef,
    thread_id: String,
    run_id: String,
    lost: CancellationToken,
    cancel: CancellationToken,
    done: CancellationToken,
}

impl CancelWatcher {
    async fn run(self) {
        let mut every = tokio::time::interval(CANCEL_POLL);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                biased;
                () = self.done.cancelled() => return,
                () = self.lost.cancelled() => {
                    if !self.done.is_cancelled() {
                        tracing::warn!(thread_id = %self.thread_id, run_id = %self.run_id, "This instance lost the run's lease; cancelling the run");
                        self.cancel.cancel();
                    }
                    return;
                }
                _ = every.tick() => {}
            }
            match self.store.get(CANCELS_TREE, self.thread_id.as_bytes()) {
                Ok(Some(asked)) if asked == self.run_id.as_bytes() => {
                    tracing::info!(thread_id = %self.thread_id, run_id = %self.run_id, "Cancelling a run at another instance's request");
                    self.cancel.cancel();
                    return;
                }
                Ok(_) => {}
                Err(error) => {
                    tracing::debug!(%error, thread_id = %self.thread_id, "Could not look for a cancel; trying again")
                }
            }
        }
    }
}
