//! Gives the heap a burst of runs freed back to the operating system once the daemon is quiet.
//!
//! Why: glibc's allocator keeps freed memory in its arenas and returns only the top of each
//! heap. After 1,000 runs in flight the daemon freed nearly everything, yet RSS stayed at the
//! peak (measured: 161 MiB, still 141 MiB of anonymous memory 40 s later); `malloc_trim(0)`
//! hands the free pages back (down to the pre-burst level). Trimming walks every arena, so it
//! runs only when no run is in flight and some finished since the last trim, not per run.
//! Queued memory updates count as activity too: a burst's runs leave one each, and the heap
//! they pin is freed only as they run, tens of seconds after the burst (measured after the
//! first burst of 1,000 runs: trimming once half of them had run took RSS 43.6 → 34.7 MiB,
//! where nothing trimmed it before).
//! The same check drops thread states idle past `cache.thread_states_idle_minutes` from the
//! cache (and trims after it), so memory settles back when conversations pause, and folds the
//! metrics' pending histogram samples, which otherwise pile up until `/metrics` is scraped.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::harness::Harness;

/// How often the daemon looks for a quiet moment after activity. A burst's memory returns
/// within about this long after its last run ends.
const CHECK_EVERY: Duration = Duration::from_secs(2);

/// Trims after activity, until `stop`. The task is the daemon's (owned by its tracker).
pub async fn run(harness: Harness, stop: CancellationToken) {
    let (_, mut trimmed_at) = activity(&harness);
    let mut seen = trimmed_at;
    let mut ticks = tokio::time::interval(CHECK_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = ticks.tick() => {}
        }
        crate::metrics::fold_histograms();
        // Quiet for a whole interval: the burst's connections have closed by now too (trimming
        // the moment the last run ended left their buffers, freed a moment later, in the heap).
        let evicted = harness.evict_idle_threads();
        let (in_flight, done) = activity(&harness);
        let settled = done == seen && in_flight == 0;
        seen = done;
        if settled && (done != trimmed_at || evicted > 0) {
            trimmed_at = done;
            // Walking the arenas is a few milliseconds of blocking work after a big burst.
            let _ = tokio::task::spawn_blocking(release_free_heap).await;
        }
    }
}

/// Runs in flight, and runs finished plus memory updates processed (a count that moves while
/// the daemon works).
fn activity(harness: &Harness) -> (usize, u64) {
    let (in_flight, finished) = harness.run_activity();
    let updates = harness
        .memory()
        .map_or(0, |memory| memory.queue.processed());
    (in_flight, finished + updates)
}

/// Returns free heap pages to the OS; a no-op where the allocator does that by itself.
pub fn release_free_heap() {
    crate::body_buffers::release();
    #[cfg(all(target_os = "linux", target_env = "gnu", not(feature = "mimalloc")))]
    // SAFETY: malloc_trim only reorganises the allocator's own free lists under its locks; it
    // takes no pointers and is safe to call from any thread at any time.
    #[allow(unsafe_code)]
    unsafe {
        libc::malloc_trim(0);
    }
}
