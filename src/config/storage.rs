//! The `store:` and `cache:` sections: which backend holds the store (sled in `data_dir`, or a
//! PostgreSQL database several daemons share), how much memory the store and the in-process
//! caches may hold, and how long superseded checkpoint records are kept.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::config::Secret;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct StoreConfig {
    /// Where threads, memory, usage and the channels' records live: `sled` (embedded, in
    /// `data_dir`, for one daemon) or `postgres` (the database `store.postgres.url` names,
    /// shared by several daemons; nothing is kept in a local sled then).
    pub backend: StoreBackend,
    /// sled's page cache in MiB (sled's own default is 1 GiB). Threads read often stay folded in
    /// the thread-state cache (`cache.thread_states_mb`), so a small page cache costs little.
    pub cache_capacity_mb: u64,
    /// Drop checkpoint records a later one superseded (old versions of a rewritten message,
    /// removed messages, old titles) once they are older than this many days; the thread's
    /// current state is always kept. 0 keeps them forever.
    pub retention_days: u32,
    /// The database of `store.backend: postgres`.
    pub postgres: PostgresConfig,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            backend: StoreBackend::Sled,
            cache_capacity_mb: antler_store::sled_store::DEFAULT_CACHE_CAPACITY_MB,
            retention_days: 0,
            postgres: PostgresConfig::default(),
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum StoreBackend {
    #[default]
    Sled,
    Postgres,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct PostgresConfig {
    /// The database, as `postgres://user:password@host:5432/database`; a secret (it holds the
    /// password), usually written `$ANTLER_DATABASE_URL`. `?sslmode=require` (or `verify-full`)
    /// connects through TLS and verifies the server's certificate against the system's and
    /// Mozilla's roots plus the PEM file `sslrootcert=` names; without it the connection is
    /// plain (a database on this host or a private network). The schema is created or
    /// migrated at start.
    pub url: Option<Secret>,
    /// Connections each daemon keeps open at most. Queries are short (a turn makes a few), so a
    /// handful serves many chats; mind the server's `max_connections` across all daemons.
    pub pool_size: usize,
}

impl Default for PostgresConfig {
    fn default() -> Self {
        Self {
            url: None,
            pool_size: 8,
        }
    }
}

impl StoreConfig {
    /// What is wrong with the section, by key.
    pub(crate) fn problems(&self) -> Vec<(&'static str, String)> {
        let mut problems = Vec::new();
        if self.backend == StoreBackend::Postgres {
            match self.postgres.url.as_ref().map(Secret::expose) {
                None | Some("") => problems.push((
                    "store.postgres.url",
                    "is required with store.backend: postgres; set it to \
                     postgres://user:password@host:5432/database, best as $ANTLER_DATABASE_URL"
                        .to_string(),
                )),
                Some(url)
                    if !url.starts_with("postgres://") && !url.starts_with("postgresql://") =>
                {
                    problems.push((
                        "store.postgres.url",
                        "must start with postgres:// or postgresql://".to_string(),
                    ));
                }
                Some(_) => {}
            }
        }
        if self.postgres.pool_size == 0 {
            problems.push(("store.postgres.pool_size", "must be at least 1".to_string()));
        }
        problems
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_needs_a_url_and_a_pool() {
        let mut store = StoreConfig {
            backend: StoreBackend::Postgres,
            ..StoreConfig::default()
        };
        let problems = store.problems();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].0, "store.postgres.url");
        assert!(
            problems[0].1.contains("$ANTLER_DATABASE_URL"),
            "{problems:?}"
        );
        store.postgres.url = Some(Secret::new("mysql://u:hunter2@db/x"));
        store.postgres.pool_size = 0;
        let problems = store.problems();
        let keys: Vec<&str> = problems.iter().map(|(key, _)| *key).collect();
        assert_eq!(keys, ["store.postgres.url", "store.postgres.pool_size"]);
        assert!(!format!("{problems:?}").contains("hunter2"));
        store.postgres.url = Some(Secret::new("postgres://u:hunter2@db/x"));
        store.postgres.pool_size = 8;
        assert!(store.problems().is_empty());
        assert!(
            !format!("{store:?}").contains("hunter2"),
            "Debug redacts the URL"
        );
        // sled ignores the section.
        assert!(StoreConfig::default().problems().is_empty());
    }
}
