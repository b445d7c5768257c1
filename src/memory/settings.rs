//! Where memory reads `memory.*`: at use time, so a config reload applies to the next update
//! (threshold, fact cap, history kept) and to the next queued conversation (debounce) without a
//! restart, while updates already queued keep the time they were given.

use std::sync::Arc;

use crate::config::MemoryConfig;

/// A source of the memory settings in force now; cheap to clone.
#[derive(Clone)]
pub struct MemorySettings(Arc<dyn Fn() -> MemoryConfig + Send + Sync>);

impl MemorySettings {
    /// Settings that never change (tests, tools working on a data dir).
    pub fn fixed(config: MemoryConfig) -> Self {
        Self(Arc::new(move || config.clone()))
    }

    /// Settings read through `read` each time (the daemon passes its config handle's).
    pub fn live(read: impl Fn() -> MemoryConfig + Send + Sync + 'static) -> Self {
        Self(Arc::new(read))
    }

    pub fn current(&self) -> MemoryConfig {
        (self.0)()
    }
}

impl From<MemoryConfig> for MemorySettings {
    fn from(config: MemoryConfig) -> Self {
        Self::fixed(config)
    }
}

impl std::fmt::Debug for MemorySettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("MemorySettings")
            .field(&self.current())
            .finish()
    }
}
