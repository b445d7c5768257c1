//! Periodic work that must run once across the instances sharing the store: checkpoint
//! retention, and on a shared store the sweep of runs whose instance died.
//!
//! Each round is claimed with the lease `job:{name}`; on a shared store the time of the last
//! round is kept in `jobs/{name}`, so a daily job runs once a day for the whole cluster, not
//! once a day per instance, and an instance that starts an hour after another does not run it
//! again. A round whose lease is lost stops at once (a blocking pass already under way, such
//! as retention's, finishes the batch it is writing; its deletes are idempotent). On sled the
//! harness runs each job at start and then every period, as before, with no lease or record.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{Harness, Inner};
use crate::cluster::HeldLease;
use antler_store::BatchOp;

/// `job name` → the wall-clock time (ms, big-endian) its last round started.
pub const JOBS_TREE: &str = "jobs";
/// Lease names of periodic and one-off jobs: `job:{name}`.
pub(crate) const JOB_PREFIX: &str = "job:";
/// How often checkpoint retention runs (also once at start on sled).
pub(crate) const RETENTION_EVERY: Duration = Duration::from_secs(24 * 60 * 60);

/// One round of a job; `false` when it had nothing to do (retention switched off), which is
/// not recorded as a round.
type Round = Pin<Box<dyn Future<Output = bool> + Send>>;
pub(super) type Work = Arc<dyn Fn(Harness) -> Round + Send + Sync>;

/// The right to run a one-off job now ([`Harness::claim_job`]); released when dropped.
pub struct JobClaim {
    _held: Option<HeldLease>,
}

/// The harness's job tasks and their stop signal.
#[derive(Default)]
pub(super) struct Jobs {
    tracker: TaskTracker,
    stop: CancellationToken,
}

impl Jobs {
    /// Stops every job and waits for the rounds under way to wind down.
    pub(super) async fn shutdown(&self) {
        self.stop.cancel();
        self.tracker.close();
        self.tracker.wait().await;
    }
}

impl Harness {
    /// Starts the periodic jobs (the daemon calls this once, in its runtime): checkpoint
    /// retention while `store.retention_days` is set (read at each round), and on a shared
    /// store the sweep that marks interrupted the threads whose run's instance died, every
    /// lease length. Stopped by [`Harness::shutdown`].
    pub fn start_jobs(&self) {
        let retention: Work = Arc::new(|harness: Harness| {
            Box::pin(async move {
                let days = harness.config().current().store.retention_days;
                if days == 0 {
                    return false;
                }
                let threads = harness.threads().clone();
                match tokio::task::spawn_blocking(move || threads.apply_retention(days)).await {
                    Ok(Ok(report)) if report.records > 0 => tracing::info!(
                        records = report.records,
                        threads = report.threads,
                        bytes = report.bytes,
                        "Dropped superseded checkpoint records (store.retention_days)"
                    ),
                    Ok(Ok(_)) => {}
                    Ok(Err(error)) => tracing::warn!(%error, "Checkpoint retention failed"),
                    Err(error) => tracing::warn!(%error, "Checkpoint retention did not finish"),
                }
                true
            })
        });
        self.spawn_job("retention", RETENTION_EVERY, retention);
        self.start_approval_job();
        if self.inner.shared {
            let sweep: Work = Arc::new(|harness: Harness| {
                Box::pin(async move {
                    if let Err(error) = harness.interrupt_orphaned_runs() {
                        tracing::warn!(%error, "Could not look for runs whose instance stopped");
                    }
                    true
                })
            });
            self.spawn_job("runs", self.inner.cluster.lease_duration(), sweep);
        }
    }

    /// One attempt to take the one-off job `name` (pruning the channel journal when a channel
    /// starts): `None` while another instance runs it, or when the store cannot be reached
    /// (logged; the job is skipped this time). Dropping the claim ends it. On sled it is
    /// always granted, without a lease.
    pub fn claim_job(&self, name: &str) -> Option<JobClaim> {
        if !self.inner.shared {
            return Some(JobClaim { _held: None });
        }
        match self.inner.cluster.try_hold(&format!("{JOB_PREFIX}{name}")) {
            Ok(held) => held.map(|held| JobClaim { _held: Some(held) }),
            Err(error) => {
                tracing::warn!(%error, job = name, "Could not claim a job; skipping it this time");
                None
            }
        }
    }

    pub(super) fn spawn_job(&self, name: &'static str, every: Duration, work: Work) {
        let job = Job {
            inner: Arc::downgrade(&self.inner),
            name,
            every,
            stop: self.inner.jobs.stop.clone(),
            work,
        };
        // Owned by the harness's job tracker: `shutdown` stops it and waits for it.
        self.inner.jobs.tracker.spawn(job.run());
    }
}

struct Job {
    /// Weak: a job must not keep the harness alive.
    inner: Weak<Inner>,
    name: &'static str,
    every: Duration,
    stop: CancellationToken,
    work: Work,
}

impl Job {
    async fn run(self) {
        loop {
            let Some(inner) = self.inner.upgrade() else {
                return;
            };
            let harness = Harness { inner };
            let wait = self.round(harness).await;
            tokio::select! {
                () = self.stop.cancelled() => return,
                () = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// Runs one round if it is due and this instance wins its lease; how long to wait for the
    /// next look.
    async fn round(&self, harness: Harness) -> Duration {
        let cluster = harness.cluster().clone();
        let lease = cluster.lease_duration();
        if !harness.inner.shared {
            // sled: this process is the only one; no lease, no record, as before clusters.
            (self.work)(harness).await;
            return self.every;
        }
        let held = match cluster.try_hold(&format!("{JOB_PREFIX}{}", self.name)) {
            Ok(Some(held)) => held,
            // Another instance is running it: look again once its round is likely over.
            Ok(None) => return self.every.min(lease),
            Err(error) => {
                tracing::warn!(%error, job = self.name, "Could not claim a job; trying again");
                return lease;
            }
        };
        let now = cluster.now_ms();
        match last_round(&cluster, self.name) {
            Ok(Some(last)) => {
                let next = last.saturating_add(millis(self.every));
                if now < next {
                    return Duration::from_millis(next - now);
                }
            }
            Ok(None) => {}
            Err(error) => {
                tracing::warn!(%error, job = self.name, "Could not read when a job last ran; trying again");
                return lease;
            }
        }
        let lost = held.lost();
        let ran = tokio::select! {
            ran = (self.work)(harness) => ran,
            () = lost.cancelled() => {
                tracing::warn!(job = self.name, "Lost the job's lease; stopped its round");
                return lease;
            }
            () = self.stop.cancelled() => return Duration::ZERO,
        };
        if !ran {
            return self.every;
        }
        let record = BatchOp::Put {
            tree: JOBS_TREE,
            key: self.name.as_bytes().to_vec(),
            value: now.to_be_bytes().to_vec(),
        };
        if let Err(error) = held.write_fenced(vec![record]) {
            tracing::warn!(%error, job = self.name, "Could not record a job's round; another instance may repeat it");
        }
        self.every
    }
}

fn last_round(
    cluster: &crate::cluster::Cluster,
    name: &str,
) -> Result<Option<u64>, antler_store::StoreError> {
    Ok(cluster
        .store()
        .get(JOBS_TREE, name.as_bytes())?
        .and_then(|bytes| <[u8; 8]>::try_from(bytes.as_slice()).ok())
        .map(u64::from_be_bytes))
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
