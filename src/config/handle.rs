//! The live configuration shared by every component, swapped atomically on hot reload.

use std::sync::{Arc, RwLock};

use crate::config::AppConfig;

/// A cheap-to-clone handle to the current configuration.
#[derive(Clone, Debug)]
pub struct ConfigHandle {
    current: Arc<RwLock<Arc<AppConfig>>>,
}

impl ConfigHandle {
    /// A handle that never changes (tests, embedded clients given a config value).
    pub fn fixed(config: AppConfig) -> Self {
        Self {
            current: Arc::new(RwLock::new(Arc::new(config))),
        }
    }

    /// The configuration in force now. Runs take one snapshot and keep it to the end.
    pub fn current(&self) -> Arc<AppConfig> {
        match self.current.read() {
            Ok(guard) => guard.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Replaces the configuration (used by the reload watcher).
    pub fn replace(&self, config: AppConfig) {
        let next = Arc::new(config);
        match self.current.write() {
            Ok(mut guard) => *guard = next,
            Err(poisoned) => *poisoned.into_inner() = next,
        }
    }
}
