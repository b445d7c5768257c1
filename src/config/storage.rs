//! The `store:` and `cache:` sections: how much memory the store and the in-process caches may
//! hold, and how long superseded checkpoint records are kept.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct StoreConfig {
    /// sled's page cache in MiB (sled's own default is 1 GiB). Threads read often stay folded in
    /// the thread-state cache (`cache.thread_states_mb`), so a small page cache costs little.
    pub cache_capacity_mb: u64,
    /// Drop checkpoint records a later one superseded (old versions of a rewritten message,
    /// removed messages, old titles) once they are older than this many days; the thread's
    /// current state is always kept. 0 keeps them forever.
    pub retention_days: u32,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            cache_capacity_mb: antler_store::sled_store::DEFAULT_CACHE_CAPACITY_MB,
            retention_days: 0,
        }
    }
}

/// Each cache drops its least recently used entries past its bound; a dropped entry is read
/// again from the store when needed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct CacheConfig {
    /// Folded thread states kept in memory, in MiB (estimated from their records). One thread
    /// larger than this is still kept, alone, so a very long thread is not refolded every turn.
    /// A thread joins once it has 8 messages; a shorter one folds in a few reads. The default
    /// holds ~75 threads of 20 short messages; a thread outside it is folded from its log on its
    /// next turn, which costs far less than the model call.
    pub thread_states_mb: u64,
    /// A thread state nobody used for this many minutes leaves the cache (its next turn folds
    /// it from the store again), so a daemon's memory settles back once conversations pause.
    /// 0 keeps states until the size bound pushes them out.
    pub thread_states_idle_minutes: u64,
    /// Custom agents (config and SOUL.md) kept parsed.
    pub agents: usize,
    /// Assembled system prompts kept.
    pub prompts: usize,
}

impl Default for CacheConfig {
    fn default() -> Self {
        Self {
            thread_states_mb: 2,
            thread_states_idle_minutes: 30,
            agents: 64,
            prompts: 64,
        }
    }
}
