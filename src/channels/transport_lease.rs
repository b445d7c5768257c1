//! Which daemon runs a channel's long-lived transport (long polling, a gateway, Socket Mode)
//! when several share one store: the holder of the lease `{channel}:transport:{key}`.
//!
//! Every daemon keeps the channel's runtime registered, so each can send replies and serve
//! webhooks; only the transport waits for the lease. A second `getUpdates` poller makes
//! Telegram answer 409 and a second gateway session duplicates every event, so the transport
//! stops the moment the lease is lost and waits to take it again. A single daemon takes the
//! lease at once and notices nothing.

use std::sync::Arc;

use antler_channel::{ChannelError, InboundSink, Secret, Transport};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use crate::channels::health::{ChannelHealth, HealthBoard};
use crate::channels::reload::SessionPhase;
use crate::channels::supervise::{PhaseReport, supervise};
use crate::cluster::{Cluster, HeldLease};

/// The lease name of `channel`'s transport. The key is a digest of the credential the
/// platform ties the connection to (never the credential: lease names show in `/readyz`), so
/// daemons configured with the same bot share one lease and a different bot gets its own.
pub(crate) fn lease_name(channel: &str, identity: Option<&Secret>) -> String {
    let key = identity.map_or_else(
        || "default".to_string(),
        |secret| {
            let digest = Sha256::digest(secret.expose().as_bytes());
            hex::encode(&digest[..8])
        },
    );
    format!("{channel}:transport:{key}")
}

/// What one channel's leased transport runs with.
pub(crate) struct LeasedTransport<'a> {
    pub(crate) cluster: &'a Cluster,
    pub(crate) lease: &'a str,
    pub(crate) channel: &'a str,
    pub(crate) transport: Arc<dyn Transport>,
    pub(crate) sink: Arc<dyn InboundSink>,
    pub(crate) health: &'a HealthBoard,
    pub(crate) phase: &'a PhaseReport,
}

impl LeasedTransport<'_> {
    /// Runs the transport whenever this daemon holds the lease, until `stop`. Returns the
    /// fatal error that stopped it, or `Ok` when stopped.
    pub(crate) async fn run(&self, stop: &CancellationToken) -> Result<(), ChannelError> {
        loop {
            let held = match self.cluster.try_hold(self.lease) {
                Ok(Some(held)) => held,
                Ok(None) | Err(_) => {
                    self.stand_by();
                    match self.cluster.hold(self.lease, stop).await {
                        Some(held) => held,
                        None => return Ok(()),
                    }
                }
            };
            tracing::info!(
                channel = self.channel,
                lease = self.lease,
                epoch = held.lease().epoch,
                "This instance runs the channel's transport"
            );
            match self.while_held(&held, stop).await {
                Ok(()) if stop.is_cancelled() => return Ok(()),
                Ok(()) => {}
                // The other holder's poll, not a foreign one: this daemon's turn is over.
                Err(ChannelError::Conflict(reason)) if !self.still_ours(&held) => {
                    tracing::info!(
                        channel = self.channel,
                        reason,
                        "The transport met its successor; standing by"
                    );
                }
                Err(error) => return Err(error),
            }
            drop(held);
        }
    }

    /// Supervises the transport until `stop`, a fatal error, or the lease is lost (then it
    /// is stopped at once and this returns `Ok`).
    async fn while_held(
        &self,
        held: &HeldLease,
        stop: &CancellationToken,
    ) -> Result<(), ChannelError> {
        let lost = held.lost();
        let run_stop = stop.child_token();
        let supervised = supervise(
            self.channel,
            self.transport.clone(),
            self.sink.clone(),
            self.health,
            self.phase,
            &run_stop,
        );
        tokio::pin!(supervised);
        tokio::select! {
            result = &mut supervised => result,
            () = lost.cancelled() => {
                tracing::warn!(
                    channel = self.channel,
                    lease = self.lease,
                    "Lost the transport's lease; stopping the transport"
                );
                run_stop.cancel();
                let result = (&mut supervised).await;
                match result {
                    Err(ChannelError::Conflict(_)) | Ok(()) => Ok(()),
                    Err(error) => Err(error),
                }
            }
        }
    }

    /// Whether the lease is still this daemon's: a conflict met while it is was caused by a
    /// poller outside the cluster, one met after it expired by the successor.
    fn still_ours(&self, held: &HeldLease) -> bool {
        let mine = held.lease();
        !held.is_lost()
            && self.cluster.live(self.lease).is_ok_and(|live| {
                live.iter()
                    .any(|lease| lease.holder == mine.holder && lease.epoch == mine.epoch)
            })
    }

    fn stand_by(&self) {
        tracing::info!(
            channel = self.channel,
            lease = self.lease,
            "Another instance runs the channel's transport; this one sends replies and takes over if it stops"
        );
        self.health.set(self.channel, ChannelHealth::Standby);
        (self.phase)(SessionPhase::Connected);
    }
}

#[cfg(test)]
#[path = "transport_lease_tests.rs"]
mod tests;
