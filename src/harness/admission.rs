//! Admission control: whether the daemon may start another run at all, before any thread or
//! model work (today: the memory ceiling `gateway.max_rss_mb`); and the idle eviction that keeps
//! the thread-state cache from holding memory for conversations that paused.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::config::AppConfig;

use super::{Harness, RunError};

impl Harness {
    /// Drops cached thread states idle for longer than `cache.thread_states_idle_minutes` (read
    /// live, 0: never); returns how many were dropped.
    pub fn evict_idle_threads(&self) -> usize {
        let minutes = self.inner.config.current().cache.thread_states_idle_minutes;
        if minutes == 0 {
            return 0;
        }
        let evicted = self
            .inner
            .threads
            .evict_idle(std::time::Duration::from_secs(minutes.saturating_mul(60)));
        crate::metrics::cache_evictions("thread_states", "idle", evicted);
        evicted
    }
}

/// Refuses a new run while the process is past `gateway.max_rss_mb` (0 = no limit).
pub(super) fn overload_check(config: &AppConfig) -> Result<(), RunError> {
    let limit_mb = config.gateway.max_rss_mb;
    if limit_mb == 0 {
        return Ok(());
    }
    let Some(rss) = sampled_rss() else {
        return Ok(());
    };
    let rss_mb = rss / (1024 * 1024);
    if rss_mb < limit_mb {
        return Ok(());
    }
    crate::metrics::run_refused("overloaded");
    tracing::warn!(
        rss_mb,
        limit_mb,
        "Refusing a new run: memory is past gateway.max_rss_mb"
    );
    Err(RunError::Overloaded { rss_mb, limit_mb })
}

/// How stale the RSS reading may be: a burst of run starts reads `/proc` a few times a second,
/// not once per run, and memory does not grow meaningfully in that time.
const RSS_SAMPLE_AGE: Duration = Duration::from_millis(250);

static RSS_SAMPLE: Mutex<Option<(Instant, u64)>> = Mutex::new(None);

fn sampled_rss() -> Option<u64> {
    let mut sample = RSS_SAMPLE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((at, rss)) = *sample
        && at.elapsed() < RSS_SAMPLE_AGE
    {
        return Some(rss);
    }
    let rss = crate::metrics::resident_bytes()?;
    *sample = Some((Instant::now(), rss));
    Some(rss)
}
