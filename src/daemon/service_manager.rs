//! Talks to systemd (or any supervisor speaking the `sd_notify` protocol): READY once the
//! daemon serves, RELOADING/READY around a SIGHUP reload, STOPPING at the drain, and watchdog
//! pings from a task that pings only while the daemon is healthy.
//!
//! Every call is a no-op without `NOTIFY_SOCKET`, so the daemon behaves the same under Docker,
//! a terminal or the tests. Failures to notify are logged once and never stop the daemon.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sd_notify::NotifyState;
use tokio_util::sync::CancellationToken;

use crate::harness::Harness;

/// How long one health probe may take before the watchdog ping is skipped.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Sends notifications, reporting a broken socket once.
#[derive(Clone, Default)]
pub struct ServiceManager {
    reported: Arc<AtomicBool>,
}

impl ServiceManager {
    /// Startup is finished: the HTTP server accepts connections and the channels were started.
    pub fn ready(&self, status: &str) {
        self.send(&[NotifyState::Ready, NotifyState::Status(status)]);
    }

    /// A SIGHUP reload begins (the form `Type=notify-reload` requires: RELOADING + the clock).
    pub fn reloading(&self) {
        match NotifyState::monotonic_usec_now() {
            Ok(now) => self.send(&[NotifyState::Reloading, now]),
            Err(_) => self.send(&[NotifyState::Reloading]),
        }
    }

    pub fn stopping(&self) {
        self.send(&[
            NotifyState::Stopping,
            NotifyState::Status("draining runs in flight"),
        ]);
    }

    pub fn status(&self, status: &str) {
        self.send(&[NotifyState::Status(status)]);
    }

    /// Puts a reload's rollback in the unit's STATUS (`systemctl status antler`) until `stop`.
    /// systemd already heard READY for the reload: the rollback comes seconds later, once the
    /// restarted channel failed to connect.
    pub async fn report_rollbacks(
        self,
        config: crate::config::ConfigHandle,
        stop: tokio_util::sync::CancellationToken,
    ) {
        let mut reloads = config.subscribe_reloads();
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                changed = reloads.changed() => if changed.is_err() { return },
            }
            let record = reloads.borrow_and_update().clone();
            if let Some(record) = record.filter(|r| r.outcome == "rolled_back") {
                let detail = record.detail.unwrap_or_default();
                self.status(&format!("config change rolled back, {detail}"));
            }
        }
    }

    fn send(&self, states: &[NotifyState]) {
        if let Err(error) = sd_notify::notify(states)
            && !self.reported.swap(true, Ordering::Relaxed)
        {
            tracing::warn!(%error, "Cannot notify the service manager (NOTIFY_SOCKET)");
        }
    }

    /// With `WatchdogSec=` set, pings at half the interval while [`healthy`] holds; a daemon
    /// whose store stopped answering or whose runtime is stuck stops pinging and systemd
    /// restarts it. Returns `None` when no watchdog is asked for.
    // The caller owns the task: it awaits the handle on its tracker, and `stop` ends it.
    #[allow(clippy::disallowed_methods)]
    pub fn spawn_watchdog(
        &self,
        harness: Arc<Harness>,
        stop: CancellationToken,
    ) -> Option<tokio::task::JoinHandle<()>> {
        let interval = sd_notify::watchdog_enabled()? / 2;
        let manager = self.clone();
        tracing::info!(?interval, "systemd watchdog enabled");
        Some(tokio::spawn(async move {
            let mut ticker = tokio::time::interval(interval);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut was_healthy = true;
            loop {
                tokio::select! {
                    () = stop.cancelled() => break,
                    _ = ticker.tick() => {}
                }
                let healthy = healthy(&harness).await;
                if healthy {
                    manager.send(&[NotifyState::Watchdog]);
                } else if was_healthy {
                    tracing::error!("Health probe failed: withholding the systemd watchdog ping");
                }
                was_healthy = healthy;
            }
        }))
    }
}

/// The store answers a read within [`PROBE_TIMEOUT`] on a blocking thread (which also proves
/// the blocking pool and the scheduler are not starved).
async fn healthy(harness: &Arc<Harness>) -> bool {
    let threads = harness.threads().clone();
    let probe = tokio::task::spawn_blocking(move || threads.get("watchdog-probe").is_ok());
    matches!(
        tokio::time::timeout(PROBE_TIMEOUT, probe).await,
        Ok(Ok(true))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_notify_socket_nothing_is_sent_or_reported() {
        // The test process has no NOTIFY_SOCKET: every call must be a silent no-op.
        if std::env::var_os("NOTIFY_SOCKET").is_some() {
            return;
        }
        let manager = ServiceManager::default();
        manager.ready("ok");
        manager.reloading();
        manager.stopping();
        assert!(!manager.reported.load(Ordering::Relaxed));
    }
}
