//! Stopping the harness: runs drained within a grace period, then everything they left behind
//! (titles, the memory queue, sandboxes, MCP servers, leases) and the final flush.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{CANCEL_GRACE, Harness, HarnessError, memory_queue};
use antler_store::{StoreError, ThreadStatus};
use std::sync::atomic::Ordering;

impl Harness {
    /// Stops accepting runs, waits up to `grace` for the ones in flight, cancels the rest
    /// (their threads end `Interrupted`) and flushes the store.
    pub async fn shutdown(&self, grace: Duration) -> Result<(), HarnessError> {
        self.inner.accepting.store(false, Ordering::SeqCst);
        // First: no slot is claimed or started from here on (claimed ones wait for a restart).
        self.stop_schedules().await;
        self.inner.jobs.shutdown().await;
        self.inner.tracker.close();
        if tokio::time::timeout(grace, self.inner.tracker.wait())
            .await
            .is_err()
        {
            let remaining: Vec<(String, CancellationToken)> = self
                .runs()
                .iter()
                .map(|(thread_id, active)| (thread_id.clone(), active.cancel.clone()))
                .collect();
            tracing::warn!(
                threads = ?remaining.iter().map(|(t, _)| t).collect::<Vec<_>>(),
                "Runs still in flight after the shutdown grace period; cancelling them"
            );
            for (_, cancel) in &remaining {
                cancel.cancel();
            }
            if tokio::time::timeout(CANCEL_GRACE, self.inner.tracker.wait())
                .await
                .is_err()
            {
                for (thread_id, _) in &remaining {
                    if let Err(error) = self
                        .inner
                        .threads
                        .set_status(thread_id, ThreadStatus::Interrupted)
                    {
                        tracing::warn!(%error, thread_id, "Could not mark a stuck run's thread interrupted");
                    }
                }
            }
        }
        // Titles still being written are dropped (each thread keeps its first-message title):
        // nothing a run started writes after this point.
        self.inner.background.shutdown().await;
        if let Some(memory) = &self.inner.memory {
            memory
                .queue
                .shutdown(memory_queue::MEMORY_FLUSH_DEADLINE)
                .await;
        }
        self.inner.sandbox.shutdown().await;
        self.inner.mcp.shutdown().await;
        // Released last: the work they guard has ended above.
        self.inner.cluster.shutdown().await;
        let threads = self.inner.threads.clone();
        tokio::task::spawn_blocking(move || threads.flush())
            .await
            .map_err(|e| StoreError::Io(format!("the final flush did not finish: {e}")))??;
        Ok(())
    }
}
