//! The guard a run holds: frees its thread for the next run when the run task ends, however
//! it ends (the registry entry, the sandbox lease, the thread's claim across instances).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::sandbox_slot::SandboxLease;
use super::{Inner, lock_runs, run_claims};

/// Frees the thread for the next run when the run task ends, however it ends.
pub(super) struct RunGuard {
    pub(super) inner: Arc<Inner>,
    pub(super) thread_id: String,
    pub(super) run_id: String,
    /// Keeps the run's sandbox provider from being shut down under it.
    pub(super) sandbox: Option<SandboxLease>,
    /// The thread's claim across instances (shared stores only).
    pub(super) claim: Option<run_claims::RunClaim>,
}

impl Drop for RunGuard {
    fn drop(&mut self) {
        self.inner.runs_finished.fetch_add(1, Ordering::Relaxed);
        if let Some(claim) = self.claim.take() {
            run_claims::release(claim, &self.thread_id);
        }
        let mut runs = lock_runs(&self.inner);
        if runs
            .get(&self.thread_id)
            .is_some_and(|active| active.run_id == self.run_id)
        {
            runs.remove(&self.thread_id);
        }
    }
}
