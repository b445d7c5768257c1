//! Several daemons on one store: which instance does which piece of work, under leases that
//! are renewed in the background and, once lost, stop the work they guarded at once.
//!
//! The records and their compare-and-sets are `antler_store::lease`; this module keeps them
//! alive. A [`HeldLease`] renews itself every third of `cluster.lease_seconds` on a task the
//! [`Cluster`] owns; when a renewal fails past the lease's own deadline (the store unreachable,
//! the process paused, another instance took it over) its [`HeldLease::lost`] token is
//! cancelled, and whoever does the work selects on it. Work written under a lease goes through
//! [`HeldLease::write_fenced`], so a holder that resumes after losing its lease writes nothing.
//! A single daemon on sled runs the same code and simply always wins.

mod clock;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use antler_store::lease::{Acquired, Lease, Leases};
use antler_store::{BatchOp, StoreError, StoreRef};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use clock::{
    CLOCK_START_ENV, OffsetWallClock, SystemWallClock, TokioWallClock, WallClock, clock_from_env,
};

/// The lease every running daemon holds on its own name: the cluster's member list.
pub const INSTANCE_PREFIX: &str = "instance:";

/// The instances sharing a store and the leases this one holds.
#[derive(Clone)]
pub struct Cluster {
    inner: Arc<Inner>,
}

struct Inner {
    leases: Leases,
    ttl: Duration,
    clock: Arc<dyn WallClock>,
    backend: &'static str,
    /// What this instance holds now, by name (for `/readyz` and the gauge).
    held: Mutex<BTreeMap<String, Lease>>,
    tracker: TaskTracker,
    shutdown: CancellationToken,
}

impl Cluster {
    /// `backend` names the store for `/readyz` (`sled`, `postgres`).
    pub fn new(
        store: StoreRef,
        instance_id: impl Into<String>,
        lease: Duration,
        backend: &'static str,
        clock: Arc<dyn WallClock>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                leases: Leases::new(store, instance_id),
                ttl: lease.max(Duration::from_millis(30)),
                clock,
                backend,
                held: Mutex::default(),
                tracker: TaskTracker::new(),
                shutdown: CancellationToken::new(),
            }),
        }
    }

    pub fn instance_id(&self) -> &str {
        self.inner.leases.holder()
    }

    pub fn backend(&self) -> &'static str {
        self.inner.backend
    }

    /// Whether the store admits one process only (sled): then this daemon is the only one,
    /// every lease in the store was left by a previous run, and what it keeps in the data dir
    /// needs no instance name.
    pub fn store_is_exclusive(&self) -> bool {
        self.inner.backend == "sled"
    }

    pub fn lease_duration(&self) -> Duration {
        self.inner.ttl
    }

    pub fn store(&self) -> &StoreRef {
        self.inner.leases.store()
    }

    /// The wall clock leases are measured with (injected in tests).
    pub fn now_ms(&self) -> u64 {
        self.inner.clock.now_ms()
    }

    /// That clock, for what else keeps time with it (the scheduler).
    pub fn clock(&self) -> Arc<dyn WallClock> {
        self.inner.clock.clone()
    }

    /// One attempt to take `name`; `None` while another instance's lease on it is live.
    pub fn try_hold(&self, name: &str) -> Result<Option<HeldLease>, StoreError> {
        let ttl_ms = ttl_ms(self.inner.ttl);
        match self.inner.leases.try_acquire(name, ttl_ms, self.now_ms())? {
            Acquired::Busy(_) => {
                crate::metrics::claim_conflict(kind_of(name));
                Ok(None)
            }
            Acquired::Held { lease, took_over } => {
                if took_over {
                    crate::metrics::lease_takeover(kind_of(name));
                    tracing::info!(
                        lease = name,
                        epoch = lease.epoch,
                        "Took over a lease whose holder stopped renewing it"
                    );
                }
                Ok(Some(self.keep(lease)))
            }
        }
    }

    /// Waits until `name` is held (trying every third of the lease), or `None` once `cancel`
    /// or the cluster's shutdown fires. Store errors are logged and tried again.
    pub async fn hold(&self, name: &str, cancel: &CancellationToken) -> Option<HeldLease> {
        loop {
            match self.try_hold(name) {
                Ok(Some(held)) => return Some(held),
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(lease = name, error = %e, "Could not take a lease; trying again")
                }
            }
            tokio::select! {
                () = cancel.cancelled() => return None,
                () = self.inner.shutdown.cancelled() => return None,
                () = tokio::time::sleep(self.inner.ttl / 3) => {}
            }
        }
    }

    /// Every live lease whose name starts with `prefix`.
    pub fn live(&self, prefix: &str) -> Result<Vec<Lease>, StoreError> {
        let now = self.now_ms();
        Ok(self
            .inner
            .leases
            .list(prefix)?
            .into_iter()
            .filter(|lease| lease.is_live(now))
            .collect())
    }

    /// The daemons sharing the store: the live `instance:` leases (this one included once
    /// [`Cluster::join`] ran).
    pub fn instances(&self) -> Result<Vec<Lease>, StoreError> {
        self.live(INSTANCE_PREFIX)
    }

    /// Holds this instance's own `instance:` lease until shutdown, so `antler status` and the
    /// other instances see it.
    pub fn join(&self) -> Result<Option<HeldLease>, StoreError> {
        self.try_hold(&format!("{INSTANCE_PREFIX}{}", self.instance_id()))
    }

    /// Releases every live lease in the store, and says how many; called at start, before
    /// this instance holds any. Only for a store one process opens at a time (sled): whatever
    /// it holds was left by a daemon that is gone, and waiting for those leases to expire
    /// would keep a restarted daemon's bot silent for a lease.
    pub fn release_leftovers(&self) -> Result<usize, StoreError> {
        let now = self.now_ms();
        let mut released = 0;
        for lease in self.inner.leases.list("")? {
            if lease.is_live(now) && self.inner.leases.release(&lease)? {
                released += 1;
            }
        }
        Ok(released)
    }

    /// The names of the leases this instance holds now.
    pub fn held_names(&self) -> Vec<String> {
        lock(&self.inner.held).keys().cloned().collect()
    }

    /// Stops renewing every lease, releases them and waits for that to finish.
    pub async fn shutdown(&self) {
        self.inner.shutdown.cancel();
        self.inner.tracker.close();
        self.inner.tracker.wait().await;
    }

    fn keep(&self, lease: Lease) -> HeldLease {
        let name = lease.name.clone();
        lock(&self.inner.held).insert(name.clone(), lease.clone());
        crate::metrics::leases_held(lock(&self.inner.held).len());
        let current = Arc::new(Mutex::new(lease));
        let lost = CancellationToken::new();
        let stop = self.inner.shutdown.child_token();
        let renewer = Renewer {
            cluster: self.clone(),
            current: current.clone(),
            lost: lost.clone(),
            stop: stop.clone(),
        };
        // Owned by the cluster's tracker: `shutdown` stops it and waits for its release.
        self.inner.tracker.spawn(renewer.run());
        HeldLease {
            name,
            current,
            lost,
            stop,
            leases: self.inner.leases.clone(),
        }
    }

    fn forget(&self, name: &str, epoch: u64) {
        let mut held = lock(&self.inner.held);
        if held.get(name).is_some_and(|lease| lease.epoch == epoch) {
            held.remove(name);
        }
        crate::metrics::leases_held(held.len());
    }
}

