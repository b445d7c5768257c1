//! The live configuration shared by every component, swapped atomically on hot reload.

use std::sync::Arc;

use tokio::sync::watch;

use crate::config::AppConfig;

/// A cheap-to-clone handle to the current configuration. Components that must act on a change
/// (a channel whose credentials changed) subscribe; everything else reads [`Self::current`] when
/// it needs a value, so a reload applies to the next message or run.
#[derive(Clone, Debug)]
pub struct ConfigHandle {
    current: Arc<watch::Sender<Arc<AppConfig>>>,
}

impl ConfigHandle {
    /// A handle starting at `config` (it changes only through [`Self::replace`]).
    pub fn fixed(config: AppConfig) -> Self {
        Self {
            current: Arc::new(watch::Sender::new(Arc::new(config))),
        }
    }

    /// The configuration in force now. Runs take one snapshot and keep it to the end.
    pub fn current(&self) -> Arc<AppConfig> {
        self.current.borrow().clone()
    }

    /// Replaces the configuration (used by the reload watcher) and wakes the subscribers.
    pub fn replace(&self, config: AppConfig) {
        self.current.send_replace(Arc::new(config));
    }

    /// Notified after every [`Self::replace`].
    pub fn subscribe(&self) -> watch::Receiver<Arc<AppConfig>> {
        self.current.subscribe()
    }
}
