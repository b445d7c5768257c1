//! Reload rollback: a reload that restarts a channel (its credentials or connection settings
//! changed) is kept only once that channel connects with the new settings. If it fails in a way
//! retrying cannot fix, or has not connected within `channels.reload_connect_timeout_seconds`,
//! the whole previous config is put back, so the channel reconnects with its old settings and
//! nothing else of the failed edit stays half-applied.
//!
//! Why a coordinator beside the watcher rather than inside it: the watcher only knows the file,
//! the lifecycles only know their own channel. The coordinator watches the [`ConfigHandle`]
//! (whoever replaced it) and the [`SessionBoard`] the lifecycles write, and is the one place that
//! decides. The file on disk stays as the operator wrote it; the watcher re-reads it only when
//! its content changes or on SIGHUP, so a rolled-back edit is not retried in a loop.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::config::{AppConfig, ConfigHandle};

/// How far a channel's current session got.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum SessionPhase {
    Connecting,
    /// A transient error; the lifecycle retries with backoff.
    Retrying(String),
    Connected,
    /// Stopped until the settings change (a refused token, a conflicting poller).
    Failed(String),
}

/// The phase of the session running with connection key `key`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SessionState {
    pub(crate) key: u64,
    pub(crate) phase: SessionPhase,
}

type Sessions = BTreeMap<&'static str, SessionState>;

/// Each channel's latest session, written by the lifecycles; cheap to clone.
#[derive(Clone, Debug, Default)]
pub(crate) struct SessionBoard(Arc<watch::Sender<Sessions>>);

impl SessionBoard {
    pub(crate) fn set(&self, channel: &'static str, key: u64, phase: SessionPhase) {
        self.0.send_modify(|sessions| {
            sessions.insert(channel, SessionState { key, phase });
        });
    }

    fn subscribe(&self) -> watch::Receiver<Sessions> {
        self.0.subscribe()
    }
}

/// Keeps or rolls back each reload that restarted channels.
pub(crate) struct ReloadCoordinator {
    pub(crate) config: ConfigHandle,
    pub(crate) sessions: SessionBoard,
}

impl ReloadCoordinator {
    pub(crate) async fn run(self, stop: CancellationToken) {
        let mut changes = self.config.subscribe();
        // The config the daemon started with is good by definition: there is nothing to go back to.
        let mut good = changes.borrow_and_update().clone();
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                changed = changes.changed() => if changed.is_err() { return },
            }
            let mut candidate = changes.borrow_and_update().clone();
            // Judge the newest config until it is kept or rolled back; a newer reload arriving
            // meanwhile is judged instead, against the same last good config.
            while !Arc::ptr_eq(&candidate, &good) {
                let restarted = restarted_channels(&good, &candidate);
                if restarted.is_empty() {
                    good = candidate;
                    break;
                }
                let limit = Duration::from_secs(candidate.channels.reload_connect_timeout_seconds);
                tokio::select! {
                    _ = stop.cancelled() => return,
                    changed = changes.changed() => {
                        if changed.is_err() {
                            return;
                        }
                        candidate = changes.borrow_and_update().clone();
                    }
                    verdict = verdict(self.sessions.subscribe(), &restarted, limit) => {
                        match verdict {
                            Ok(()) => {
                                let names: Vec<&str> = restarted.iter().map(|(name, _)| *name).collect();
                                tracing::info!(channels = ?names, "The channels restarted by the config reload are connected; the new config stays");
                                good = candidate;
                                break;
                            }
                            Err(failures) => {
                                self.roll_back(&candidate, &good, &failures);
                                // The restored config, or a newer one that landed first.
                                candidate = changes.borrow_and_update().clone();
                            }
                        }
                    }
                }
            }
        }
    }

    fn roll_back(&self, failed: &Arc<AppConfig>, good: &Arc<AppConfig>, failures: &[String]) {
        let reason = failures.join("; ");
        if !self.config.restore(failed, good.clone()) {
            tracing::warn!(%reason, "A channel restarted by a config reload did not come up, but a newer config is already in force; judging that one instead");
            return;
        }
        tracing::error!(%reason, "A channel restarted by the config reload did not come up; restored the previous config (the file on disk is unchanged: fix it and save it again, or send SIGHUP)");
        self.config.record_reload(
            "rolled_back",
            Some(format!("restored the previous config: {reason}")),
        );
    }
}

/// The channels `candidate` restarts or starts, with their new connection keys.
fn restarted_channels(good: &AppConfig, candidate: &AppConfig) -> Vec<(&'static str, u64)> {
    candidate
        .channels
        .sections()
        .into_iter()
        .filter(|section| section.enabled())
        .map(|section| (section.name(), section.connection_key()))
        .filter(|(name, key)| connection_key(good, name) != Some(*key))
        .collect()
}

fn connection_key(config: &AppConfig, name: &str) -> Option<u64> {
    let section = config.channels.section(name)?;
    section.enabled().then(|| section.connection_key())
}

/// `Ok` once every restarted channel is connected on its new key; the reasons as soon as one
/// failed, or once `limit` passed.
async fn verdict(
    mut sessions: watch::Receiver<Sessions>,
    restarted: &[(&'static str, u64)],
    limit: Duration,
) -> Result<(), Vec<String>> {
    let judged = tokio::time::timeout(limit, async {
        let sessions = sessions.wait_for(|sessions| judge(sessions, restarted).is_some());
        sessions
            .await
            .ok()
            .and_then(|sessions| judge(&sessions, restarted))
    })
    .await;
    match judged {
        Ok(Some(verdict)) => verdict,
        // The channel layer is gone (shutdown): nothing is left to judge.
        Ok(None) => std::future::pending().await,
        Err(_) => Err(late(&sessions.borrow(), restarted, limit)),
    }
}

fn judge(
    sessions: &Sessions,
    restarted: &[(&'static str, u64)],
) -> Option<Result<(), Vec<String>>> {
    let on_key = |name: &str, key: u64| sessions.get(name).filter(|s| s.key == key);
    let failures: Vec<String> = restarted
        .iter()
        .filter_map(|(name, key)| match on_key(name, *key).map(|s| &s.phase) {
            Some(SessionPhase::Failed(reason)) => Some(format!("{name}: {reason}")),
            _ => None,
        })
        .collect();
    if !failures.is_empty() {
        return Some(Err(failures));
    }
    restarted
        .iter()
        .all(|(name, key)| on_key(name, *key).is_some_and(|s| s.phase == SessionPhase::Connected))
        .then_some(Ok(()))
}

/// Why the channels that are not connected yet count as failed.
fn late(sessions: &Sessions, restarted: &[(&'static str, u64)], limit: Duration) -> Vec<String> {
    restarted
        .iter()
        .filter_map(|(name, key)| {
            let phase = sessions
                .get(name)
                .filter(|s| s.key == *key)
                .map(|s| &s.phase);
            let why = format!("{name}: not connected within {} s", limit.as_secs());
            match phase {
                Some(SessionPhase::Connected) => None,
                Some(SessionPhase::Retrying(reason)) => {
                    Some(format!("{why} (last error: {reason})"))
                }
                _ => Some(why),
            }
        })
        .collect()
}

#[cfg(test)]
#[path = "reload_tests.rs"]
mod tests;