/// A lease this instance holds, renewed until it is dropped (then released) or lost.
pub struct HeldLease {
    name: String,
    current: Arc<Mutex<Lease>>,
    lost: CancellationToken,
    stop: CancellationToken,
    leases: Leases,
}

impl HeldLease {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The lease as last renewed.
    pub fn lease(&self) -> Lease {
        lock(&self.current).clone()
    }

    /// Cancelled when the lease is lost (or released): the work it guards must stop.
    pub fn lost(&self) -> CancellationToken {
        self.lost.clone()
    }

    pub fn is_lost(&self) -> bool {
        self.lost.is_cancelled()
    }

    /// Applies `ops` only if this lease has not changed hands; `Ok(false)` (nothing written)
    /// once another instance took it over.
    pub fn write_fenced(&self, ops: Vec<BatchOp>) -> Result<bool, StoreError> {
        let written = self.leases.write_fenced(&self.lease(), ops)?;
        if !written {
            self.lost.cancel();
        }
        Ok(written)
    }
}

impl Drop for HeldLease {
    fn drop(&mut self) {
        // The renewer releases the record and exits.
        self.stop.cancel();
    }
}

struct Renewer {
    cluster: Cluster,
    current: Arc<Mutex<Lease>>,
    lost: CancellationToken,
    stop: CancellationToken,
}

impl Renewer {
    async fn run(self) {
        let inner = &self.cluster.inner;
        let ttl_ms = ttl_ms(inner.ttl);
        let mut wait = inner.ttl / 3;
        loop {
            tokio::select! {
                () = self.stop.cancelled() => break,
                () = tokio::time::sleep(wait) => {}
            }
            wait = inner.ttl / 3;
            let held = lock(&self.current).clone();
            match inner.leases.renew(&held, ttl_ms, self.cluster.now_ms()) {
                Ok(Some(renewed)) => {
                    lock(&inner.held).insert(renewed.name.clone(), renewed.clone());
                    *lock(&self.current) = renewed;
                }
                Ok(None) => {
                    tracing::warn!(lease = %held.name, epoch = held.epoch, "Lost a lease; stopping the work it guarded");
                    self.lose(&held);
                    return;
                }
                // The store is unreachable: keep trying while the lease lasts, and stop the
                // work at its deadline, when another instance may take it over.
                Err(e) if held.is_live(self.cluster.now_ms()) => {
                    tracing::warn!(lease = %held.name, error = %e, "Could not renew a lease; trying again");
                    let left = held.expires_at_ms.saturating_sub(self.cluster.now_ms());
                    wait = wait.min(Duration::from_millis(left));
                }
                Err(e) => {
                    tracing::warn!(lease = %held.name, error = %e, "A lease expired while the store was unreachable; stopping its work");
                    self.lose(&held);
                    return;
                }
            }
        }
        let held = lock(&self.current).clone();
        if let Err(e) = inner.leases.release(&held) {
            tracing::warn!(lease = %held.name, error = %e, "Could not release a lease; it expires on its own");
        }
        self.lose(&held);
    }

    fn lose(&self, held: &Lease) {
        self.lost.cancel();
        self.cluster.forget(&held.name, held.epoch);
    }
}

/// The part of a lease name before its first `:` (`telegram`, `chat`, `instance`), the metric
/// label: bounded, unlike the full names.
fn kind_of(name: &str) -> &str {
    name.split_once(':').map_or(name, |(kind, _)| kind)
}

fn ttl_ms(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests;
