//! The live configuration shared by every component, swapped atomically on hot reload, and what
//! the last reload did (shown by `/readyz` and `antler status`).

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;
use tokio::sync::watch;

use crate::config::{AppConfig, ConfigOrigin};

/// A cheap-to-clone handle to the current configuration. Components that must act on a change
/// (a channel whose credentials changed) subscribe; everything else reads [`Self::current`] when
/// it needs a value, so a reload applies to the next message or run.
#[derive(Clone, Debug)]
pub struct ConfigHandle {
    current: Arc<watch::Sender<Arc<AppConfig>>>,
    last_reload: Arc<watch::Sender<Option<ReloadRecord>>>,
    /// Where the config in force came from (`antler status` shows it).
    origin: Arc<std::sync::Mutex<ConfigOrigin>>,
}

/// What became of the last reload: `outcome` is the label of `antler_config_reloads_total`
/// (`reloaded`, `rejected`, `rolled_back`, `unreadable`). `detail` never carries config values:
/// `/readyz` is open to anyone who can reach the daemon.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ReloadRecord {
    pub outcome: &'static str,
    /// Seconds since the Unix epoch.
    pub at: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl ConfigHandle {
    /// A handle starting at `config` (it changes only through [`Self::replace`]).
    pub fn fixed(config: AppConfig) -> Self {
        Self {
            current: Arc::new(watch::Sender::new(Arc::new(config))),
            last_reload: Arc::new(watch::Sender::new(None)),
            origin: Arc::new(std::sync::Mutex::new(ConfigOrigin::Embedded)),
        }
    }

    /// Where the config in force came from (the embedded default until told otherwise).
    pub fn origin(&self) -> ConfigOrigin {
        self.origin
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Records where the config in force came from (at start, and when the reload watcher
    /// adopts a config file created after the start).
    pub fn set_origin(&self, origin: ConfigOrigin) {
        *self
            .origin
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = origin;
    }

    /// The configuration in force now. Runs take one snapshot and keep it to the end.
    pub fn current(&self) -> Arc<AppConfig> {
        self.current.borrow().clone()
    }

    /// Replaces the configuration (used by the reload watcher) and wakes the subscribers.
    pub fn replace(&self, config: AppConfig) {
        self.current.send_replace(Arc::new(config));
    }

    /// Puts `previous` back, but only while `expected` is still the config in force: a rollback
    /// must not undo a newer reload that landed while the failed one was being judged.
    pub fn restore(&self, expected: &Arc<AppConfig>, previous: Arc<AppConfig>) -> bool {
        self.current.send_if_modified(|current| {
            if Arc::ptr_eq(current, expected) {
                *current = previous;
                true
            } else {
                false
            }
        })
    }

    /// Notified after every [`Self::replace`] and [`Self::restore`].
    pub fn subscribe(&self) -> watch::Receiver<Arc<AppConfig>> {
        self.current.subscribe()
    }

    /// Remembers what the latest reload did and counts it in `antler_config_reloads_total`.
    pub fn record_reload(&self, outcome: &'static str, detail: Option<String>) {
        crate::metrics::config_reload(outcome);
        let at = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let record = ReloadRecord {
            outcome,
            at,
            detail,
        };
        self.last_reload.send_replace(Some(record));
    }

    /// The latest reload's record; `None` until the first one.
    pub fn last_reload(&self) -> Option<ReloadRecord> {
        self.last_reload.borrow().clone()
    }

    /// Notified after every [`Self::record_reload`] (the service manager reports a rollback,
    /// which comes seconds after the reload itself was announced).
    pub fn subscribe_reloads(&self) -> watch::Receiver<Option<ReloadRecord>> {
        self.last_reload.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restore_only_replaces_the_config_it_was_judging() {
        let handle = ConfigHandle::fixed(AppConfig::default());
        let previous = handle.current();
        handle.replace(AppConfig::default());
        let judged = handle.current();
        handle.replace(AppConfig::default());
        assert!(
            !handle.restore(&judged, previous.clone()),
            "a newer reload stays"
        );
        let newer = handle.current();
        assert!(handle.restore(&newer, previous.clone()));
        assert!(Arc::ptr_eq(&handle.current(), &previous));
    }

    #[test]
    fn the_last_reload_is_remembered() {
        let handle = ConfigHandle::fixed(AppConfig::default());
        assert_eq!(handle.last_reload(), None);
        handle.record_reload("rolled_back", Some("telegram: refused".into()));
        let record = handle.last_reload().unwrap();
        assert_eq!(record.outcome, "rolled_back");
        assert_eq!(record.detail.as_deref(), Some("telegram: refused"));
        assert!(record.at > 0);
    }
}
