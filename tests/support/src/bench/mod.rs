//! Operational benchmarks of the real daemon binary against the wire-level fakes: how many
//! chats it serves at once (`concurrency`), whether SIGKILL loses or repeats replies (`crash`),
//! how its memory behaves over many turns on all four channels (`soak`) and what it weighs
//! idle (`idle`), and whether signed webhook deliveries, some sent twice, make one run and one
//! answer each (`webhooks`). The `ops_bench` example prints their tables; `tests/it/ops_bench.rs` runs
//! them small in CI. The daemon is spawned by path: this crate must not depend on `antler`.

mod concurrency;
mod crash;
mod drive;
mod failover;
mod fleet;
mod font;
mod idle;
mod model;
mod plot;
mod process;
mod schedules;
mod soak;
mod tally;
mod webhooks;

use std::time::Duration;

pub use concurrency::{ConcurrencyOptions, ConcurrencyReport, concurrency};
pub use crash::{CrashOptions, CrashReport, crash};
pub use failover::{FailoverOptions, FailoverReport, failover};
pub use fleet::Platform;
pub use idle::{IdleReport, idle};
pub use model::{EchoModel, answer_for, echo_model, marker_of};
pub use plot::rss_plot_png;
pub use process::{DaemonProcess, Workdir, peak_rss_kib, rss_kib};
pub use schedules::{
    ScheduleCrashOptions, ScheduleCrashReport, ScheduleIdleReport, cpu_time, schedule_crash,
    schedule_idle,
};
pub use soak::{SoakOptions, SoakReport, soak};
pub use tally::Tally;
pub use webhooks::{Again, WebhookOptions, WebhookReport, webhooks};

/// Why a benchmark could not run (not a bad figure: those are in the report).
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("cannot prepare the benchmark's work dir or config: {0}")]
    Setup(#[from] std::io::Error),
    #[error(
        "cannot start the daemon binary {binary}: {error} (build it first: `cargo build --release`)"
    )]
    Spawn {
        binary: String,
        error: std::io::Error,
    },
    #[error("the daemon did not become ready within {seconds} s: {what}; see {log}")]
    NotReady {
        seconds: u64,
        what: String,
        log: String,
    },
}

/// `p` in 0..=100 of sorted `values` (nearest rank); zero when empty.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// KiB as MiB for tables.
pub fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// A small deterministic generator (xorshift64*), so a crash run can be replayed by its seed
/// without a `rand` dependency.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    /// A seed from the clock, for runs that do not ask for one.
    pub fn clock_seed() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `low..high` (`low` when the range is empty).
    pub fn range(&mut self, low: u64, high: u64) -> u64 {
        if high <= low {
            return low;
        }
        low + self.next_u64() % (high - low)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let values: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&values, 50.0), Duration::from_millis(50));
        assert_eq!(percentile(&values, 99.0), Duration::from_millis(99));
        assert_eq!(percentile(&values, 100.0), Duration::from_millis(100));
        assert_eq!(percentile(&[], 50.0), Duration::ZERO);
    }

    #[test]
    fn the_generator_is_deterministic_and_stays_in_range() {
        let mut a = Rng::new(42);
        let mut b = Rng::new(42);
        for _ in 0..1000 {
            let x = a.range(10, 20);
            assert_eq!(x, b.range(10, 20));
            assert!((10..20).contains(&x));
        }
        assert_eq!(Rng::new(0).range(5, 5), 5);
    }
}
