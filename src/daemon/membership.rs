//! This daemon's place in the cluster: its `instance:{id}` lease, held for its whole life, so
//! `antler status` and the other instances sharing the store see it.

use crate::cluster::{Cluster, HeldLease, INSTANCE_PREFIX};
use crate::daemon::DaemonError;

/// Joins the cluster. On a store only this process can open (sled) the leases a previous run
/// left are released first: that daemon is gone, and its bot should not wait a lease for it.
/// On a shared store a live lease on this instance's own name is waited for (up to two
/// leases: a container restarted under the same name finds its previous life's lease), and
/// refused if someone keeps renewing it: two daemons with one name would share every lease.
pub(crate) async fn join(cluster: &Cluster) -> Result<HeldLease, DaemonError> {
    let store_error = |e: antler_store::StoreError| DaemonError::Cluster(e.to_string());
    if cluster.store_is_exclusive() {
        let released = cluster.release_leftovers().map_err(store_error)?;
        if released > 0 {
            tracing::info!(
                released,
                "Released the leases the previous run left (sled: it was the only daemon)"
            );
        }
    }
    let name = format!("{INSTANCE_PREFIX}{}", cluster.instance_id());
    let patience = cluster.lease_duration() * 2;
    let waited = tokio::time::Instant::now();
    while !cluster.live(&name).map_err(store_error)?.is_empty() {
        if waited.elapsed() >= patience {
            return Err(DaemonError::InstanceTaken(cluster.instance_id().into()));
        }
        if waited.elapsed().is_zero() {
            tracing::info!(
                instance = cluster.instance_id(),
                "A lease on this instance's name is live (its previous run, or another daemon with the same cluster.instance_id); waiting for it to expire"
            );
        }
        tokio::time::sleep(cluster.lease_duration() / 3).await;
    }
    let member = cluster.join().map_err(store_error)?;
    let member = member.ok_or_else(|| DaemonError::InstanceTaken(cluster.instance_id().into()))?;
    tracing::info!(
        instance = cluster.instance_id(),
        backend = cluster.backend(),
        lease_seconds = cluster.lease_duration().as_secs(),
        "Joined the cluster"
    );
    Ok(member)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use std::time::Duration;

    use antler_store::{MemoryStore, StoreRef};

    use super::*;
    use crate::cluster::TokioWallClock;

    const LEASE: Duration = Duration::from_secs(15);

    fn daemon(store: &StoreRef, id: &str, backend: &'static str) -> Cluster {
        let clock = Arc::new(TokioWallClock::new());
        Cluster::new(store.clone(), id, LEASE, backend, clock)
    }

    #[tokio::test(start_paused = true)]
    async fn instances_are_listed_and_a_live_namesake_is_refused() {
        let store: StoreRef = Arc::new(MemoryStore::new());
        let first = daemon(&store, "web-1", "postgres");
        let _member = join(&first).await.expect("joined");
        let other = daemon(&store, "web-2", "postgres");
        let _other = join(&other).await.expect("a different name joins");
        let names: Vec<String> = other
            .instances()
            .unwrap()
            .into_iter()
            .map(|lease| lease.holder)
            .collect();
        assert_eq!(names, ["web-1", "web-2"]);
        // A second daemon named web-1 while the first one renews its lease.
        let namesake = daemon(&store, "web-1", "postgres");
        let refused = join(&namesake).await.err().expect("refused");
        assert!(
            refused.to_string().contains("cluster.instance_id"),
            "{refused}"
        );
        first.shutdown().await;
        other.shutdown().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_restart_under_the_same_name_waits_for_its_previous_lease() {
        let store: StoreRef = Arc::new(MemoryStore::new());
        // The previous life died holding its lease.
        let left = antler_store::lease::Leases::new(store.clone(), "web-1");
        let clock = TokioWallClock::new();
        left.try_acquire(
            "instance:web-1",
            15_000,
            crate::cluster::WallClock::now_ms(&clock),
        )
        .unwrap();
        let again = daemon(&store, "web-1", "postgres");
        let started = tokio::time::Instant::now();
        let _member = join(&again).await.expect("joined once it expired");
        assert!(started.elapsed() >= LEASE - LEASE / 3 && started.elapsed() <= LEASE * 2);
        again.shutdown().await;
    }

    #[tokio::test(start_paused = true)]
    async fn on_sled_the_previous_runs_leases_are_released_at_once() {
        let store: StoreRef = Arc::new(MemoryStore::new());
        let left = antler_store::lease::Leases::new(store.clone(), "host-41");
        let clock = TokioWallClock::new();
        let now = crate::cluster::WallClock::now_ms(&clock);
        left.try_acquire("instance:host-41", 15_000, now).unwrap();
        left.try_acquire("telegram:transport:ab", 15_000, now)
            .unwrap();
        let restarted = daemon(&store, "host-42", "sled");
        let started = tokio::time::Instant::now();
        let _member = join(&restarted).await.expect("joined");
        assert!(started.elapsed().is_zero());
        assert!(
            restarted
                .try_hold("telegram:transport:ab")
                .unwrap()
                .is_some()
        );
        let names: Vec<String> = restarted
            .instances()
            .unwrap()
            .into_iter()
            .map(|lease| lease.holder)
            .collect();
        assert_eq!(names, ["host-42"]);
        restarted.shutdown().await;
    }
}
