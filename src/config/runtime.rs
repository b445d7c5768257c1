//! `runtime:`: the async runtime the daemon runs on, read once at start.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::config::ConfigProblem;

/// Ceiling of `runtime.worker_threads`: more workers than this only add wake-ups.
pub const MAX_WORKER_THREADS: u16 = 256;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct RuntimeConfig {
    /// Threads that run the daemon's tasks (connections, runs, channels); 0 = one per CPU
    /// core. A run spends its time waiting on the model and the sandbox, so one thread keeps
    /// up with a thousand runs in flight, and it spends less CPU per turn than two, which wake
    /// each other up (a quarter less on long threads). Raise it when the daemon's own CPU
    /// becomes the limit. Blocking work (files, the store's flushes) has its own pool either
    /// way. Read at start; a change takes effect after a restart.
    pub worker_threads: u16,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self { worker_threads: 1 }
    }
}

impl RuntimeConfig {
    pub fn problems(&self) -> Vec<ConfigProblem> {
        if self.worker_threads > MAX_WORKER_THREADS {
            vec![ConfigProblem::new(
                "runtime.worker_threads",
                format!("must be at most {MAX_WORKER_THREADS} (0 = one per CPU core)"),
            )]
        } else {
            Vec::new()
        }
    }

    /// A tokio runtime with this many workers (all drivers enabled). The blocking pool is
    /// bounded: a burst of blocking work queues instead of starting hundreds of threads, each
    /// keeping its own allocator arena (RSS that never comes back).
    pub fn build(&self) -> std::io::Result<tokio::runtime::Runtime> {
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        builder.enable_all().max_blocking_threads(64);
        if self.worker_threads > 0 {
            builder.worker_threads(usize::from(self.worker_threads));
        }
        builder.build()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worker_threads_above_the_ceiling_name_the_key() {
        let problems = RuntimeConfig {
            worker_threads: MAX_WORKER_THREADS + 1,
        }
        .problems();
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].path, "runtime.worker_threads");
        assert!(RuntimeConfig::default().problems().is_empty());
    }

    #[test]
    fn the_runtime_has_the_configured_workers() {
        let runtime = RuntimeConfig { worker_threads: 3 }.build().unwrap();
        assert_eq!(runtime.metrics().num_workers(), 3);
        // 0 leaves the count to tokio: its `TOKIO_WORKER_THREADS`, else one per core.
        let per_core = RuntimeConfig { worker_threads: 0 }.build().unwrap();
        let expected = std::env::var("TOKIO_WORKER_THREADS")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| std::thread::available_parallelism().unwrap().get());
        assert_eq!(per_core.metrics().num_workers(), expected);
    }
}
