//! The wall clock leases are measured with: real time in the daemon, tokio's (pausable) time
//! in tests, so expiry is tested without waiting.

use std::time::{SystemTime, UNIX_EPOCH};

pub trait WallClock: Send + Sync {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;
}

/// The system's clock: leases are shared between hosts, so they need a time every host agrees
/// on (NTP keeps hosts within milliseconds).
pub struct SystemWallClock;

impl WallClock for SystemWallClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| {
                u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
            })
    }
}

/// A clock that starts at the system time and then advances with tokio's time, which tests
/// pause and advance.
pub struct TokioWallClock {
    base_ms: u64,
    start: tokio::time::Instant,
}

impl TokioWallClock {
    pub fn new() -> Self {
        Self {
            base_ms: SystemWallClock.now_ms(),
            start: tokio::time::Instant::now(),
        }
    }
}

impl Default for TokioWallClock {
    fn default() -> Self {
        Self::new()
    }
}

impl WallClock for TokioWallClock {
    fn now_ms(&self) -> u64 {
        let elapsed = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.base_ms.saturating_add(elapsed)
    }
}
